"""The best positions of a score array: the cut every retriever's candidate list goes through."""

from __future__ import annotations

import numpy as np


def top_k(
    scores: np.ndarray,
    k: int,
    mask: np.ndarray | None = None,
    above: float | None = None,
) -> np.ndarray:
    """Positions of the ``k`` highest scores, best first.

    Args:
        scores: 1-d array of scores, without NaN.
        k: how many to return at most.
        mask: optional boolean array like ``scores``; only True positions
            compete (apply a :class:`codesearch.scope.Scope` mask here, before
            the cut, so a narrow scope still gets ``k`` results).
        above: optional bound; only scores strictly above it compete (``0.0``
            drops documents that share no term with a BM25 query).

    Returns:
        int64 positions into ``scores``, ordered by score descending; equal
        scores are ordered by position, so the result is deterministic.

    Raises:
        ValueError: ``k`` is negative, ``scores`` holds NaN, or ``mask`` does
            not match ``scores``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1:
        raise ValueError(f"top_k takes a 1-d score array, got shape {scores.shape}")
    if k < 0:
        raise ValueError(f"top_k needs k >= 0, got {k}")
    if mask is None:
        candidates = np.arange(scores.size, dtype=np.int64)
    else:
        mask = np.asarray(mask)
        if mask.shape != scores.shape or mask.dtype != np.bool_:
            raise ValueError(
                f"top_k mask must be a boolean array of shape {scores.shape}, got {mask.dtype} {mask.shape}"
            )
        candidates = np.flatnonzero(mask).astype(np.int64)
    values = scores[candidates]
    if np.isnan(values).any():
        raise ValueError("top_k scores hold NaN; fix the scorer that produced them")
    if above is not None:
        keep = values > above
        candidates, values = candidates[keep], values[keep]
    if k == 0:
        return np.empty(0, dtype=np.int64)
    if k < candidates.size:
        # Everything tied with the k-th best competes for the last places, so the
        # position tie-break below sees all of them.
        kth = np.partition(values, values.size - k)[values.size - k]
        keep = values >= kth
        candidates, values = candidates[keep], values[keep]
    order = np.lexsort((candidates, -values))[:k]
    result: np.ndarray = candidates[order]
    return result


__all__ = ["top_k"]
