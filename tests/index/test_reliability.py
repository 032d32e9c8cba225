"""Reliability of the whole indexing pipeline: kill -9, damaged files, many processes, links.

Bounded in time: each test runs in well under a minute on two cores.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import TESTS, HashingEmbedder

from codesearch import CodeSearch
from codesearch.exceptions import IndexCorruptError, IndexLockedError
from codesearch.index.columns import stored_records
from codesearch.index.snapshot import IndexSnapshot
from codesearch.index.store import IndexStore

TESTS_DIR = TESTS
FORKSERVER = multiprocessing.get_context("forkserver")
FORKSERVER.set_forkserver_preload(["numpy", "codesearch.search", "conftest"])


def _write_version(root: Path, version: int) -> None:
    """Version 0 and 1 of a 40-file repository; 1 edits, adds and deletes files."""
    for i in range(40):
        body = "\n".join(f"def function_{i}_{j}(argument):\n    return argument * {j}\n" for j in range(30))
        if version == 1 and i % 4 == 0:
            body = body.replace("argument * 3", "argument ** 3 + 1")
        path = root / "pkg" / f"module_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        if version == 1 and i % 10 == 9:
            path.unlink(missing_ok=True)
            continue
        path.write_text(body)
    if version == 1:
        (root / "pkg" / "added.py").write_text("def added_function():\n    return 42\n")
    else:
        (root / "pkg" / "added.py").unlink(missing_ok=True)


def _state(snapshot: IndexSnapshot) -> tuple[object, ...]:
    """What must survive a crash: chunks, vectors, BM25 arrays and the file table."""
    # Left out: when it was written, and the files' and folders' modification times (each trial writes the
    # files anew).
    manifest = {k: v for k, v in snapshot.manifest.items() if k not in ("updated", "scanned_ns", "walk_stats")}
    arrays = tuple((name, snapshot.arrays[name].tobytes()) for name in sorted(snapshot.arrays) if name != "chunk_file_mtime")
    return (repr(sorted(manifest.items())), repr(stored_records(snapshot.arrays)), arrays)


def _searcher(root: Path, index_dir: Path, tier: str, model: HashingEmbedder | None = None) -> CodeSearch:
    """The transformer tier alone, or the static tier alone (a stand-in embedder for each)."""
    static = HashingEmbedder(name="hashing", dim=64, salt="static") if tier == "static" else None
    return CodeSearch(root, model=model or HashingEmbedder(), static=static, index_dir=index_dir)


@pytest.fixture(scope="module")
def reference_states(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], tuple[object, ...]]:
    states = {}
    for tier in ("full", "static"):
        for version in (0, 1):
            root = tmp_path_factory.mktemp(f"ref-{tier}{version}")
            _write_version(root, version)
            cs = _searcher(root, root.parent / f"ref-{tier}{version}-index", tier)
            cs.index(tier=tier)  # type: ignore[arg-type]
            snapshot = cs.store.load()
            # Index paths are relative to the root and the root itself is recorded: normalise it.
            snapshot.manifest["root"] = "ROOT"
            states[(tier, version)] = _state(snapshot)
    return states


_FS_CALLS = ("mkdir", "fsync", "rename", "replace", "unlink", "rmdir", "ftruncate")
"""The file-system calls through which an index run changes its folder (files are written by ``open``)."""


def _count_fs_calls(die_at: int) -> list[str]:
    """In this (child) process, count the calls of :data:`_FS_CALLS` and SIGKILL it just before the
    ``die_at``-th (0: never). Returns the list of calls made so far, by name (``replace:CURRENT`` for the commit)."""
    calls: list[str] = []

    def wrap(name: str, real):  # type: ignore[no-untyped-def]
        def call(*args, **kwargs):  # type: ignore[no-untyped-def]
            if len(calls) + 1 == die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            target = str(args[1]) if name == "replace" and len(args) > 1 else ""
            calls.append("replace:CURRENT" if target.endswith("/CURRENT") else name)
            return real(*args, **kwargs)
        return call

    for name in _FS_CALLS:
        setattr(os, name, wrap(name, getattr(os, name)))
    return calls


def _index(root: Path, index_dir: Path, die_on_call: int = 0, checkpoint_every: int = 0, tier: str = "full",
           die_at_fs_call: int = 0, record_fs_calls: Path | None = None) -> None:
    """Index ``root`` (one tier) in a child process; optionally die (SIGKILL) on the n-th embedding call or
    just before the n-th file-system call, or write the file-system calls of an uninterrupted run as JSON."""
    import codesearch.index.builder as builder_module

    if checkpoint_every:
        builder_module.CHECKPOINT_EVERY = checkpoint_every
    calls = _count_fs_calls(die_at_fs_call) if die_at_fs_call or record_fs_calls is not None else []
    model = _DyingEmbedder(die_on_call) if die_on_call else None
    _searcher(root, index_dir, tier, model).index(tier=tier)  # type: ignore[arg-type]
    if record_fs_calls is not None:
        record_fs_calls.write_text(json.dumps(calls))


def _start_index(root: Path, index_dir: Path, **kwargs: object) -> multiprocessing.process.BaseProcess:
    """Start a child that indexes ``root``.

    Children are forked from a fresh single-threaded forkserver, never from
    pytest's own process: by this point that process has run onnxruntime and
    torch thread pools, and a child forked from it can deadlock on a lock some
    other thread held at the moment of the fork. Forking (instead of starting a
    new interpreter) keeps each trial cheap, so many kill points fit in a short
    test; the child is still a separate process killed by a real SIGKILL.
    """
    child = FORKSERVER.Process(target=_index, args=(root, index_dir), kwargs=kwargs, daemon=True)
    child.start()
    return child


def _wait(child: multiprocessing.process.BaseProcess, timeout: float = 120) -> int:
    child.join(timeout)
    if child.exitcode is None:
        child.kill()
        child.join()
        pytest.fail(f"indexing child {child.pid} still running after {timeout} s")
    return child.exitcode


def _prepare(root: Path, index_dir: Path, tier: str, update: bool) -> None:
    """Leave version 1 on disk, with ``index_dir`` empty or (``update``) holding version 0's index."""
    if update:
        _write_version(root, 0)
        _searcher(root, index_dir, tier).index(tier=tier)  # type: ignore[arg-type]
    _write_version(root, 1)


