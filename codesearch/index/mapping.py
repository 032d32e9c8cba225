"""Arrays of a generation memory-mapped, and a mapped array's file linked into the next generation.

A memory-mapped load (:func:`map_array`) opens an index in milliseconds and
holds only the pages its queries touch. The process remembers which file each
mapping is of (:data:`MAPPED`), so a commit that keeps an array as it was
links its file into the new generation (:func:`carried`, :func:`link`)
instead of writing it again.
"""

from __future__ import annotations

import io
import math
import os
import weakref
from pathlib import Path
from typing import Any, Literal

import numpy as np

from codesearch.index.integrity import ChecksumMismatch


def npy_header(dtype: np.dtype[Any], shape: tuple[int, ...], fortran_order: bool) -> bytes:
    """The bytes ``np.save`` writes before the data of an array of this dtype, shape and order."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": fortran_order, "shape": shape}
    buffer = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(buffer, header)
    except ValueError:  # a header too long for version 1.0: np.save writes 2.0
        buffer = io.BytesIO()
        np.lib.format.write_array_header_2_0(buffer, header)
    return buffer.getvalue()


def map_array(path: Path, meta: dict[str, Any], size: int) -> np.ndarray:
    """The array of a ``.npy`` file, memory-mapped (read when empty or 0-d, which cannot be mapped).

    Its header must be, byte for byte, the one ``np.save`` writes for the dtype and shape the manifest records,
    and the file exactly that header and the data: a damaged header is refused here, before anything parses it
    (the sha256 of the whole file is checked in the background).

    Raises:
        ChecksumMismatch: the header or the file's size is not what the manifest records.
        ValueError, KeyError, TypeError: the manifest's record of the array is malformed.
    """
    dtype, shape = np.dtype(meta["dtype"]), tuple(int(n) for n in meta["shape"])
    if dtype.hasobject:
        raise ValueError(f"dtype {dtype} needs pickle")
    c_order, f_order = npy_header(dtype, shape, False), npy_header(dtype, shape, True)
    with open(path, "rb") as handle:
        found = handle.read(max(len(c_order), len(f_order)))
    order: Literal["C", "F"]
    if found.startswith(c_order):
        header, order = c_order, "C"
    elif found.startswith(f_order):
        header, order = f_order, "F"
    else:
        raise ChecksumMismatch("its header differs from the dtype and shape the manifest records")
    if len(header) + dtype.itemsize * math.prod(shape) != size:
        raise ChecksumMismatch(f"{size} bytes where a {dtype.str}{list(shape)} array takes "
                                f"{len(header) + dtype.itemsize * math.prod(shape)}")
    if not shape or 0 in shape:
        return np.load(path, allow_pickle=False)
    return np.memmap(path, dtype=dtype, mode="r", offset=len(header), shape=shape, order=order)


MAPPED: dict[tuple[int, int, str, tuple[int, ...]], tuple[Path, dict[str, Any]]] = {}
"""Arrays this process has memory-mapped from a generation, by (address, bytes, dtype, shape): their file and its
size and sha256. A commit links such an array's file into the new generation instead of writing it again (a tier
upgrade or a refresh keeps most arrays as they are). An entry leaves when its mapping is collected."""


def array_key(array: np.ndarray) -> tuple[int, int, str, tuple[int, ...]]:
    return array.__array_interface__["data"][0], array.nbytes, array.dtype.str, tuple(array.shape)


def remember_mapping(array: np.ndarray, path: Path, meta: dict[str, Any]) -> None:
    key = array_key(array)
    MAPPED[key] = (path, dict(meta))
    weakref.finalize(array, MAPPED.pop, key, None)


def carried(array: np.ndarray) -> tuple[Path, dict[str, Any]] | None:
    """The file of a generation that holds exactly ``array`` (the whole of a mapping, or a view of all of it)."""
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or not MAPPED:
        return None
    return MAPPED.get(array_key(array))


def link(source: Path, target: Path) -> bool:
    """Hard-link a generation's file into another (its bytes never change); ``False`` where links fail (the
    file went with its generation, or the file system has none): the caller writes it instead."""
    try:
        os.link(source, target)
    except OSError:
        return False
    return True


__all__ = ["MAPPED", "array_key", "carried", "link", "map_array", "npy_header", "remember_mapping"]
