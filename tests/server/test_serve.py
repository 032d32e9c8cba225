"""`codesearch serve` in a subprocess: the API against the CLI's --json, MCP over HTTP with the SDK's client,
security (binds, tokens, hosts, sizes, CORS, read-only), and a short load on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import SESSIONS, UTILS

from codesearch.faces.cli import main

pytest.importorskip("uvicorn")
pytest.importorskip("jinja2")

import anyio

from benchmarks.serve_load import Client, load, start_server, stop_server

TESTS = """\
from pkg.sessions import Session


def test_strip_auth():
    assert Session().should_strip_auth("http://a", "http://b")
"""
NETRC = 'def read_netrc(path):\n    """Parse the credentials of a .netrc file."""\n    return {}\n'
STDIO_TOOLS = {"search", "find_related", "find_definition", "find_references", "index_status", "reindex"}


def make_repos(base: Path) -> tuple[Path, Path]:
    repo, other = base / "repo", base / "other"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "docs").mkdir()
    (repo / "pkg" / "sessions.py").write_text(SESSIONS)
    (repo / "pkg" / "utils.py").write_text(UTILS)
    (repo / "tests" / "test_sessions.py").write_text(TESTS)
    (repo / "docs" / "auth.md").write_text("# Auth\n\nThe session strips the auth header on a redirect.\n")
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "netrc.py").write_text(NETRC)
    return repo, other


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two repositories indexed with the real default model (the transformer tier), in their default places."""
    pytest.importorskip("onnxruntime")
    from codesearch import CodeSearch

    repo, other = make_repos(tmp_path_factory.mktemp("serve"))
    for root in (repo, other):
        with CodeSearch(root) as cs:
            cs.index()
    return repo, other


@pytest.fixture(scope="module")
def server(repos: tuple[Path, Path]) -> Any:
    process, base = start_server([str(repos[0]), str(repos[1])])
    yield base
    stop_server(process)


def get(base: str, path: str, headers: dict[str, str] | None = None, **params: Any) -> tuple[int, Any]:
    client = Client(base, headers)
    try:
        status, body = client.get(path, **params)
    finally:
        client.close()
    return status, json.loads(body) if body.startswith((b"{", b"[")) else body.decode()


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


# --- the API answers what the CLI prints --------------------------------------------------------------------

def test_api_answers_equal_the_cli_json(server: str, repos: tuple[Path, Path]) -> None:
    repo, other = (str(r) for r in repos)
    cases: list[tuple[str, dict[str, Any], list[str]]] = [
        ("/api/search", {"q": "strip the auth header on redirect", "repo": repo},
         ["search", "strip the auth header on redirect", repo]),
        ("/api/search", {"q": "session auth", "repo": repo, "mode": "bm25", "kind": ["test", "doc"]},
         ["search", "session auth", repo, "--mode", "bm25", "--kind", "test", "--kind", "doc"]),
        ("/api/search", {"q": "length of a body", "repo": "repo", "scope": "pkg/", "k": 2, "compact": "true"},
         ["search", "length of a body", repo, "--scope", "pkg/", "-k", "2", "--compact"]),
        ("/api/search", {"q": "session auth", "repo": repo, "no_tests": "true", "max_tokens": 150},
         ["search", "session auth", repo, "--no-tests", "--max-tokens", "150"]),
        ("/api/search", {"q": "parse netrc credentials"}, ["search", "parse netrc credentials", repo, other]),
        ("/api/search", {"q": "session", "repo": repo, "scope": "nowhere/"},
         ["search", "session", repo, "--scope", "nowhere/"]),
        ("/api/definitions", {"name": "Session.should_strip_auth"}, ["def", "Session.should_strip_auth", repo]),
        ("/api/definitions", {"name": "should_strip_aut"}, ["def", "should_strip_aut", repo]),
        ("/api/references", {"name": "should_strip_auth", "compact": "1"},
         ["refs", "should_strip_auth", repo, "--compact"]),
        ("/api/related", {"location": "pkg/sessions.py:5", "k": 3}, ["related", "pkg/sessions.py:5", repo, "-k", "3"]),
        ("/api/definitions", {"name": "read_netrc", "repo": "other"}, ["def", "read_netrc", other]),
    ]
    for path, params, command in cases:
        status, answer = get(server, path, **params)
        assert status == 200, (path, params, answer)
        assert answer == cli_json(*command), (path, params)
    status, answer = get(server, "/api/search", q="session", repo=repo, scope="nowhere/")
    assert answer["hits"] == [] and answer["note"].startswith("no indexed file under 'nowhere'")
    fused = get(server, "/api/search", q="parse netrc credentials")[1]
    assert set(fused["tier"]) == {repo, other} and {h["root"] for h in fused["hits"]} == {repo, other}

    status, facts = get(server, "/api/status", repo=repo)
    expected = cli_json("status", repo)
    process_facts = {"freshness", "freshness_reason", "read_only", "refreshed_in_memory"}  # this process's, not the index's
    assert {k: v for k, v in facts.items() if k not in process_facts} == \
        {k: v for k, v in expected.items() if k not in process_facts}
    assert facts["read_only"] is True and facts["tier"] == "full" and facts["changed_files"] == 0


