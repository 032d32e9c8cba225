"""The on-disk index: checksummed generations committed by an atomic rename.

Layout of an index directory::

    DIR/
      LOCK                  the write lock (codesearch._lock); holds the writer's pid
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
Crash safety and locking are tested on POSIX; on Windows clean-up of files a
reader holds open is retried on the next save.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from codesearch._lock import FileLock, LockHeld
from codesearch.exceptions import (
    IndexCorruptError,
    IndexLockedError,
    IndexNotFoundError,
    IndexReadOnlyError,
    IndexWriteError,
)
from codesearch.index import checkpoints
from codesearch.index.integrity import FIX, ChecksumMismatch, Verification, read_verified, write_array, write_file
from codesearch.index.mapping import carried, link, map_array, remember_mapping
from codesearch.index.pointer import CURRENT, GENERATION, Pointer, format_pointer, parse_pointer
from codesearch.index.snapshot import ARRAY_NAME, FORMAT_VERSION, IndexSnapshot

_LOCK = "LOCK"
_MANIFEST = "manifest.json"
_CHUNKS = "chunks.json"
_TMP_GEN_RE = re.compile(r"gen-([0-9]+)\.tmp-.+")
_TMP_CURRENT_PREFIX = "CURRENT.tmp-"
_READ_ATTEMPTS = 50


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
        self._file_lock = FileLock(self._directory / _LOCK)
        self._lock_depth = 0
        _STORES.add(self)

    def _forget_lock_in_forked_child(self) -> None:
        # A forked child holds nothing of its parent's lock (the file lock makes its own in a new process).
        self._lock_depth, self._thread_lock = 0, threading.RLock()

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
        return (self._directory / CURRENT).is_file()

    def current_token(self) -> bytes | None:
        """The bytes of ``CURRENT`` (they change with every commit), or ``None`` when nothing is committed.

        A reader keeps the token of what it loaded and compares it with this
        to learn, with one small read, whether another process committed since.
        """
        try:
            return (self._directory / CURRENT).read_bytes()
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
        if not self._thread_lock.acquire(timeout != 0, timeout if timeout > 0 else -1):
            raise IndexLockedError(
                f"the index at {self._directory} is being written by another thread of this "
                f"process (pid {os.getpid()}); wait for it or pass a longer timeout"
            )
        owner = os.getpid()
        try:
            if self._lock_depth == 0:
                self._acquire_file_lock(timeout)
            self._lock_depth += 1
            try:
                yield
            finally:
                if os.getpid() == owner:  # a forked child leaving the block owns nothing
                    self._lock_depth -= 1
                    if self._lock_depth == 0:
                        self._file_lock.release()
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

    # -- checkpoints (codesearch.index.checkpoints) -------------------------------------

    def save_checkpoint(self, fingerprint: str, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Keep vectors embedded so far, so a run that dies before its commit loses none of them (call under
        :meth:`write_lock`; see :func:`~codesearch.index.checkpoints.save_checkpoint`)."""
        self.check_writable("keep a checkpoint")
        checkpoints.save_checkpoint(self._directory, fingerprint, keys, vectors)

    def load_checkpoint(self, fingerprint: str) -> dict[str, np.ndarray]:
        """Vectors by chunk key that interrupted runs of this model left behind (empty if none)."""
        return checkpoints.load_checkpoint(self._directory, fingerprint)

    def clear_checkpoint(self) -> None:
        """Drop every checkpoint part (after a commit has made them redundant)."""
        self.check_writable("clear its checkpoint")
        checkpoints.clear_checkpoint(self._directory)

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
            files = {_CHUNKS: write_file(tmp / _CHUNKS, chunk_bytes)}
            array_meta: dict[str, dict[str, Any]] = {}
            for name, array in arrays.items():
                filename = f"{name}.npy"
                kept = carried(array)
                if kept is not None and link(kept[0], tmp / filename):
                    files[filename] = kept[1]  # an array of the live generation, unchanged: its file, linked
                else:
                    files[filename] = write_array(tmp / filename, array)
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
            write_file(tmp / _MANIFEST, manifest_bytes)
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
        self._write_current(Pointer(number, hashlib.sha256(manifest_bytes).hexdigest()))
        _collect_garbage(directory, keep=final.name, generations=True)
        return number

    def _write_current(self, pointer: Pointer) -> None:
        tmp = self._directory / f"{_TMP_CURRENT_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            write_file(tmp, format_pointer(pointer))
            os.replace(tmp, self._directory / CURRENT)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        _fsync_dir(self._directory)

    def _live_pointer(self) -> Pointer | None:
        try:
            data = (self._directory / CURRENT).read_bytes()
            return parse_pointer(data, self._directory)
        except (FileNotFoundError, IndexCorruptError):
            return None

    def _acquire_file_lock(self, timeout: float) -> None:
        if not self._directory.is_dir():
            self._directory.mkdir(parents=True, exist_ok=True)
            _fsync_dir(self._directory.parent)
        try:
            self._file_lock.acquire(timeout)
        except LockHeld as held:
            waited = f" after waiting {timeout:g} s" if timeout > 0 else ""
            raise IndexLockedError(
                f"the index at {self._directory} is being written by another process "
                f"({held.holder}; lock file {held.path}){waited}; wait for it to finish or pass a longer timeout"
            ) from None

    # -- reading -------------------------------------------------------------

    def _read(self, *, full: bool, mmap: bool = False, written_here: bool = False) -> IndexSnapshot | dict[str, Any]:
        current = self._directory / CURRENT
        for attempt in range(_READ_ATTEMPTS):
            try:
                raw = current.read_bytes()
            except (FileNotFoundError, NotADirectoryError):
                raise IndexNotFoundError(
                    f"no index at {self._directory}; run `codesearch index` first"
                ) from None
            pointer = parse_pointer(raw, self._directory)
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
                    f"index file {missing} is missing; " + FIX.format(dir=self._directory)
                ) from err
        raise IndexLockedError(
            f"the index at {self._directory} changed {_READ_ATTEMPTS} times while being read; "
            "try again when indexing has finished"
        )

    def _read_generation(self, pointer: Pointer, *, full: bool, mmap: bool = False,
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
            if set(files) != expected or any(not ARRAY_NAME.fullmatch(n) for n in array_meta):
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
                data = read_verified(handles[path.name], files[path.name])
                array = _as_recorded(np.load(io.BytesIO(data), allow_pickle=False), meta)
            except ChecksumMismatch as err:
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
            chunks = json.loads(read_verified(handle, meta))
            if not isinstance(chunks, list):
                raise TypeError("chunks must be a list")
        except ChecksumMismatch as err:
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
                array = map_array(path, meta, files[path.name]["size"])
            except ChecksumMismatch as err:
                raise self._corrupt(path, str(err)) from None
            except (ValueError, KeyError, TypeError, EOFError, SyntaxError) as err:
                raise self._corrupt(path, f"unreadable: {err}") from err
            small = array.size == 0 or array.ndim == 0
            if not small:
                remember_mapping(array, path, files[path.name])
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
            f"index file {path} is damaged ({reason}); " + FIX.format(dir=self._directory)
        )


