"""A fitted BM25 as one blob of bytes, for a store that keeps it in a row (the corpus's keywords table).

The arrays are :meth:`BM25.to_arrays`'s, the ones a single index keeps one
``.npy`` file each: a store holds the same fit whichever container it uses.
A row needs one blob, so :func:`pack` lays the arrays out one after another
behind a JSON header, and :func:`unpack` reads them back as views of the blob
(``np.savez``'s zip and header parsing took 2-4 ms a repository, most of a
stored fit's read).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np

from codesearch.keyword.bm25 import BM25

_ALIGN = 8


def pack(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Arrays as one buffer: an 8-byte header length, a JSON header (name, dtype, shape, offset of each), then each
    array's bytes at an 8-byte aligned offset. :func:`unpack` reads them back without a copy (``np.savez``'s zip
    and header parsing took 2-4 ms a repository, most of a stored fit's read)."""
    header, parts, offset = [], [], 0
    for name, array in arrays.items():
        raw = np.asarray(array, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
        header.append([name, raw.dtype.newbyteorder("<").str, list(raw.shape), offset])
        data = raw.astype(raw.dtype.newbyteorder("<"), copy=False).tobytes()
        parts.append(data + b"\0" * (-len(data) % _ALIGN))
        offset += len(parts[-1])
    head = json.dumps(header).encode("utf-8")
    head += b" " * (-(8 + len(head)) % _ALIGN)
    return len(head).to_bytes(8, "little") + head + b"".join(parts)


def unpack(blob: bytes) -> dict[str, np.ndarray]:
    """The arrays of a :func:`pack` blob, read-only views of it (no copy)."""
    size = int.from_bytes(blob[:8], "little")
    base = 8 + size
    out = {}
    for name, dtype, shape, offset in json.loads(blob[8:base]):
        kind = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        out[name] = np.frombuffer(blob, dtype=kind, count=count, offset=base + offset).reshape(shape)
    return out


def bm25_blob(bm25: BM25, ids: np.ndarray) -> bytes:
    """A fitted BM25 and the ids of its documents (in order) as one blob."""
    return pack({"chunk_ids": np.asarray(ids, dtype=np.int64), **bm25.to_arrays(copy=False)})


def bm25_of_blob(blob: bytes) -> tuple[np.ndarray, BM25]:
    """A :func:`bm25_blob` read back: the document ids in order, and the fitted BM25 (scores equal to the one
    stored; its arrays are read-only views of ``blob``).

    Raises:
        IndexCorruptError, ValueError, KeyError: the blob is damaged or of a later array format.
    """
    arrays = unpack(blob)
    ids = arrays.pop("chunk_ids")
    return ids, BM25.from_arrays(arrays)


__all__ = ["bm25_blob", "bm25_of_blob", "pack", "unpack"]
