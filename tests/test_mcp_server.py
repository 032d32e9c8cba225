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
                assert tools == {"search", "find_related", "index_status", "reindex"}

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
