"""The on-disk index: checksummed generations committed by an atomic rename.

Layout of an index directory::

    DIR/
      LOCK                  the write lock (flock / msvcrt); holds the writer's pid
      CURRENT               names the live generation and its manifest's sha256,
                            followed by a sha256 of those lines
      gen-<n>/              one committed generation, never changed after commit
        manifest.json       format version, the caller's manifest, and the size
                            and sha256 of every other file of the generation
        chunks.json         chunk metadata
        <name>.npy          one array per file, written and read without pickle
      gen-<n>.tmp-<pid>-<r>/  a generation being written (only a crashed writer
                            leaves one behind; the next writer deletes it)

A commit writes a new ``gen-<n>`` under a temporary name, fsyncs every file and
the folder, renames it into place, then replaces ``CURRENT`` the same way
(temp file, fsync, ``os.replace``, fsync of ``DIR``). A crash at any point
leaves ``CURRENT`` naming either the old or the new generation, both complete.
Generations are numbered upwards and never reused, so a name in ``CURRENT``
always means the same bytes.

Readers take no lock. A reader whose generation is deleted under it by a
writer's clean-up sees ``CURRENT`` change and starts again; a check that fails
while ``CURRENT`` stays the same is real damage and raises
:class:`~codesearch.exceptions.IndexCorruptError`. Nothing here uses pickle:
metadata is JSON and arrays are ``.npy`` loaded with ``allow_pickle=False``.
Crash safety and locking are tested on POSIX; on Windows the lock uses
``msvcrt`` and clean-up of files a reader holds open is retried on the next save.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import re
import secrets
import shutil
import sys
import threading
import time
import weakref
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple

import numpy as np

from codesearch.exceptions import (
    IndexCorruptError,
    IndexFormatError,
    IndexLockedError,
    IndexNotFoundError,
    IndexReadOnlyError,
    IndexWriteError,
)

if sys.platform == "win32":  # pragma: no cover - exercised only on Windows
    import msvcrt
else:
    import fcntl

FORMAT_VERSION = 2
"""Version of the on-disk layout; an index written by another version is not read (a searcher builds it again).
2: chunk records as columns of ``.npy`` arrays, file hashes and stats among them, instead of JSON."""

_MAGIC = "codesearch-index"
_CURRENT = "CURRENT"
_LOCK = "LOCK"
_MANIFEST = "manifest.json"
_CHUNKS = "chunks.json"
_CHECKPOINT = "checkpoint"
_GEN_RE = re.compile(r"gen-([0-9]+)")
_TMP_GEN_RE = re.compile(r"gen-([0-9]+)\.tmp-.+")
_TMP_CURRENT_PREFIX = "CURRENT.tmp-"
_ARRAY_NAME_RE = re.compile(r"[a-z0-9_]+")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
# Kinds of dtype np.save writes without pickle: bool, ints, floats, complex,
# timedelta, datetime, fixed-width str/bytes and structured/void.
_PLAIN_DTYPE_KINDS = frozenset("biufcmMUSV")
_READ_ATTEMPTS = 50
_LOCK_POLL_S = 0.02
_WIN_LOCK_OFFSET = 1 << 30  # lock a byte far past the pid so readers can still read it
_FIX = "re-run `codesearch index` to rebuild it (or delete {dir})"


@dataclass(frozen=True, slots=True, eq=False)
class IndexSnapshot:
    """Everything one index generation holds.

    Attributes:
        manifest: JSON-able facts about the index (model fingerprint, chunker
            parameters, ``files``: {path: sha256}, timestamps ...). The store
            adds ``"format_version"``; another value raises ``ValueError``.
        chunks: JSON-able metadata of each chunk. It is stored as JSON, so
            tuples come back as lists.
        arrays: named arrays (vectors, BM25 matrix parts, vocabulary). Names
            match ``[a-z0-9_]+``; object and other pickle-only dtypes raise
            ``ValueError``.

    Two snapshots are equal when manifest and chunks are equal and every array
    has the same name, dtype, shape and values (NaN equal to NaN).
    """

    manifest: dict[str, Any]
    chunks: list[dict[str, Any]]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    verification: Verification | None = field(default=None, compare=False, repr=False)
    """For a memory-mapped load, the background check of every array's sha256 (``None``: verified before return)."""

    def __post_init__(self) -> None:
        if not isinstance(self.manifest, dict):
            raise TypeError(f"manifest must be a dict, not {type(self.manifest).__name__}")
        if not isinstance(self.chunks, list):
            raise TypeError(f"chunks must be a list, not {type(self.chunks).__name__}")
        if not isinstance(self.arrays, dict):
            raise TypeError(f"arrays must be a dict, not {type(self.arrays).__name__}")
        version = self.manifest.get("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(
                f"manifest format_version is {version!r} but this store writes version "
                f"{FORMAT_VERSION}; leave the key out and the store sets it"
            )
        if "format_version" not in self.manifest:
            object.__setattr__(self, "manifest", {**self.manifest, "format_version": FORMAT_VERSION})
        for name, array in self.arrays.items():
            if not isinstance(name, str) or not _ARRAY_NAME_RE.fullmatch(name):
                raise ValueError(f"array name {name!r} must match [a-z0-9_]+")
            if not isinstance(array, np.ndarray):
                raise TypeError(f"array {name!r} must be a numpy.ndarray, not {type(array).__name__}")
            if array.dtype.hasobject or array.dtype.kind not in _PLAIN_DTYPE_KINDS:
                raise ValueError(
                    f"array {name!r} has dtype {array.dtype}, which can only be stored with "
                    "pickle; convert it first (strings: .astype(str), numbers: a numeric dtype)"
                )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexSnapshot):
            return NotImplemented
        if self.manifest != other.manifest or self.chunks != other.chunks:
            return False
        if self.arrays.keys() != other.arrays.keys():
            return False
        for name, mine in self.arrays.items():
            theirs = other.arrays[name]
            if mine.dtype != theirs.dtype or mine.shape != theirs.shape:
                return False
            if not np.array_equal(mine, theirs, equal_nan=mine.dtype.kind in "fc"):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]