def _outcome(index_dir: Path, reference_states: dict[tuple[str, int], tuple[object, ...]], tier: str) -> str:
    """What a killed run left: ``empty`` (nothing committed), ``old`` (version 0) or ``new`` (version 1), never
    anything else and never a damaged index."""
    store = IndexStore(index_dir)
    if not store.exists():
        return "empty"
    snapshot = store.load()  # never IndexCorruptError
    snapshot.manifest["root"] = "ROOT"
    state = _state(snapshot)
    if state == reference_states[(tier, 1)]:
        return "new"
    assert state == reference_states[(tier, 0)], "the index is neither the old nor the new state"
    return "old"


@pytest.mark.parametrize(("tier", "update"), [("full", True), ("full", False), ("static", True)],
                         ids=["update-full", "build-full", "update-static"])
def test_kill_9_before_each_file_system_call_of_an_index_run_leaves_old_or_new(
    tmp_path: Path, reference_states: dict[tuple[str, int], tuple[object, ...]], tier: str, update: bool
) -> None:
    """SIGKILL an index run just before its 1st, 2nd, ... file-system call (checkpoints, the generation's
    files, the switch of CURRENT, the clean-up): before the switch the old index (or none) is live, after it
    the new one, whatever the machine's speed."""
    root, prepared = tmp_path / "repo", tmp_path / "prepared"
    _prepare(root, prepared, tier, update)
    prepared.mkdir(exist_ok=True)
    record = tmp_path / "calls.json"
    shutil.copytree(prepared, tmp_path / "recorded")
    assert _wait(_start_index(root, tmp_path / "recorded", tier=tier, checkpoint_every=200,
                              record_fs_calls=record)) == 0
    calls = json.loads(record.read_text())
    assert calls.count("replace:CURRENT") == 1, calls
    switch = calls.index("replace:CURRENT") + 1  # the commit is the switch of CURRENT, the n-th call
    before = "old" if update else "empty"
    outcomes = Counter()
    # Every call up to just past the switch; of the clean-up after it (one unlink per old file), every third.
    targets = [*range(1, switch + 3), *range(switch + 3, len(calls), 3), len(calls)]
    for target in sorted(set(targets)):
        index_dir = tmp_path / f"index{target}"
        shutil.copytree(prepared, index_dir)
        code = _wait(_start_index(root, index_dir, tier=tier, checkpoint_every=200, die_at_fs_call=target))
        assert code == -signal.SIGKILL, f"call {target} of {len(calls)} ({calls[target - 1]}) was never made"
        outcome = _outcome(index_dir, reference_states, tier)
        assert outcome == ("new" if target > switch else before), f"killed before call {target}: {calls[target - 1]}"
        outcomes[outcome] += 1
        shutil.rmtree(index_dir)
    assert outcomes[before] >= 1 and outcomes["new"] >= 1, outcomes  # both, by construction of the targets


