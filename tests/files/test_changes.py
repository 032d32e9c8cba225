"""The stat pass: the Cython stat table against its pure-Python twin, and the restricted pass a watcher drives."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesearch.files import changes as changes_module
from codesearch.files import scan
from codesearch.files._statpass_py import StatTable as PyStatTable
from codesearch.files.changes import RACY_NS, Changes, StatPass, changed_files, content_sha256, trusted_mtime, unchanged

try:
    from codesearch.files._statpass import StatTable as CyStatTable
except ImportError:  # pragma: no cover - not built here
    CyStatTable = None  # type: ignore[assignment,misc]

needs_extension = pytest.mark.skipif(CyStatTable is None, reason="the Cython stat table is not built")


def _settled(root: Path) -> None:
    """Date every folder and ignore file a minute back, as a repository's are older than its last index."""
    past = time.time() - 60
    for path in [root, *(p for p in root.rglob("*") if p.is_dir() or p.name == ".gitignore")]:
        os.utime(path, (past, past))


def _touch_later(path: Path, text: str) -> None:
    before = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for folder in ("a", "a/b", "c"):
        (root / folder).mkdir(parents=True)
        for n in range(3):
            (root / folder / f"m{n}.py").write_text(f"x = {n}\n")
    (root / ".gitignore").write_text("*.log\n")
    _settled(root)
    return root


@needs_extension
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 9), st.sampled_from(["touch", "grow", "remove", "keep"])), max_size=8),
       folder_rows=st.booleans(), recorded_shift=st.integers(-1, 1))
def test_the_cython_table_answers_as_its_pure_twin(tmp_path: Path, edits: list[tuple[int, str]], folder_rows: bool,
                                                   recorded_shift: int) -> None:
    root = tmp_path / f"t{time.monotonic_ns()}"
    (root / "sub").mkdir(parents=True)
    paths = [root / "sub" / f"f{n}.txt" for n in range(8)] + [root / "sub", root / "missing"]
    for path in paths[:8]:
        path.write_text("abc")
    infos = [p.stat() if p.exists() else None for p in paths]
    sizes = [i.st_size if i else 0 for i in infos]
    mtimes = [(i.st_mtime_ns if i else 0) + (recorded_shift if n == 3 else 0) for n, i in enumerate(infos)]
    mtimes[4] = -1  # never matches
    for row, edit in edits:
        path = paths[row]
        if edit == "remove" and path.is_file():
            path.unlink()
        elif edit in ("touch", "grow") and path.is_file():
            if edit == "grow":
                path.write_text("abcd")
            os.utime(path, ns=(10**18, 10**18 + row))
    names = [str(p) for p in paths] + [str(root / "nul\0byte"), str(root / "sub") + "/"]
    sizes += [0, 12345]
    mtimes += [0, infos[8].st_mtime_ns if infos[8] else 0]
    checks = [True] * 8 + [folder_rows, True, True, False]
    fast, pure = CyStatTable(names, sizes, mtimes, checks), PyStatTable(names, sizes, mtimes, checks)
    assert len(fast) == len(pure) == len(names)
    assert fast.differences() == pure.differences()


def test_tables_refuse_rows_of_different_lengths() -> None:
    for table in (PyStatTable, CyStatTable):
        if table is None:
            continue
        with pytest.raises(ValueError, match="same length"):
            table(["/a", "/b"], [1], [1, 2], [True, True])


def test_the_extension_is_used_unless_pure_python_forced() -> None:
    code = "import codesearch.files.changes as c; print(c.BACKEND, c.StatTable.__module__)"
    for forced, expected in (("1", ["python", "codesearch.files._statpass_py"]),
                             ("", ["cython", "codesearch.files._statpass"] if CyStatTable else None)):
        env = {**os.environ, "CODESEARCH_PUREPYTHON": forced}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        if expected is not None:
            assert out.stdout.split() == expected


def test_a_stat_pass_prepared_once_sees_each_later_change(tree: Path) -> None:
    scanned = scan(tree)
    prepared = StatPass(tree, scanned.stats, walk_stats=scanned.walk_stats)
    assert not prepared.changes()
    _touch_later(tree / "a" / "m1.py", "x = 11\n")
    assert prepared.changes().modified == ("a/m1.py",)
    (tree / "c" / "m2.py").unlink()
    (tree / "c" / "new.py").write_text("y = 1\n")
    found = prepared.changes()
    assert (found.added, found.modified, found.removed) == (("c/new.py",), ("a/m1.py",), ("c/m2.py",))
    assert found == changed_files(tree, scanned.stats, walk_stats=scanned.walk_stats) == prepared.walked()


