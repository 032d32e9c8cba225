"""Ranking: how retrievers' candidate lists become the final order.

A pipeline of named stages (candidates -> fusion -> definition and path boosts
-> file coherence -> path priors -> diversity), each a small function in
:mod:`codesearch.ranking.stages` with its knobs in the frozen :class:`Ranking`
and a switch to turn it off, so benchmarks can ablate one stage at a time. A
store feeds it through :mod:`codesearch.ranking.source` (:class:`Candidates`
and :class:`RankingFacts`); :mod:`codesearch.ranking.fusion` is the one
weighted reciprocal rank fusion, also used to fuse several repositories.
"""

from __future__ import annotations

from codesearch.ranking.config import ARTICLE, DEFAULT, DEFAULT_PRIORS, RANKINGS, STAGES, Ranking, resolve_ranking
from codesearch.ranking.facts import IndexFacts, path_classes, path_words
from codesearch.ranking.fusion import reciprocal_rank_fusion
from codesearch.ranking.pipeline import rank, rank_scores
from codesearch.ranking.query import QueryProfile, analyze_query
from codesearch.ranking.source import Candidates, RankingFacts, candidates_from_scores

__all__ = [
    "ARTICLE",
    "DEFAULT",
    "DEFAULT_PRIORS",
    "RANKINGS",
    "STAGES",
    "Candidates",
    "IndexFacts",
    "QueryProfile",
    "Ranking",
    "RankingFacts",
    "analyze_query",
    "candidates_from_scores",
    "path_classes",
    "path_words",
    "rank",
    "rank_scores",
    "reciprocal_rank_fusion",
    "resolve_ranking",
]
