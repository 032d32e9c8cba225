"""The seam between a store and the ranking: candidate lists in, and the facts the stages read about them.

The stages after retrieval (:mod:`codesearch.ranking.stages`) never see a
store. They read one :class:`Candidates` (each retriever's best chunks in
scope, their scores, and each list's score range) and an object with the
:class:`RankingFacts` protocol (which file a chunk is in, the file's stem and
path-class priors, the symbol table, path words). A single index in memory
gives them from whole-index arrays (:func:`candidates_from_scores` and
:class:`~codesearch.ranking.facts.IndexFacts`); a distributed corpus can give
them from its own vector and text indexes, and the same stages rank both.

Chunk ids are ints that order chunks the way their store does; equal scores
are ordered by them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from codesearch.ranking import stages
from codesearch.ranking.config import Ranking


class RankingFacts(Protocol):
    """What the ranking stages read about chunks and files, whole-index where the stage needs it."""

    @property
    def file_of(self) -> np.ndarray | Mapping[int, int]:
        """Chunk -> its file's number."""
        ...

    @property
    def stems(self) -> Sequence[str] | Mapping[int, str]:
        """File number -> its lowercased stem."""
        ...

    @property
    def files(self) -> Sequence[str]:
        """The files (only their count is read: path words weigh by file frequency)."""
        ...

    def files_matching(self, word: str) -> Collection[int]:
        """Files whose stem or parent folder holds a form of ``word``."""
        ...

    def files_named(self, name: str) -> Sequence[int]:
        """Files whose whole stem is ``name``, squashed."""
        ...

    def defining(self, names: Sequence[str]) -> dict[int, str]:
        """Chunks in scope that define any of ``names`` (case-insensitive), with the name as written there."""
        ...

    def chunk_priors(self, multipliers: Mapping[str, float]) -> np.ndarray | Mapping[int, float]:
        """Per chunk, the product of the multipliers of its file's path classes."""
        ...


@dataclass(frozen=True)
class Candidates:
    """Each retriever's candidates for one query.

    Attributes:
        ranked: list name (``bm25``, ``dense``, ``static``) -> chunk ids in
            scope, best first.
        scores: list name -> their scores, aligned with ``ranked`` (float64).
        ranges: list name -> ``(lowest, highest)`` score over the list's
            candidates of the whole index, scope or not, so that a scope
            filters a list without rescaling it; empty when fusion reads ranks only.
    """

    ranked: dict[str, list[int]]
    scores: dict[str, np.ndarray]
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)


def candidates_from_scores(
    lists: Mapping[str, np.ndarray],
    facts: RankingFacts,
    ranking: Ranking,
    k: int,
    mask: np.ndarray | None = None,
    covered: Mapping[str, np.ndarray] | None = None,
) -> Candidates:
    """The candidates of an index whose retrievers scored every chunk.

    The keyword lists take the priors of ``ranking.keyword_priors`` first
    (:func:`~codesearch.ranking.stages.weigh_keyword_lists`); each list then
    gives its ``max(k, ranking.depth)`` best chunks in scope.

    Args:
        lists: retriever name -> one score per chunk.
        facts: the index's facts (for the keyword lists' priors).
        ranking: the knobs.
        k: how many hits the search asks for.
        mask: chunks in scope, or None for all.
        covered: per list, the chunks it scored, where it did not score all
            (the transformer leaves test files out); the rest are not its candidates.
    """
    if ranking.priors:
        lists = stages.weigh_keyword_lists(lists, facts, ranking)
    depth = max(k, ranking.depth)
    ranked = stages.candidates(lists, depth, mask, covered)
    ranges: dict[str, tuple[float, float]] = {}
    if ranking.score_share:
        whole = ranked if mask is None else stages.candidates(lists, depth, None, covered)
        ranges = stages.score_ranges(whole, lists)
    scores = {name: np.asarray(lists[name][ids], dtype=np.float64) for name, ids in ranked.items()}
    return Candidates(ranked, scores, ranges)


__all__ = ["Candidates", "RankingFacts", "candidates_from_scores"]
