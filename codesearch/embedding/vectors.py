"""Token vectors into one vector per text, and rows scaled to unit length."""

from __future__ import annotations

import numpy as np


def l2_normalize(rows: np.ndarray) -> np.ndarray:
    """Scale each row of a float array to unit L2 norm, in place (an all-zero row stays zero); returns ``rows``."""
    rows /= np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return rows


def pool(hidden: np.ndarray, pooling: str) -> np.ndarray:
    """Pool unpadded token vectors ``(batch, length, dim)`` into ``(batch, dim)`` float32: ``mean`` or ``cls``."""
    if pooling == "cls":
        return np.ascontiguousarray(hidden[:, 0, :], dtype=np.float32)
    return hidden.mean(axis=1, dtype=np.float32)


__all__ = ["l2_normalize", "pool"]