@pytest.mark.parametrize(("tier", "trials"), [("full", 12), ("static", 6)])
def test_kill_9_at_random_moments_leaves_old_or_new_index(
    tmp_path: Path, reference_states: dict[tuple[str, int], tuple[object, ...]], tier: str, trials: int
) -> None:
    """Real kills at random moments: the index is always the old or the new state (or none for a first build).

    Which of them a moment draws depends on the machine's speed, so nothing is asserted about that: the test
    above makes each happen at every file-system call.
    """
    rng = random.Random(20261130)
    root = tmp_path / "repo"
    _write_version(root, 1)
    started = time.perf_counter()
    assert _wait(_start_index(root, tmp_path / "warm-up", tier=tier)) == 0  # starts the forkserver
    window = time.perf_counter() - started
    outcomes = Counter()
    for trial in range(trials):
        index_dir = tmp_path / f"index{trial}"
        full = trial % 3 == 0  # a third build from nothing, the rest update version 0 to 1
        _prepare(root, index_dir, tier, update=not full)
        child = _start_index(root, index_dir, tier=tier)
        time.sleep(rng.uniform(0.0, window * 1.5))
        child.kill()
        _wait(child)
        outcome = _outcome(index_dir, reference_states, tier)
        assert outcome != ("old" if full else "empty"), f"trial {trial}: {outcome}"
        outcomes[outcome] += 1
    assert sum(outcomes.values()) == trials


