"""Whether a file changed since it was recorded (the one rule), and the stat pass that applies it to a scan.

The rule, for the single index (its scan, its builder) and the corpus (its
driver's stat pass, its workers) alike: a file is unchanged while its size
and mtime equal the recorded ones (:func:`unchanged`), and an mtime recorded
within :data:`RACY_NS` of when it was read is not trusted (:func:`trusted_mtime`):
timestamps advance in coarse ticks, so a file written again in the tick it
was read in keeps its mtime. Such a file is read again, and its bytes
compared (:func:`content_sha256`). Each store keeps the untrusted mtime its
own way (the single index records the raw stat and the scan's time, a walk's
folder ``-1``, the corpus ``None``), and asks this module either way.


With the folder and ignore-file stats of the scan (``walk_stats``) unchanged,
a walk would meet the same files, so only the known files are stat'ed (a file
added, removed or renamed changes its folder's mtime). Otherwise the one
walker (:func:`codesearch.files.walk.walk`) lists the folders again; a file
already known is only stat'ed, and only a new one is checked against the file
rules.

A :class:`StatPass` prepares one scan's stats once (absolute paths encoded, the
numbers in C arrays) for a process that compares them again and again; the
comparison itself is a :class:`StatTable` from one of two twins: the Cython
``codesearch.files._statpass`` (``stat(2)`` in a loop without the GIL) or the
pure-Python ``codesearch.files._statpass_py``. ``CODESEARCH_PUREPYTHON=1``
forces the latter; :data:`BACKEND` says which is in use.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codesearch.exceptions import RootNotFoundError
from codesearch.files.read import SkippedFile, read_file
from codesearch.files.walk import MAX_FILE_BYTES, file_reason, walk

if os.environ.get("CODESEARCH_PUREPYTHON") == "1":
    from codesearch.files._statpass_py import StatTable

    BACKEND = "python"
else:
    try:
        from codesearch.files._statpass import StatTable  # type: ignore[assignment]

        BACKEND = "cython"
    except ImportError:  # not built (no compiler, or not POSIX): the twin gives the same answers, a little slower
        from codesearch.files._statpass_py import StatTable

        BACKEND = "python"


RACY_NS = 2_000_000_000
"""An mtime this recent when its file (or folder, or ignore file) was read is not trusted to show a later change."""

StatKey = tuple[int | None, int | None]
"""A file's recorded ``(size, mtime_ns)``; either may be unknown (``None``)."""


def trusted_mtime(mtime_ns: int, read_ns: int) -> int | None:
    """``mtime_ns`` of a file read at ``read_ns``, or ``None`` when it is within :data:`RACY_NS` of then."""
    return None if read_ns - mtime_ns < RACY_NS else mtime_ns


def unchanged(recorded: StatKey | None, size: int, mtime_ns: int) -> bool:
    """Whether recorded stats show a file unchanged: its size and a trusted mtime known, and equal to these."""
    return recorded is not None and recorded[1] is not None and recorded == (size, mtime_ns)


def content_sha256(path: str, max_file_bytes: int) -> bytes | None:
    """The sha256 of a file's bytes (to tell whether a file of untrusted stats changed), or ``None`` when it cannot
    be read or holds over ``max_file_bytes``."""
    import hashlib

    try:
        return hashlib.sha256(read_file(path, max_file_bytes)).digest()
    except SkippedFile:
        return None


@dataclass(frozen=True, slots=True)
class Changes:
    """What :func:`changed_files` found: paths added, modified and removed since the recorded stats."""

    added: tuple[str, ...] = ()
    modified: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.modified or self.removed)

    def __len__(self) -> int:
        return len(self.added) + len(self.modified) + len(self.removed)


def changed_files(
    root: str | os.PathLike[str],
    known: Mapping[str, Sequence[int]],
    *,
    use_ignore_files: bool = True,
    follow_symlinks: bool = False,
    max_file_bytes: int = MAX_FILE_BYTES,
    exclude_dirs: Iterable[str | os.PathLike[str]] = (),
    walk_stats: Mapping[str, Sequence[int]] | None = None,
) -> Changes:
    """Compare the files under ``root`` with ``known`` (``path -> (size, mtime_ns)``, as :attr:`ScanResult.stats`).

    With ``walk_stats`` (:attr:`ScanResult.walk_stats` of the same scan) and
    no folder or ignore file changed since, no folder is listed: only the
    known files are stat'ed. Otherwise the walk applies the folder rules of
    :func:`~codesearch.files.scan.scan`. No file is read, so this is cheap
    enough to run before every search (a process that does so keeps a
    :class:`StatPass`).

    Raises:
        RootNotFoundError: if ``root`` does not exist or is not a folder.
    """
    return StatPass(root, known, walk_stats=walk_stats, use_ignore_files=use_ignore_files,
                    follow_symlinks=follow_symlinks, max_file_bytes=max_file_bytes, exclude_dirs=exclude_dirs).changes()


