"""Counts that describe a repository as codesearch sees it: files, skips, bytes, chunks."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any

from codesearch.chunking import BACKEND, ChunkParams, chunk_text
from codesearch.scan import scan


@dataclass(frozen=True, slots=True)
class RepoStats:
    """What :func:`repo_stats` measured; :meth:`as_dict` gives the ``--json`` keys."""

    root: str
    files_seen: int
    files_indexed: int
    bytes: int
    chunks: int
    skipped: dict[str, int]
    backend: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def repo_stats(
    root: str | os.PathLike[str],
    *,
    use_ignore_files: bool = True,
    params: ChunkParams = ChunkParams(),
) -> RepoStats:
    """Scan ``root`` and chunk every indexed file, without embedding anything.

    Raises:
        RootNotFoundError: if ``root`` is missing or not a folder.
    """
    result = scan(root, use_ignore_files=use_ignore_files)
    chunks = sum(len(chunk_text(f.path, f.text, params)) for f in result.files)
    return RepoStats(
        root=str(result.root),
        files_seen=result.files_seen,
        files_indexed=len(result.files),
        bytes=result.bytes,
        chunks=chunks,
        skipped=dict(sorted(result.skipped.items())),
        backend=BACKEND,
    )
