"""A real MCP session: `codesearch mcp` in a subprocess, driven by the SDK's stdio client."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
import anyio
from conftest import SESSIONS, UTILS, HashingEmbedder
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def _result(call: Any) -> dict[str, Any]:
    assert not call.is_error, call.content[0].text
    data: dict[str, Any] = json.loads(call.content[0].text)
    return data


def _error(call: Any) -> str:
    assert call.is_error
    text: str = call.content[0].text
    assert "\n" not in text.strip() and "Traceback" not in text
    return text


@pytest.mark.slow
def test_mcp_session_search_related_freshness_status_and_errors(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "sessions.py").write_text(SESSIONS)
    (repo / "pkg" / "utils.py").write_text(UTILS)
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "netrc.py").write_text("def read_netrc(path):\n    \"\"\"Parse a .netrc file.\"\"\"\n    return {}\n")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "codesearch.faces.cli", "mcp", str(repo), str(other)],
        env={**os.environ, "CODESEARCH_CACHE_DIR": os.environ["CODESEARCH_CACHE_DIR"], "HF_HUB_OFFLINE": "1"},
        cwd=str(tmp_path),
    )

    async def session() -> None:
        with open(tmp_path / "server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                tools = {t.name for t in (await client.list_tools()).tools}
                assert tools == {"search", "find_related", "find_definition", "find_references", "index_status", "reindex"}

                status = _result(await client.call_tool("index_status", {}))
                assert status["indexed"] is False

                found = _result(await client.call_tool("search", {"query": "super_len", "k": 3, "max_lines": 2}))
                top = found["hits"][0]
                assert top["path"] == "pkg/utils.py" and "super_len" in top["symbols"]
                assert top["location"] == f"pkg/utils.py:{top['start_line']}-{top['end_line']}"
                assert top["text"].count("\n") <= 1 and found["tier"] in ("static", "full")
                assert set(top) >= {"path", "start_line", "end_line", "location", "kind", "score", "symbols", "text"}

                related = _result(await client.call_tool("find_related", {"location": "pkg/sessions.py:3", "k": 5}))
                assert related["hits"] and all(not (h["path"] == "pkg/sessions.py" and h["start_line"] <= 3 <= h["end_line"])
                                               for h in related["hits"])

                # An edit is seen by index_status, then by the next search without any reindex.
                time.sleep(0.05)
                (repo / "pkg" / "zoo.py").write_text("def zebra_crossing():\n    return 'stripes'\n")
                status = _result(await client.call_tool("index_status", {}))
                assert status["changed_files"] == 1 and status["changes"]["added"] == ["pkg/zoo.py"]
                found = _result(await client.call_tool("search", {"query": "zebra_crossing", "k": 1}))
                assert found["hits"][0]["path"] == "pkg/zoo.py" and found["refreshed"] == 1, found

                # Another root is indexed on first use.
                found = _result(await client.call_tool("search", {"query": "read_netrc", "repo": str(other), "k": 1}))
                assert found["repo"] == str(other.resolve()) and found["hits"][0]["path"] == "lib/netrc.py"

                # Bad arguments: a one-line tool error each, and the server goes on serving.
                for tool, arguments, needle in [
                    ("search", {"query": "x", "mode": "fuzzy"}, "unknown mode"),
                    ("search", {"query": "x", "k": 0}, "at least 1"),
                    ("search", {"query": "   "}, "empty"),
                    ("search", {"query": "x", "repo": str(repo / "missing")}, "does not exist"),
                    ("search", {"query": "x", "repo": str(tmp_path / "missing")}, "outside the folders"),
                    ("find_related", {"location": "pkg/missing.py:1"}, "not indexed"),
                    ("find_related", {"location": "pkg/utils.py:999"}, "covers line 999"),
                    ("find_related", {"location": str(tmp_path / "outside.py") + ":1"}, "outside"),
                    ("find_related", {"location": "no-line-here"}, "PATH:LINE"),
                ]:
                    assert needle in _error(await client.call_tool(tool, arguments)), (tool, arguments)
                    assert _result(await client.call_tool("index_status", {}))["indexed"] is True

                report = _result(await client.call_tool("reindex", {}))
                assert report["tier"] == "full" and report["files"] == 3
                status = _result(await client.call_tool("index_status", {}))
                assert status["tier"] == "full" and status["model"] == "minilm" and status["changed_files"] == 0
                found = _result(await client.call_tool("search", {"query": "strip the auth header on redirect"}))
                assert found["tier"] == "full" and "Session.should_strip_auth" in found["hits"][0]["symbols"]

    anyio.run(session)


TESTS = """\
from pkg.sessions import Session