class StatPass:
    """One scan's recorded stats, prepared once for many stat passes.

    Args:
        root: the folder that was scanned.
        known: ``path -> (size, mtime_ns)`` of its files (:attr:`ScanResult.stats`).
        walk_stats: its folders and ignore files (:attr:`ScanResult.walk_stats`), if recorded.
        use_ignore_files, follow_symlinks, max_file_bytes, exclude_dirs: the walk's rules, as for
            :func:`~codesearch.files.scan.scan`, used when the folders must be listed again.

    Raises:
        RootNotFoundError: if ``root`` does not exist or is not a folder.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        known: Mapping[str, Sequence[int]],
        *,
        walk_stats: Mapping[str, Sequence[int]] | None = None,
        use_ignore_files: bool = True,
        follow_symlinks: bool = False,
        max_file_bytes: int = MAX_FILE_BYTES,
        exclude_dirs: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        self.root = _real_root(root)
        self.known = known
        self.walk_stats = walk_stats or {}
        self.use_ignore_files = use_ignore_files
        self.follow_symlinks = follow_symlinks
        self.max_file_bytes = max_file_bytes
        self.exclude_dirs = tuple(exclude_dirs)
        self._prefix = f"{self.root}/"
        self._files: StatTable | None = None
        self._file_paths: list[str] = []
        self._folders: StatTable | None = None

    def changes(self) -> Changes:
        """Files added, modified and removed since the scan: the known files alone while no folder changed, else a walk."""
        if self.walk_stats and not self._folder_table().differences():
            return self.known_changes()
        return self.walked()

    def known_changes(self) -> Changes:
        """The known files modified or gone, by one stat each (nothing listed, so nothing added)."""
        if self._files is None:
            self._files, self._file_paths = _table(self._prefix, self.known, check_sizes=True), list(self.known)
        modified: list[str] = []
        removed: list[str] = []
        for row, gone in self._files.differences():
            (removed if gone else modified).append(self._file_paths[row])
        return Changes((), tuple(sorted(modified)), tuple(sorted(removed)))

    def walked(self) -> Changes:
        """The changes found by listing every folder again (the known files are only stat'ed).

        Raises:
            RootNotFoundError: the root is gone or no longer a folder.
        """
        real_root = _real_root(self.root)
        added: list[str] = []
        modified: list[str] = []
        seen: set[str] = set()
        get = self.known.get
        for found in walk(real_root, use_ignore_files=self.use_ignore_files, follow_symlinks=self.follow_symlinks,
                          exclude_dirs=self.exclude_dirs):
            recorded = get(found.rel)
            if recorded is not None:
                try:
                    info = found.entry.stat()
                except OSError:
                    continue
                seen.add(found.rel)
                if info.st_mtime_ns != recorded[1] or info.st_size != recorded[0]:
                    modified.append(found.rel)
            elif file_reason(found.entry, found.rel, found.rules, self.max_file_bytes)[0] is None:
                added.append(found.rel)
        removed = [path for path in self.known if path not in seen] if len(seen) != len(self.known) else []
        return Changes(tuple(sorted(added)), tuple(sorted(modified)), tuple(sorted(removed)))

    def among(self, paths: Iterable[str]) -> Changes | None:
        """The changes among ``paths`` (relative to the root: what a file watcher reported), or ``None`` when a
        folder or ignore file they touch changed, so that only a walk (:meth:`walked`) can say what was added.

        An ignore file in force or a folder the walk entered is compared with its recorded stat; a known file is
        stat'ed; any other
        path (a new file, or one the index does not hold) is judged by its folder's recorded mtime, which an
        added, removed or renamed entry moves. A path in a folder the walk does not enter is ignored.
        """
        modified: list[str] = []
        removed: list[str] = []
        known = self.known
        walk_stats = self.walk_stats
        prefix = self._prefix
        for rel in paths:
            if rel in walk_stats and _differs(prefix, rel, walk_stats[rel]):
                return None  # an ignore file in force changed (it may be indexed too): the walk's rules changed
            recorded = known.get(rel)
            if recorded is not None:
                try:
                    info = os.stat(prefix + rel)
                except (OSError, ValueError):
                    removed.append(rel)
                    continue
                if info.st_mtime_ns != recorded[1] or info.st_size != recorded[0]:
                    modified.append(rel)
                continue
            if not walk_stats:
                return None
            key = f"{rel}/"  # the path as a folder the walk entered
            if key in walk_stats and _differs(prefix, key, walk_stats[key]):
                return None
            parent = rel.rpartition("/")[0]
            key = f"{parent}/" if parent else "/"
            if key in walk_stats and _differs(prefix, key, walk_stats[key]):
                return None
        return Changes((), tuple(sorted(set(modified))), tuple(sorted(set(removed))))

    def _folder_table(self) -> StatTable:
        if self._folders is None:
            self._folders = _table(self._prefix, self.walk_stats, check_sizes=False)
        return self._folders


def _real_root(root: str | os.PathLike[str]) -> Path:
    root_path = Path(root)
    if not root_path.is_dir():
        raise RootNotFoundError(f"{'not a directory' if root_path.exists() else 'path does not exist'}: {root}")
    return root_path.resolve()


def _table(prefix: str, recorded: Mapping[str, Sequence[int]], *, check_sizes: bool) -> StatTable:
    """``recorded`` as a :class:`StatTable` in its own order (a folder's size, a key ending in ``/``, is never compared)."""
    paths = [prefix + rel for rel in recorded]
    values = list(recorded.values())
    return StatTable(paths, [v[0] for v in values], [v[1] for v in values],
                     [check_sizes and not rel.endswith("/") for rel in recorded])


def _differs(prefix: str, rel: str, recorded: Sequence[int]) -> bool:
    """Whether ``rel``'s stat no longer matches ``recorded`` (as a row of :meth:`StatTable.differences`)."""
    try:
        info = os.stat(prefix + rel)
    except (OSError, ValueError):
        return True
    return info.st_mtime_ns != recorded[1] or (not rel.endswith("/") and info.st_size != recorded[0])


__all__ = ["BACKEND", "RACY_NS", "Changes", "StatKey", "StatPass", "changed_files", "content_sha256", "trusted_mtime",
           "unchanged"]