def test_the_restricted_pass_stats_the_reported_paths_and_defers_to_a_walk_when_a_folder_moved(tree: Path) -> None:
    (tree / "a" / "debug.log").write_text("ignored\n")
    _settled(tree)
    scanned = scan(tree)
    prepared = StatPass(tree, scanned.stats, walk_stats=scanned.walk_stats)
    _touch_later(tree / "a" / "b" / "m0.py", "x = 100\n")
    _touch_later(tree / "c" / "m0.py", "x = 200\n")  # changed, but not reported: not looked at
    found = prepared.among(["a/b/m0.py", "a/b/m1.py"])
    assert found is not None and (found.added, found.modified, found.removed) == ((), ("a/b/m0.py",), ())

    # A file the index does not hold, changed in place: its folder did not move, so nothing to do.
    (tree / "a" / "debug.log").write_text("ignored, longer\n")
    assert prepared.among(["a/debug.log"]) == Changes()
    # A path in a folder the walk never entered (not recorded) is not the index's business.
    assert prepared.among(["node_modules/x/index.js"]) == Changes()

    (tree / "a" / "b" / "added.py").write_text("z = 1\n")  # its folder's mtime moves
    assert prepared.among(["a/b/added.py"]) is None
    assert prepared.walked().added == ("a/b/added.py",)


def test_the_restricted_pass_sees_a_removed_file_an_edited_ignore_file_and_a_removed_folder(tree: Path) -> None:
    scanned = scan(tree)
    prepared = StatPass(tree, scanned.stats, walk_stats=scanned.walk_stats)
    (tree / "c" / "m1.py").unlink()
    found = prepared.among(["c/m1.py"])
    assert found is not None and found.removed == ("c/m1.py",)
    _touch_later(tree / ".gitignore", "*.log\n*.tmp\n")
    assert prepared.among([".gitignore"]) is None
    assert StatPass(tree, scanned.stats).among(["brand-new.py"]) is None  # no folder stats recorded: only a walk knows


def test_a_root_that_vanished_is_reported_by_the_prepared_pass(tree: Path, tmp_path: Path) -> None:
    scanned = scan(tree)
    prepared = StatPass(tree, scanned.stats, walk_stats=scanned.walk_stats)
    tree.rename(tmp_path / "moved")
    with pytest.raises(changes_module.RootNotFoundError):
        prepared.changes()


# --------------------------------------------------------------------------- the one rule


def test_an_mtime_within_the_racy_window_of_its_read_is_not_trusted() -> None:
    read = 10 * RACY_NS
    assert trusted_mtime(read - RACY_NS, read) == read - RACY_NS  # as old as the window: trusted
    assert trusted_mtime(read - RACY_NS + 1, read) is None  # a nanosecond newer: the same tick may hide a change
    assert trusted_mtime(read + 5, read) is None  # written after it was read (a clock step): not trusted


def test_a_file_is_unchanged_only_by_known_and_equal_stats() -> None:
    assert unchanged((10, 1_000), 10, 1_000)
    assert not unchanged((10, 1_000), 11, 1_000) and not unchanged((10, 1_000), 10, 1_001)
    assert not unchanged((10, None), 10, 1_000)  # an untrusted mtime: read again
    assert not unchanged(None, 10, 1_000)  # never recorded


def test_content_sha256_reads_the_file_or_says_it_cannot(tmp_path: Path) -> None:
    import hashlib

    path = tmp_path / "a.py"
    path.write_bytes(b"print(1)\n")
    assert content_sha256(str(path), 1 << 20) == hashlib.sha256(b"print(1)\n").digest()
    assert content_sha256(str(path), 4) is None  # grown past the limit
    assert content_sha256(str(tmp_path / "gone.py"), 1 << 20) is None


def test_the_scan_and_the_builder_apply_the_rule(tmp_path: Path) -> None:
    """A folder the scan just read is recorded with -1 (untrusted). A file whose recorded mtime was too recent to
    trust when the index was built is read again even with the same size and mtime, and an edit that kept both is
    found; once its mtime is older than the window, the same stats keep it unread."""
    from conftest import HashingEmbedder

    from codesearch import CodeSearch

    repo = tmp_path / "repo"
    repo.mkdir()
    source = repo / "a.py"
    assert scan(repo).walk_stats["/"][1] == -1

    def edit_keeping_stats(text: str) -> None:
        stat = source.stat()
        source.write_text(text)
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    source.write_text("def a():\n    return 1\n")
    cs = CodeSearch(repo, model=HashingEmbedder(), static=False, index_dir=tmp_path / "idx")
    cs.index(tier="full")
    edit_keeping_stats("def a():\n    return 2\n")
    assert cs.index(tier="full").changed_files == 1  # recorded within the window: read, and found changed
    past = time.time_ns() - 10 * RACY_NS
    os.utime(source, ns=(past, past))
    assert cs.index(tier="full").changed_files == 0  # other stats: read, the same bytes: kept
    edit_keeping_stats("def a():\n    return 3\n")
    assert cs.index(tier="full").changed_files == 0  # trusted stats, the same: left unread
    assert "return 2" in cs.search("a", k=1, mode="bm25", refresh=False)[0].text
