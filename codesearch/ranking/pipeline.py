"""The ranking pipeline: the stages of :mod:`codesearch.ranking.stages`, in order, as a :class:`Ranking` says.

It reads retrieval's output as :class:`~codesearch.ranking.candidates.Candidates`
and the facts about them (:class:`~codesearch.ranking.facts.RankingFacts`), so
any store that can give those is ranked by the same stages.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from codesearch.ranking import stages
from codesearch.ranking.candidates import Candidates, candidates_from_scores
from codesearch.ranking.config import Ranking
from codesearch.ranking.facts import ChunkFacts, RankingFacts
from codesearch.ranking.query import analyze_query


def rank(
    query: str,
    found: Candidates,
    facts: RankingFacts,
    ranking: Ranking,
    k: int,
    vectors: np.ndarray | Mapping[int, np.ndarray] | None = None,
) -> list[tuple[int, float]]:
    """Turn retrievers' candidates into the ``k`` best chunks: fusion, boosts, priors, diversity.

    Args:
        query: the query text (its profile picks the fusion weights and boosts).
        found: each retriever's candidates in scope, with their scores and ranges.
        facts: what the stages read about chunks and files, scoped as the search is
            (definitions found through the symbol table are in scope).
        ranking: the knobs and stage switches.
        k: how many chunks to return.
        vectors: the embedding list's vector of each candidate (a whole-index
            array or a mapping), for diversity to tell a file's other answers
            from repeats of one.

    Returns:
        ``(chunk, score)`` best first, at most ``k``.
    """
    profile = analyze_query(query)
    weights = stages.list_weights(profile, list(found.ranked), ranking)
    scores = stages.fuse(found.ranked, weights, ranking.rrf_k, ranking.fusion_depth, found.scores, ranking.score_share,
                         found.ranges or None)
    evidence = dict(scores)
    top = max(scores.values(), default=1.0 / (ranking.rrf_k + 1.0))
    if ranking.definitions:
        stages.boost_definitions(scores, profile, facts, ranking, top)
    if ranking.path_words:
        stages.boost_path_words(scores, profile, facts, ranking, top)
    if ranking.coherence:
        stages.boost_coherence(scores, facts, ranking, top)
    if ranking.priors:
        stages.apply_priors(scores, facts, ranking, profile)
    if ranking.diversity:
        final = stages.diversify(scores, facts, ranking, evidence, vectors, k)
    else:
        final = stages.ordered(scores)
    return final[:k]


def rank_scores(
    query: str,
    lists: Mapping[str, np.ndarray],
    facts: ChunkFacts,
    ranking: Ranking,
    k: int,
    mask: np.ndarray | None = None,
    vectors: np.ndarray | None = None,
    covered: Mapping[str, np.ndarray] | None = None,
) -> list[tuple[int, float]]:
    """:func:`rank` for an index whose retrievers scored every chunk (one score array per list).

    Args:
        lists: retriever name (``"bm25"``, ``"dense"``, ``"static"``) -> one score per chunk.
        mask: chunks in scope (applied before any cut), or None for all.
        covered: per list, the chunks it scored, where it did not score all.
        query, facts, ranking, k, vectors: as for :func:`rank`.
    """
    found = candidates_from_scores(lists, facts, ranking, k, mask, covered)
    return rank(query, found, facts.scoped(mask), ranking, k, vectors)


__all__ = ["rank", "rank_scores"]
