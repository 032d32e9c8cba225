"""Read the files of a repository that should be indexed: the walk's files, decoded, with their stats.

:func:`scan` takes the files :func:`codesearch.files.walk.walk` meets, applies
the file rules (lockfiles, ignore rules, extensions, size; then content: a NUL
byte in the first 512 bytes means ``binary`` -- unless the file starts with a
UTF-16/UTF-32 byte-order mark, in which case it is decoded) and reads the
rest. Every skipped file is counted under one reason.

Text is decoded as UTF-8 (a BOM is dropped, invalid bytes become U+FFFD) or as
UTF-16/32 when a BOM says so. A file that cannot be read (permission denied,
vanished mid-walk) is skipped as ``unreadable``.

Files are read through :func:`codesearch.files.read.read_file`, which no swap
between listing and reading can mislead (a link, a FIFO, a device are skipped
with their reason, never read).

Names are kept as the operating system gives them to :func:`os.scandir`: a
name that is not UTF-8 holds surrogate escapes (``os.fsdecode``), so
``os.fsencode(path)`` is the name's own bytes and the path opens the file again.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from codesearch.exceptions import RootNotFoundError
from codesearch.files.changes import trusted_mtime
from codesearch.files.read import SkippedFile, SkipReason, read_file
from codesearch.files.walk import IGNORE_FILES, MAX_FILE_BYTES, SNIFF_BYTES, file_reason, walk

_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file chosen for indexing.

    Attributes:
        path: path relative to the root, ``/``-separated.
        size: size on disk in bytes.
        text: decoded text.
        sha256: hex digest of the raw bytes.
        encoding: the codec used to decode them.
        mtime_ns: modification time when it was read, in nanoseconds.
    """

    path: str
    size: int
    text: str
    sha256: str
    encoding: str
    mtime_ns: int = 0


@dataclass(slots=True)
class ScanResult:
    """What :func:`scan` found.

    Attributes:
        root: the resolved root folder.
        files: the indexed files, sorted by path.
        files_seen: files met during the walk (pruned folders are not entered).
        skipped: count per :class:`SkipReason` (folders pruned count once each).
        skipped_paths: ``(path, reason)`` per skip: the walk's in walk order, then
            those found by reading (binary, unreadable, grown too large).
        stats: ``path -> (size, mtime_ns)`` of every file that was read
            (indexed, or found binary or unreadable by its content): what
            :func:`changed_files` compares later without reading anything.
        walk_stats: what the walk itself depended on: each folder entered
            (``"/"`` for the root, ``"src/pkg/"`` ...) -> ``(0, mtime_ns)``, and
            each ignore file in force -> ``(size, mtime_ns)``; ``mtime_ns`` is
            -1 when it was too recent to trust. While all are unchanged, a walk
            would meet the same files, so :func:`changed_files` only stats those.
    """

    root: Path
    files: list[SourceFile] = field(default_factory=list)
    files_seen: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)
    stats: dict[str, tuple[int, int]] = field(default_factory=dict)
    walk_stats: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        """Total size on disk of the indexed files."""
        return sum(f.size for f in self.files)

    def _skip(self, path: str, reason: str) -> None:
        self.skipped[reason] += 1
        self.skipped_paths.append((path, reason))


def decode_bytes(data: bytes) -> tuple[str, str] | None:
    """Decode a file's bytes, or return ``None`` if they look binary.

    Returns:
        ``(text, encoding)``: BOM-marked UTF-8/16/32 is decoded by its BOM; other
        data is binary when its first 512 bytes hold a NUL, else UTF-8 with
        invalid bytes replaced by U+FFFD.
    """
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding, errors="replace"), encoding
    if b"\0" in data[:SNIFF_BYTES]:
        return None
    return data.decode("utf-8", errors="replace"), "utf-8"


@dataclass(frozen=True, slots=True)
class Listed:
    """A file the walk met that the name, extension and size rules keep: to be read, or compared by its stat.

    ``path`` is what is opened: the file itself, or for a link followed inside
    the root, its target as the walk resolved it (a link is never opened).
    """

    rel: str
    path: str
    size: int
    mtime_ns: int


@dataclass(slots=True)
class Listing:
    """What :func:`list_files` found: the files to read, and what the walk depended on and skipped.

    ``files_seen``, ``skipped``, ``skipped_paths`` and ``walk_stats`` are as in :class:`ScanResult`.
    """

    root: Path
    files: list[Listed] = field(default_factory=list)
    files_seen: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_paths: list[tuple[str, str]] = field(default_factory=list)
    walk_stats: dict[str, tuple[int, int]] = field(default_factory=dict)

    def skip(self, path: str, reason: str) -> None:
        self.skipped[reason] += 1
        self.skipped_paths.append((path, reason))


