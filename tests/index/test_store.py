"""Tests of the on-disk index: round trips, damage detection, locking, crash safety.

The crash and concurrency tests run real subprocesses: writers killed with
SIGKILL at random moments and just before every file-system call of a save,
and eight processes writing and reading one index at once. Every state they
write is rebuilt here from its number, so "loads and equals the old or the new
state" is checked value for value.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
import re
import select
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs
import pytest
from conftest import ROOT

import codesearch.index.store as store_module
from codesearch.cache import default_index_dir
from codesearch.exceptions import IndexCorruptError, IndexLockedError, IndexNotFoundError, IndexReadOnlyError
from codesearch.index.snapshot import FORMAT_VERSION, IndexSnapshot
from codesearch.index.store import IndexStore

REPO = ROOT

# Shared by this module and the subprocess scripts, so both build the same states.
STATE_SRC = r'''
import hashlib
import numpy as np
from codesearch.index.snapshot import IndexSnapshot

def make_state(i, n=48, dim=16):
    """A distinct, deterministic snapshot for state number i."""
    rng = np.random.default_rng(i)
    chunks = [
        {"path": f"src/mod_{i}/f{j}.py", "start_line": 10 * j + 1, "end_line": 10 * j + 10,
         "kind": "code", "text": f"def f_{i}_{j}():\n    return 'é{i}·{j}'", "key": f"{i}:{j}",
         "symbols": [f"f_{i}_{j}"]}
        for j in range(n)
    ]
    files = {c["path"]: hashlib.sha256(c["text"].encode()).hexdigest() for c in chunks}
    nnz = 3 * n
    arrays = {
        "vectors": rng.standard_normal((n, dim)).astype(np.float32),
        "bm25_data": rng.random(nnz),
        "bm25_indices": rng.integers(0, n, nnz).astype(np.int32),
        "bm25_indptr": np.arange(0, nnz + 1, 3, dtype=np.int64),
        "vocabulary": np.array([f"tok_{i}_{k}" for k in range(n)]),
    }
    manifest = {"state": i, "model": {"name": "test-model", "dim": dim},
                "chunker": {"target_tokens": 700}, "files": files, "created": 1.7e9 + i}
    return IndexSnapshot(manifest=manifest, chunks=chunks, arrays=arrays)
'''
_namespace: dict[str, Any] = {}
exec(STATE_SRC, _namespace)
make_state = _namespace["make_state"]

# A few MB per generation for the kill tests: 2.5 MB of vectors, ~0.2 MB of JSON.
BIG = {"n": 1200, "dim": 512}


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def spawn(script: str, *args: object, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        env=child_env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kwargs,
    )


def index_files(store: IndexStore) -> list[Path]:
    """CURRENT and every file of the live generation."""
    gens = [p for p in store.directory.iterdir() if re.fullmatch(r"gen-\d+", p.name)]
    assert len(gens) == 1, gens
    return [store.directory / "CURRENT", *sorted(gens[0].iterdir())]


def assert_clean(store: IndexStore) -> None:
    """Only CURRENT, LOCK and one generation remain: crashed writers' leftovers are gone."""
    names = sorted(p.name for p in store.directory.iterdir())
    assert len(names) == 3 and names[:2] == ["CURRENT", "LOCK"], names
    assert re.fullmatch(r"gen-\d+", names[2]), names


# -- default_index_dir ---------------------------------------------------------


def test_default_index_dir_is_keyed_by_the_absolute_root(tmp_path, monkeypatch):
    monkeypatch.delenv("CODESEARCH_CACHE_DIR", raising=False)
    repo = tmp_path / "my repo!"
    repo.mkdir()
    path = default_index_dir(repo)
    assert path.parent == Path(platformdirs.user_cache_dir("codesearch", False)) / "indexes"
    assert re.fullmatch(r"my_repo-[0-9a-f]{16}", path.name)
    monkeypatch.chdir(tmp_path)
    assert default_index_dir(Path("my repo!")) == path
    other = tmp_path / "other" / "my repo!"
    other.mkdir(parents=True)
    assert default_index_dir(other) != path
    assert re.fullmatch(r"root-[0-9a-f]{16}", default_index_dir(Path("/")).name)