def test_one_flipped_byte_in_any_index_file_is_detected(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _write_version(root, 0)
    pristine = tmp_path / "pristine"
    CodeSearch(root, model=HashingEmbedder(), index_dir=pristine).index()
    names = sorted(p.relative_to(pristine) for p in pristine.rglob("*") if p.is_file() and p.name != "LOCK")
    assert len(names) >= 4
    rng = random.Random(7)
    for name in names:
        index_dir = tmp_path / "damaged"
        shutil.rmtree(index_dir, ignore_errors=True)
        shutil.copytree(pristine, index_dir)
        damaged = bytearray((index_dir / name).read_bytes())
        damaged[rng.randrange(len(damaged))] ^= 0x01
        (index_dir / name).write_bytes(bytes(damaged))
        with pytest.raises(IndexCorruptError):
            CodeSearch(root, model=HashingEmbedder(), index_dir=index_dir).verify()
        # A searcher maps the arrays and checks their sha256 in the background: a search may answer before the
        # verdict, never after it. A damaged file stat makes the stat pass refresh that file; the rebuild waits
        # for the verdict and, the index being damaged, builds it from the files, keeping nothing of it.
        fresh = CodeSearch(root, model=HashingEmbedder(), index_dir=index_dir)
        try:
            fresh.search("function_3_4", mode="bm25")
        except IndexCorruptError:
            continue
        loaded = fresh._session.current()[0]
        assert fresh.last_search is not None and loaded.verification is not None
        if fresh.last_search.refreshed:  # rebuilt by the refresh
            assert fresh.verify() > 0 and not (index_dir / name).exists()
            continue
        assert loaded.verification.wait(30)
        with pytest.raises(IndexCorruptError):
            fresh.search("function_3_4", mode="bm25")
    assert CodeSearch(root, model=HashingEmbedder(), index_dir=pristine).search("function_3_4", mode="bm25")


_CONCURRENT = textwrap.dedent(
    """
    import sys, json
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from codesearch import CodeSearch
    from codesearch.exceptions import IndexLockedError
    from conftest import HashingEmbedder

    root, index_dir, role = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    outcome = {{"indexed": 0, "locked": 0, "searched": 0}}
    for _ in range(4):
        cs = CodeSearch(root, model=HashingEmbedder(), index_dir=index_dir, lock_timeout=0.2)
        if role == "writer":
            try:
                cs.index()
                outcome["indexed"] += 1
            except IndexLockedError:
                outcome["locked"] += 1
        else:
            hits = cs.search("function_7_3 argument", k=3, mode="hybrid")
            assert hits and hits[0].path.startswith("pkg/")
            outcome["searched"] += 1
    print(json.dumps(outcome))
    """
)


def test_eight_processes_index_and_search_the_same_root(tmp_path: Path) -> None:
    import json

    root, index_dir = tmp_path / "repo", tmp_path / "index"
    _write_version(root, 0)
    CodeSearch(root, model=HashingEmbedder(), index_dir=index_dir).index()
    script = tmp_path / "worker_concurrent.py"
    script.write_text(_CONCURRENT.format(tests=str(TESTS_DIR)))
    roles = ["writer"] * 4 + ["reader"] * 4
    procs = [
        subprocess.Popen([sys.executable, str(script), str(root), str(index_dir), role],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for role in roles
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    writers, readers = results[:4], results[4:]
    assert all(r["indexed"] + r["locked"] == 4 for r in writers)
    assert sum(r["indexed"] for r in writers) >= 1
    assert all(r["searched"] == 4 for r in readers)
    final = CodeSearch(root, model=HashingEmbedder(), index_dir=index_dir)
    snapshot = final.store.load()
    assert len(stored_records(snapshot.arrays)) == len(snapshot.arrays["vectors"])
    assert final.search("function_7_3", k=1, mode="bm25")[0].path == "pkg/module_7.py"


def test_second_writer_gets_a_clear_lock_error(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _write_version(root, 0)
    first = CodeSearch(root, model=HashingEmbedder(), index_dir=tmp_path / "index")
    second = CodeSearch(root, model=HashingEmbedder(), index_dir=tmp_path / "index", lock_timeout=0)
    holder = IndexStore(tmp_path / "index")
    first.index()
    code = (
        "import sys, time; from codesearch.index.store import IndexStore\n"
        f"s = IndexStore({str(tmp_path / 'index')!r})\n"
        "with s.write_lock():\n    print('held', flush=True); time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        with pytest.raises(IndexLockedError, match=str(proc.pid)):
            second.index()
    finally:
        proc.kill()
        proc.wait()
    assert second.index().embedded == 0  # the killed holder's lock is gone
    assert holder.exists()


def test_symlink_loop_and_escape_end_the_walk_without_leaking(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _write_version(root, 0)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("def leaked_secret_function():\n    return 'password'\n")
    os.symlink(root, root / "pkg" / "loop")
    os.symlink(outside, root / "escape")
    cs = CodeSearch(root, model=HashingEmbedder(), index_dir=tmp_path / "index")
    report = cs.index()
    assert report.files == 40
    snapshot = cs.store.load()
    assert not any("leaked_secret_function" in c["text"] for c in stored_records(snapshot.arrays))
    assert all(not c["path"].startswith(("escape/", "pkg/loop/")) for c in stored_records(snapshot.arrays))
    assert np.isfinite(snapshot.arrays["vectors"]).all()


class _DyingEmbedder(HashingEmbedder):
    """Kills its own process (SIGKILL) on the n-th call, like a crash mid-index."""

    def __init__(self, die_on_call: int) -> None:
        super().__init__()
        self.die_on_call = die_on_call

    def embed_documents(self, texts, progress=False):  # type: ignore[no-untyped-def]
        if len(self.calls) + 1 == self.die_on_call:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().embed_documents(texts, progress)


def test_a_crash_mid_embedding_keeps_the_finished_slices(tmp_path: Path) -> None:
    root, index_dir = tmp_path / "repo", tmp_path / "index"
    _write_version(root, 0)
    # The child checkpoints every 10 chunks and dies on its third slice.
    assert _wait(_start_index(root, index_dir, die_on_call=3, checkpoint_every=10)) == -signal.SIGKILL
    assert not IndexStore(index_dir).exists()  # nothing was committed ...

    resumed = CodeSearch(root, model=HashingEmbedder(), index_dir=index_dir).index()
    assert resumed.chunks > 30
    assert resumed.reused == 20 and resumed.embedded == resumed.chunks - 20  # ... but two slices were kept
    assert not (index_dir / "checkpoint").exists()
    full = CodeSearch(root, model=HashingEmbedder(), index_dir=tmp_path / "full")
    full.index()
    np.testing.assert_allclose(IndexStore(index_dir).load().arrays["vectors"],
                               full.store.load().arrays["vectors"], atol=1e-6)
