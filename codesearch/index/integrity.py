"""The sha256 of a generation's files: computed as they are written, checked as they are read, or in the background.

Every file of a generation is recorded in its manifest with its size and
sha256 (:func:`write_file`, :func:`write_array`); a full read checks each as
it reads it (:func:`read_verified`); a memory-mapped read leaves the check to
a background thread (:class:`Verification`), whose verdict a search asks for
before it trusts an answer.
"""

from __future__ import annotations

import hashlib
import io
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from codesearch.exceptions import IndexCorruptError

FIX = "re-run `codesearch index` to rebuild it (or delete {dir})"
"""How a damaged index's message ends (``dir``: the index folder)."""


class ChecksumMismatch(Exception):
    """A file's bytes differ from what its manifest records."""


class HashingWriter:
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


def write_file(path: Path, data: bytes) -> dict[str, Any]:
    with open(path, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def write_array(path: Path, array: np.ndarray) -> dict[str, Any]:
    with open(path, "xb") as handle:
        writer = HashingWriter(handle)
        np.save(writer, array, allow_pickle=False)
        handle.flush()
        os.fsync(handle.fileno())
    return {"size": writer.size, "sha256": writer.hexdigest()}


def read_verified(handle: BinaryIO, meta: dict[str, Any], *, chunked: bool = False) -> bytes:
    if chunked:  # hash without holding the file in memory
        digest, size = hashlib.sha256(), 0
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            size += len(block)
        if size != meta["size"]:
            raise ChecksumMismatch(f"{size} bytes where the manifest records {meta['size']}")
        if digest.hexdigest() != meta["sha256"]:
            raise ChecksumMismatch("its sha256 differs from the one in the manifest")
        return b""
    data = handle.read()
    if len(data) != meta["size"]:
        raise ChecksumMismatch(f"{len(data)} bytes where the manifest records {meta['size']}")
    if hashlib.sha256(data).hexdigest() != meta["sha256"]:
        raise ChecksumMismatch("its sha256 differs from the one in the manifest")
    return data


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
                read_verified(handle, self._files[name], chunked=True)
        except ChecksumMismatch as err:
            if self._error is None:
                self._error = f"index file {self._folder / name} is damaged ({err}); " + FIX.format(
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


__all__ = ["FIX", "ChecksumMismatch", "HashingWriter", "Verification", "read_verified", "write_array", "write_file"]