def test_cache_dir_env_overrides_the_cache_root(tmp_path, monkeypatch):
    monkeypatch.setenv("CODESEARCH_CACHE_DIR", str(tmp_path / "cache"))
    path = default_index_dir(tmp_path)
    assert path.parent == tmp_path / "cache" / "indexes"
    assert not path.exists()


# -- snapshots and round trips -------------------------------------------------


def test_round_trip_keeps_every_value_dtype_and_shape(tmp_path):
    arrays = {
        "vectors": np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32),
        "vocabulary": np.array(["λ", "get_user", ""]),
        "raw": np.array([b"a\x00", b"bc"]),
        "fortran": np.asfortranarray(np.arange(12, dtype=np.int16).reshape(3, 4)),
        "scalar": np.array(2.5),
        "empty": np.zeros((0, 384), dtype=np.float32),
        "nan": np.array([np.nan, 1.0]),
        "mask": np.array([True, False]),
        "record": np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
    }
    chunks = [{"path": "a.py", "start_line": 1, "end_line": 3, "text": "x = 'é'\n\ty", "symbols": ["x"]}]
    snapshot = IndexSnapshot({"model": "m", "files": {"a.py": "00"}}, chunks, arrays)
    store = IndexStore(tmp_path / "idx")
    assert not store.exists()
    assert store.save(snapshot) == 1
    assert store.exists()
    loaded = store.load()
    assert loaded == snapshot
    assert loaded.manifest["format_version"] == FORMAT_VERSION
    assert loaded.arrays["fortran"].flags.f_contiguous
    assert store.read_manifest() == {"model": "m", "files": {"a.py": "00"}, "format_version": FORMAT_VERSION}
    assert store.directory == (tmp_path / "idx").absolute()


def test_snapshot_equality_compares_arrays_by_value_dtype_and_shape():
    base = make_state(1)
    assert base == make_state(1)
    assert base != make_state(2)
    other = make_state(1)
    other.arrays["vectors"][0, 0] += 1
    assert base != other
    retyped = make_state(1)
    retyped.arrays["bm25_indices"] = retyped.arrays["bm25_indices"].astype(np.int64)
    assert base != retyped
    with pytest.raises(TypeError):
        hash(base)


def test_each_save_is_a_new_generation_and_older_ones_are_deleted(tmp_path):
    store = IndexStore(tmp_path)
    assert [store.save(make_state(i)) for i in range(3)] == [1, 2, 3]
    assert store.load() == make_state(2)
    assert_clean(store)
    assert (tmp_path / "gen-3").is_dir()


def test_an_array_mapped_from_the_live_generation_is_linked_into_the_next_not_written_again(tmp_path):
    store = IndexStore(tmp_path)
    store.save(make_state(1))
    mapped = store.load(mmap=True)
    mapped.verification.wait()
    kept = tmp_path / "gen-1" / "vectors.npy"
    inode = kept.stat().st_ino
    changed = dict(mapped.arrays)
    changed["bm25_indices"] = np.asarray(mapped.arrays["bm25_indices"]) + 1  # a new array: written
    changed["vectors"] = np.asarray(mapped.arrays["vectors"])  # a view of the whole mapping: linked
    changed["bm25_data"] = mapped.arrays["bm25_data"][::-1]  # same bytes, another order: written
    store.save(IndexSnapshot(mapped.manifest, mapped.chunks, changed))
    assert (tmp_path / "gen-2" / "vectors.npy").stat().st_ino == inode
    assert (tmp_path / "gen-2" / "bm25_data.npy").stat().st_ino != inode
    assert store.verify() > 0  # every file's recorded sha256 holds, the linked one included
    again = store.load()
    np.testing.assert_array_equal(again.arrays["vectors"], make_state(1).arrays["vectors"])
    np.testing.assert_array_equal(again.arrays["bm25_data"], make_state(1).arrays["bm25_data"][::-1])
    np.testing.assert_array_equal(again.arrays["bm25_indices"], make_state(1).arrays["bm25_indices"] + 1)