def _checked_root(root: str | os.PathLike[str]) -> Path:
    root_path = Path(root)
    if not root_path.exists():
        raise RootNotFoundError(f"path does not exist: {root}")
    if not root_path.is_dir():
        raise RootNotFoundError(f"not a directory: {root}")
    return root_path.resolve()


def list_files(
    root: str | os.PathLike[str],
    *,
    use_ignore_files: bool = True,
    follow_symlinks: bool = False,
    max_file_bytes: int = MAX_FILE_BYTES,
    exclude_dirs: Iterable[str | os.PathLike[str]] = (),
) -> Listing:
    """Walk ``root`` in sorted order and stat the files the name, extension and size rules keep; read none.

    Raises:
        RootNotFoundError: if ``root`` does not exist or is not a folder.
    """
    real_root = _checked_root(root)
    listing = Listing(root=real_root)

    def skipped(rel: str, reason: str, is_file: bool) -> None:
        listing.files_seen += is_file
        listing.skip(rel, reason)

    def folder(rel: str, info: os.stat_result) -> None:
        listing.walk_stats[rel] = _trusted(0, info.st_mtime_ns)

    def ignore_file(rel: str, info: os.stat_result | None) -> None:
        listing.walk_stats[rel] = (0, -1) if info is None else _trusted(info.st_size, info.st_mtime_ns)

    for found in walk(real_root, use_ignore_files=use_ignore_files, follow_symlinks=follow_symlinks,
                      exclude_dirs=exclude_dirs, on_skip=skipped, on_folder=folder, on_ignore_file=ignore_file):
        listing.files_seen += 1
        reason, info = file_reason(found.entry, found.rel, found.rules, max_file_bytes)
        if reason is not None or info is None:
            listing.skip(found.rel, reason or SkipReason.UNREADABLE)
            continue
        listing.files.append(Listed(found.rel, found.path, info.st_size, info.st_mtime_ns))
    return listing


def scan(
    root: str | os.PathLike[str],
    *,
    use_ignore_files: bool = True,
    follow_symlinks: bool = False,
    max_file_bytes: int = MAX_FILE_BYTES,
    exclude_dirs: Iterable[str | os.PathLike[str]] = (),
) -> ScanResult:
    """Walk ``root`` in sorted order and read every file that should be indexed.

    Args:
        root: the folder to scan.
        use_ignore_files: honour ``.gitignore`` and ``.codesearchignore`` files.
        follow_symlinks: follow links to files and folders inside the root.
        max_file_bytes: larger files are skipped as ``too_large``.
        exclude_dirs: folders never entered (skipped as ``skipped_dir``), such
            as an index kept inside the repository it indexes.

    Returns:
        The files to index and what was skipped, per reason.

    Raises:
        RootNotFoundError: if ``root`` does not exist or is not a folder.
    """
    listing = list_files(root, use_ignore_files=use_ignore_files, follow_symlinks=follow_symlinks,
                         max_file_bytes=max_file_bytes, exclude_dirs=exclude_dirs)
    result = ScanResult(root=listing.root, files_seen=listing.files_seen, skipped=listing.skipped,
                        skipped_paths=listing.skipped_paths, walk_stats=listing.walk_stats)
    for listed in listing.files:
        rel = listed.rel
        result.stats[rel] = (listed.size, listed.mtime_ns)
        try:
            data = read_file(listed.path, max_file_bytes)
        except SkippedFile as skipped:
            result._skip(rel, skipped.reason)
            continue
        decoded = decode_bytes(data)
        if decoded is None:
            result._skip(rel, SkipReason.BINARY)
            continue
        text, encoding = decoded
        result.files.append(SourceFile(rel, len(data), text, hashlib.sha256(data).hexdigest(), encoding,
                                       listed.mtime_ns))
    result.files.sort(key=lambda f: f.path)
    return result


def _trusted(size: int, mtime_ns: int) -> tuple[int, int]:
    """``(size, mtime_ns)``, with -1 for an mtime too recent to show a later change (:func:`trusted_mtime`): a stat
    pass walks again while a folder or ignore file's is."""
    mtime = trusted_mtime(mtime_ns, time.time_ns())
    return (size, -1 if mtime is None else mtime)


__all__ = ["IGNORE_FILES", "MAX_FILE_BYTES", "Listed", "Listing", "ScanResult", "SkipReason", "SkippedFile",
           "SourceFile", "decode_bytes", "list_files", "read_file", "scan"]
