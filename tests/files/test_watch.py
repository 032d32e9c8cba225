"""Watch mode: a file watcher instead of a stat pass before each search (``CodeSearch(watch=True)``).

Nothing here sleeps to assert: a test waits, with a deadline, for the watcher to report what it wrote
(:attr:`FolderWatcher.reported`, or a path pending), then searches.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("watchfiles")

from codesearch import CodeSearch
from codesearch.files import watch as watch_module
from codesearch.files.changes import StatPass
from codesearch.files.watch import FolderWatcher, Pending
from codesearch.index.builder import IndexBuilder
from codesearch.index.columns import stored_records

DEADLINE_S = 20.0
# What watchfiles raises when inotify's fs.inotify.max_user_watches is reached (seen with the limit lowered to 10).
WATCH_LIMIT_ERROR = ('OS file watch limit reached. about ["{path}"] (Error { kind: MaxFilesWatch, '
                     'paths: ["{path}"] })')


def _until(condition: Callable[[], object], what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout} s")
        time.sleep(0.002)


def _settle(root: Path) -> None:
    """Date every folder a minute back, as a repository's are older than its last index."""
    past = time.time() - 60
    for path in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        os.utime(path, (past, past))


def _write_later(path: Path, text: str) -> None:
    """Write ``text`` and move the mtime a second on, so a stat pass could not miss it either."""
    before = path.stat().st_mtime_ns if path.exists() else time.time_ns()
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def _watcher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("codesearch-watch-") and t.is_alive()]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    for n in range(6):
        (root / "pkg" / f"mod{n}.py").write_text(f"def handler_{n}(request):\n    return request.path + '{n}'\n")
    (root / "README.md").write_text("Handlers for requests.\n")
    _settle(root)
    return root


@pytest.fixture
def stat_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts whole stat passes (:meth:`StatPass.changes`), the work watch mode saves."""
    calls: list[int] = []
    real = StatPass.changes

    def counting(self: StatPass):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(self)

    monkeypatch.setattr(StatPass, "changes", counting)
    return calls


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts index builds (a refresh is one)."""
    calls: list[int] = []
    real = IndexBuilder.build

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(IndexBuilder, "build", counting)
    return calls