def test_a_mapped_array_whose_file_is_gone_is_written_instead(tmp_path):
    store = IndexStore(tmp_path)
    store.save(make_state(1))
    mapped = store.load(mmap=True)
    mapped.verification.wait()
    store.save(make_state(2))  # gen-1 is deleted; the mapping stays readable
    assert not (tmp_path / "gen-1").exists()
    store.save(IndexSnapshot(mapped.manifest, mapped.chunks, dict(mapped.arrays)))
    assert store.load() == make_state(1)


def test_snapshot_rejects_pickle_only_dtypes_bad_names_and_other_versions():
    with pytest.raises(ValueError, match="pickle"):
        IndexSnapshot({}, [], {"objs": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(ValueError, match="pickle"):
        IndexSnapshot({}, [], {"rec": np.zeros(1, dtype=[("o", object)])})
    for name in ["Vectors", "bm25-data", "", "../x", "a.npy"]:
        with pytest.raises(ValueError, match=r"\[a-z0-9_\]"):
            IndexSnapshot({}, [], {name: np.zeros(1)})
    with pytest.raises(ValueError, match="format_version"):
        IndexSnapshot({"format_version": FORMAT_VERSION + 1}, [], {})
    with pytest.raises(TypeError):
        IndexSnapshot({}, [], {"v": [1.0, 2.0]})  # type: ignore[dict-item]
    versioned = {"format_version": FORMAT_VERSION}
    assert IndexSnapshot(versioned, []).manifest == versioned


def test_save_rejects_non_json_metadata_before_writing_anything(tmp_path):
    store = IndexStore(tmp_path / "idx")
    for manifest, chunks in [({"files": {1, 2}}, []), ({"x": float("nan")}, []), ({}, [{"s": object()}])]:
        with pytest.raises(ValueError, match="JSON"):
            store.save(IndexSnapshot(manifest, chunks))
    assert not store.exists()


def test_load_without_an_index_says_to_run_codesearch_index(tmp_path):
    for store in [IndexStore(tmp_path / "missing"), IndexStore(tmp_path)]:
        with pytest.raises(IndexNotFoundError, match="codesearch index"):
            store.load()
        with pytest.raises(IndexNotFoundError):
            store.read_manifest()
        assert not store.exists()


def test_store_modules_never_use_pickle():
    folder = Path(store_module.__file__).parent
    trees = [ast.parse((folder / name).read_text())
             for name in ("store.py", "snapshot.py", "integrity.py", "mapping.py", "pointer.py", "checkpoints.py")]
    imported = set()
    numpy_io_calls = []
    for node in (node for tree in trees for node in ast.walk(tree)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in {"load", "save"} and ast.unparse(node.func.value) == "np":
                numpy_io_calls.append(node)
    assert not imported & {"pickle", "cPickle", "joblib", "dill", "shelve", "marshal", "cloudpickle"}
    assert {call.func.attr for call in numpy_io_calls} == {"load", "save"}
    for call in numpy_io_calls:
        flags = {kw.arg: kw.value for kw in call.keywords}
        assert isinstance(flags.get("allow_pickle"), ast.Constant) and flags["allow_pickle"].value is False


# -- damage detection ----------------------------------------------------------


def _positions(size: int, rng: random.Random) -> list[int]:
    if size <= 2048:
        return list(range(size))
    return sorted({*range(16), size // 2, *range(size - 4, size), *rng.sample(range(size), 200)})


def test_flipping_any_byte_of_any_index_file_is_detected(tmp_path):
    store = IndexStore(tmp_path)
    state = make_state(3)
    store.save(state)
    rng = random.Random(3)
    checked = Counter()
    for path in index_files(store):
        original = path.read_bytes()
        with open(path, "r+b") as handle:  # in place: truncating on every flip is slow
            for pos in _positions(len(original), rng):
                handle.seek(pos)
                handle.write(bytes([original[pos] ^ 0xFF]))
                handle.flush()
                with pytest.raises(IndexCorruptError, match=re.escape(path.name)) as info:
                    store.load()
                assert "codesearch index" in str(info.value)
                if path.name in {"CURRENT", "manifest.json"}:
                    with pytest.raises(IndexCorruptError):
                        store.read_manifest()
                handle.seek(pos)
                handle.write(original[pos : pos + 1])
                handle.flush()
                checked[path.name] += 1
        assert path.read_bytes() == original
    assert store.load() == state
    assert set(checked) == {"CURRENT", "manifest.json", "chunks.json"} | {f"{n}.npy" for n in state.arrays}
    assert sum(checked.values()) > 1000


def test_truncated_emptied_or_missing_files_are_detected(tmp_path):
    store = IndexStore(tmp_path)
    state = make_state(4)
    store.save(state)
    for path in index_files(store):
        original = path.read_bytes()
        for damaged in [original[:-1], original[: len(original) // 2], b"", original + b"\n"]:
            path.write_bytes(damaged)
            with pytest.raises(IndexCorruptError, match=re.escape(path.name)):
                store.load()
        path.unlink()
        error = IndexNotFoundError if path.name == "CURRENT" else IndexCorruptError
        with pytest.raises(error, match=re.escape(path.name) if error is IndexCorruptError else "index"):
            store.load()
        path.write_bytes(original)
    assert store.load() == state


def test_current_naming_a_missing_generation_is_a_clear_error(tmp_path):
    store = IndexStore(tmp_path)
    store.save(make_state(1))
    (tmp_path / "gen-1").rename(tmp_path / "elsewhere")
    with pytest.raises(IndexCorruptError, match=r"gen-1.*missing.*codesearch index"):
        store.load()


def test_other_format_version_is_refused_with_the_fix(tmp_path):
    store = IndexStore(tmp_path)
    store.save(make_state(1))
    current = tmp_path / "CURRENT"
    lines = current.read_text().splitlines()
    body = f"codesearch-index {FORMAT_VERSION + 1}\n{lines[1]}\n{lines[2]}\n"
    current.write_text(body + hashlib.sha256(body.encode()).hexdigest() + "\n")
    with pytest.raises(IndexCorruptError, match=rf"format version {FORMAT_VERSION + 1}.*codesearch index"):
        store.load()
    store.save(make_state(2))  # a writer replaces an unreadable index
    assert store.load() == make_state(2)


def test_leftovers_of_crashed_writers_are_ignored_then_collected(tmp_path):
    store = IndexStore(tmp_path)
    store.save(make_state(1))
    (tmp_path / "gen-7.tmp-999-abcd").mkdir()
    (tmp_path / "gen-7.tmp-999-abcd" / "vectors.npy").write_bytes(b"partial")
    (tmp_path / "gen-5").mkdir()  # renamed into place, but CURRENT never switched
    (tmp_path / "CURRENT.tmp-999-abcd").write_bytes(b"half")
    (tmp_path / "notes.txt").write_text("not ours")
    assert store.load() == make_state(1)
    assert store.save(make_state(2)) == 8  # numbers are never reused
    assert store.load() == make_state(2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["CURRENT", "LOCK", "gen-8", "notes.txt"]


def test_reader_retries_when_a_writer_deletes_its_generation(tmp_path, monkeypatch):
    reader, writer = IndexStore(tmp_path), IndexStore(tmp_path)
    writer.save(make_state(1))
    original = IndexStore._read_generation
    calls = []

    def commit_meanwhile(self, pointer, *, full, mmap=False, written_here=False):
        calls.append(pointer.number)
        if len(calls) == 1:  # CURRENT was read; now a writer replaces and deletes gen-1
            writer.save(make_state(2))
        return original(self, pointer, full=full, mmap=mmap, written_here=written_here)

    monkeypatch.setattr(IndexStore, "_read_generation", commit_meanwhile)
    assert reader.load() == make_state(2)
    assert calls == [1, 2]


# -- the write lock ------------------------------------------------------------


def test_second_writer_fails_at_once_naming_holder_pid_and_lock_file(tmp_path):
    first, second = IndexStore(tmp_path), IndexStore(tmp_path)
    with first.write_lock():
        began = time.monotonic()
        with pytest.raises(IndexLockedError) as info:
            with second.write_lock(timeout=0):
                pass
        assert time.monotonic() - began < 1.0  # timeout 0: one try, no waiting
        message = str(info.value)
        assert f"pid {os.getpid()}" in message and str(tmp_path / "LOCK") in message
        with pytest.raises(IndexLockedError):
            second.save(make_state(1))
        assert isinstance(info.value, TimeoutError)
    second.save(make_state(1))
    assert first.load() == make_state(1)
    assert (tmp_path / "LOCK").read_text() == ""  # the holder's pid goes with its hold


def test_writer_with_timeout_gives_up_after_its_timeout(tmp_path):
    first, second = IndexStore(tmp_path), IndexStore(tmp_path)
    with first.write_lock():
        began = time.monotonic()
        with pytest.raises(IndexLockedError, match="waiting 0.3 s"):
            with second.write_lock(timeout=0.3):
                pass
        assert 0.3 <= time.monotonic() - began < 5.0  # it waited its timeout, and no longer


def test_writer_with_timeout_takes_the_lock_once_it_is_released(tmp_path):
    first, second = IndexStore(tmp_path), IndexStore(tmp_path)
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with first.write_lock():
            taken.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(30)
    threading.Timer(0.3, release.set).start()
    began = time.monotonic()
    second.save(make_state(1), timeout=30)
    assert 0.3 <= time.monotonic() - began < 10.0  # it waited for the release, then wrote
    holder.join()
    assert second.load() == make_state(1)
    with first.write_lock(timeout=0):  # and the second writer let it go
        pass


def test_a_read_only_store_reads_and_refuses_every_write_without_creating_a_file(tmp_path):
    IndexStore(tmp_path).save(make_state(1))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    (tmp_path / "LOCK").unlink()
    reader = IndexStore(tmp_path, read_only=True)
    assert reader.load() == make_state(1) and reader.read_manifest() == make_state(1).manifest
    for write in (lambda: reader.save(make_state(2)), lambda: reader.write_lock().__enter__(),
                  lambda: reader.save_checkpoint("f" * 64, ["k"], np.zeros((1, 2), np.float32)),
                  reader.clear_checkpoint):
        with pytest.raises(IndexReadOnlyError, match="read-only here.*codesearch index PATH --index-dir"):
            write()
    assert sorted(p.name for p in tmp_path.rglob("*")) == [n for n in before if n != "LOCK"]
    assert isinstance(IndexReadOnlyError("x"), PermissionError)


def test_a_store_is_writable_unless_its_folder_or_lock_or_file_system_says_no(tmp_path, monkeypatch):
    store = IndexStore(tmp_path / "new" / "index")
    assert store.is_writable()  # not there yet: its nearest folder decides
    IndexStore(tmp_path).save(make_state(1))
    assert IndexStore(tmp_path).is_writable()
    monkeypatch.setattr(store_module.os, "access", lambda path, mode: Path(path).name != "LOCK")
    assert not IndexStore(tmp_path).is_writable()  # (root ignores permission bits, so os.access is faked)
    monkeypatch.setattr(store_module.os, "access", lambda path, mode: True)
    monkeypatch.setattr(store_module, "_mounted_read_only", lambda folder: True)
    assert not IndexStore(tmp_path).is_writable()


def test_lock_is_reentrant_for_its_store_and_exclusive_between_threads(tmp_path):
    store = IndexStore(tmp_path)
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            with store.write_lock(timeout=0):
                pass
        except BaseException as err:
            errors.append(err)

    with store.write_lock():
        with store.write_lock():
            store.save(make_state(1))
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert store.load() == make_state(1)
        store.save(make_state(2))
    assert len(errors) == 1 and isinstance(errors[0], IndexLockedError)
    with store.write_lock(timeout=0):  # released after the outer block
        pass


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_under_the_lock_neither_holds_nor_keeps_it(tmp_path):
    store = IndexStore(tmp_path)
    ready_r, ready_w = os.pipe()
    state = make_state(1)  # built before the fork: the child only tries the lock
    with store.write_lock():
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            try:
                try:
                    store.save(state)
                    os.write(ready_w, b"saved!")
                except IndexLockedError:
                    os.write(ready_w, b"locked")
                time.sleep(30)  # outlive the parent's hold on the lock
            finally:
                os._exit(1)
        # The child only tries the lock, but it was forked from a process with
        # threads: never wait on it forever.
        readable, _, _ = select.select([ready_r], [], [], 60)
        assert readable, "the forked child did not answer within 60 s"
        assert os.read(ready_r, 6) == b"locked"
    try:
        IndexStore(tmp_path).save(make_state(2), timeout=0)  # released although the child lives
        assert IndexStore(tmp_path).load() == make_state(2)
    finally:
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(ready_r)
        os.close(ready_w)
    assert os.WTERMSIG(status) == signal.SIGKILL


HOLDER = r'''
import sys, time
from codesearch.index.store import IndexStore
with IndexStore(sys.argv[1]).write_lock():
    print("locked", flush=True)
    time.sleep(60)
'''


def test_lock_of_a_killed_process_is_recovered(tmp_path):
    proc = spawn(HOLDER, tmp_path)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "locked\n"
        with pytest.raises(IndexLockedError, match=f"pid {proc.pid}"):
            IndexStore(tmp_path).save(make_state(1))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert (tmp_path / "LOCK").read_text().strip() == str(proc.pid)  # the dead holder's pid stays
    IndexStore(tmp_path).save(make_state(1), timeout=0)  # no wait: the kernel dropped the lock
    assert IndexStore(tmp_path).load() == make_state(1)


# -- crash safety --------------------------------------------------------------

# A fork server: imports numpy and the store once, then forks one writer per
# command line, so a kill costs milliseconds instead of an interpreter start.
# Writers and server write to the same stdout pipe with os.write (short lines
# are atomic); "reaped <pid> <status>" comes after everything that writer wrote.
FORK_SERVER = STATE_SRC + r"""
import os, signal, sys, traceback
from codesearch.index.store import IndexStore

def say(*words):
    os.write(1, (" ".join(map(str, words)) + "\n").encode())

def random_writer(directory, state, n, dim):
    # Saves state, state+1, ... until killed.
    store, state = IndexStore(directory), int(state)
    while True:
        snapshot = make_state(state, int(n), int(dim))
        say("begin", state)
        store.save(snapshot)
        say("done", state)
        state += 1

def step_writer(directory, state, target):
    # Saves one state, killing itself just before its target-th file-system call.
    store, snapshot, target = IndexStore(directory), make_state(int(state)), int(target)
    count = 0
    def wrap(name, real):
        def call(*args, **kwargs):
            nonlocal count
            count += 1
            if count == target:
                os.kill(os.getpid(), signal.SIGKILL)
            say("op", count, name)
            return real(*args, **kwargs)
        return call
    for name in ["mkdir", "fsync", "rename", "replace", "unlink", "rmdir", "ftruncate"]:
        setattr(os, name, wrap(name, getattr(os, name)))
    store.save(snapshot)
    say("saved")

JOBS = {"random": random_writer, "step": step_writer}
for line in sys.stdin:
    job, *args = line.split()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            JOBS[job](*args)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    say("pid", pid)
    say("reaped", pid, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


class ForkServer:
    """Drives FORK_SERVER: start a writer, read its lines, kill it, collect what it wrote."""

    def __init__(self, limit_s: float = 600) -> None:
        env = child_env() | {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FORK_SERVER],
            env=env,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        # A hung writer would block readline forever; this turns it into EOF.
        self.watchdog = threading.Timer(limit_s, self.proc.kill)
        self.watchdog.start()

    def start(self, *words: object) -> tuple[int, list[str]]:
        """Start a writer; return its pid and its lines up to the first 'begin' or its end."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        pid, lines = None, []
        while pid is None or not lines or not lines[-1].startswith(("begin", "reaped")):
            line = self.readline()
            if line.startswith("pid "):
                pid = int(line.split()[1])
            else:
                lines.append(line)
        return pid, lines

    def finish(self, pid: int, lines: list[str], kill: bool = True) -> tuple[int, list[str]]:
        """Kill the writer (if still running); return its exit code and all its lines."""
        if kill and not lines[-1].startswith("reaped"):
            os.kill(pid, signal.SIGKILL)
        while not lines[-1].startswith("reaped"):
            lines.append(self.readline())
        return int(lines[-1].split()[2]), lines[:-1]

    def readline(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.close()
            pytest.fail(f"fork server died or hung: {self.proc.stderr.read()}")  # type: ignore[union-attr]
        return line.rstrip("\n")

    def close(self) -> None:
        self.watchdog.cancel()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def fork_server():
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    server = ForkServer()
    yield server
    server.close()


def test_kill_before_every_file_system_call_of_a_save_leaves_old_or_new(tmp_path, fork_server):
    """SIGKILL a writer just before its 1st, 2nd, ... file-system call of one save."""
    store = IndexStore(tmp_path)
    old, new = 0, 1
    store.save(make_state(old))
    outcomes = Counter()
    for target in range(1, 200):
        # Leftovers of an earlier crash, so the writer's clean-up is cut short too.
        (tmp_path / f"gen-{10_000 + target}.tmp-1-dead").mkdir()
        (tmp_path / f"gen-{10_000 + target}.tmp-1-dead" / "chunks.json").write_text("[]")
        pid, lines = fork_server.start("step", tmp_path, new, target)
        code, lines = fork_server.finish(pid, lines, kill=False)
        ops = [line.split()[2] for line in lines if line.startswith("op ")]
        if code == 0:
            assert lines[-1] == "saved"
            assert store.load() == make_state(new)
            break
        assert code == -signal.SIGKILL, lines
        loaded = store.load()
        switched = "replace" in ops  # os.replace of CURRENT is the commit point
        assert loaded == make_state(new if switched else old)
        outcomes["new" if switched else "old"] += 1
        old, new = loaded.manifest["state"], new + 1
        store.save(make_state(old))  # the next writer recovers and cleans up
        assert store.load() == make_state(old)
        assert_clean(store)
    else:
        pytest.fail("the writer never finished")
    assert outcomes["old"] >= 8 and outcomes["new"] >= 3, outcomes


KILLS = 60


def test_kill_9_at_random_moments_leaves_old_or_new_never_corrupt(tmp_path, fork_server):
    """Kill writers of a few MB per generation at 60 random moments during their saves: always old or new."""
    store = IndexStore(tmp_path)
    timings = []
    for state in range(3):
        start = time.monotonic()
        store.save(make_state(state, **BIG))
        timings.append(time.monotonic() - start)
    window = 2 * statistics.median(timings)
    committed, next_state = 2, 3
    rng = random.Random(20240601)
    outcomes = Counter()
    for _ in range(KILLS):
        pid, lines = fork_server.start("random", tmp_path, next_state, BIG["n"], BIG["dim"])
        assert lines[:1] == [f"begin {next_state}"], fork_server.finish(pid, lines)  # more when this process is slow
        time.sleep(rng.uniform(0, window))
        code, lines = fork_server.finish(pid, lines)
        assert code == -signal.SIGKILL, lines
        begun = [int(line.split()[1]) for line in lines if line.startswith("begin")]
        last = begun[-1]
        before = last - 1 if len(begun) > 1 else committed  # saves before `last` returned
        if any(name.startswith("gen-") and ".tmp-" in name for name in os.listdir(tmp_path)):
            outcomes["killed mid-write"] += 1
        loaded = store.load()  # never raises: the old or the new generation is live
        state = loaded.manifest["state"]
        assert state in {before, last}
        assert loaded == make_state(state, **BIG)
        outcomes["new" if state == last else "old"] += 1
        committed, next_state = state, last + 1
    # Which outcomes the random moments drew depends on the machine's speed, so nothing is asserted about
    # them: both are made to happen, at every file-system call of a save, by the step test above.
    assert sum(outcomes[o] for o in ("old", "new")) == KILLS, outcomes
    store.save(make_state(next_state, **BIG))
    assert_clean(store)


# -- concurrency ---------------------------------------------------------------

WORKER = STATE_SRC + r'''
import json, sys, time
from pathlib import Path
from codesearch.exceptions import IndexLockedError
from codesearch.index.store import IndexStore

directory, role, ident, timeout = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
store = IndexStore(directory)
stop = Path(directory).parent / "stop"
go = Path(directory).parent / "go"
while not go.exists():
    time.sleep(0.005)
report = {"role": role, "saved": [], "locked": 0, "loads": 0, "bad": []}

def check(snapshot):
    expected = make_state(snapshot.manifest["state"], 300, 32)
    if snapshot != expected:
        report["bad"].append(f"mixed or wrong state {snapshot.manifest['state']}")

if role == "writer":
    for j in range(6):
        state = 1000 * ident + j
        snapshot = make_state(state, 300, 32)
        try:
            with store.write_lock(timeout=timeout):
                check(store.load())  # read-modify-write under the lock
                store.save(snapshot)
            report["saved"].append(state)
        except IndexLockedError:
            report["locked"] += 1
        time.sleep(0.01)
else:
    while not stop.exists():
        try:
            check(store.load())
            manifest = store.read_manifest()
            if manifest != make_state(manifest["state"], 300, 32).manifest:
                report["bad"].append(f"wrong manifest for state {manifest['state']}")
            report["loads"] += 1
        except Exception as err:
            report["bad"].append(f"{type(err).__name__}: {err}")
print(json.dumps(report))
'''


def test_eight_processes_writing_and_reading_one_index(tmp_path):
    directory = tmp_path / "idx"
    store = IndexStore(directory)
    store.save(make_state(0, 300, 32))
    roles = [("writer", 1, 60.0), ("writer", 2, 60.0), ("writer", 3, 0.0), ("writer", 4, 0.0)]
    roles += [("reader", 10 + i, 0.0) for i in range(4)]
    procs = [spawn(WORKER, directory, role, ident, timeout) for role, ident, timeout in roles]
    (tmp_path / "go").touch()
    writers, readers = procs[:4], procs[4:]
    reports = []
    for proc in writers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))
    (tmp_path / "stop").touch()
    for proc in readers:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        reports.append(json.loads(out))

    assert [r["bad"] for r in reports] == [[]] * 8
    waiting = reports[:2]  # writers with a timeout all get their turn
    assert all(len(r["saved"]) == 6 and r["locked"] == 0 for r in waiting), waiting
    assert all(len(r["saved"]) + r["locked"] == 6 for r in reports[2:4])
    assert sum(r["loads"] for r in reports[4:]) > 0
    written = {state for r in reports[:4] for state in r["saved"]}
    final = store.load()
    assert final.manifest["state"] in written
    assert final == make_state(final.manifest["state"], 300, 32)
    assert_clean(store)
