"""What both retrievers share: one search over any searcher, and a hit's metadata."""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from codesearch.types import Hit

_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_GUARD = threading.Lock()


@dataclass(frozen=True)
class SearchOptions:
    """The scope a retriever passes through to the searcher's ``search`` (as :meth:`CodeSearch.search` takes it).

    ``repos`` names repositories of a :class:`~codesearch.corpus.Corpus` (ignored by the others).
    """

    k: int = 10
    mode: str = "hybrid"
    scope: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    kinds: tuple[str, ...] | None = None
    repos: tuple[str, ...] | None = None

    @classmethod
    def of(cls, k: int = 10, mode: str = "hybrid", scope: str | None = None, include: Iterable[str] = (),
           exclude: Iterable[str] = (), kinds: Iterable[str] | None = None,
           repos: Iterable[str] | None = None) -> SearchOptions:
        return cls(k, mode, scope, tuple(include), tuple(exclude), None if kinds is None else tuple(kinds),
                   None if repos is None else tuple(repos))


def _lock(searcher: Any) -> threading.Lock:
    """One lock per searcher: its searches take turns, whichever retrievers (and threads) share it."""
    with _GUARD:
        lock = _LOCKS.get(searcher)
        if lock is None:
            lock = _LOCKS[searcher] = threading.Lock()
        return lock


def search(searcher: Any, query: str, options: SearchOptions) -> list[Hit]:
    """``searcher.search(query, ...)`` with ``options``, for a ``CodeSearch``, ``MultiSearch`` or ``Corpus``.

    Raises:
        TypeError: ``searcher`` has no ``search`` method.
        ValueError: what the searcher raises for bad options (an empty query, ``k`` below 1, an unknown mode).
    """
    if not callable(getattr(searcher, "search", None)):
        raise TypeError(f"a retriever needs a CodeSearch, MultiSearch or Corpus, got {type(searcher).__name__}")
    arguments: dict[str, Any] = {"k": options.k, "mode": options.mode, "scope": options.scope,
                                 "include": list(options.include), "exclude": list(options.exclude),
                                 "kinds": set(options.kinds) if options.kinds else None}
    if "repos" in inspect.signature(searcher.search).parameters:  # a Corpus (its module needs the corpus extra)
        arguments["repos"] = list(options.repos) if options.repos else None
    with _lock(searcher):
        return list(searcher.search(query, **arguments))


def repository(searcher: Any, hit: Hit) -> str | None:
    """The repository a hit comes from: its ``repo`` (a corpus), its ``root`` (several roots), else the searcher's root."""
    if hit.repo is not None:
        return hit.repo
    if hit.root is not None:
        return hit.root
    root = getattr(searcher, "root", None)
    return str(root) if root is not None else None


def metadata(searcher: Any, hit: Hit) -> dict[str, Any]:
    """A hit's facts as a document's metadata: path, lines, location, score, kind, symbols and repository."""
    return {"path": hit.path, "start_line": hit.start_line, "end_line": hit.end_line, "location": hit.location,
            "score": hit.score, "kind": hit.kind, "symbols": list(hit.symbols), "repository": repository(searcher, hit)}


def document_id(searcher: Any, hit: Hit) -> str:
    """A stable id: the location, after the repository when the searcher has several."""
    where = hit.repo or hit.root
    return f"{where}:{hit.location}" if where else hit.location


__all__ = ["SearchOptions", "document_id", "metadata", "repository", "search"]