@pytest.fixture(params=[False, True], ids=["per-folder", "recursive"])
def recursive(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Both ways of watching (each walked folder, as on Linux; the root's tree, as elsewhere)."""
    monkeypatch.setattr(watch_module, "RECURSIVE", request.param)
    return bool(request.param)


@pytest.fixture
def no_leaked_watchers() -> Iterator[None]:
    yield
    _until(lambda: not _watcher_threads(), "every watcher thread to end", timeout=5)


def _watching(repo: Path, index_dir: Path, **kwargs) -> CodeSearch:  # type: ignore[no-untyped-def]
    """A keyword-only searcher in watch mode whose watcher is in place and caught up (its first stat pass done)."""
    cs = CodeSearch(repo, model=None, index_dir=index_dir, watch=True, **kwargs)
    cs.index()
    cs.search("handler", k=1, mode="bm25")  # starts the watcher
    watcher = cs._freshness._watcher
    assert watcher is not None and watcher.wait_started(DEADLINE_S), watcher and watcher.reason
    cs.search("handler", k=1, mode="bm25")  # the catch-up stat pass
    assert cs.status()["freshness"] == "watch"
    return cs


def _reported(cs: CodeSearch, path: str) -> Callable[[], bool]:
    """Whether the watcher has ``path`` pending (or asks for a rescan)."""
    def check() -> bool:
        watcher = cs._freshness._watcher
        return watcher is not None and (path in watcher._pending or watcher._rescan)
    return check


def test_watch_mode_sees_an_edit_an_added_and_a_removed_file_with_no_stat_pass(
        repo: Path, tmp_path: Path, stat_passes: list[int], recursive: bool, no_leaked_watchers: None) -> None:
    with _watching(repo, tmp_path / "index") as cs:
        stat_passes.clear()
        for _ in range(3):
            assert cs.search("handler_2", k=1, mode="bm25")[0].path == "pkg/mod2.py"
            assert cs.last_search is not None and cs.last_search.refreshed == 0
        assert stat_passes == []  # nothing pending: the searches checked nothing

        _write_later(repo / "pkg" / "mod2.py", "def zebra_crossing(request):\n    return 'stripes'\n")
        _until(_reported(cs, "pkg/mod2.py"), "the edit to be reported")
        assert cs.search("zebra_crossing", k=1, mode="bm25")[0].path == "pkg/mod2.py"
        assert cs.last_search is not None and cs.last_search.refreshed == 1

        (repo / "pkg" / "added.py").write_text("def okapi_route(request):\n    return 'forest'\n")
        _until(_reported(cs, "pkg/added.py"), "the added file to be reported")
        assert cs.search("okapi_route", k=1, mode="bm25")[0].path == "pkg/added.py"
        assert cs.last_search is not None and cs.last_search.refreshed == 1

        (repo / "pkg" / "added.py").unlink()
        _until(_reported(cs, "pkg/added.py"), "the removal to be reported")
        assert all(h.path != "pkg/added.py" for h in cs.search("okapi_route", k=3, mode="bm25"))
        assert cs.last_search is not None and cs.last_search.refreshed == 1
        assert stat_passes == []  # the reported paths alone were statted (and the added file's folder listed)
        assert cs.status()["changed_files"] == 0


def test_a_burst_of_two_thousand_writes_is_one_refresh(repo: Path, tmp_path: Path, builds: list[int],
                                                       no_leaked_watchers: None) -> None:
    with _watching(repo, tmp_path / "index") as cs:
        watcher = cs._freshness._watcher
        assert watcher is not None
        builds.clear()
        before = watcher.reported
        for n in range(2000):
            (repo / "pkg" / f"burst{n:04d}.py").write_text(f"def burst_{n}(request):\n    return {n}\n")
        _until(lambda: watcher.reported - before >= 2000, "2,000 paths to be reported")
        assert cs.search("burst_1234", k=1, mode="bm25")[0].path == "pkg/burst1234.py"
        assert cs.last_search is not None and cs.last_search.refreshed == 2000
        assert len(builds) == 1
        assert cs.search("burst_7", k=1, mode="bm25")[0].path == "pkg/burst0007.py"
        assert len(builds) == 1


def test_a_change_made_before_the_watches_were_in_place_is_found(repo: Path, tmp_path: Path,
                                                                 no_leaked_watchers: None) -> None:
    with CodeSearch(repo, model=None, index_dir=tmp_path / "index", watch=True) as cs:
        cs.index()
        cs.search("handler", k=1, mode="bm25", refresh=False)  # starts the watcher, refreshes nothing
        _write_later(repo / "pkg" / "mod4.py", "def missed_by_the_watcher(request):\n    return 4\n")
        watcher = cs._freshness._watcher
        assert watcher is not None and watcher.wait_started(DEADLINE_S)
        watcher.take()  # as if the edit came before the watches: the watcher never reports it
        assert cs.search("missed_by_the_watcher", k=1, mode="bm25")[0].path == "pkg/mod4.py"
        assert cs.last_search is not None and cs.last_search.refreshed == 1


def test_when_the_watch_limit_is_reached_the_stat_pass_takes_over_and_says_so(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        no_leaked_watchers: None) -> None:
    import watchfiles

    def limit_reached(*paths: str, **kwargs: object) -> Iterator[set[tuple[int, str]]]:
        raise OSError(WATCH_LIMIT_ERROR.replace("{path}", paths[-1]))
        yield set()  # a generator, as watchfiles.watch is

    cs = CodeSearch(repo, model=None, index_dir=tmp_path / "index", watch=True)
    cs.index()
    before = cs.store.load()
    monkeypatch.setattr(watchfiles, "watch", limit_reached)
    with caplog.at_level(logging.WARNING, logger="codesearch"):
        cs.search("handler_1", k=1, mode="bm25")
        watcher = cs._freshness._watcher
        assert watcher is not None and not watcher.wait_started(DEADLINE_S) and watcher.state == "failed"
        hits = cs.search("handler_1", k=1, mode="bm25")
        _write_later(repo / "pkg" / "mod1.py", "def seen_by_the_stat_pass(request):\n    return 1\n")
        assert cs.search("seen_by_the_stat_pass", k=1, mode="bm25")[0].path == "pkg/mod1.py"
    assert hits[0].path == "pkg/mod1.py"  # the index stayed readable
    warnings = [r.getMessage() for r in caplog.records if "not watching" in r.getMessage()]
    assert len(warnings) == 1 and "max_user_watches" in warnings[0] and "stat the indexed files" in warnings[0]
    status = cs.status()
    assert status["freshness"] == "stat"
    assert "inotify watch limit is reached" in status["freshness_reason"]
    assert "sysctl fs.inotify.max_user_watches" in status["freshness_reason"]
    # The edit went in: nothing lost.
    assert stored_records(cs.store.load().arrays) != stored_records(before.arrays) and status["changed_files"] == 0
    assert not _watcher_threads()
    cs.close()


def test_a_folder_gone_before_its_watch_was_added_is_watched_again_after_the_refresh(
        repo: Path, tmp_path: Path, no_leaked_watchers: None) -> None:
    (repo / "old").mkdir()
    (repo / "old" / "legacy.py").write_text("def legacy_helper():\n    return 0\n")
    with CodeSearch(repo, model=None, index_dir=tmp_path / "index", watch=True) as cs:
        cs.index()
        (repo / "old" / "legacy.py").unlink()
        (repo / "old").rmdir()  # the index still names the folder: watching it fails
        cs.search("handler", k=1, mode="bm25", refresh=False)
        first = cs._freshness._watcher
        assert first is not None and not first.wait_started(DEADLINE_S) and isinstance(first.error, FileNotFoundError)
        assert cs.search("legacy_helper", k=1, mode="bm25") == []  # the stat pass saw the removal
        assert cs.last_search is not None and cs.last_search.refreshed == 1
        cs.search("handler", k=1, mode="bm25")  # the new index's folders: a new watcher
        second = cs._freshness._watcher
        assert second is not None and second is not first and second.wait_started(DEADLINE_S)
        cs.search("handler", k=1, mode="bm25")
        assert cs.status()["freshness"] == "watch"


def test_a_network_file_system_is_not_watched(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              no_leaked_watchers: None) -> None:
    monkeypatch.setattr(watch_module, "_file_system", lambda root: "nfs4")
    with CodeSearch(repo, model=None, index_dir=tmp_path / "index", watch=True) as cs:
        cs.index()
        cs.search("handler", k=1, mode="bm25")
        status = cs.status()
        assert status["freshness"] == "stat" and "nfs4" in status["freshness_reason"]


def test_the_watcher_stops_when_the_searcher_is_closed_or_dropped(repo: Path, tmp_path: Path) -> None:
    cs = _watching(repo, tmp_path / "index")
    assert _watcher_threads()
    cs.close()
    assert not _watcher_threads()
    assert cs.status()["freshness"] == "stat"
    _write_later(repo / "pkg" / "mod0.py", "def after_close(request):\n    return 0\n")
    assert cs.search("after_close", k=1, mode="bm25")[0].path == "pkg/mod0.py"  # stat passes from now on

    dropped = _watching(repo, tmp_path / "index")
    assert _watcher_threads()
    del dropped
    gc.collect()
    _until(lambda: not _watcher_threads(), "a dropped searcher's watcher to stop", timeout=5)


def test_the_index_inside_the_repository_does_not_trigger_refreshes(repo: Path, builds: list[int], recursive: bool,
                                                                     no_leaked_watchers: None) -> None:
    with _watching(repo, repo / ".codesearch-index") as cs:
        watcher = cs._freshness._watcher
        assert watcher is not None
        cs.index()  # a new generation written inside the repository
        (repo / "pkg" / "marker.py").write_text("MARKER = 1\n")  # events arrive in order: the index's came first
        _until(_reported(cs, "pkg/marker.py"), "the marker to be reported")
        assert watcher.take() == Pending(frozenset({"pkg/marker.py"}))


def test_folder_watcher_drops_skipped_folders_and_asks_for_a_rescan_past_its_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_leaked_watchers: None) -> None:
    root = tmp_path / "tree"
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / "src").mkdir()
    watcher = FolderWatcher(root.resolve(), recursive=True).start()
    try:
        assert watcher.wait_started(DEADLINE_S)
        (root / "node_modules" / "dep" / "index.js").write_text("module.exports = 1\n")
        (root / "src" / "app.py").write_text("x = 1\n")
        _until(lambda: "src/app.py" in watcher._pending, "src/app.py to be reported")
        assert watcher.take() == Pending(frozenset({"src/app.py"}))
        monkeypatch.setattr(watch_module, "MAX_PENDING", 3)
        watcher.put_back(Pending(frozenset({"a", "b", "c", "d"})))
        assert watcher.take() == Pending(frozenset(), rescan=True)
        assert not watcher.take()
    finally:
        watcher.stop()
    assert watcher.state == "stopped" and not watcher.alive