def test_strip_auth():
    assert Session().should_strip_auth("http://a", "http://b")
"""


def _keyword_server(repo: Path, tmp_path: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "codesearch.faces.cli", "mcp", str(repo), "--model", "none", *args],
        env={**os.environ, "CODESEARCH_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}, cwd=str(tmp_path))


def test_mcp_session_navigation_budget_scope_and_errors(tmp_path: Path) -> None:
    """A keyword-only server (with --allow-any-repo): the navigation tools, answers measured against max_tokens, the
    scope arguments, repo= on index_status and reindex, and bad arguments as tool errors while the server keeps
    serving."""
    from codesearch.faces.answers import estimate_tokens

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "docs").mkdir()
    (repo / "pkg" / "sessions.py").write_text(SESSIONS)
    (repo / "pkg" / "utils.py").write_text(UTILS)
    (repo / "tests" / "test_sessions.py").write_text(TESTS)
    (repo / "docs" / "auth.md").write_text("# Auth\n\nThe session strips the auth header on redirect.\n")
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "netrc.py").write_text("def read_netrc(path):\n    return {}\n")

    async def session() -> None:
        with open(tmp_path / "server.log", "w") as errlog:
            async with stdio_client(_keyword_server(repo, tmp_path, "--allow-any-repo"), errlog=errlog) as (read, write), \
                    ClientSession(read, write) as client:
                await client.initialize()

                async def call(tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
                    answer = await client.call_tool(tool, arguments)
                    return _result(answer), estimate_tokens(answer.content[0].text)

                found, _ = await call("find_definition", {"name": "Session.should_strip_auth"})
                top = found["hits"][0]
                assert (top["path"], top["defines"], found["capped"]) == ("pkg/sessions.py", "Session.should_strip_auth",
                                                                          False)
                assert "text" in top and "note" not in found
                missing, _ = await call("find_definition", {"name": "should_strip_aut"})
                assert missing["hits"] == [] and "closest names: should_strip_auth" in missing["note"]
                refs, _ = await call("find_references", {"name": "should_strip_auth", "compact": True})
                assert refs["textual"] is True and "dynamic dispatch" in refs["note"]
                assert [(h["location"].split(":")[0], h.get("defines")) for h in refs["hits"]] == [
                    ("pkg/sessions.py", "Session.should_strip_auth"), ("tests/test_sessions.py", None)]
                assert refs["hits"][1]["line"] == 'assert Session().should_strip_auth("http://a", "http://b")'
                capped, _ = await call("find_references", {"name": "Session", "k": 1})
                assert capped["capped"] is True and len(capped["hits"]) == 1

                # The whole answer, as the client receives it, within max_tokens; what was cut is said.
                _, size = await call("search", {"query": "session auth redirect", "mode": "bm25"})
                assert size > 150
                for tool, arguments in [("search", {"query": "session auth redirect", "mode": "bm25"}),
                                        ("find_definition", {"name": "Session"}),
                                        ("find_references", {"name": "Session"}),
                                        ("search", {"query": "session auth redirect", "mode": "bm25", "compact": True})]:
                    for budget in (150, 300, 2000):
                        answer, size = await call(tool, {**arguments, "max_tokens": budget})
                        assert size <= budget and answer["tokens"] == size and answer["max_tokens"] == budget
                assert answer["trimmed"] == answer["dropped"] == 0
                small, _ = await call("search", {"query": "session auth redirect", "mode": "bm25", "max_tokens": 150})
                assert small["dropped"] + small["trimmed"] > 0

                # Scope arguments, kinds and max_lines.
                scoped, _ = await call("search", {"query": "session auth", "mode": "bm25", "scope": "pkg/"})
                assert {h["path"] for h in scoped["hits"]} <= {"pkg/sessions.py", "pkg/utils.py"} and scoped["hits"]
                kinds, _ = await call("search", {"query": "session auth", "mode": "bm25", "kinds": ["test", "doc"]})
                assert {h["kind"] for h in kinds["hits"]} == {"test", "doc"}
                globbed, _ = await call("search", {"query": "session auth", "mode": "bm25", "include": ["*.md"]})
                assert [h["path"] for h in globbed["hits"]] == ["docs/auth.md"]
                kept, _ = await call("search", {"query": "session auth", "mode": "bm25", "exclude": ["pkg/", "docs/"]})
                assert [h["path"] for h in kept["hits"]] == ["tests/test_sessions.py"]
                empty, _ = await call("search", {"query": "session", "mode": "bm25", "scope": "nowhere/"})
                assert empty["hits"] == [] and empty["note"].startswith("no indexed file under 'nowhere'")
                lines, _ = await call("search", {"query": "should_strip_auth", "mode": "bm25", "max_lines": 1})
                assert lines["hits"][0]["truncated"] is True and "\n" not in lines["hits"][0]["text"]
                whole_text, _ = await call("search", {"query": "read_netrc", "mode": "bm25", "repo": str(other),
                                                      "max_lines": 40})
                assert whole_text["hits"][0]["truncated"] is False

                # repo= on index_status and reindex.
                status, _ = await call("index_status", {"repo": str(other)})
                assert status["indexed"] is True and status["root"] == str(other.resolve())
                assert status["read_only"] is False and status["refreshed_in_memory"] == 0
                report, _ = await call("reindex", {"repo": str(other)})
                assert report["repo"] == str(other.resolve()) and report["files"] == 1 and report["embedded"] == 0
                fresh = tmp_path / "fresh"
                (fresh / "src").mkdir(parents=True)
                (fresh / "src" / "a.py").write_text("def alpha():\n    return 1\n")
                status, _ = await call("index_status", {"repo": str(fresh)})
                assert status["indexed"] is False
                report, _ = await call("reindex", {"repo": str(fresh)})
                assert report["tier"] == "keyword" and report["chunks"] == 1

                for tool, arguments, needle in [
                    ("search", {"query": "x", "max_tokens": 0}, "max_tokens must be at least 1"),
                    ("search", {"query": "x", "mode": "bm25", "max_tokens": 5}, "below the smallest answer"),
                    ("search", {"query": "x", "max_lines": -1}, "max_lines must be 0 or more"),
                    ("find_definition", {"name": "send", "max_tokens": -3}, "max_tokens must be at least 1"),
                    ("find_definition", {"name": " "}, "name is empty"),
                    ("find_definition", {"name": "send", "k": 0}, "at least 1"),
                    ("find_references", {"name": "+="}, "identifier"),
                    ("find_references", {"name": "send", "max_lines": -2}, "max_lines"),
                    ("find_related", {"location": "pkg/utils.py:1", "max_tokens": 0}, "max_tokens"),
                ]:
                    assert needle in _error(await client.call_tool(tool, arguments)), (tool, arguments)
                    assert _result(await client.call_tool("index_status", {}))["indexed"] is True

    anyio.run(session)


def test_several_read_only_mcp_servers_share_one_index(tmp_path: Path) -> None:
    """Two agents' servers read one index at once: no lock, no write, and each sees an edit in memory."""
    from codesearch import CodeSearch

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "sessions.py").write_text(SESSIONS)
    index_dir = tmp_path / "shared-index"
    CodeSearch(repo, model=None, index_dir=index_dir).index()
    (index_dir / "LOCK").unlink()
    (repo / "pkg" / "zoo.py").write_text("def zebra_crossing():\n    return 'stripes'\n")
    before = sorted(str(p.relative_to(index_dir)) for p in index_dir.rglob("*"))

    async def agent(results: list[dict[str, Any]]) -> None:
        params = _keyword_server(repo, tmp_path, "--index-dir", str(index_dir), "--read-only")
        with open(tmp_path / f"server{len(results)}.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                found = _result(await client.call_tool("find_definition", {"name": "zebra_crossing"}))
                status = _result(await client.call_tool("index_status", {}))
                assert "read-only" in _error(await client.call_tool("reindex", {}))
                results.append({"path": found["hits"][0]["path"], "read_only": status["read_only"],
                                "in_memory": status["refreshed_in_memory"]})

    async def both() -> list[dict[str, Any]]:
        results: list[dict[str, Any]] = []
        async with anyio.create_task_group() as group:
            group.start_soon(agent, results)
            group.start_soon(agent, results)
        return results

    assert anyio.run(both) == [{"path": "pkg/zoo.py", "read_only": True, "in_memory": 1}] * 2
    assert sorted(str(p.relative_to(index_dir)) for p in index_dir.rglob("*")) == before


class _SlowEmbedder(HashingEmbedder):
    """A transformer stand-in that takes a while per batch, so a background build is still running."""

    def embed_documents(self, texts, progress=False):  # type: ignore[no-untyped-def]
        time.sleep(0.15)
        return super().embed_documents(texts, progress)


def test_a_search_during_the_background_build_stats_once_and_sees_an_edit(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import codesearch.index.builder as builder_module
    from codesearch.faces.mcp_server import Workspace, tool_search
    from codesearch.files.changes import StatPass

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    for n in range(12):
        (repo / "pkg" / f"mod{n}.py").write_text(f"def handler_{n}(request):\n    return request.path + '{n}'\n")
    monkeypatch.setattr(builder_module, "CHECKPOINT_EVERY", 1)  # a checkpoint per chunk: the build can stop soon
    stat_passes: list[int] = []
    counted = StatPass.changes

    def counting(self):  # type: ignore[no-untyped-def]
        stat_passes.append(1)
        return counted(self)

    monkeypatch.setattr(StatPass, "changes", counting)
    ws = Workspace([str(repo)], model=_SlowEmbedder(name="dense"), index_dir=tmp_path / "index",
                   static=HashingEmbedder(name="dense", dim=64, salt="static"), watch=False)  # the stat pass's way
    first = tool_search(ws, "handler_3", k=1)
    assert first["tier"] == "static" and first["hits"][0]["path"] == "pkg/mod3.py"
    cs, _ = ws.searcher(None)
    build = cs._freshness._upgrade
    assert build is not None and build.is_alive()  # 12 batches of 150 ms: the transformer tier is still being built

    # Nothing changed: one stat pass for the search, not one to decide on pausing and another to refresh.
    stat_passes.clear()
    again = tool_search(ws, "handler_5", k=1)
    assert again["hits"][0]["path"] == "pkg/mod5.py" and again["refreshed"] == again["refreshed_in_memory"] == 0
    assert len(stat_passes) == 1 and build.is_alive()

    # An edit: the build stops at its next checkpoint, the search refreshes and shows it, the build starts again.
    time.sleep(0.05)
    (repo / "pkg" / "zoo.py").write_text("def zebra_crossing():\n    return 'stripes'\n")
    found = tool_search(ws, "zebra_crossing", k=1)
    assert found["hits"][0]["path"] == "pkg/zoo.py" and found["refreshed"] == 1
    assert not build.is_alive() and cs._freshness._upgrade is not build
    ws.wait_for_upgrades(timeout=30)
    done = tool_search(ws, "zebra_crossing", k=1)
    assert done["tier"] == "full" and done["hits"][0]["path"] == "pkg/zoo.py"


def _until(condition, what: str, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.002)


def _watch_threads() -> list[Any]:
    import threading

    return [t for t in threading.enumerate() if t.name.startswith("codesearch-watch-") and t.is_alive()]


def test_the_server_watches_each_repository_says_so_and_stops_watching_on_close(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import codesearch.index.builder as builder_module
    from codesearch.faces.mcp_server import Workspace, tool_index_status, tool_search
    from codesearch.files.changes import StatPass

    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    for n in range(12):
        (repo / "pkg" / f"mod{n}.py").write_text(f"def handler_{n}(request):\n    return request.path + '{n}'\n")
    monkeypatch.setattr(builder_module, "CHECKPOINT_EVERY", 1)
    stat_passes: list[int] = []
    counted = StatPass.changes

    def counting(self):  # type: ignore[no-untyped-def]
        stat_passes.append(1)
        return counted(self)

    monkeypatch.setattr(StatPass, "changes", counting)
    ws = Workspace([str(repo)], model=_SlowEmbedder(name="dense"), index_dir=tmp_path / "index",
                   static=HashingEmbedder(name="dense", dim=64, salt="static"))
    try:
        assert tool_search(ws, "handler_3", k=1)["hits"][0]["path"] == "pkg/mod3.py"
        cs, _ = ws.searcher(None)
        watcher = cs._freshness._watcher
        assert watcher is not None and watcher.wait_started(20)
        tool_search(ws, "handler_4", k=1)  # the one stat pass after the watches are in place
        status = tool_index_status(ws)
        assert status["freshness"] == "watch" and "watching" in status["freshness_reason"]
        build = cs._freshness._upgrade
        assert build is not None and build.is_alive()  # the transformer tier is still being built

        # Nothing changed: no stat pass at all, and the build goes on.
        stat_passes.clear()
        assert tool_search(ws, "handler_5", k=1)["refreshed"] == 0
        assert stat_passes == [] and build.is_alive()

        # An edit, once reported: the build stops at its next checkpoint, the search refreshes and shows it.
        (repo / "pkg" / "zoo.py").write_text("def zebra_crossing():\n    return 'stripes'\n")
        _until(lambda: "pkg/zoo.py" in watcher._pending, "the new file to be reported")
        found = tool_search(ws, "zebra_crossing", k=1)
        assert found["hits"][0]["path"] == "pkg/zoo.py" and found["refreshed"] == 1
        assert not build.is_alive() and stat_passes == []
        assert _watch_threads()
    finally:
        ws.close()
        ws.wait_for_upgrades(timeout=30)
    assert not _watch_threads()
    assert tool_index_status(ws)["freshness"] == "stat"


# -- issue 38: the server serves only what it was given; every bad call is one line; answers are bounded ----------

FORGED = "e.py\nreal.py:99: FORGED"
"""A file name that would forge a result line of a text listing."""


def _tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "sessions.py").write_text(SESSIONS)
    (root / "pkg" / "utils.py").write_text(UTILS)
    return root


def _hostile(root: Path) -> Path:
    """A 1 MB one-line file, a file name with a newline and one with a byte that is not UTF-8."""
    (root / "pkg" / "min.js").write_text("var minified_bundle = '" + "y" * 1_000_000 + "';\n")
    (root / "pkg" / FORGED).write_text("def forged_name():\n    return 1\n")
    with open(os.fsencode(root / "pkg") + b"/bad\xffname.py", "w") as handle:
        handle.write("def undecodable_name():\n    return forged_name()\n")
    return root


BAD_ARGUMENTS = [  # (tool, arguments, what the one-line error says); issue 38 row 11 and the echoes
    ("search", {}, "query is required"),
    ("search", {"query": 123}, "query must be a string, got 123"),
    ("search", {"query": "x", "k": "ten"}, 'k must be an integer, got "ten"'),
    ("search", {"query": "x", "k": True}, "k must be an integer, got true"),
    ("search", {"query": "x", "k": 2.5}, "k must be an integer, got 2.5"),
    ("search", {"query": "x", "max_tokens": "lots"}, 'max_tokens must be an integer, got "lots"'),
    ("search", {"query": "x", "compact": "yes"}, 'compact must be true or false, got "yes"'),
    ("search", {"query": "x", "include": ["*.py", 3]}, "include[1] must be a string, got 3"),
    ("find_definition", {"name": None}, "name must be a string, got null"),
    ("find_references", {"name": "x", "k": False}, "k must be an integer, got false"),
    ("find_related", {"location": 7}, "location must be a string, got 7"),
    ("index_status", {"repo": 5}, "repo must be a string, got 5"),
    ("find_definition", {"name": "x" * 100_000}, "100,000 characters"),
    ("find_related", {"location": "y" * 100_000}, "is not a location"),
    ("search", {"query": "x", "mode": "z" * 100_000}, "unknown mode"),
]


def test_a_repo_outside_the_servers_roots_is_refused_and_nothing_is_written(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38 row 3: `repo` indexed and searched any folder the user could read (or a path relative to the
    server's working directory), and left an index of it in the cache."""
    from codesearch.exceptions import CodeSearchError, RepositoryNotServedError
    from codesearch.faces.mcp_server import (
        Workspace,
        tool_find_definition,
        tool_find_references,
        tool_find_related,
        tool_index_status,
        tool_reindex,
        tool_search,
    )

    cache = tmp_path / "cache"
    monkeypatch.setenv("CODESEARCH_CACHE_DIR", str(cache))
    root = _tree(tmp_path / "root")
    other = tmp_path / "other"
    other.mkdir()
    (other / "secret.py").write_text("def leaked_secret():\n    return 'hunter2'\n")
    (root / "escape").symlink_to(other)
    monkeypatch.chdir(root)
    ws = Workspace([str(root)], model=None, watch=False, background=False)
    assert tool_search(ws, "super_len", mode="bm25")["hits"]
    before = sorted(cache.rglob("*"))
    calls = {
        "search": lambda repo: tool_search(ws, "leaked_secret", repo=repo, mode="bm25"),
        "find_definition": lambda repo: tool_find_definition(ws, "leaked_secret", repo=repo),
        "find_references": lambda repo: tool_find_references(ws, "leaked_secret", repo=repo),
        "find_related": lambda repo: tool_find_related(ws, "secret.py:1", repo=repo),
        "index_status": lambda repo: tool_index_status(ws, repo=repo),
        "reindex": lambda repo: tool_reindex(ws, repo=repo),
    }
    for repo in (str(other), "../other", str(root / "escape"), "escape", str(root / "pkg" / ".." / ".." / "other"),
                 str(other / "secret.py"), str(tmp_path), "/", str(tmp_path / "missing")):
        for tool, call in calls.items():
            with pytest.raises(RepositoryNotServedError, match="outside the folders this server serves") as caught:
                call(repo)
            assert isinstance(caught.value, CodeSearchError) and "\n" not in str(caught.value), (tool, repo)
    assert sorted(cache.rglob("*")) == before  # no index and no cache entry for any of them
    assert sorted(p.name for p in other.iterdir()) == ["secret.py"]

    # The roots and the folders under them are served (a subfolder has an index of its own, as before).
    assert tool_search(ws, "super_len", repo="pkg", mode="bm25")["hits"][0]["path"] == "utils.py"
    assert tool_index_status(ws, repo=str(root))["root"] == str(root)
    # --allow-any-repo keeps the old reach.
    anywhere = Workspace([str(root)], model=None, watch=False, background=False, allow_any_repo=True)
    assert tool_search(anywhere, "leaked_secret", repo=str(other), mode="bm25")["hits"][0]["path"] == "secret.py"


def test_bad_arguments_globs_long_lines_and_hostile_names_through_the_sdk(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38 rows 7, 8, 11 and 12 through the SDK in this process: an argument of the wrong type is one line naming
    it (k: true refused, not taken as 1); a bad glob is the library's one line; max_lines bounds an answer's bytes;
    file names with a newline or a byte that is not UTF-8 answer."""
    from mcp import Client

    from codesearch.faces.mcp_server import Workspace, build_server
    from codesearch.scope import Scope

    monkeypatch.setenv("CODESEARCH_CACHE_DIR", str(tmp_path / "cache"))
    ws = Workspace([str(_hostile(_tree(tmp_path / "root")))], model=None, watch=False, background=False)

    async def session() -> None:
        async with Client(build_server(ws)) as client:
            async def answer(tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], int]:
                call = await client.call_tool(tool, arguments)
                return _result(call), len(call.content[0].text.encode())

            for tool, arguments, needle in BAD_ARGUMENTS:
                text = _error(await client.call_tool(tool, arguments))
                assert needle in text and "pydantic" not in text and "http" not in text, (tool, text[:300])
                assert len(text) < 1200, (tool, len(text))
                assert not (await client.call_tool("index_status", {})).is_error
            for option in ("include", "exclude"):
                with pytest.raises(ValueError) as caught:
                    Scope.of(**{option: ["[z-a]"]})
                text = _error(await client.call_tool("search", {"query": "x", "mode": "bm25", option: ["[z-a]"]}))
                assert text == f"Error executing tool search: {caught.value}"

            bounded, size = await answer("search", {"query": "minified_bundle", "mode": "bm25", "max_lines": 1, "k": 1})
            assert bounded["hits"][0]["path"] == "pkg/min.js" and bounded["hits"][0]["truncated"] is True
            assert size < 5_000, size
            _, size = await answer("search", {"query": "minified_bundle", "mode": "bm25", "k": 1})
            assert size < 40 * 600 + 5_000, size  # the default max_lines=40 bounds it too

            refs, _ = await answer("find_references", {"name": "forged_name"})
            assert {h["path"] for h in refs["hits"]} == {f"pkg/{FORGED}", "pkg/bad\\udcffname.py"}
            found, _ = await answer("search", {"query": "undecodable_name forged_name", "mode": "bm25"})
            assert {h["path"] for h in found["hits"]} >= {f"pkg/{FORGED}", "pkg/bad\\udcffname.py"}

    anyio.run(session)


def _raw_exchange(argv: list[str], env: dict[str, str], lines: list[bytes]) -> list[dict[str, Any]]:
    """Write JSON-RPC lines as bytes to a server, one at a time after the handshake; its answer to each (or None
    where it gave none within 30 s)."""
    import select
    import subprocess

    proc = subprocess.Popen([sys.executable, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None

    def send(line: bytes) -> None:
        proc.stdin.write(line + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]

    def receive() -> dict[str, Any] | None:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        return json.loads(proc.stdout.readline()) if ready else None  # type: ignore[union-attr]

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}).encode())
        assert receive() is not None
        send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        answers = []
        for line in lines:
            send(line)
            answers.append(receive())
        return answers  # type: ignore[return-value]
    finally:
        proc.kill()
        proc.wait()


def test_a_real_stdio_session_answers_every_hostile_call_in_one_line_and_keeps_serving(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 8 of issue 38: the SDK's stdio client against `codesearch mcp` in a subprocess, through every case of the
    issue's table that reaches MCP; then the JSON-RPC bytes no SDK client sends (text that is not UTF-8)."""
    from codesearch import CodeSearch

    cache = tmp_path / "cache"
    monkeypatch.setenv("CODESEARCH_CACHE_DIR", str(cache))
    root = _hostile(_tree(tmp_path / "root"))
    (root / "sub").mkdir()
    (root / "sub" / "netrc.py").write_text("def read_netrc(path):\n    return {}\n")
    damaged = CodeSearch(root / "sub", model=None).store.directory
    CodeSearch(root / "sub", model=None).index()
    target = next(p for p in sorted(damaged.rglob("*.json")) if p.is_file() and p.name != "LOCK")
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x20
    target.write_bytes(bytes(data))
    other = tmp_path / "other"
    other.mkdir()
    (other / "secret.py").write_text("def leaked_secret():\n    return 'hunter2'\n")
    (root / "escape").symlink_to(other)
    env = {**os.environ, "CODESEARCH_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    argv = ["-m", "codesearch.faces.cli", "mcp", str(root), "--model", "none"]
    params = StdioServerParameters(command=sys.executable, args=argv, env=env, cwd=str(root))

    async def session() -> None:
        with open(tmp_path / "server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
                await client.initialize()

                async def alive() -> None:
                    assert _result(await client.call_tool("index_status", {}))["root"] == str(root)

                for repo in (str(other), "../other", "escape", "/"):
                    for tool, arguments in [("search", {"query": "leaked_secret", "mode": "bm25"}),
                                            ("find_definition", {"name": "leaked_secret"}), ("reindex", {})]:
                        text = _error(await client.call_tool(tool, {**arguments, "repo": repo}))
                        assert "outside the folders this server serves" in text, (tool, repo, text)
                for option in ("include", "exclude"):
                    text = _error(await client.call_tool("search", {"query": "x", "mode": "bm25", option: ["[z-a]"]}))
                    assert "bad glob '[z-a]'" in text
                for tool, arguments, needle in BAD_ARGUMENTS:
                    assert needle in _error(await client.call_tool(tool, arguments)), tool
                await alive()

                one_line = await client.call_tool("search", {"query": "minified_bundle", "mode": "bm25", "max_lines": 1})
                assert len(one_line.content[0].text.encode()) < 10_000 and _result(one_line)["hits"]
                refs = _result(await client.call_tool("find_references", {"name": "forged_name"}))
                assert {h["path"] for h in refs["hits"]} == {f"pkg/{FORGED}", "pkg/bad\\udcffname.py"}
                forged = await client.call_tool("find_related", {"location": f"pkg/{FORGED}:1"})
                assert "keyword-only" in _error(forged)

                # A damaged index: a one-line error, or an answer as the undamaged index gives (rebuilt).
                hurt = await client.call_tool("search", {"query": "read_netrc", "mode": "bm25", "repo": str(root / "sub")})
                if hurt.is_error:
                    _error(hurt)
                else:
                    assert [h["path"] for h in _result(hurt)["hits"]] == ["netrc.py"]
                await alive()

    anyio.run(session)
    assert not any(entry.name.startswith(("other-", "escape-")) for entry in (cache / "indexes").iterdir())

    # Text that is not UTF-8: raw bytes (read as U+FFFD by the SDK) and a lone surrogate escape (which the SDK's
    # parser refuses, dropping the request unanswered, unless the server reads it as U+FFFD too).
    calls = [
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search", "arguments": '
        b'{"query": "forged_name \xff\xfe", "mode": "bm25"}}}',
        b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": '
        b'{"query": "forged_name \\udcff", "mode": "bm25"}}}',
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "find_definition", "arguments": '
        b'{"name": "forged_name\\ud800"}}}',
        b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "index_status", "arguments": {}}}',
    ]
    answers = _raw_exchange(argv, env, calls)
    assert [a and a["id"] for a in answers] == [1, 2, 3, 4], answers
    for answer in answers[:2]:
        assert not answer["result"]["isError"] and json.loads(answer["result"]["content"][0]["text"])["hits"]
    assert json.loads(answers[2]["result"]["content"][0]["text"])["name"] == "forged_name\ufffd"
    assert not answers[3]["result"]["isError"]


def test_eight_concurrent_sessions_of_mixed_and_bad_calls_lose_nothing(tmp_path: Path) -> None:
    """Item 8 of issue 38: an MCP load test (benchmarks/mcp_load.py): 8 concurrent SDK sessions over stdio, each
    with its own server on one shared read-only index, mixed tools and bad calls; no session or call is lost and
    every answer is as due. p50/p99 are printed (the suite never asserts a time)."""
    from benchmarks import mcp_load
    from codesearch import CodeSearch

    repo = mcp_load.make_tree(tmp_path / "tree", 60)
    CodeSearch(repo, model=None, index_dir=tmp_path / "index").index()
    (tmp_path / "index" / "LOCK").unlink(missing_ok=True)
    result = mcp_load.run_load(repo, tmp_path / "index", clients=8, calls=20, timeout=240, logs=tmp_path,
                               env={"CODESEARCH_CACHE_DIR": str(tmp_path / "cache")})
    mcp_load.print_table(result)
    assert result["sessions_completed"] == 8 and result["sessions_lost"] == 0, result
    assert result["calls_answered"] == 8 * 20 and result["calls_lost"] == 0, result
    assert result["unexpected"] == 0, result["unexpected_examples"]
    assert result["p50_ms"] is not None and result["p99_ms"] is not None
