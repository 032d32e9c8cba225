"""Search several repositories at once: one :class:`CodeSearch` per root, their rankings fused."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from codesearch.ranking.fusion import RRF_K, reciprocal_rank_fusion
from codesearch.search import CodeSearch
from codesearch.types import Hit, IndexReport, SearchInfo, check_search

ROOT_DEPTH = 3
"""Each root gives ``ROOT_DEPTH * k`` hits to the fusion."""


class MultiSearch:
    """Search several roots together; every hit says which root it comes from.

    Each root keeps its own index (and its own refresh, tiers and model guard);
    its ranked hits are fused by reciprocal rank fusion, since the roots'
    scores are relative to their own candidates and do not compare directly.

    Args:
        roots: the repository folders (at least one; duplicates are dropped).
        **options: passed to every :class:`CodeSearch` (``model``, ``int8``,
            ``ranking`` ...); ``index_dir`` is not accepted, since each root
            has its own.

    Raises:
        ValueError: no root, or ``index_dir`` given.
        RootNotFoundError: a root is missing or not a folder.
    """

    def __init__(self, roots: Sequence[str | os.PathLike[str]], **options: Any) -> None:
        if not roots:
            raise ValueError("MultiSearch needs at least one root")
        if "index_dir" in options:
            raise ValueError("MultiSearch keeps one index per root; index_dir cannot be shared")
        unique = list(dict.fromkeys(Path(r).expanduser().absolute() for r in roots))
        self.searchers = [CodeSearch(root, **options) for root in unique]
        self.last_search: list[SearchInfo | None] = []

    @classmethod
    def of(cls, searchers: Sequence[CodeSearch]) -> MultiSearch:
        """Searchers already open, searched together (a server keeps one searcher per root for every face).

        Raises:
            ValueError: no searcher.
        """
        if not searchers:
            raise ValueError("MultiSearch needs at least one root")
        multi = cls.__new__(cls)
        multi.searchers = list(searchers)
        multi.last_search = []
        return multi

    @property
    def roots(self) -> list[Path]:
        return [s.root for s in self.searchers]

    def search(self, query: str, k: int = 10, **options: Any) -> list[Hit]:
        """The ``k`` best hits over every root, each with its ``root`` set.

        Takes the options of :meth:`CodeSearch.search`.
        """
        check_search(query, k, options.get("mode", "hybrid"))
        per_root: list[list[Hit]] = []
        for searcher in self.searchers:
            hits = searcher.search(query, k=k * ROOT_DEPTH if len(self.searchers) > 1 else k, **options)
            per_root.append([replace(h, root=str(searcher.root)) for h in hits])
        self.last_search = [s.last_search for s in self.searchers]
        if len(per_root) == 1:
            return per_root[0][:k]
        by_id = {(h.root, h.location): h for hits in per_root for h in hits}
        fused = reciprocal_rank_fusion([[(h.root, h.location) for h in hits] for hits in per_root], k=RRF_K,
                                       depth=None)
        return [replace(by_id[key], score=score) for key, score in fused[:k]]

    def index(self, **options: Any) -> list[IndexReport]:
        """Index every root (see :meth:`CodeSearch.index`); one report per root."""
        return [s.index(**options) for s in self.searchers]


__all__ = ["MultiSearch"]
