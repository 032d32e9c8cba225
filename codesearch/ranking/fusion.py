"""Weighted reciprocal rank fusion, with an optional share of each retriever's own score: one fusion for all.

Each list votes ``weight / (k + rank)`` for the ids in its top ``depth``
(Cormack, Clarke and Buettcher, SIGIR 2009). Only ranks are used, so scores on
different scales (BM25, cosine similarity) combine without calibration. With
``score_share``, that share of each vote is the retriever's own score instead,
min-max scaled over a range and topped at the first place's rank score, so two
neighbours far apart in score are told apart. The ranking pipeline fuses its
retrievers with it (:func:`codesearch.ranking.stages.fuse`), and
:class:`codesearch.multi.MultiSearch` fuses the rankings of several
repositories (:func:`reciprocal_rank_fusion`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from itertools import islice
from typing import TypeVar

import numpy as np

H = TypeVar("H", bound=Hashable)

RRF_K = 60
"""The smoothing constant of the original paper."""
RRF_DEPTH = 30
"""How many entries of each list vote by default."""


def weighted_votes(
    rankings: Sequence[Sequence[H]],
    weights: Sequence[float] | None = None,
    k: float = RRF_K,
    depth: int | None = RRF_DEPTH,
    scores: Sequence[Sequence[float] | np.ndarray | None] | None = None,
    score_share: float = 0.0,
    ranges: Sequence[tuple[float, float] | None] | None = None,
) -> tuple[dict[H, float], dict[H, tuple[int, int]]]:
    """Each id's fused score, and its first place ``(best rank, list)`` for ordering ties.

    An id's score is the :func:`math.fsum` of its votes, so it does not depend
    on the order of the lists. Within one list only an id's first (best) place
    votes; a list whose weight is 0 takes no part.

    Args:
        rankings: each list best first.
        weights: one non-negative weight per list; all 1.0 when None.
        k: smoothing constant, ``>= 0``: place ``r`` votes ``1 / (k + r)``.
        depth: how many places of each list vote; None for all.
        scores: per list, the retriever's scores aligned with its ranking (or
            None for a list voting by rank alone); read when ``score_share > 0``.
        score_share: the share of each vote that is the list's own score,
            min-max scaled over ``ranges`` (default: the voting places' own
            range) and topped at ``1 / (k + 1)``.
        ranges: per list, the ``(lowest, highest)`` score to scale by.

    Raises:
        ValueError: ``k`` or a weight is negative or not finite, ``depth`` is
            below 1, ``score_share`` is outside [0, 1], or ``weights`` does not
            have one entry per list.
        TypeError: a ranking is a string (wrap it in a list).
    """
    if not (math.isfinite(k) and k >= 0):
        raise ValueError(f"reciprocal rank fusion needs k >= 0 (60 is usual), got {k!r}")
    if depth is not None and depth < 1:
        raise ValueError(f"reciprocal rank fusion needs depth >= 1, or None for whole lists; got {depth!r}")
    if not 0.0 <= score_share <= 1.0:
        raise ValueError(f"score_share must be between 0 and 1, got {score_share!r}")
    if weights is None:
        weights = [1.0] * len(rankings)
    elif len(weights) != len(rankings):
        raise ValueError(f"reciprocal rank fusion got {len(weights)} weights for {len(rankings)} rankings; "
                         "give one per ranking")
    for w in weights:
        if not (math.isfinite(w) and w >= 0):
            raise ValueError(f"reciprocal rank fusion weights must be finite and >= 0, got {w!r}")
    fused: dict[H, float] = {}  # an id's vote, while it has one
    votes: dict[H, list[float]] = {}  # the votes of an id that has several
    first_place: dict[H, tuple[int, int]] = {}
    for index, (ranking, weight) in enumerate(zip(rankings, weights)):
        if isinstance(ranking, (str, bytes)):
            raise TypeError(f"ranking {index} is a string, not a list of ids; wrap it in a list")
        if weight == 0:
            continue
        voting = list(islice(ranking, depth))
        # Every place's vote at once, each operation as one float would take it (numpy rounds each alike).
        rank_votes = 1.0 / (k + np.arange(1, len(voting) + 1, dtype=np.float64))
        values = scores[index] if scores is not None and score_share > 0 else None
        if values is not None and voting:
            own = np.asarray(values[: len(voting)], dtype=np.float64)
            given = ranges[index] if ranges is not None else None
            low, high = given if given is not None else (own.min(), own.max())
            low, span = float(low), float(high - low) or 1.0
            rank_votes = (1.0 - score_share) * rank_votes + score_share * (own - low) / span / (k + 1)
        seen: set[H] = set()
        for rank, (item, vote) in enumerate(zip(voting, (weight * rank_votes).tolist()), start=1):
            if item in seen:
                continue
            seen.add(item)
            if item not in fused:
                fused[item] = vote
                first_place[item] = (rank, index)
            else:
                votes.setdefault(item, [fused[item]]).append(vote)
                first_place[item] = min(first_place[item], (rank, index))
    for item, item_votes in votes.items():
        fused[item] = math.fsum(item_votes)
    return fused, first_place


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[H]],
    k: float = RRF_K,
    depth: int | None = RRF_DEPTH,
    weights: Sequence[float] | None = None,
) -> list[tuple[H, float]]:
    """Fuse ranked lists of ids into one ranking (see :func:`weighted_votes` for the scores).

    Ties are broken by the id's first place in a rank-major walk of the
    lists: its best rank, smaller first, and among equal best ranks the earlier
    list (in ``rankings`` order) where it holds that rank. Ids are never
    compared, so they need only be hashable, and the order is deterministic.

    Returns:
        ``(id, score)`` pairs, best first.

    Example:
        >>> reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=0)
        [('b', 1.5), ('a', 1.0), ('c', 0.5)]
    """
    fused, first_place = weighted_votes(rankings, weights, k, depth)
    return sorted(fused.items(), key=lambda pair: (-pair[1], first_place[pair[0]]))


__all__ = ["RRF_DEPTH", "RRF_K", "reciprocal_rank_fusion", "weighted_votes"]