def test_api_errors_are_one_line_with_their_status(server: str, repos: tuple[Path, Path], tmp_path: Path) -> None:
    repo = str(repos[0])
    cases: list[tuple[str, dict[str, Any], int, str]] = [
        ("/api/search", {}, 400, "q is required"),
        ("/api/search", {"q": "x", "k": "ten"}, 400, "k must be an integer"),
        ("/api/search", {"q": "x", "k": 0}, 400, "k must be at least 1"),
        ("/api/search", {"q": "x", "k": 101}, 400, "k must be at most 100"),
        ("/api/search", {"q": "x", "mode": "fuzzy"}, 400, "unknown mode"),
        ("/api/search", {"q": "   "}, 400, "the query is empty"),
        ("/api/search", {"q": "x", "kind": "binary"}, 400, "binary"),
        ("/api/search", {"q": "x", "k": [1, 2]}, 400, "give k once"),
        ("/api/search", {"q": "x", "compact": "maybe"}, 400, "compact must be true or false"),
        ("/api/search", {"q": "x", "max_tokens": 5, "mode": "bm25"}, 400, "below the smallest answer"),
        ("/api/search", {"q": "x", "limit": 3}, 400, "unknown parameter 'limit'"),
        ("/api/search", {"q": "x", "repo": str(tmp_path)}, 404, "is not served here"),
        ("/api/search", {"q": "x", "repo": "/etc"}, 404, "is not served here"),
        ("/api/definitions", {"name": " "}, 400, "name is empty"),
        ("/api/references", {"name": "+="}, 400, "identifier"),
        ("/api/related", {"location": "pkg/missing.py:1"}, 400, "not indexed"),
        ("/api/related", {"location": "no-line-here"}, 400, "PATH:LINE"),
        ("/api/nowhere", {}, 404, "no such endpoint"),
    ]
    for path, params, code, needle in cases:
        status, answer = get(server, path, **params)
        assert status == code and list(answer) == ["error"], (path, params, status, answer)
        assert needle in answer["error"] and "\n" not in answer["error"], (path, params, answer)
    assert get(server, "/api/search", q="x" * 9000)[0] == 414
    client = Client(server, {"Content-Length": str(2 * 1024 * 1024), "Content-Type": "application/json"})
    client.connection.request("POST", "/mcp", body=b"{}", headers=client.headers)
    assert client.connection.getresponse().status == 413
    client.close()
    assert get(server, "/api/search", q="session auth", repo=repo, mode="bm25")[0] == 200  # still serving


def test_openapi_describes_every_endpoint(server: str) -> None:
    status, document = get(server, "/api/openapi.json")
    assert status == 200 and document["openapi"].startswith("3.1")
    assert set(document["paths"]) == {"/api/search", "/api/definitions", "/api/references", "/api/related",
                                      "/api/status"}
    search = document["paths"]["/api/search"]["get"]
    params = {p["name"]: p for p in search["parameters"]}
    assert params["q"]["required"] is True and params["k"]["schema"] == {"type": "integer", "default": 10}
    assert params["kind"]["schema"]["items"]["enum"] == ["source", "test", "doc", "config"]
    assert "codesearch search" in search["description"]


# --- MCP over streamable HTTP -------------------------------------------------------------------------------

