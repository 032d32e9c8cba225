"""What changed in a corpus's repositories since it recorded them, known from stats alone.

A refresh starts with this pass in the driver, before any model, actor or
Ray is started: each repository is walked with the one walker
(:func:`codesearch.files.scan.list_files`, which stats and reads nothing)
and compared with the files table. A file whose recorded size and mtime
equal the walk's is unchanged; one added, removed, with other stats or with
stats the table does not know (a row older than the ``mtime_ns`` column, or
an mtime too recent to trust when it was recorded) is read again. A
repository with none of these is not refreshed at all, and the bytes left to
read decide whether the rest is worth starting Ray for.

The rule is the single index's (:func:`codesearch.files.changes.unchanged`,
:func:`~codesearch.files.changes.trusted_mtime`): the worker applies it too,
to leave unread the files it may.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from codesearch.files.changes import StatKey, unchanged
from codesearch.files.scan import Listing


@dataclass
class RepoChanges:
    """One repository's files as the walk found them against the table's.

    Attributes:
        repo, root: the repository and its folder.
        listing: the walk (handed to the worker, which then does not walk again).
        to_read: files added or whose stats differ or are unknown; ``read_bytes``: their sizes.
        removed: recorded files the walk no longer meets.
    """

    repo: str
    root: str
    listing: Listing
    to_read: int
    read_bytes: int
    removed: int

    @property
    def changed(self) -> bool:
        """Whether anything is to be read or dropped."""
        return bool(self.to_read or self.removed)


def known_stats(table: pa.Table) -> dict[str, dict[str, StatKey]]:
    """``repo -> path -> (size, mtime_ns)`` of a files-table read with those four columns."""
    out: dict[str, dict[str, StatKey]] = {}
    columns = (table[name].to_pylist() for name in ("repo", "path", "size", "mtime_ns"))
    for repo, path, size, mtime_ns in zip(*columns):
        out.setdefault(repo, {})[path] = (size, mtime_ns)
    return out


def stat_pass(listings: Sequence[tuple[str, str, Listing]], known: dict[str, dict[str, StatKey]]) -> list[RepoChanges]:
    """Each repository's changes: ``listings`` are ``(repo, root, walk)``, ``known`` the table's stats."""
    out = []
    for repo, root, listing in listings:
        recorded = known.get(repo, {})
        fresh = [f for f in listing.files if not unchanged(recorded.get(f.rel), f.size, f.mtime_ns)]
        seen = {f.rel for f in listing.files}
        out.append(RepoChanges(repo, root, listing, len(fresh), sum(f.size for f in fresh),
                               sum(1 for path in recorded if path not in seen)))
    return out


__all__ = ["RepoChanges", "known_stats", "stat_pass"]
