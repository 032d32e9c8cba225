"""A refresh's stat pass (codesearch/corpus/changes.py): which repositories and files a refresh must read, from
the files table's stats and a walk alone (the rule itself is codesearch.files.changes')."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codesearch.files.scan import list_files

pa = pytest.importorskip("pyarrow")

from codesearch.corpus.changes import known_stats, stat_pass  # noqa: E402


def _table(rows: list[tuple[str, str, int | None, int | None]]) -> pa.Table:
    repo, path, size, mtime = zip(*rows) if rows else ((), (), (), ())
    return pa.table({"repo": list(repo), "path": list(path), "size": pa.array(list(size), pa.int64()),
                     "mtime_ns": pa.array(list(mtime), pa.int64())})


def _repo(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    for name, text in (("a.py", "x = 1\n"), ("pkg/b.py", "y = 22\n"), ("pkg/c.py", "z = 333\n")):
        (root / name).write_text(text)
        os.utime(root / name, ns=(1_000_000_000_000, 1_000_000_000_000))
    return root


def test_known_stats_are_grouped_by_repository_and_path_unknown_values_kept() -> None:
    table = _table([("r", "a.py", 6, 10), ("r", "b.py", 7, None), ("s", "a.py", None, 3)])
    assert known_stats(table) == {"r": {"a.py": (6, 10), "b.py": (7, None)}, "s": {"a.py": (None, 3)}}
    assert known_stats(_table([])) == {}


def test_only_files_with_other_unknown_or_new_stats_are_read_and_removed_ones_counted(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    listing = list_files(root)
    stats = {f.rel: (f.size, f.mtime_ns) for f in listing.files}
    recorded = {
        "a.py": stats["a.py"],  # unchanged: not read
        "pkg/b.py": (stats["pkg/b.py"][0] + 1, stats["pkg/b.py"][1]),  # another size: read
        "gone.py": (5, 5),  # no longer on disk: removed
    }  # pkg/c.py: not recorded, so added
    (changes,) = stat_pass([("r", str(root), listing)], {"r": recorded})
    assert (changes.repo, changes.root, changes.listing) == ("r", str(root), listing)
    assert changes.to_read == 2 and changes.read_bytes == stats["pkg/b.py"][0] + stats["pkg/c.py"][0]
    assert changes.removed == 1 and changes.changed


def test_a_repository_whose_stats_all_hold_is_left_alone_unless_a_mtime_was_not_trusted(tmp_path: Path) -> None:
    root = _repo(tmp_path / "r")
    listing = list_files(root)
    recorded = {f.rel: (f.size, f.mtime_ns) for f in listing.files}
    (same,) = stat_pass([("r", str(root), listing)], {"r": recorded})
    assert (same.to_read, same.read_bytes, same.removed, same.changed) == (0, 0, 0, False)
    recorded["a.py"] = (recorded["a.py"][0], None)  # recorded too soon after a write to trust
    (untrusted,) = stat_pass([("r", str(root), listing)], {"r": recorded})
    assert untrusted.to_read == 1 and untrusted.changed
    (fresh,) = stat_pass([("new", str(root), listing)], {})  # a repository the table does not know
    assert fresh.to_read == 3 and fresh.removed == 0
