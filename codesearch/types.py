"""The values the API hands out: hits, what a search and an index run did, and the names of tiers and modes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

if TYPE_CHECKING:
    from codesearch.embedding.catalogue import ModelSpec

Mode = Literal["bm25", "dense", "hybrid"]
MODES: tuple[Mode, ...] = ("bm25", "dense", "hybrid")
Tier = Literal["keyword", "static", "full"]
"""What an index can answer with: keywords only; keywords and static vectors; and the transformer's vectors too.

One name per tier everywhere in the code. On disk the transformer tier's facts
stay under the manifest key ``"model"`` and its vectors in the array
``vectors``; the ranking calls its list ``dense`` (see :mod:`codesearch.index.manifest`)."""
KEYWORD: Tier = "keyword"
STATIC: Tier = "static"
FULL: Tier = "full"
TIERS: tuple[Tier, ...] = (KEYWORD, STATIC, FULL)
Chunking = Literal["definitions", "lines"]
CHUNKINGS: tuple[Chunking, ...] = ("definitions", "lines")


class TextEmbedder(Protocol):
    """What an index needs from an embedding model (:class:`codesearch.embedding.Embedder`, or a stand-in)."""

    @property
    def fingerprint(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def spec(self) -> ModelSpec: ...

    def embed_documents(self, texts: Sequence[str], progress: bool = False) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: a chunk of a file, its score and its kind.

    ``str(hit)`` reads ``path:start-end  (score, kind)``; :attr:`location` is
    the bare ``path:start-end`` an editor opens. ``root`` is set when several
    repositories are searched together (:class:`codesearch.multi.MultiSearch`).
    """

    path: str
    start_line: int
    end_line: int
    score: float
    kind: str
    text: str
    symbols: tuple[str, ...] = ()
    root: str | None = None

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"

    def __str__(self) -> str:
        return f"{self.location}  ({self.score:.4f}, {self.kind})"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["symbols"] = list(self.symbols)
        data["location"] = self.location
        if self.root is None:
            data.pop("root")
        return data


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What one :meth:`CodeSearch.index` run did.

    Attributes:
        files: files indexed.
        chunks: chunks in the index.
        embedded: chunks the transformer embedded (0 for a static-tier build).
        reused: chunks whose vectors were kept.
        unread: chunks the transformer does not read (test files, unless
            ``embed_tests``); keywords and the static tier still find them.
        shared: later line windows of a long definition, which share the
            vector of its first window (:func:`~codesearch.chunking.window_heads`).
        removed: chunks of the previous index that are gone.
        seconds: wall time.
        tier: the tier the index now has (``keyword``, ``static`` or ``full``).
        static_embedded: chunks the static model embedded.
        changed_files: files read and chunked again (all of them on a first build).
    """

    files: int
    chunks: int
    embedded: int
    reused: int
    removed: int
    seconds: float
    tier: str = FULL
    static_embedded: int = 0
    changed_files: int = 0
    unread: int = 0
    shared: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SearchInfo:
    """How the last :meth:`CodeSearch.search` was answered.

    Attributes:
        tier: which tier answered (``keyword``, ``static`` or ``full``).
        refreshed: files re-indexed before answering because they had changed.
        built: whether the index had to be built first.
        seconds: wall time of the whole search: building or refreshing the
            index, retrieval and ranking.
    """

    tier: str
    refreshed: int
    built: bool
    seconds: float


__all__ = ["CHUNKINGS", "FULL", "KEYWORD", "MODES", "STATIC", "TIERS", "Chunking", "Hit", "IndexReport", "Mode",
           "SearchInfo", "TextEmbedder", "Tier"]
