"""The committed index one searcher holds (codesearch/index/session.py): opened, built when missing, followed
across other writers' commits, refreshed (committed or in memory), asked; driven directly, without the facade."""

from __future__ import annotations

from pathlib import Path

import pytest
from session_roles import repo, session, write

from codesearch.exceptions import IndexNotFoundError
from codesearch.index.store import IndexStore
from codesearch.ranking import DEFAULT
from codesearch.scope import Scope


def test_the_first_current_builds_the_index_and_the_next_opens_it(tmp_path: Path) -> None:
    root = repo(tmp_path / "repo")
    s = session(root, tmp_path / "index")
    first, built = s.current()
    assert built and s.store.exists() and first.token == s.store.current_token()
    again, built_again = s.current()
    assert again is first and not built_again
    assert s.info()["files"] == 3 and s.info()["read_only"] is False


def test_another_writers_commit_is_followed_by_its_token(tmp_path: Path) -> None:
    root = repo(tmp_path / "repo")
    mine, theirs = session(root, tmp_path / "index"), session(root, tmp_path / "index")
    before, _ = mine.current()
    write(root / "pkg" / "more.py", "def more():\n    return 1\n")
    theirs.build("keyword", progress=False)
    after, built = mine.current()
    assert after is not before and not built and after.token == mine.store.current_token()
    assert "pkg/more.py" in after.known_stats()


def test_a_read_only_store_without_an_index_says_where_to_build_it(tmp_path: Path) -> None:
    root = repo(tmp_path / "repo")
    with pytest.raises(IndexNotFoundError, match="read-only here; build it where it is writable"):
        session(root, tmp_path / "index", read_only=True).current()


def test_a_refresh_commits_or_stays_in_memory_and_changes_count_against_the_stored_index(tmp_path: Path) -> None:
    root = repo(tmp_path / "repo")
    s = session(root, tmp_path / "index")
    loaded, _ = s.current()
    write(root / "pkg" / "utils.py", "def super_len(o):\n    return 0\n")
    assert s.changes().modified == ("pkg/utils.py",)
    refreshed, n = s.refresh(loaded)
    assert n == 1 and not refreshed.unstored and refreshed.token == s.store.current_token() != loaded.token
    assert not s.changes()
    write(root / "README.md", "# edited\n")
    token = s.store.current_token()
    with IndexStore(s.store.directory).write_lock():  # another writer holds the lock: refreshed in memory only
        memory, n = s.refresh(refreshed)
    assert n == 1 and memory.unstored == frozenset({"README.md"}) and s.store.current_token() == token
    assert s.changes().modified == ("README.md",)  # the stored index is as it was
    assert s.info()["refreshed_in_memory"] == 1


def test_an_answer_ranks_the_refreshed_index_and_says_how(tmp_path: Path) -> None:
    root = repo(tmp_path / "repo")
    s = session(root, tmp_path / "index")
    s.current()
    write(root / "pkg" / "utils.py", "def platypus_len(o):\n    return len(o)\n")
    loaded, ranked, info = s.answer("platypus_len", "bm25", Scope.of(None), DEFAULT, 5, None)
    assert info.refreshed == 1 and not info.built and info.tier == "keyword"
    assert loaded.hit(*ranked[0]).path == "pkg/utils.py"
    _, unrefreshed, info = s.answer("send", "bm25", Scope.of(None), DEFAULT, 5, refresh=False)
    assert info.refreshed == 0 and unrefreshed