class Verification:
    """The sha256 of a memory-mapped generation's files, checked after it opened.

    A daemon thread hashes the files, smallest first; :meth:`require` has the
    files an answer reads checked before it returns (hashing here those the
    thread has not reached, so both work at once). :meth:`check` raises
    :class:`~codesearch.exceptions.IndexCorruptError` once any file was found
    damaged, and raises nothing while checks are still running.

    Attributes:
        files: the names of the files checked (every file of the generation but
            its manifest and chunk list, which are checked as they are read).
    """

    def __init__(self, folder: Path, files: dict[str, dict[str, Any]], index_dir: Path) -> None:
        self._folder, self._files, self._index_dir = folder, files, index_dir
        self.files = frozenset(files)
        self._order = sorted(files, key=lambda name: (files[name]["size"], name))
        self._error: str | None = None
        self._guard = threading.Lock()
        self._claimed: set[str] = set()
        self._checked = {name: threading.Event() for name in files}
        self._left = len(files)
        self._done = threading.Event()
        if not files:
            self._done.set()
        self._thread = threading.Thread(target=self._run, name="codesearch-verify", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def passed(self) -> None:
        """Take the files as checked (their writer hashed them as it wrote them)."""
        with self._guard:
            self._claimed.update(self._files)
        for event in self._checked.values():
            event.set()
        self._done.set()

    def _run(self) -> None:
        for name in self._order:
            if self._error is not None:
                break
            self._check_file(name)
        if self._error is not None:
            self._done.set()

    def _check_file(self, name: str) -> None:
        """Hash ``name`` unless another thread has taken it (or is hashing it now)."""
        with self._guard:
            if name in self._claimed:
                return
            self._claimed.add(name)
        try:
            with open(self._folder / name, "rb") as handle:
                _read_verified(handle, self._files[name], chunked=True)
        except _ChecksumMismatch as err:
            if self._error is None:
                self._error = f"index file {self._folder / name} is damaged ({err}); " + _FIX.format(
                    dir=self._index_dir)
        except OSError:
            pass  # the generation was replaced and collected meanwhile: the next load verifies the new one
        finally:
            self._checked[name].set()
            with self._guard:
                self._left -= 1
                finished = self._left == 0
            if finished or self._error is not None:
                self._done.set()

    @property
    def done(self) -> bool:
        """Whether every file has been checked (or one found damaged)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the verdict on every file; returns whether it is in."""
        return self._done.wait(timeout)

    def require(self, names: Iterable[str] | None = None) -> None:
        """Return once the files ``names`` (default: all) have been checked: those no thread has taken are hashed
        here, smallest first, the others waited for.

        Raises:
            IndexCorruptError: a file of the generation (any, not only those named) was found damaged; the
                message names it.
        """
        if self._done.is_set():  # every file checked, or one found damaged
            self.check()
            return
        named = None if names is None else set(names)
        wanted = [name for name in self._order if named is None or name in named]
        for name in wanted:
            self.check()
            self._check_file(name)
        for name in wanted:
            self._checked[name].wait()
            self.check()

    def check(self) -> None:
        """Raise :class:`IndexCorruptError` if a file was found damaged.

        Raises:
            IndexCorruptError: the message names the file.
        """
        if self._error is not None:
            raise IndexCorruptError(self._error)


class _Pointer(NamedTuple):
    """What ``CURRENT`` says: the live generation and its manifest's sha256."""

    number: int
    manifest_sha256: str

    @property
    def name(self) -> str:
        return f"gen-{self.number}"


class IndexStore:
    """One index folder: atomic saves under a write lock, verified loads.

    ``save`` takes the write lock itself unless this object already holds it,
    so a read-modify-write (load, change, save) belongs inside
    ``with store.write_lock(...)``. Readers (``load``, ``read_manifest``) take
    no lock and are safe while another process commits.

    A read-only store (``read_only=True``) reads as any other and refuses
    every write (the lock, saves, checkpoints) with
    :class:`~codesearch.exceptions.IndexReadOnlyError`; it creates no file,
    not even ``LOCK``, so it can serve from a read-only folder, and any number
    of processes can read one index at once.

    Args:
        directory: the index folder; created by the first save.
        read_only: never write here (see :meth:`is_writable` to decide).
    """

    def __init__(self, directory: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self._directory = Path(directory).expanduser().absolute()
        self.read_only = read_only
        self._thread_lock = threading.RLock()
        self._lock_fd: int | None = None
        self._lock_depth = 0
        _STORES.add(self)

    def _forget_lock_in_forked_child(self) -> None:
        # A forked child shares the parent's lock; closing its copy of the
        # descriptor lets the lock go when the parent releases it or dies.
        if self._lock_fd is not None:
            os.close(self._lock_fd)
        self._lock_fd, self._lock_depth, self._thread_lock = None, 0, threading.RLock()

    @property
    def directory(self) -> Path:
        """The index folder."""
        return self._directory

    def __repr__(self) -> str:
        return f"IndexStore({str(self._directory)!r})"

    def is_writable(self) -> bool:
        """Whether this process may write here: the folder (or, before the first save, the nearest existing
        folder above it) is writable and on a file system mounted read-write, and so is ``LOCK`` if present."""
        folder = self._directory
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        if not os.access(folder, os.W_OK) or _mounted_read_only(folder):
            return False
        lock = self._directory / _LOCK
        return not lock.exists() or os.access(lock, os.W_OK)

    def check_writable(self, what: str) -> None:
        """Raise :class:`~codesearch.exceptions.IndexReadOnlyError` (saying this store cannot ``what``) if it is read-only."""
        if self.read_only:
            raise IndexReadOnlyError(
                f"the index at {self._directory} is read-only here, so it cannot {what}; build or update it "
                f"where it is writable (`codesearch index PATH --index-dir {self._directory}`)"
            )

    def exists(self) -> bool:
        """Whether a generation has been committed here (not verified; ``load`` verifies)."""
        return (self._directory / _CURRENT).is_file()

    def current_token(self) -> bytes | None:
        """The bytes of ``CURRENT`` (they change with every commit), or ``None`` when nothing is committed.

        A reader keeps the token of what it loaded and compares it with this
        to learn, with one small read, whether another process committed since.
        """
        try:
            return (self._directory / _CURRENT).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    @contextmanager
    def write_lock(self, timeout: float = 0.0) -> Iterator[None]:
        """Hold the index's write lock for the ``with`` block.

        The lock is an OS file lock on ``DIR/LOCK``, so the kernel drops it when
        its holder dies, even by ``kill -9``: a lock left by a killed process
        never blocks. Re-entrant on the same store object and thread; a child
        forked while it is held does not hold it.

        Args:
            timeout: seconds to wait; 0 fails at once, a negative value waits forever.

        Raises:
            IndexLockedError: another process (or thread) still holds the lock
                after ``timeout``; the message names its pid and the lock file.
        """
        self.check_writable("take the write lock")
        deadline = None if timeout < 0 else time.monotonic() + timeout
        if not self._thread_lock.acquire(timeout != 0, timeout if timeout > 0 else -1):
            raise IndexLockedError(
                f"the index at {self._directory} is being written by another thread of this "
                f"process (pid {os.getpid()}); wait for it or pass a longer timeout"
            )
        owner = os.getpid()
        try:
            if self._lock_depth == 0:
                self._lock_fd = self._acquire_file_lock(deadline, timeout)
            self._lock_depth += 1
            try:
                yield
            finally:
                if os.getpid() == owner:  # a forked child leaving the block owns nothing
                    self._lock_depth -= 1
                    if self._lock_depth == 0 and self._lock_fd is not None:
                        fd, self._lock_fd = self._lock_fd, None
                        _release_file_lock(fd)
        finally:
            if os.getpid() == owner:
                self._thread_lock.release()

    def save(self, snapshot: IndexSnapshot, *, timeout: float = 0.0) -> int:
        """Commit ``snapshot`` as the new live generation, atomically.

        Takes the write lock for the duration unless this object already holds
        it. Readers see the old generation until the switch and the new one
        after; a crash at any point leaves one of the two loadable. Older
        generations and leftovers of crashed writers are deleted afterwards.

        Args:
            snapshot: what to store.
            timeout: how long to wait for the write lock if not already held.

        Returns:
            The number of the committed generation (increases with every save).

        Raises:
            ValueError: manifest or chunks are not JSON-serialisable.
            IndexLockedError: another writer holds the lock.
            IndexReadOnlyError: the store is read-only.
        """
        if not isinstance(snapshot, IndexSnapshot):
            raise TypeError(f"save() takes an IndexSnapshot, not {type(snapshot).__name__}")
        self.check_writable("be saved")
        _json_bytes(snapshot.manifest, "manifest")  # fail before taking the lock
        chunk_bytes = _json_bytes(snapshot.chunks, "chunks")
        with self.write_lock(timeout):
            return self._commit(snapshot.manifest, chunk_bytes, snapshot.arrays)

    def load(self, *, mmap: bool = False, written_here: bool = False) -> IndexSnapshot:
        """Read and verify the live generation.

        The manifest is checked against ``CURRENT``. By default every file's
        size and sha256 are checked against the manifest before anything is
        returned. With ``mmap``, arrays are memory-mapped instead of read (an
        index opens in milliseconds, and a process holds only the pages its
        queries touch): sizes are checked now, and the sha256 of every file by
        a background thread (:attr:`IndexSnapshot.verification`), whose
        verdict :meth:`Verification.check` raises. ``written_here`` (with
        ``mmap``, by the writer that has just committed it and still holds the
        lock) skips that thread: the sha256 were computed as the files were written.

        Raises:
            IndexNotFoundError: nothing has been committed here.
            IndexCorruptError: a file is damaged or missing, or the index has
                another format version; the message names the file.
        """
        snapshot = self._read(full=True, mmap=mmap, written_here=written_here)
        assert isinstance(snapshot, IndexSnapshot)
        return snapshot

    def read_manifest(self) -> dict[str, Any]:
        """Read the live generation's manifest only (cheap; verified against ``CURRENT``).

        Raises:
            IndexNotFoundError: nothing has been committed here.
            IndexCorruptError: ``CURRENT`` or the manifest is damaged or of
                another format version.
        """
        manifest = self._read(full=False)
        assert isinstance(manifest, dict)
        return manifest

    def verify(self) -> int:
        """Check the sha256 of every file of the live generation now; returns how many bytes were read.

        Raises:
            IndexNotFoundError: nothing has been committed here.
            IndexCorruptError: a file is damaged or missing; the message names it.
        """
        snapshot = self._read(full=True)
        assert isinstance(snapshot, IndexSnapshot)
        return sum(array.nbytes for array in snapshot.arrays.values())

    # -- checkpoints ---------------------------------------------------------

    def save_checkpoint(self, fingerprint: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Keep vectors embedded so far, so a run that dies before its commit loses none of them.

        Checkpoints live beside the generations (``DIR/checkpoint/``), never
        inside one, so the index itself is still only ever the old or the new
        state. Each call writes one part by write-to-temp and rename; a torn
        part is ignored when read. Call under :meth:`write_lock`.

        Args:
            fingerprint: the model that made the vectors; parts of other models are ignored.
            keys: one chunk key per row of ``vectors``.
            vectors: float32 rows.
        """
        self.check_writable("keep a checkpoint")
        if len(keys) != len(vectors):
            raise ValueError(f"save_checkpoint got {len(keys)} keys for {len(vectors)} vectors")
        if not keys:
            return
        folder = self._directory / _CHECKPOINT
        folder.mkdir(parents=True, exist_ok=True)
        part = len([n for n in os.listdir(folder) if n.endswith(".npz")])
        name = f"{fingerprint[:16]}-{part:06d}-{secrets.token_hex(4)}.npz"
        tmp = folder / f".{name}.tmp"
        with open(tmp, "wb") as handle:
            np.savez(handle, keys=np.asarray(list(keys), dtype=str),
                     vectors=np.asarray(vectors, dtype=np.float32),
                     fingerprint=np.asarray(fingerprint, dtype=str))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, folder / name)

    def load_checkpoint(self, fingerprint: str) -> dict[str, np.ndarray]:
        """Vectors by chunk key that interrupted runs of this model left behind (empty if none)."""
        folder = self._directory / _CHECKPOINT
        found: dict[str, np.ndarray] = {}
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".npz") and n.startswith(fingerprint[:16]))
        except OSError:
            return found
        for name in names:
            try:
                with np.load(folder / name, allow_pickle=False) as part:
                    if str(part["fingerprint"]) != fingerprint:
                        continue
                    keys, vectors = part["keys"], part["vectors"]
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
                continue  # a part torn by a crash: its vectors are simply embedded again
            if vectors.ndim == 2 and len(keys) == len(vectors) and np.isfinite(vectors).all():
                found.update(zip(keys.tolist(), vectors))
        return found

    def clear_checkpoint(self) -> None:
        """Drop every checkpoint part (after a commit has made them redundant)."""
        self.check_writable("clear its checkpoint")
        shutil.rmtree(self._directory / _CHECKPOINT, ignore_errors=True)

    # -- writing -------------------------------------------------------------

    def _commit(self, manifest: dict[str, Any], chunk_bytes: bytes, arrays: dict[str, np.ndarray]) -> int:
        directory = self._directory
        live = self._live_pointer()
        number = 1 + max([*_generation_numbers(directory), live.number if live else 0])
        # Clear what crashed writers left before writing, to free the space; keep
        # every generation if CURRENT cannot be read, since we cannot tell which is live.
        _collect_garbage(directory, keep=live.name if live else None, generations=live is not None)

        tmp = directory / f"gen-{number}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
        final = directory / f"gen-{number}"
        os.mkdir(tmp)
        try:
            files = {_CHUNKS: _write_file(tmp / _CHUNKS, chunk_bytes)}
            array_meta: dict[str, dict[str, Any]] = {}
            for name, array in arrays.items():
                filename = f"{name}.npy"
                carried = _carried(array)
                if carried is not None and _link(carried[0], tmp / filename):
                    files[filename] = carried[1]  # an array of the live generation, unchanged: its file, linked
                else:
                    files[filename] = _write_array(tmp / filename, array)
                array_meta[name] = {"file": filename, "dtype": array.dtype.str, "shape": list(array.shape)}
            record = {
                "format_version": FORMAT_VERSION,
                "generation": number,
                "created": time.time(),
                "files": files,
                "arrays": array_meta,
                "manifest": manifest,
            }
            manifest_bytes = _json_bytes(record, "manifest")
            _write_file(tmp / _MANIFEST, manifest_bytes)
            _fsync_dir(tmp)
            os.rename(tmp, final)
        except BaseException as err:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
                raise IndexWriteError(
                    f"no space left to write the index at {directory} ({err.strerror}); the index there is as it "
                    "was: free some space, or pass --index-dir on a disk with room"
                ) from err
            raise
        _fsync_dir(directory)
        self._write_current(_Pointer(number, hashlib.sha256(manifest_bytes).hexdigest()))
        _collect_garbage(directory, keep=final.name, generations=True)
        return number

    def _write_current(self, pointer: _Pointer) -> None:
        tmp = self._directory / f"{_TMP_CURRENT_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            _write_file(tmp, _format_current(pointer))
            os.replace(tmp, self._directory / _CURRENT)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        _fsync_dir(self._directory)

    def _live_pointer(self) -> _Pointer | None:
        try:
            data = (self._directory / _CURRENT).read_bytes()
            return _parse_current(data, self._directory)
        except (FileNotFoundError, IndexCorruptError):
            return None

    def _acquire_file_lock(self, deadline: float | None, timeout: float) -> int:
        if not self._directory.is_dir():
            self._directory.mkdir(parents=True, exist_ok=True)
            _fsync_dir(self._directory.parent)
        path = self._directory / _LOCK
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while not _try_lock(fd):
                if deadline is not None and time.monotonic() >= deadline:
                    waited = f" after waiting {timeout:g} s" if timeout > 0 else ""
                    raise IndexLockedError(
                        f"the index at {self._directory} is being written by another process "
                        f"({_lock_holder(path)}; lock file {path}){waited}; wait for it to "
                        "finish or pass a longer timeout"
                    )
                time.sleep(_LOCK_POLL_S)
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- reading -------------------------------------------------------------

    def _read(self, *, full: bool, mmap: bool = False, written_here: bool = False) -> IndexSnapshot | dict[str, Any]:
        current = self._directory / _CURRENT
        for attempt in range(_READ_ATTEMPTS):
            try:
                raw = current.read_bytes()
            except (FileNotFoundError, NotADirectoryError):
                raise IndexNotFoundError(
                    f"no index at {self._directory}; run `codesearch index` first"
                ) from None
            pointer = _parse_current(raw, self._directory)
            try:
                return self._read_generation(pointer, full=full, mmap=mmap, written_here=written_here)
            except (FileNotFoundError, NotADirectoryError, IndexCorruptError) as err:
                # A writer may have switched CURRENT and deleted this generation
                # meanwhile; only a failure under an unchanged CURRENT is damage.
                try:
                    unchanged = current.read_bytes() == raw
                except FileNotFoundError:
                    unchanged = False
                if not unchanged:
                    time.sleep(min(0.001 * 2**attempt, 0.05))
                    continue
                if isinstance(err, IndexCorruptError):
                    raise
                missing = err.filename or self._directory / pointer.name
                raise IndexCorruptError(
                    f"index file {missing} is missing; " + _FIX.format(dir=self._directory)
                ) from err
        raise IndexLockedError(
            f"the index at {self._directory} changed {_READ_ATTEMPTS} times while being read; "
            "try again when indexing has finished"
        )

    def _read_generation(self, pointer: _Pointer, *, full: bool, mmap: bool = False,
                         written_here: bool = False) -> IndexSnapshot | dict[str, Any]:
        gen_dir = self._directory / pointer.name
        manifest_path = gen_dir / _MANIFEST
        manifest_bytes = manifest_path.read_bytes()
        if hashlib.sha256(manifest_bytes).hexdigest() != pointer.manifest_sha256:
            raise self._corrupt(manifest_path, "its sha256 differs from the one in CURRENT")
        try:
            record = json.loads(manifest_bytes)
            if record["format_version"] != FORMAT_VERSION or record["generation"] != pointer.number:
                raise ValueError("format version or generation differs from CURRENT")
            files: dict[str, dict[str, Any]] = record["files"]
            array_meta: dict[str, dict[str, Any]] = record["arrays"]
            manifest: dict[str, Any] = record["manifest"]
            if not isinstance(manifest, dict) or not isinstance(array_meta, dict):
                raise TypeError("manifest and arrays must be objects")
            expected = {_CHUNKS} | {f"{name}.npy" for name in array_meta}
            if set(files) != expected or any(not _ARRAY_NAME_RE.fullmatch(n) for n in array_meta):
                raise ValueError("the file list does not match the arrays")
        except (ValueError, KeyError, TypeError) as err:
            raise self._corrupt(manifest_path, f"unreadable: {err}") from err
        if not full:
            return manifest
        if mmap:
            return self._map_files(gen_dir, files, array_meta, manifest, written_here)
        with ExitStack() as stack:
            # Open every file before reading any: an open file stays readable on
            # POSIX even if a writer's clean-up deletes it, so a slow reader is
            # not starved by frequent commits.
            handles: dict[str, BinaryIO] = {
                name: stack.enter_context(open(gen_dir / name, "rb")) for name in files
            }
            return self._read_files(gen_dir, handles, files, array_meta, manifest)

    def _read_files(
        self,
        gen_dir: Path,
        handles: dict[str, BinaryIO],
        files: dict[str, dict[str, Any]],
        array_meta: dict[str, dict[str, Any]],
        manifest: dict[str, Any],
    ) -> IndexSnapshot:
        chunks = self._chunk_list(handles[_CHUNKS], files[_CHUNKS], gen_dir / _CHUNKS)
        arrays: dict[str, np.ndarray] = {}
        for name, meta in array_meta.items():
            path = gen_dir / f"{name}.npy"
            try:
                data = _read_verified(handles[path.name], files[path.name])
                array = _as_recorded(np.load(io.BytesIO(data), allow_pickle=False), meta)
            except _ChecksumMismatch as err:
                raise self._corrupt(path, str(err)) from None
            except (ValueError, KeyError, TypeError, EOFError, SyntaxError) as err:
                raise self._corrupt(path, f"unreadable: {err}") from err
            arrays[name] = array
        try:
            return IndexSnapshot(manifest=manifest, chunks=chunks, arrays=arrays)
        except (ValueError, TypeError) as err:
            raise self._corrupt(gen_dir / _MANIFEST, f"invalid content: {err}") from err

    def _chunk_list(self, handle: BinaryIO, meta: dict[str, Any], path: Path) -> list[Any]:
        """The generation's chunk records, their sha256 checked as they are read."""
        try:
            chunks = json.loads(_read_verified(handle, meta))
            if not isinstance(chunks, list):
                raise TypeError("chunks must be a list")
        except _ChecksumMismatch as err:
            raise self._corrupt(path, str(err)) from None
        except (ValueError, TypeError) as err:
            raise self._corrupt(path, f"unreadable: {err}") from err
        return chunks

    def _map_files(
        self,
        gen_dir: Path,
        files: dict[str, dict[str, Any]],
        array_meta: dict[str, dict[str, Any]],
        manifest: dict[str, Any],
        written_here: bool = False,
    ) -> IndexSnapshot:
        """The generation with its arrays memory-mapped; sizes checked now, sha256 by a background thread
        (unless ``written_here``)."""
        for name, meta in files.items():
            size = os.stat(gen_dir / name).st_size  # FileNotFoundError: the caller retries or reports it
            if size != meta["size"]:
                raise self._corrupt(gen_dir / name, f"{size} bytes where the manifest records {meta['size']}")
        with open(gen_dir / _CHUNKS, "rb") as handle:  # small: read and checked now
            chunks = self._chunk_list(handle, files[_CHUNKS], gen_dir / _CHUNKS)
        arrays: dict[str, np.ndarray] = {}
        for name, meta in array_meta.items():
            path = gen_dir / f"{name}.npy"
            try:
                array = _map_array(path, meta, files[path.name]["size"])
            except _ChecksumMismatch as err:
                raise self._corrupt(path, str(err)) from None
            except (ValueError, KeyError, TypeError, EOFError, SyntaxError) as err:
                raise self._corrupt(path, f"unreadable: {err}") from err
            small = array.size == 0 or array.ndim == 0
            if not small:
                _remember_mapping(array, path, files[path.name])
                # A plain view of the mapping: indexing an np.memmap runs Python code on every access (hundreds per
                # query); the view reads the same pages and keeps the mapping alive.
                array = array.view(np.ndarray)
            arrays[name] = array
        verification = Verification(gen_dir, {n: m for n, m in files.items() if n != _CHUNKS}, self._directory)
        try:
            snapshot = IndexSnapshot(manifest=manifest, chunks=chunks, arrays=arrays, verification=verification)
        except (ValueError, TypeError) as err:
            raise self._corrupt(gen_dir / _MANIFEST, f"invalid content: {err}") from err
        if written_here:
            verification.passed()
        else:
            verification.start()
        return snapshot

    def _corrupt(self, path: Path, reason: str) -> IndexCorruptError:
        return IndexCorruptError(
            f"index file {path} is damaged ({reason}); " + _FIX.format(dir=self._directory)
        )


class _ChecksumMismatch(Exception):
    """A file's bytes differ from what its manifest records."""


class _HashingWriter:
    """A write-only file wrapper that hashes and counts what passes through."""

    def __init__(self, raw: io.BufferedWriter) -> None:
        self._raw = raw
        self._sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._sha.update(data)
        self.size += memoryview(data).nbytes
        return self._raw.write(data)

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def _json_bytes(value: Any, what: str) -> bytes:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{what} must be JSON-serialisable (str keys, no NaN): {err}") from err
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a path with a byte that is not UTF-8 (a surrogate escape): kept as a \u escape
        return json.dumps(value, allow_nan=False, separators=(",", ":")).encode("ascii")


def _write_file(path: Path, data: bytes) -> dict[str, Any]:
    with open(path, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _write_array(path: Path, array: np.ndarray) -> dict[str, Any]:
    with open(path, "xb") as handle:
        writer = _HashingWriter(handle)
        np.save(writer, array, allow_pickle=False)
        handle.flush()
        os.fsync(handle.fileno())
    return {"size": writer.size, "sha256": writer.hexdigest()}


def _npy_header(dtype: np.dtype[Any], shape: tuple[int, ...], fortran_order: bool) -> bytes:
    """The bytes ``np.save`` writes before the data of an array of this dtype, shape and order."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran_order, "shape": shape}
    buffer = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(buffer, header)
    except ValueError:  # a header too long for version 1.0: np.save writes 2.0
        buffer = io.BytesIO()
        np.lib.format.write_array_header_2_0(buffer, header)
    return buffer.getvalue()


def _map_array(path: Path, meta: dict[str, Any], size: int) -> np.ndarray:
    """The array of a ``.npy`` file, memory-mapped (read when empty or 0-d, which cannot be mapped).

    Its header must be, byte for byte, the one ``np.save`` writes for the dtype and shape the manifest records,
    and the file exactly that header and the data: a damaged header is refused here, before anything parses it
    (the sha256 of the whole file is checked in the background).

    Raises:
        _ChecksumMismatch: the header or the file's size is not what the manifest records.
        ValueError, KeyError, TypeError: the manifest's record of the array is malformed.
    """
    dtype, shape = np.dtype(meta["dtype"]), tuple(int(n) for n in meta["shape"])
    if dtype.hasobject:
        raise ValueError(f"dtype {dtype} needs pickle")
    c_order, f_order = _npy_header(dtype, shape, False), _npy_header(dtype, shape, True)
    with open(path, "rb") as handle:
        found = handle.read(max(len(c_order), len(f_order)))
    order: Literal["C", "F"]
    if found.startswith(c_order):
        header, order = c_order, "C"
    elif found.startswith(f_order):
        header, order = f_order, "F"
    else:
        raise _ChecksumMismatch("its header differs from the dtype and shape the manifest records")
    if len(header) + dtype.itemsize * math.prod(shape) != size:
        raise _ChecksumMismatch(f"{size} bytes where a {dtype.str}{list(shape)} array takes "
                                f"{len(header) + dtype.itemsize * math.prod(shape)}")
    if not shape or 0 in shape:
        return np.load(path, allow_pickle=False)
    return np.memmap(path, dtype=dtype, mode="r", offset=len(header), shape=shape, order=order)


def _as_recorded(array: np.ndarray, meta: dict[str, Any]) -> np.ndarray:
    """``array`` when its dtype and shape are the ones the manifest recorded; else ValueError."""
    if array.dtype.str != meta["dtype"] or list(array.shape) != meta["shape"]:
        raise ValueError(f"dtype/shape {array.dtype.str}{array.shape} differ from the manifest")
    return array


_MAPPED: dict[tuple[int, int, str, tuple[int, ...]], tuple[Path, dict[str, Any]]] = {}
"""Arrays this process has memory-mapped from a generation, by (address, bytes, dtype, shape): their file and its
size and sha256. A commit links such an array's file into the new generation instead of writing it again (a tier
upgrade or a refresh keeps most arrays as they are). An entry leaves when its mapping is collected."""


def _array_key(array: np.ndarray) -> tuple[int, int, str, tuple[int, ...]]:
    return array.__array_interface__["data"][0], array.nbytes, array.dtype.str, tuple(array.shape)


def _remember_mapping(array: np.ndarray, path: Path, meta: dict[str, Any]) -> None:
    key = _array_key(array)
    _MAPPED[key] = (path, dict(meta))
    weakref.finalize(array, _MAPPED.pop, key, None)


def _carried(array: np.ndarray) -> tuple[Path, dict[str, Any]] | None:
    """The file of a generation that holds exactly ``array`` (the whole of a mapping, or a view of all of it)."""
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or not _MAPPED:
        return None
    return _MAPPED.get(_array_key(array))


def _link(source: Path, target: Path) -> bool:
    """Hard-link a generation's file into another (its bytes never change); ``False`` where links fail (the
    file went with its generation, or the file system has none): the caller writes it instead."""
    try:
        os.link(source, target)
    except OSError:
        return False
    return True


def _read_verified(handle: BinaryIO, meta: dict[str, Any], *, chunked: bool = False) -> bytes:
    if chunked:  # hash without holding the file in memory
        digest, size = hashlib.sha256(), 0
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
        if size != meta["size"]:
            raise _ChecksumMismatch(f"{size} bytes where the manifest records {meta['size']}")
        if digest.hexdigest() != meta["sha256"]:
            raise _ChecksumMismatch("its sha256 differs from the one in the manifest")
        return b""
    data = handle.read()
    if len(data) != meta["size"]:
        raise _ChecksumMismatch(f"{len(data)} bytes where the manifest records {meta['size']}")
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise _ChecksumMismatch("its sha256 differs from the one in the manifest")
    return data


def _format_current(pointer: _Pointer) -> bytes:
    body = f"{_MAGIC} {FORMAT_VERSION}\n{pointer.name}\n{pointer.manifest_sha256}\n"
    return (body + hashlib.sha256(body.encode("ascii")).hexdigest() + "\n").encode("ascii")


def _parse_current(data: bytes, directory: Path) -> _Pointer:
    path = directory / _CURRENT
    fix = _FIX.format(dir=directory)
    try:
        lines = data.decode("ascii").split("\n")
    except UnicodeDecodeError:
        raise IndexCorruptError(f"index file {path} is damaged (not ASCII); {fix}") from None
    if len(lines) != 5 or lines[4] != "":
        raise IndexCorruptError(f"index file {path} is damaged (expected 4 lines); {fix}")
    body = "\n".join(lines[:3]) + "\n"
    if hashlib.sha256(body.encode("ascii")).hexdigest() != lines[3]:
        raise IndexCorruptError(f"index file {path} is damaged (its checksum does not match); {fix}")
    magic, _, version = lines[0].partition(" ")
    if magic != _MAGIC:
        raise IndexCorruptError(f"{path} is not a codesearch index pointer; {fix}")
    if version != str(FORMAT_VERSION):
        raise IndexFormatError(
            f"the index at {directory} has format version {version}, but this codesearch "
            f"reads version {FORMAT_VERSION}; {fix}"
        )
    match = _GEN_RE.fullmatch(lines[1])
    if match is None or not _SHA256_RE.fullmatch(lines[2]):
        raise IndexCorruptError(f"index file {path} is damaged (bad generation line); {fix}")
    return _Pointer(int(match.group(1)), lines[2])


def _generation_numbers(directory: Path) -> list[int]:
    numbers = []
    for name in os.listdir(directory):
        match = _GEN_RE.fullmatch(name) or _TMP_GEN_RE.fullmatch(name)
        if match:
            numbers.append(int(match.group(1)))
    return numbers


def _collect_garbage(directory: Path, *, keep: str | None, generations: bool) -> None:
    """Delete temp folders and files of crashed writers and, if asked, every generation but ``keep``."""
    for name in os.listdir(directory):
        path = directory / name
        if _TMP_GEN_RE.fullmatch(name) or (generations and _GEN_RE.fullmatch(name) and name != keep):
            shutil.rmtree(path, ignore_errors=True)
        elif name.startswith(_TMP_CURRENT_PREFIX):
            _unlink_quietly(path)


def _unlink_quietly(path: Path) -> None:
    with suppress(OSError):
        os.unlink(path)


_STORES: weakref.WeakSet[IndexStore] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for store in list(_STORES):
        store._forget_lock_in_forked_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _fsync_dir(path: Path) -> None:
    """Make a folder's entries (new, renamed, removed names) durable."""
    if sys.platform == "win32":  # pragma: no cover - folders cannot be opened there
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":  # pragma: no cover
        os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _release_file_lock(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)
        if sys.platform == "win32":  # pragma: no cover
            os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _mounted_read_only(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (where even root cannot write)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # pragma: no cover - no statvfs (Windows)
        return False


def _lock_holder(path: Path) -> str:
    try:
        text = path.read_text("ascii", errors="replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"


__all__ = ["FORMAT_VERSION", "IndexSnapshot", "IndexStore", "Verification"]
