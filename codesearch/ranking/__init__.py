"""Ranking: how retrievers' candidate lists become the final order.

A pipeline of named stages (candidates -> fusion -> definition and path boosts
-> file coherence -> path priors -> diversity), each a small function in
:mod:`codesearch.ranking.stages` with its knobs in the frozen :class:`Ranking`
and a switch to turn it off, so benchmarks can ablate one stage at a time.
"""

from __future__ import annotations

from codesearch.ranking.config import ARTICLE, DEFAULT, DEFAULT_PRIORS, RANKINGS, STAGES, Ranking, resolve_ranking
from codesearch.ranking.facts import IndexFacts, definition_names, path_classes, path_words
from codesearch.ranking.pipeline import rank
from codesearch.ranking.query import QueryProfile, analyze_query

__all__ = [
    "ARTICLE",
    "DEFAULT",
    "DEFAULT_PRIORS",
    "RANKINGS",
    "STAGES",
    "IndexFacts",
    "QueryProfile",
    "Ranking",
    "analyze_query",
    "definition_names",
    "path_classes",
    "path_words",
    "rank",
    "resolve_ranking",
]
