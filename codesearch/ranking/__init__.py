"""Ranking: how retrievers' candidate lists become the final order, for either store.

A pipeline of named stages (candidates -> fusion -> definition and path boosts
-> file coherence -> path priors -> diversity), each a small function with its
knobs in the frozen :class:`Ranking` and a switch to turn it off, so
benchmarks can ablate one stage at a time. A store feeds it its retrievers'
scores (:mod:`codesearch.ranking.candidates`: whole-index score arrays, or
``(chunk, score)`` pairs) and the facts about its files and chunks
(:mod:`codesearch.ranking.facts`: :class:`FileFacts` and :class:`ChunkFacts`);
the later stages are in :mod:`codesearch.ranking.stages`;
:mod:`codesearch.ranking.fusion` is the one weighted reciprocal rank fusion,
also used to fuse several repositories.
"""

from __future__ import annotations

from codesearch.ranking.candidates import Candidates, candidates_from_pairs, candidates_from_scores
from codesearch.ranking.config import ARTICLE, DEFAULT, DEFAULT_PRIORS, RANKINGS, STAGES, Ranking, resolve_ranking
from codesearch.ranking.facts import ChunkFacts, FileFacts, RankingFacts
from codesearch.ranking.fusion import reciprocal_rank_fusion
from codesearch.ranking.paths import path_classes, path_words
from codesearch.ranking.pipeline import rank, rank_scores
from codesearch.ranking.query import QueryProfile, analyze_query

__all__ = [
    "ARTICLE",
    "DEFAULT",
    "DEFAULT_PRIORS",
    "RANKINGS",
    "STAGES",
    "Candidates",
    "ChunkFacts",
    "FileFacts",
    "QueryProfile",
    "Ranking",
    "RankingFacts",
    "analyze_query",
    "candidates_from_pairs",
    "candidates_from_scores",
    "path_classes",
    "path_words",
    "rank",
    "rank_scores",
    "reciprocal_rank_fusion",
    "resolve_ranking",
]
