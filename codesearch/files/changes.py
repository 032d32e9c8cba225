"""The stat pass: which indexed files changed on disk since a scan, found without reading any.

With the folder and ignore-file stats of the scan (``walk_stats``) unchanged,
a walk would meet the same files, so only the known files are stat'ed (a file
added, removed or renamed changes its folder's mtime). Otherwise the one
walker (:func:`codesearch.files.walk.walk`) lists the folders again; a file
already known is only stat'ed, and only a new one is checked against the file
rules.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from codesearch.exceptions import RootNotFoundError
from codesearch.files.walk import MAX_FILE_BYTES, file_reason, walk


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
    enough to run before every search.

    Raises:
        RootNotFoundError: if ``root`` does not exist or is not a folder.
    """
    root_path = Path(root)
    if not root_path.is_dir():
        raise RootNotFoundError(f"{'not a directory' if root_path.exists() else 'path does not exist'}: {root}")
    real_root = root_path.resolve()
    # While no folder or ignore file the walk depended on changed, it would meet the same files.
    if walk_stats and next(_stat_differences(str(real_root), walk_stats), None) is None:
        return _known_changes(str(real_root), known)
    added: list[str] = []
    modified: list[str] = []
    seen: set[str] = set()
    get = known.get
    for found in walk(real_root, use_ignore_files=use_ignore_files, follow_symlinks=follow_symlinks,
                      exclude_dirs=exclude_dirs):
        recorded = get(found.rel)
        if recorded is not None:
            try:
                info = found.entry.stat()
            except OSError:
                continue
            seen.add(found.rel)
            if info.st_mtime_ns != recorded[1] or info.st_size != recorded[0]:
                modified.append(found.rel)
        elif file_reason(found.entry, found.rel, found.rules, max_file_bytes)[0] is None:
            added.append(found.rel)
    removed = [path for path in known if path not in seen] if len(seen) != len(known) else []
    return Changes(tuple(sorted(added)), tuple(sorted(modified)), tuple(sorted(removed)))


def _known_changes(root: str, known: Mapping[str, Sequence[int]]) -> Changes:
    """The known files modified or gone, by one stat each."""
    modified: list[str] = []
    removed: list[str] = []
    for rel, gone in _stat_differences(root, known):
        (removed if gone else modified).append(rel)
    return Changes((), tuple(sorted(modified)), tuple(sorted(removed)))


def _stat_differences(root: str, recorded: Mapping[str, Sequence[int]]) -> Iterator[tuple[str, bool]]:
    """``(path, gone)`` for each recorded path whose stat no longer matches (a folder's size is not compared;
    an mtime recorded as -1 never matches)."""
    stat_path = os.stat
    for rel, (size, mtime_ns) in recorded.items():
        try:
            info = stat_path(f"{root}/{rel}")
        except OSError:
            yield rel, True
            continue
        if info.st_mtime_ns != mtime_ns or (not rel.endswith("/") and info.st_size != size):
            yield rel, False


__all__ = ["Changes", "changed_files"]
