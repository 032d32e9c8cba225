"""The values the API hands out: hits, what a search and an index run did, and the names of tiers and modes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from codesearch.display import clipped

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
    repositories are searched together (:class:`codesearch.multi.MultiSearch`);
    ``repo`` names the repository of a corpus hit (:class:`codesearch.corpus.Corpus`).

    Attributes:
        defines: the chunk's symbol that answers to the name asked, as the
            chunk writes it (``Session.send`` for ``send``): set on every hit of
            :meth:`CodeSearch.definitions`, and on a hit of
            :meth:`CodeSearch.references` whose chunk defines the name.
        lines: the lines of the chunk where the name is used as a whole word
            (:meth:`CodeSearch.references`); empty otherwise.
    """

    path: str
    start_line: int
    end_line: int
    score: float
    kind: str
    text: str
    symbols: tuple[str, ...] = ()
    root: str | None = None
    defines: str | None = None
    lines: tuple[int, ...] = ()
    repo: str | None = None

    @classmethod
    def of(cls, path: str, start_line: Any, end_line: Any, score: Any, kind: str, text: str,
           symbols: Iterable[str] | None = (), repo: str | None = None) -> Hit:
        """The hit of a store's chunk, its values as a store holds them (numpy numbers, a list or ``None`` of
        symbols) made plain Python values: the one way every store builds its hits."""
        return cls(path, int(start_line), int(end_line), float(score), kind, text, tuple(symbols or ()), repo=repo)

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"

    def __str__(self) -> str:
        return f"{self.location}  ({self.score:.4f}, {self.kind})"

    def as_dict(self) -> dict[str, Any]:
        """The hit as JSON-able data, with its ``location``; ``root``, ``repo``, ``defines`` and ``lines`` only when set."""
        data = asdict(self)
        data["symbols"] = list(self.symbols)
        data["location"] = self.location
        for name in ("root", "repo", "defines"):
            if data[name] is None:
                data.pop(name)
        if self.lines:
            data["lines"] = list(self.lines)
        else:
            data.pop("lines")
        return data


@dataclass(frozen=True, slots=True)
class SymbolHits(Sequence[Hit]):
    """What :meth:`CodeSearch.definitions` or :meth:`CodeSearch.references` found for a name.

    It reads as the sequence of its hits (``len``, index, iterate), and says
    more about them than a list could.

    Attributes:
        name: the name asked for.
        hits: the chunks found, in the documented order of each method.
        capped: more were found than the ``k`` asked for; the first ``k`` are here.
        note: why nothing was found (no such symbol, and the closest names),
            or what to bear in mind; ``None`` when there is nothing to say.
        textual: the hits are textual matches of the name (references), not the symbol table's
            definitions: calls through dynamic dispatch, reflection or strings built at run time are missed.
    """

    name: str
    hits: tuple[Hit, ...]
    capped: bool = False
    note: str | None = None
    textual: bool = False

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, index: Any) -> Any:
        return self.hits[index]

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __bool__(self) -> bool:
        return bool(self.hits)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able data: ``name``, ``textual``, ``capped``, ``note`` (when set) and ``hits``."""
        data: dict[str, Any] = {"name": self.name, "textual": self.textual, "capped": self.capped}
        if self.note is not None:
            data["note"] = self.note
        data["hits"] = [hit.as_dict() for hit in self.hits]
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
        note: why the answer is empty (no indexed file in scope, every file
            of the kind asked for skipped and why, no word of the query in the
            index ...); ``None`` when there are hits.
        refreshed_in_memory: files the answer read as they are on disk while
            the stored index holds them otherwise: re-indexed in this process's
            memory only, because the index is read-only here or another process
            held its write lock (``codesearch index`` running). 0 when the
            stored index is what answered.
    """

    tier: str
    refreshed: int
    built: bool
    seconds: float
    note: str | None = None
    refreshed_in_memory: int = 0


def check_search(query: str, k: int, mode: str) -> None:
    """The rules a search's arguments keep, whichever facade takes them (a repository's, a corpus's).

    Raises:
        ValueError: an unknown mode, ``k`` below 1, or an empty query.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {clipped(str(mode))!r}; use one of {', '.join(MODES)}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if not query.strip():
        raise ValueError("the query is empty; give words, a question or an identifier")


__all__ = ["CHUNKINGS", "FULL", "KEYWORD", "MODES", "STATIC", "TIERS", "Chunking", "Hit", "IndexReport", "Mode",
           "SearchInfo", "SymbolHits", "TextEmbedder", "Tier", "check_search"]