def _json_bytes(value: Any, what: str) -> bytes:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{what} must be JSON-serialisable (str keys, no NaN): {err}") from err
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a path with a byte that is not UTF-8 (a surrogate escape): kept as a \u escape
        return json.dumps(value, allow_nan=False, separators=(",", ":")).encode("ascii")


def _as_recorded(array: np.ndarray, meta: dict[str, Any]) -> np.ndarray:
    """``array`` when its dtype and shape are the ones the manifest recorded; else ValueError."""
    if array.dtype.str != meta["dtype"] or list(array.shape) != meta["shape"]:
        raise ValueError(f"dtype/shape {array.dtype.str}{array.shape} differ from the manifest")
    return array


def _generation_numbers(directory: Path) -> list[int]:
    numbers = []
    for name in os.listdir(directory):
        match = GENERATION.fullmatch(name) or _TMP_GEN_RE.fullmatch(name)
        if match:
            numbers.append(int(match.group(1)))
    return numbers


def _collect_garbage(directory: Path, *, keep: str | None, generations: bool) -> None:
    """Delete temp folders and files of crashed writers and, if asked, every generation but ``keep``."""
    for name in os.listdir(directory):
        path = directory / name
        if _TMP_GEN_RE.fullmatch(name) or (generations and GENERATION.fullmatch(name) and name != keep):
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


def _mounted_read_only(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (where even root cannot write)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # pragma: no cover - no statvfs (Windows)
        return False


__all__ = ["IndexStore"]
