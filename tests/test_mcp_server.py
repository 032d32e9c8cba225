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
        command=sys.executable, args=["-m", "codesearch.cli", "mcp", str(repo)],
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

                # Another folder is indexed on first use.
                found = _result(await client.call_tool("search", {"query": "read_netrc", "repo": str(other), "k": 1}))
                assert found["repo"] == str(other.resolve()) and found["hits"][0]["path"] == "lib/netrc.py"

                # Bad arguments: a one-line tool error each, and the server goes on serving.
                for tool, arguments, needle in [
                    ("search", {"query": "x", "mode": "fuzzy"}, "unknown mode"),
                    ("search", {"query": "x", "k": 0}, "at least 1"),
                    ("search", {"query": "   "}, "empty"),
                    ("search", {"query": "x", "repo": str(tmp_path / "missing")}, "does not exist"),
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
        command=sys.executable, args=["-m", "codesearch.cli", "mcp", str(repo), "--model", "none", *args],
        env={**os.environ, "CODESEARCH_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}, cwd=str(tmp_path))


def test_mcp_session_navigation_budget_scope_and_errors(tmp_path: Path) -> None:
    """A keyword-only server: the navigation tools, answers measured against max_tokens, the scope arguments,
    repo= on index_status and reindex, and bad arguments as tool errors while the server keeps serving."""
    from codesearch.answers import estimate_tokens

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
            async with stdio_client(_keyword_server(repo, tmp_path), errlog=errlog) as (read, write), \
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
    from codesearch.files.changes import StatPass
    from codesearch.mcp_server import Workspace, tool_search

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
    assert again["hits"][0]["path"] == "pkg/mod5.py" and again["refreshed"] == 0
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
    from codesearch.files.changes import StatPass
    from codesearch.mcp_server import Workspace, tool_index_status, tool_search

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
