"""Cutting files in worker processes gives exactly what cutting them here gives, static vectors included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import SESSIONS, TESTS, UTILS, HashingEmbedder

import codesearch.chunking.chunks
from codesearch import CodeSearch
from codesearch.index import cutting
from codesearch.index.columns import stored_records
from codesearch.index.cutting import FileTask, cut_files, cut_in_order


def _tree(root: Path, copies: int = 30) -> Path:
    for n in range(copies):
        pkg = root / f"pkg{n}"
        pkg.mkdir(parents=True)
        (pkg / "sessions.py").write_text(SESSIONS.replace("Session", f"Session{n}"))
        (pkg / "utils.py").write_text(UTILS + f"\n\ndef helper_{n}():\n    return {n}\n")
    (root / "blob.bin").write_bytes(b"\0binary" * 10)
    return root


def _tasks(root: Path) -> list[FileTask]:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return [FileTask(p.relative_to(root).as_posix(), str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in files]


def test_workers_cut_as_this_process_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tasks = _tasks(_tree(tmp_path / "repo"))
    # Looked up now: another test reloads codesearch.chunking.chunks, and the workers unpickle by name.
    params = codesearch.chunking.chunks.ChunkParams.for_chunking("definitions")
    here = cut_files(tasks, "definitions", params, 1 << 20)
    monkeypatch.setattr(cutting, "POOL_MIN_BYTES", 0)
    pooled = list(cut_in_order(tasks, "definitions", params, 1 << 20, workers=2))
    assert [f.task.rel for f in pooled] == [t.rel for t in tasks]  # in task order
    assert pooled == here and pooled[0].skipped == "binary"
    # Same bytes as the committed index recorded: not cut again.
    again = cut_files([FileTask(t.rel, t.path, t.size, t.mtime_ns, f.sha256) for t, f in zip(tasks, here)],
                      "definitions", params, 1 << 20)
    assert all(f.same and not f.chunks for f in again[1:])


@pytest.mark.slow
def test_workers_make_the_static_vectors_the_builder_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          embed_cache_dir: Path) -> None:
    root = _tree(tmp_path / "repo")
    here = CodeSearch(root, model="minilm", index_dir=tmp_path / "here")
    here.index(tier="static")
    monkeypatch.setattr(cutting, "POOL_MIN_BYTES", 0)
    pooled = CodeSearch(root, model="minilm", index_dir=tmp_path / "pooled")
    report = pooled.index(tier="static")
    assert report.static_embedded == report.chunks
    a, b = here.store.load(), pooled.store.load()
    assert stored_records(a.arrays) == stored_records(b.arrays)
    np.testing.assert_array_equal(a.arrays["static_vectors"], b.arrays["static_vectors"])


def test_a_stand_in_static_model_is_embedded_here_when_workers_cut(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = _tree(tmp_path / "repo", copies=4)
    static = HashingEmbedder(name="hashing", dim=32, salt="static")
    monkeypatch.setattr(cutting, "POOL_MIN_BYTES", 0)
    cs = CodeSearch(root, model=HashingEmbedder(), static=static, index_dir=tmp_path / "index")
    report = cs.index(tier="static")
    assert report.static_embedded == report.chunks and sum(static.calls) == report.chunks
    assert cs.search("helper_3", k=1)[0].path == "pkg3/utils.py"


def _dies_in_a_worker(*args, **kwargs):  # type: ignore[no-untyped-def]
    """``cut_files`` as a worker that is killed mid-build sees it; the building process cuts as usual."""
    import multiprocessing
    import os

    if multiprocessing.parent_process() is not None:
        os._exit(1)
    return cut_files(*args, **kwargs)


def test_a_worker_that_dies_leaves_its_batches_to_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    tasks = _tasks(_tree(tmp_path / "repo", copies=4))
    params = codesearch.chunking.chunks.ChunkParams.for_chunking("definitions")
    here = cut_files(tasks, "definitions", params, 1 << 20)
    monkeypatch.setattr(cutting, "POOL_MIN_BYTES", 0)
    monkeypatch.setattr(cutting, "BATCH_BYTES", 4096)  # several batches, some in flight when the pool breaks
    monkeypatch.setattr(cutting, "cut_files", _dies_in_a_worker)
    with caplog.at_level("WARNING", logger="codesearch.index.cutting"):
        pooled = list(cut_in_order(tasks, "definitions", params, 1 << 20, workers=2))
    assert pooled == here  # every file once, in order
    assert "cutting worker stopped" in caplog.text


def test_a_build_run_from_standard_input_cuts_in_this_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = _tree(tmp_path / "repo", copies=4)
    script = (
        "import sys\n"
        "from codesearch.index import cutting\n"
        "from codesearch.chunking import ChunkParams\n"
        f"sys.path[:0] = [{str(TESTS)!r}, {str(Path(__file__).resolve().parent)!r}]\n"
        "from test_cutting import _tasks\n"
        "from pathlib import Path\n"
        "cutting.POOL_MIN_BYTES = 0\n"
        f"tasks = _tasks(Path({str(root)!r}))\n"
        "params = ChunkParams.for_chunking('definitions')\n"
        "print(list(cutting.cut_in_order(tasks, 'definitions', params, 1 << 20, workers=2)) == "
        "cutting.cut_files(tasks, 'definitions', params, 1 << 20))\n"
    )
    done = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
