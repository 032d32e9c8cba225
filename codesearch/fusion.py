"""Reciprocal rank fusion: merge ranked lists from different retrievers.

Each list votes ``weight / (k + rank)`` for the ids in its top ``depth``
(Cormack, Clarke and Buettcher, SIGIR 2009). Only ranks are used, so scores on
different scales (BM25, cosine similarity) combine without calibration.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from itertools import islice
from typing import TypeVar

H = TypeVar("H", bound=Hashable)

RRF_K = 60
"""The smoothing constant of the original paper."""
RRF_DEPTH = 30
"""How many entries of each list vote by default."""


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[H]],
    k: float = RRF_K,
    depth: int | None = RRF_DEPTH,
    weights: Sequence[float] | None = None,
) -> list[tuple[H, float]]:
    """Fuse ranked lists of ids into one ranking.

    An id's score is ``sum(w / (k + rank))`` over the lists that hold it in
    their first ``depth`` places, with ``rank`` 1-based. Within one list only
    an id's first (best) place counts; later repeats are ignored and do not
    shift the ranks of the ids after them. A list whose weight is 0 takes no
    part, so its ids appear only if another list holds them. Each score is
    summed with :func:`math.fsum`, so it does not depend on the order of the
    lists and equal vote sets give exactly equal scores.

    Ties are broken by the id's first place in a rank-major walk of the
    lists: its best rank, smaller first, and among equal best ranks the earlier
    list (in ``rankings`` order) where it holds that rank. Ids are never
    compared, so they need only be hashable, and the order is deterministic.

    Args:
        rankings: each list best first (chunk positions, paths, any hashable).
        k: smoothing constant, ``>= 0``; larger flattens the rank curve.
        depth: how many places of each list vote; None for all of them.
        weights: one non-negative weight per list; all 1.0 when None.

    Returns:
        ``(id, score)`` pairs, best first.

    Raises:
        ValueError: ``k`` or a weight is negative or not finite, ``depth`` is
            below 1, or ``weights`` does not have one entry per list.
        TypeError: a ranking is a string (wrap it in a list).

    Example:
        >>> reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=0)
        [('b', 1.5), ('a', 1.0), ('c', 0.5)]
    """
    if not (math.isfinite(k) and k >= 0):
        raise ValueError(f"reciprocal_rank_fusion needs k >= 0 (60 is usual), got {k!r}")
    if depth is not None and depth < 1:
        raise ValueError(f"reciprocal_rank_fusion needs depth >= 1, or None for whole lists; got {depth!r}")
    if weights is None:
        weights = [1.0] * len(rankings)
    elif len(weights) != len(rankings):
        raise ValueError(
            f"reciprocal_rank_fusion got {len(weights)} weights for {len(rankings)} rankings; "
            "give one per ranking"
        )
    for w in weights:
        if not (math.isfinite(w) and w >= 0):
            raise ValueError(f"reciprocal_rank_fusion weights must be finite and >= 0, got {w!r}")

    votes: dict[H, list[float]] = {}
    first_place: dict[H, tuple[int, int]] = {}
    for list_index, (ranking, weight) in enumerate(zip(rankings, weights)):
        if isinstance(ranking, (str, bytes)):
            raise TypeError(f"ranking {list_index} is a string, not a list of ids; wrap it in a list")
        if weight == 0:
            continue
        seen: set[H] = set()
        for rank, item in enumerate(islice(ranking, depth), start=1):
            if item in seen:
                continue
            seen.add(item)
            votes.setdefault(item, []).append(weight / (k + rank))
            place = (rank, list_index)
            if item not in first_place or place < first_place[item]:
                first_place[item] = place
    fused = [(item, math.fsum(item_votes)) for item, item_votes in votes.items()]
    fused.sort(key=lambda pair: (-pair[1], first_place[pair[0]]))
    return fused


__all__ = ["RRF_DEPTH", "RRF_K", "reciprocal_rank_fusion"]
