"""Counts that describe a repository as codesearch sees it: files, skips, bytes, chunks, languages."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from codesearch.chunking import BACKEND, ChunkParams, chunk_text
from codesearch.files import scan


@dataclass(frozen=True, slots=True)
class LanguageStats:
    """How one language's files were cut.

    Attributes:
        files: files of the language.
        chunks: their chunks.
        chunks_with_symbols: chunks that name at least one definition.
        fallbacks: files cut into line windows instead, with the reason
            (``no grammar``, ``parse error``, ``too large``, ``unknown extension``).
    """

    files: int
    chunks: int
    chunks_with_symbols: int
    fallbacks: dict[str, str] = field(default_factory=dict)

    @property
    def symbol_share(self) -> float:
        """Share of chunks that carry symbols (0 when there are none)."""
        return self.chunks_with_symbols / self.chunks if self.chunks else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "symbol_share": round(self.symbol_share, 4)}


@dataclass(frozen=True, slots=True)
class RepoStats:
    """What :func:`repo_stats` measured; :meth:`as_dict` gives the ``--json`` keys.

    ``languages`` is keyed by language name; files of no known language are
    under ``"other"``, each listed in its ``fallbacks`` as ``unknown extension``.
    """

    root: str
    files_seen: int
    files_indexed: int
    bytes: int
    chunks: int
    skipped: dict[str, int]
    backend: str
    chunking: str
    languages: dict[str, LanguageStats]

    def as_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in ("root", "files_seen", "files_indexed", "bytes", "chunks",
                                                      "skipped", "backend", "chunking")}
        data["languages"] = {name: stats.as_dict() for name, stats in self.languages.items()}
        return data


def repo_stats(
    root: str | os.PathLike[str],
    *,
    use_ignore_files: bool = True,
    params: ChunkParams | None = None,
    chunking: Literal["definitions", "lines"] = "definitions",
) -> RepoStats:
    """Scan ``root`` and chunk every indexed file as an index would, without embedding anything.

    Args:
        root: the folder.
        use_ignore_files: honour ``.gitignore`` and ``.codesearchignore``.
        params: chunk sizes (default: those of the chunking, as an index uses them).
        chunking: ``"definitions"`` (the index's default) or ``"lines"``
            (the published line windows; no languages are reported).

    Raises:
        RootNotFoundError: if ``root`` is missing or not a folder.
        ValueError: an unknown ``chunking``.
    """
    if chunking not in ("definitions", "lines"):
        raise ValueError(f"unknown chunking {chunking!r}; use definitions or lines")
    params = params if params is not None else ChunkParams.for_chunking(chunking)
    result = scan(root, use_ignore_files=use_ignore_files)
    total = 0
    files: Counter[str] = Counter()
    chunks: Counter[str] = Counter()
    with_symbols: Counter[str] = Counter()
    fallbacks: dict[str, dict[str, str]] = {}
    if chunking == "lines":
        total = sum(len(chunk_text(f.path, f.text, params)) for f in result.files)
    else:
        from codesearch.chunking.definitions import cut_file

        for source in result.files:
            cut = cut_file(source.path, source.text, params)
            language = cut.language or "other"
            files[language] += 1
            chunks[language] += len(cut.chunks)
            with_symbols[language] += sum(1 for c in cut.chunks if c.symbols)
            total += len(cut.chunks)
            if cut.fallback is not None:
                fallbacks.setdefault(language, {})[source.path] = cut.fallback
    languages = {
        name: LanguageStats(files[name], chunks[name], with_symbols[name], fallbacks.get(name, {}))
        for name in sorted(files, key=lambda n: (n == "other", -files[n], n))
    }
    return RepoStats(
        root=str(result.root),
        files_seen=result.files_seen,
        files_indexed=len(result.files),
        bytes=result.bytes,
        chunks=total,
        skipped=dict(sorted(result.skipped.items())),
        backend=BACKEND,
        chunking=chunking,
        languages=languages,
    )


__all__ = ["LanguageStats", "RepoStats", "repo_stats"]
