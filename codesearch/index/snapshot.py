"""What one index generation holds (:class:`IndexSnapshot`), checked to be storable without pickle."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from codesearch.index.integrity import Verification

FORMAT_VERSION = 2
"""Version of the on-disk layout; an index written by another version is not read (a searcher builds it again).
2: chunk records as columns of ``.npy`` arrays, file hashes and stats among them, instead of JSON."""

ARRAY_NAME = re.compile(r"[a-z0-9_]+")
"""What an array's name may be (it names its ``.npy`` file)."""
# Kinds of dtype np.save writes without pickle: bool, ints, floats, complex,
# timedelta, datetime, fixed-width str/bytes and structured/void.
PLAIN_DTYPE_KINDS = frozenset("biufcmMUSV")


@dataclass(frozen=True, slots=True, eq=False)
class IndexSnapshot:
    """Everything one index generation holds.

    Attributes:
        manifest: JSON-able facts about the index (model fingerprint, chunker
            parameters, ``files``: {path: sha256}, timestamps ...). The store
            adds ``"format_version"``; another value raises ``ValueError``.
        chunks: JSON-able metadata of each chunk. It is stored as JSON, so
            tuples come back as lists.
        arrays: named arrays (vectors, BM25 matrix parts, vocabulary). Names
            match ``[a-z0-9_]+``; object and other pickle-only dtypes raise
            ``ValueError``.

    Two snapshots are equal when manifest and chunks are equal and every array
    has the same name, dtype, shape and values (NaN equal to NaN).
    """

    manifest: dict[str, Any]
    chunks: list[dict[str, Any]]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    verification: Verification | None = field(default=None, compare=False, repr=False)
    """For a memory-mapped load, the background check of every array's sha256 (``None``: verified before return)."""

    def __post_init__(self) -> None:
        if not isinstance(self.manifest, dict):
            raise TypeError(f"manifest must be a dict, not {type(self.manifest).__name__}")
        if not isinstance(self.chunks, list):
            raise TypeError(f"chunks must be a list, not {type(self.chunks).__name__}")
        if not isinstance(self.arrays, dict):
            raise TypeError(f"arrays must be a dict, not {type(self.arrays).__name__}")
        version = self.manifest.get("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(
                f"manifest format_version is {version!r} but this store writes version "
                f"{FORMAT_VERSION}; leave the key out and the store sets it"
            )
        if "format_version" not in self.manifest:
            object.__setattr__(self, "manifest", {**self.manifest, "format_version": FORMAT_VERSION})
        for name, array in self.arrays.items():
            if not isinstance(name, str) or not ARRAY_NAME.fullmatch(name):
                raise ValueError(f"array name {name!r} must match [a-z0-9_]+")
            if not isinstance(array, np.ndarray):
                raise TypeError(f"array {name!r} must be a numpy.ndarray, not {type(array).__name__}")
            if array.dtype.hasobject or array.dtype.kind not in PLAIN_DTYPE_KINDS:
                raise ValueError(
                    f"array {name!r} has dtype {array.dtype}, which can only be stored with "
                    "pickle; convert it first (strings: .astype(str), numbers: a numeric dtype)"
                )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexSnapshot):
            return NotImplemented
        if self.manifest != other.manifest or self.chunks != other.chunks:
            return False
        if self.arrays.keys() != other.arrays.keys():
            return False
        for name, mine in self.arrays.items():
            theirs = other.arrays[name]
            if mine.dtype != theirs.dtype or mine.shape != theirs.shape:
                return False
            if not np.array_equal(mine, theirs, equal_nan=mine.dtype.kind in "fc"):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]


__all__ = ["ARRAY_NAME", "FORMAT_VERSION", "PLAIN_DTYPE_KINDS", "IndexSnapshot"]
