"""Keeping an index in step with its files (codesearch/index/freshness.py): the stat pass, the refresh and its
lock, the background upgrade and what pauses it; driven directly, without the facade."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from session_roles import repo, session, write

from codesearch.exceptions import IndexCancelledError, IndexLockedError, IndexWriteError
from codesearch.files import Changes
from codesearch.index.freshness import STAT, Freshness
from codesearch.index.loaded import LoadedIndex
from codesearch.index.store import IndexStore


def _built(tmp_path: Path) -> tuple[Path, IndexStore, LoadedIndex]:
    root = repo(tmp_path / "repo")
    s = session(root, tmp_path / "index")
    loaded, built = s.current()
    assert built
    return root, s.store, loaded


def test_the_stat_pass_finds_added_modified_and_removed_files(tmp_path: Path) -> None:
    root, store, loaded = _built(tmp_path)
    freshness = Freshness(root, store, use_ignore_files=True)
    assert not freshness.changes(loaded)
    write(root / "pkg" / "utils.py", "def super_len(o):\n    return 0\n")
    write(root / "pkg" / "new.py", "x = 1\n")
    (root / "README.md").unlink()
    changes = freshness.changes(loaded)
    assert changes == Changes(("pkg/new.py",), ("pkg/utils.py",), ("README.md",))
    assert freshness.describe()["freshness"] == STAT


def test_a_refresh_rebuilds_under_the_write_lock_or_in_memory_when_another_holds_it(tmp_path: Path) -> None:
    root, store, loaded = _built(tmp_path)
    freshness = Freshness(root, store, use_ignore_files=True)
    calls: list[tuple[Changes, bool, bool]] = []

    def locked() -> bool:
        try:
            with IndexStore(store.directory).write_lock(timeout=0):
                return False
        except IndexLockedError:
            return True

    def rebuild(changes: Changes, commit: bool) -> LoadedIndex:
        calls.append((changes, commit, locked()))
        return loaded

    assert freshness.refresh(loaded, rebuild) == (loaded, 0) and not calls  # nothing changed: nothing rebuilt
    write(root / "pkg" / "utils.py", "def super_len(o):\n    return 0\n")
    assert freshness.refresh(loaded, rebuild) == (loaded, 1)
    assert calls[-1] == (Changes((), ("pkg/utils.py",), ()), True, True)  # committed under the refresh's lock
    assert not locked()  # and let go
    with IndexStore(store.directory).write_lock():  # another writer: the answer is built in memory only
        assert freshness.refresh(loaded, rebuild) == (loaded, 1)
    assert calls[-1][1:] == (False, True)
    reader = Freshness(root, IndexStore(store.directory, read_only=True), use_ignore_files=True)
    assert reader.refresh(loaded, rebuild) == (loaded, 1)
    assert calls[-1][1:] == (False, False)  # read-only: in memory, no lock taken


def test_a_failed_rebuild_raises_and_leaves_the_changes_for_the_next_search(tmp_path: Path) -> None:
    root, store, loaded = _built(tmp_path)
    freshness = Freshness(root, store, use_ignore_files=True)
    write(root / "pkg" / "utils.py", "def super_len(o):\n    return 0\n")

    def full_disk(changes: Changes, commit: bool) -> LoadedIndex:
        raise IndexWriteError("no space left")

    with pytest.raises(IndexWriteError):
        freshness.refresh(loaded, full_disk)
    assert freshness.changes(loaded).modified == ("pkg/utils.py",)


def test_the_background_upgrade_runs_once_ends_quietly_when_cancelled_and_logs_a_failure(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root, store, _ = _built(tmp_path)
    freshness = Freshness(root, store, use_ignore_files=True)
    started, release = threading.Event(), threading.Event()
    runs: list[str] = []

    def build() -> None:
        runs.append("build")
        started.set()
        release.wait(30)
        raise IndexCancelledError("stopped for a search")

    freshness.upgrade_soon(build)
    assert started.wait(30) and freshness.upgrading
    freshness.upgrade_soon(build)  # one runs already: not a second
    release.set()
    freshness.wait(30)
    assert runs == ["build"] and not freshness.upgrading
    with caplog.at_level(logging.WARNING, logger="codesearch"):
        freshness.upgrade_soon(lambda: (_ for _ in ()).throw(IndexWriteError("disk full")))
        freshness.wait(30)
    assert "transformer tier of" in caplog.text and "disk full" in caplog.text


def test_an_upgrade_is_paused_for_a_search_only_when_files_changed(tmp_path: Path) -> None:
    root, store, loaded = _built(tmp_path)
    freshness = Freshness(root, store, use_ignore_files=True)
    cancelled: list[bool] = []
    assert freshness.pause_upgrade_for_changes(loaded, lambda: cancelled.append(True)) is None  # none runs
    stop = threading.Event()
    freshness.upgrade_soon(lambda: stop.wait(30))
    assert freshness.pause_upgrade_for_changes(loaded, stop.set) is False and not stop.is_set()  # nothing changed
    write(root / "pkg" / "utils.py", "def super_len(o):\n    return 0\n")
    assert freshness.pause_upgrade_for_changes(loaded, stop.set) is True  # stopped, and joined
    assert stop.is_set() and not freshness.upgrading
