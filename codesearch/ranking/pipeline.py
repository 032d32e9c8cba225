"""The ranking pipeline: the stages of :mod:`codesearch.ranking.stages`, in order, as a :class:`Ranking` says."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from codesearch.ranking import stages
from codesearch.ranking.config import Ranking
from codesearch.ranking.facts import IndexFacts
from codesearch.ranking.query import analyze_query


def rank(
    query: str,
    lists: Mapping[str, np.ndarray],
    facts: IndexFacts,
    ranking: Ranking,
    k: int,
    mask: np.ndarray | None = None,
    vectors: np.ndarray | None = None,
    covered: Mapping[str, np.ndarray] | None = None,
) -> list[tuple[int, float]]:
    """Turn retrievers' scores into the ``k`` best chunks.

    Args:
        query: the query text (its profile picks the fusion weights and boosts).
        lists: retriever name (``"bm25"``, ``"dense"``, ``"static"``) -> one
            score per chunk; whichever are present are fused.
        facts: the index's :class:`IndexFacts`.
        ranking: the knobs and stage switches.
        k: how many chunks to return.
        mask: chunks in scope (applied before any cut), or None for all.
        vectors: the chunk vectors of the embedding list, one row per chunk,
            for diversity to tell a file's other answers from repeats of one.
        covered: per list, the chunks it scored, where it did not score all
            (the transformer leaves test files out); the rest are not its candidates.

    Returns:
        ``(chunk, score)`` best first, at most ``k``.
    """
    profile = analyze_query(query)
    if ranking.priors:
        lists = stages.weigh_keyword_lists(lists, facts, ranking)
    depth = max(k, ranking.depth)
    ranked = stages.candidates(lists, depth, mask, covered)
    weights = stages.list_weights(profile, list(ranked), ranking)
    ranges = None
    if ranking.score_share:
        # Scaled over the whole index's candidates: a scope filters the list without rescaling it.
        whole = ranked if mask is None else stages.candidates(lists, depth, None, covered)
        ranges = stages.score_ranges(whole, lists)
    scores = stages.fuse(ranked, weights, ranking.rrf_k, ranking.fusion_depth, lists, ranking.score_share, ranges)
    evidence = dict(scores)
    top = max(scores.values(), default=1.0 / (ranking.rrf_k + 1.0))
    if ranking.definitions:
        stages.boost_definitions(scores, profile, facts, ranking, top, mask)
    if ranking.path_words:
        stages.boost_path_words(scores, profile, facts, ranking, top)
    if ranking.coherence:
        stages.boost_coherence(scores, facts, ranking, top)
    if ranking.priors:
        stages.apply_priors(scores, facts, ranking)
    if ranking.diversity:
        held = ranked.get("dense", [])[: ranking.diversity_hold_top]
        final = stages.diversify(scores, facts, ranking, evidence, vectors, k, held)
    else:
        final = stages.ordered(scores)
    return final[:k]


__all__ = ["rank"]