_STALE_WRITER = """
import sys
from codesearch.index.store import IndexStore

store = IndexStore(sys.argv[1])
with store.write_lock():
    old = store.load()  # the index before the edit, as a build that listed the files before it would commit
    print("held", flush=True)
    sys.stdin.readline()
    store.save(old)
print("committed", flush=True)
"""


def test_while_another_process_writes_an_edit_is_read_into_memory_and_checked_again_after_its_commit(
        repo: Path, tmp_path: Path, stat_passes: list[int], no_leaked_watchers: None) -> None:
    """Watch mode while another process holds the write lock: the reported edit is refreshed in memory (the
    watcher's report is used up), and once that process commits a generation without the edit, the edit is still
    seen: the paths held in memory are checked again against the new commit."""
    import subprocess
    import sys

    index_dir = tmp_path / "index"
    with _watching(repo, index_dir) as cs:
        writer = subprocess.Popen([sys.executable, "-c", _STALE_WRITER, str(index_dir)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert writer.stdout is not None and writer.stdout.readline().strip() == "held"
            _write_later(repo / "pkg" / "mod4.py", "def zebra_crossing(request):\n    return request\n")
            _until(_reported(cs, "pkg/mod4.py"), "the edit's report")
            stat_passes.clear()
            assert cs.search("zebra_crossing", k=1, mode="bm25")[0].path == "pkg/mod4.py"
            assert cs.last_search is not None and cs.last_search.refreshed_in_memory == 1
            assert writer.stdin is not None
            writer.stdin.write("commit\n")
            writer.stdin.flush()
            assert writer.stdout.readline().strip() == "committed"
        finally:
            writer.communicate(timeout=30)
        assert cs.search("zebra_crossing", k=1, mode="bm25")[0].path == "pkg/mod4.py"
        assert cs.last_search is not None and (cs.last_search.refreshed, cs.last_search.refreshed_in_memory) == (1, 0)
        assert stat_passes == []  # the path held in memory was checked, not the tree
    assert CodeSearch(repo, model=None, index_dir=index_dir).status()["changed_files"] == 0