def _mcp(base: str, work: Any, headers: dict[str, str] | None = None) -> Any:
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def session() -> Any:
        async with create_mcp_http_client(headers=headers) as http, \
                streamable_http_client(f"{base}/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as client:
            await client.initialize()
            return await work(client)

    return anyio.run(session)


def test_mcp_over_http_serves_the_stdio_tools(server: str, repos: tuple[Path, Path], tmp_path: Path) -> None:
    repo, other = repos

    async def work(client: Any) -> dict[str, Any]:
        tools = {t.name for t in (await client.list_tools()).tools}
        found = await client.call_tool("search", {"query": "strip the auth header on redirect", "k": 3})
        defined = await client.call_tool("find_definition", {"name": "read_netrc", "repo": str(other)})
        outside = await client.call_tool("search", {"query": "x", "repo": str(tmp_path)})
        bad = await client.call_tool("search", {"query": "x", "mode": "fuzzy"})
        many = await client.call_tool("find_references", {"name": "Session", "k": 101})
        reindex = await client.call_tool("reindex", {})
        status = await client.call_tool("index_status", {})
        return {"tools": tools, "found": found, "defined": defined, "outside": outside, "bad": bad, "many": many,
                "reindex": reindex, "status": status}

    answers = _mcp(server, work)
    assert answers["tools"] == STDIO_TOOLS
    found = json.loads(answers["found"].content[0].text)
    api = get(server, "/api/search", q="strip the auth header on redirect", k=3, repo=str(repo))[1]
    assert found["repo"] == str(repo) and found["tier"] == "full"
    assert [(h["location"], h["score"]) for h in found["hits"]] == [(h["location"], h["score"]) for h in api["hits"]]
    assert json.loads(answers["defined"].content[0].text)["hits"][0]["path"] == "lib/netrc.py"
    for name, needle in (("outside", "is not served here"), ("bad", "unknown mode"), ("reindex", "read-only"),
                         ("many", "k must be at most 100 on this server")):
        call = answers[name]
        assert call.is_error and needle in call.content[0].text and "\n" not in call.content[0].text.strip(), name
    assert json.loads(answers["status"].content[0].text)["indexed"] is True


# --- security -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def keyword_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from codesearch import CodeSearch

    repo, _ = make_repos(tmp_path_factory.mktemp("keywords"))
    with CodeSearch(repo, model=None) as cs:
        cs.index()
    return repo


def _refused(*args: str) -> str:
    result = CliRunner().invoke(main, ["serve", *args])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def test_a_bind_beyond_loopback_needs_a_token_or_no_auth(keyword_repo: Path) -> None:
    assert "give --token" in _refused(str(keyword_repo), "--model", "none", "--host", "0.0.0.0")
    assert "not both" in _refused(str(keyword_repo), "--model", "none", "--token", "t", "--no-auth")
    assert "token is empty" in _refused(str(keyword_repo), "--model", "none", "--token", " ")


def test_a_token_guards_every_route_but_the_pages_assets(keyword_repo: Path) -> None:
    token = "s3cret-token"
    process, base = start_server([str(keyword_repo), "--model", "none", "--host", "0.0.0.0", "--token", token])
    try:
        base = base.replace("0.0.0.0", "127.0.0.1")
        assert get(base, "/api/search", q="session", mode="bm25")[0] == 401
        status, answer = get(base, "/api/search", {"Authorization": "Bearer wrong"}, q="session", mode="bm25")
        assert status == 401 and "Authorization: Bearer" in answer["error"]
        assert get(base, "/api/search", {"Authorization": f"Bearer {token}"}, q="session", mode="bm25")[0] == 200
        assert get(base, "/")[0] == 401
        assert get(base, "/static/page.css")[0] == 200
        client = Client(base)
        client.connection.request("GET", f"/?token={token}&q=session")
        response = client.connection.getresponse()
        response.read()
        assert response.status == 303 and response.getheader("Location") == "/?q=session"
        cookie = response.getheader("Set-Cookie")
        assert cookie.startswith(f"codesearch_token={token};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        client.close()
        status, html = get(base, "/", {"Cookie": cookie.split(";")[0]}, q="session")
        assert status == 200 and "pkg/sessions.py" in html
        assert get(base, "/mcp")[0] == 401

        async def tools(client: Any) -> set[str]:
            return {t.name for t in (await client.list_tools()).tools}

        assert _mcp(base, tools, {"Authorization": f"Bearer {token}"}) == STDIO_TOOLS
    finally:
        stop_server(process)


def test_loopback_checks_the_host_and_cors_stays_off_unless_asked(keyword_repo: Path) -> None:
    process, base = start_server([str(keyword_repo), "--model", "none"])
    try:
        assert get(base, "/api/status", {"Host": "evil.example"})[0] == 403
        assert get(base, "/api/status", {"Host": "localhost:1234"})[0] == 200
        client = Client(base, {"Origin": "http://app.example"})
        client.connection.request("GET", "/api/status", headers=client.headers)
        response = client.connection.getresponse()
        response.read()
        assert response.status == 200 and response.getheader("Access-Control-Allow-Origin") is None
        assert "default-src 'none'" in response.getheader("Content-Security-Policy")
        client.close()
    finally:
        stop_server(process)
    process, base = start_server([str(keyword_repo), "--model", "none", "--cors-origin", "http://app.example"])
    try:
        client = Client(base, {"Origin": "http://app.example"})
        client.connection.request("GET", "/api/status", headers=client.headers)
        response = client.connection.getresponse()
        response.read()
        assert response.getheader("Access-Control-Allow-Origin") == "http://app.example"
        client.close()
    finally:
        stop_server(process)


def test_read_only_unless_allow_refresh(tmp_path: Path) -> None:
    repo, _ = make_repos(tmp_path)
    assert "has no index" in _refused(str(repo), "--model", "none") and "--allow-refresh" in _refused(
        str(repo), "--model", "none")
    process, base = start_server([str(repo), "--model", "none", "--allow-refresh"])
    try:
        status, answer = get(base, "/api/search", q="should_strip_auth", mode="bm25")
        assert status == 200 and answer["hits"][0]["path"] == "pkg/sessions.py" and answer["tier"] == "keyword"

        async def reindex(client: Any) -> Any:
            return await client.call_tool("reindex", {})

        report = _mcp(base, reindex)
        assert not report.is_error and json.loads(report.content[0].text)["files"] == 4
    finally:
        stop_server(process)


# --- load -----------------------------------------------------------------------------------------------------

def test_sixteen_clients_on_loopback_get_every_answer(server: str) -> None:
    """The load benchmark's short form: 16 clients at once, every request answered (no timing is asserted)."""
    queries = ["strip the auth header on redirect", "length of a body", "parse netrc credentials", "change the method"]
    result = load(server, queries, clients=16, requests_per_client=8, params={"k": 5})
    assert result["errors"] == 0, result["error_samples"]
    assert result["requests"] == 16 * 8


# --- the pieces, without a server -----------------------------------------------------------------------------

@pytest.mark.parametrize(("host", "loopback"), [("127.0.0.1", True), ("127.8.9.10", True), ("localhost", True),
                                                ("::1", True), ("[::1]", True), ("0.0.0.0", False),
                                                ("192.168.1.5", False), ("::", False), ("example.com", False)])
def test_loopback_addresses(host: str, loopback: bool) -> None:
    from codesearch.server.security import check_bind, is_loopback

    assert is_loopback(host) is loopback
    if loopback:
        check_bind(host, None, False)
    else:
        with pytest.raises(ValueError, match="--token"):
            check_bind(host, None, False)
        check_bind(host, "t0ken", False)
        check_bind(host, None, True)


def test_query_parameters_are_typed_by_the_endpoint_table() -> None:
    from starlette.datastructures import QueryParams

    from codesearch.server.api import ENDPOINTS, parse

    search = next(e for e in ENDPOINTS if e.path == "/api/search")
    assert parse(search, QueryParams("q=a+b&k=3&kind=test&kind=doc&compact=yes&no_tests=0&scope=")) == {
        "q": "a b", "k": 3, "kind": ["test", "doc"], "compact": True, "no_tests": False, "scope": None}
    for query, needle in [("k=3", "q is required"), ("q=x&k=3.5", "k must be an integer"),
                          ("q=x&q=y", "give q once"), ("q=x&top=3", "unknown parameter 'top'")]:
        with pytest.raises(ValueError, match=needle):
            parse(search, QueryParams(query))


def test_hostile_file_names_are_exact_in_json_and_escaped_on_the_page(tmp_path: Path) -> None:
    """A name with a byte that is not UTF-8 and one with a newline: the API keeps them exact (as the CLI's --json
    does), the page shows them escaped and never forges a line."""
    import os

    repo = tmp_path / "repo"
    repo.mkdir()
    os.makedirs(os.fsencode(repo), exist_ok=True)
    with open(os.path.join(os.fsencode(repo), b"bad\xffname.py"), "w") as out:
        out.write("def zebra_crossing():\n    return 'stripes'\n")
    (repo / "e.py\nreal.py:99: FORGED").write_text("def zebra_stripes():\n    return 2\n")
    process, base = start_server([str(repo), "--model", "none", "--allow-refresh"])
    try:
        status, answer = get(base, "/api/search", q="zebra", mode="bm25")
        assert status == 200
        paths = {h["path"].encode("utf-8", "surrogateescape") for h in answer["hits"]}
        assert paths == {b"bad\xffname.py", b"e.py\nreal.py:99: FORGED"}
        assert answer == cli_json("search", "zebra", str(repo), "--mode", "bm25", "--model", "none")
        status, html = get(base, "/", q="zebra")
        assert status == 200 and "bad\\xffname.py:1-2" in html and "e.py\\nreal.py:99: FORGED:1-2" in html
        assert "e.py\nreal.py" not in html
    finally:
        stop_server(process)


def test_the_served_socket_answers_a_kept_alive_connection_without_nagles_delay() -> None:
    """The listening socket is made as TCP (not protocol 0), so that asyncio sets TCP_NODELAY on each connection it
    accepts: without it each answer after the first on a kept-alive connection waited ~40 ms for the client's
    delayed ACK (uvicorn writes a response's head and body apart)."""
    import asyncio
    import socket

    from codesearch.server.app import _bind

    async def accepted_nodelay() -> int:
        sock = _bind("127.0.0.1", 0)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                accepted = transport.get_extra_info("socket")
                seen.set_result(accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()
            server.close()

    assert asyncio.run(accepted_nodelay()) != 0
