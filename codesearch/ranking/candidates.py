"""The candidate stage: each retriever's best chunks in scope, from any store, as the later stages read them.

A store gives its retrievers' scores in one of two shapes, and both go
through the same rules here: one score per chunk of an index
(:func:`candidates_from_scores`: a single index, a corpus repository's view),
or ``(chunk, score)`` pairs a store's own indexes returned
(:func:`candidates_from_pairs`: a corpus across repositories). Either way the
keyword lists first take the priors of ``ranking.keyword_priors``
(:func:`keyword_multipliers`), a keyword list keeps only chunks that share a
term with the query (score above 0), each list keeps its ``max(k,
ranking.depth)`` best chunks in scope, equal scores in chunk order, and each
list's score range is that of its candidates over the whole store, scope or
not (:class:`Candidates`).

Chunk ids are ints that order chunks the way their store does; equal scores
are ordered by them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from codesearch.ranking.config import Ranking
from codesearch.ranking.facts import RankingFacts
from codesearch.topk import top_k

KEYWORD_LISTS = frozenset({"bm25"})
"""Lists whose zero scores mean "shares no term with the query" (left out of the candidates)."""


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


def keyword_multipliers(ranking: Ranking) -> dict[str, float]:
    """The path-class multipliers the keyword lists take before their cut (``ranking.keyword_priors``); empty when
    priors are off.

    So a chunk the priors bury anyway (a README whose prose matches a
    plain-English query) does not take a keyword place from code, nor become
    the top that fusion scales the list's scores by.
    """
    if not ranking.priors:
        return {}
    return {name: m for name, m in ranking.prior_multipliers.items() if name in ranking.keyword_priors}


def weigh_keyword_lists(lists: Mapping[str, np.ndarray], facts: RankingFacts, ranking: Ranking) -> dict[str, np.ndarray]:
    """The keyword lists times the priors of :func:`keyword_multipliers`; the others as given."""
    multipliers = keyword_multipliers(ranking)
    if not multipliers or KEYWORD_LISTS.isdisjoint(lists):
        return dict(lists)
    priors = facts.chunk_priors(multipliers)
    return {name: scores * priors if name in KEYWORD_LISTS else scores for name, scores in lists.items()}


def candidates(lists: Mapping[str, np.ndarray], n: int, mask: np.ndarray | None = None,
               covered: Mapping[str, np.ndarray] | None = None) -> dict[str, list[int]]:
    """The ``n`` best chunks of each retriever's scores, in scope, best first.

    Args:
        lists: retriever name (``"bm25"``, ``"dense"``, ``"static"``) -> one score per chunk.
        n: how many per list.
        mask: chunks in scope, or None for all.
        covered: per list, the chunks it scored (the others' scores mean nothing), where not all.
    """
    found = {}
    for name, scores in lists.items():
        within = mask
        if covered is not None and name in covered:
            within = covered[name] if mask is None else mask & covered[name]
        found[name] = top_k(scores, n, mask=within, above=0.0 if name in KEYWORD_LISTS else None).tolist()
    return found


def score_ranges(ranked: Mapping[str, Sequence[int]], lists: Mapping[str, np.ndarray]) -> dict[str, tuple[float, float]]:
    """Each list's ``(lowest, highest)`` score over its candidates ``ranked`` (best first)."""
    ranges = {}
    for name, chunks in ranked.items():
        if len(chunks):
            ranges[name] = (float(lists[name][chunks[-1]]), float(lists[name][chunks[0]]))
    return ranges


def candidates_from_scores(
    lists: Mapping[str, np.ndarray],
    facts: RankingFacts,
    ranking: Ranking,
    k: int,
    mask: np.ndarray | None = None,
    covered: Mapping[str, np.ndarray] | None = None,
) -> Candidates:
    """The candidates of an index whose retrievers scored every chunk.

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
        lists = weigh_keyword_lists(lists, facts, ranking)
    depth = max(k, ranking.depth)
    ranked = candidates(lists, depth, mask, covered)
    ranges: dict[str, tuple[float, float]] = {}
    if ranking.score_share:
        whole = ranked if mask is None else candidates(lists, depth, None, covered)
        ranges = score_ranges(whole, lists)
    scores = {name: np.asarray(lists[name][ids], dtype=np.float64) for name, ids in ranked.items()}
    return Candidates(ranked, scores, ranges)


Pairs = Sequence[tuple[int, float]]
"""A retriever's ``(chunk, score)`` pairs, in any order."""


def _cut_pairs(pairs: Pairs, keyword: bool, priors: Mapping[int, float] | np.ndarray | None, n: int,
               keep: Callable[[int], bool] | None) -> list[tuple[int, float]]:
    """One list's ``n`` best pairs: weighed by ``priors`` (a keyword list), without the keyword list's zeros and the
    chunks ``keep`` refuses, best first, equal scores in chunk order."""
    out = []
    for chunk, raw in pairs:
        score = raw * float(priors[chunk]) if priors is not None else raw
        if (not keyword or score > 0) and (keep is None or keep(chunk)):
            out.append((chunk, score))
    out.sort(key=lambda pair: (-pair[1], pair[0]))
    return out[:n]


def candidates_from_pairs(
    lists: Mapping[str, Pairs],
    facts: RankingFacts,
    ranking: Ranking,
    k: int,
    keep: Callable[[int], bool] | None = None,
    whole: Mapping[str, Pairs] | None = None,
) -> Candidates:
    """The candidates of a store whose retrievers returned ``(chunk, score)`` pairs (each its best, within what the
    store could filter itself).

    Args:
        lists: retriever name -> its pairs in scope.
        facts: the facts of every chunk in the pairs (for the keyword lists' priors).
        ranking: the knobs.
        k: how many hits the search asks for.
        keep: the chunks in scope, where the store could not filter the lists itself (a scope's globs); None: all.
        whole: per list, its pairs over the whole store, scope or not, for its score range; a list missing here
            takes the range of its own candidates.
    """
    depth = max(k, ranking.depth)
    multipliers = keyword_multipliers(ranking)
    priors = facts.chunk_priors(multipliers) if multipliers and not KEYWORD_LISTS.isdisjoint(lists) else None

    def cut(name: str, pairs: Pairs, within: Callable[[int], bool] | None) -> list[tuple[int, float]]:
        keyword = name in KEYWORD_LISTS
        return _cut_pairs(pairs, keyword, priors if keyword else None, depth, within)

    found = {name: cut(name, pairs, keep) for name, pairs in lists.items()}
    ranges: dict[str, tuple[float, float]] = {}
    if ranking.score_share:
        for name, cut_list in found.items():
            source = cut(name, whole[name], None) if whole is not None and name in whole else cut_list
            if source:
                ranges[name] = (float(source[-1][1]), float(source[0][1]))
    ranked = {name: [chunk for chunk, _ in pairs] for name, pairs in found.items()}
    scores = {name: np.array([s for _, s in pairs], dtype=np.float64) for name, pairs in found.items()}
    return Candidates(ranked, scores, ranges)


__all__ = ["KEYWORD_LISTS", "Candidates", "Pairs", "candidates", "candidates_from_pairs", "candidates_from_scores",
           "keyword_multipliers", "score_ranges", "weigh_keyword_lists"]
