"""Bad input at scale: a full disk during a build, a one-megabyte line, a tree of many tiny files."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import SESSIONS, UTILS, HashingEmbedder

import codesearch.index.store as store_module
from codesearch import CodeSearch
from codesearch.exceptions import CodeSearchError, IndexWriteError
from codesearch.index.columns import stored_records


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "sessions.py").write_text(SESSIONS)
    (root / "pkg" / "utils.py").write_text(UTILS)
    return root


def test_a_disk_that_fills_during_a_build_leaves_the_index_as_it_was(repo: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cs = CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "index")
    cs.index()
    before = stored_records(cs.store.load().arrays)
    (repo / "pkg" / "zoo.py").write_text("def zebra_crossing():\n    return 'stripes'\n")
    written = []
    real = store_module.write_array

    def fill_up(path: Path, array: np.ndarray) -> dict[str, object]:
        written.append(path.name)
        if len(written) == 5:  # the fifth array finds the disk full, half written
            path.write_bytes(b"\0" * 100)
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real(path, array)

    monkeypatch.setattr(store_module, "write_array", fill_up)
    with pytest.raises(IndexWriteError, match="no space left to write the index .*the index there is as it was") as info:
        cs.index()
    assert isinstance(info.value, CodeSearchError) and isinstance(info.value, OSError)
    monkeypatch.undo()
    assert not [p for p in (tmp_path / "index").iterdir() if ".tmp-" in p.name]  # the half-written generation is gone
    fresh = CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "index")
    assert stored_records(fresh.store.load().arrays) == before and fresh.verify() > 0
    assert fresh.search("zebra_crossing", k=1)[0].path == "pkg/zoo.py"  # the next search, with room, takes the edit


def test_the_cli_says_the_disk_is_full_in_one_line(repo: Path, tmp_path: Path) -> None:
    code = (
        "import errno, sys\n"
        "import codesearch.index.store as s\n"
        "def full(path, array):\n"
        "    raise OSError(errno.ENOSPC, 'No space left on device', str(path))\n"
        "s.write_array = full\n"
        "from codesearch.faces.cli import main\n"
        "sys.exit(main())\n"
    )
    run = subprocess.run([sys.executable, "-c", code, "index", str(repo), "--model", "none", "--index-dir",
                          str(tmp_path / "index")], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and "no space left to write the index" in run.stderr


def test_a_one_megabyte_line_is_indexed_and_found(repo: Path, tmp_path: Path) -> None:
    line = "var a=" + ",".join(f"x{n}" for n in range(138_000)) + ",needle_at_the_end;"
    assert 990_000 < len(line) < (1 << 20)
    (repo / "bundle.js").write_text(line)
    cs = CodeSearch(repo, model=HashingEmbedder(), static=HashingEmbedder(name="hashing", dim=32, salt="s"),
                    index_dir=tmp_path / "index")
    report = cs.index()
    assert report.files == 3
    hit = cs.search("needle_at_the_end", k=1, mode="bm25")[0]
    # Cut into windows of at most 51,200 characters (32 budgets of the definitions' 1,600), on line 1 all of them.
    assert hit.path == "bundle.js" and hit.start_line == hit.end_line == 1
    assert hit.text.endswith(",needle_at_the_end;") and len(hit.text) <= 51_200
    assert [(s, e) for p, s, e in cs.locations() if p == "bundle.js"] == [(1, 1)] * 20
    assert cs.search("super_len", k=1)[0].path == "pkg/utils.py"


@pytest.mark.slow
def test_a_tree_of_many_tiny_files(tmp_path: Path) -> None:
    """20,000 one-function files (the 200,000 of the monorepo benchmark took 37 s and 470 MB keyword-only here)."""
    root = tmp_path / "tiny"
    for d in range(40):
        folder = root / f"d{d}"
        folder.mkdir(parents=True)
        for f in range(500):
            (folder / f"f{f}.py").write_text(f"def fn_{d}_{f}():\n    return {f}\n")
    cs = CodeSearch(root, model=None, index_dir=tmp_path / "index")
    report = cs.index()
    assert (report.files, report.chunks, report.reused) == (20_000, 20_000, 0)
    assert cs.search("fn_17_423", k=1, mode="bm25")[0].path == "d17/f423.py"
    os.remove(root / "d3" / "f7.py")
    assert cs.search("fn_3_7", k=1, mode="bm25", refresh=True)[0].path != "d3/f7.py"
    assert cs.last_search is not None and cs.last_search.refreshed == 1
