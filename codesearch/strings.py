"""Many strings in one UTF-8 blob: stored as two plain arrays, opened memory-mapped, looked up by binary search."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import pairwise

import numpy as np

from codesearch.exceptions import IndexCorruptError


class Strings(Sequence[str]):
    """A list of strings kept as one UTF-8 blob and ``n + 1`` offsets into it (no object per string)."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        self.blob = blob
        self.offsets = offsets
        self._views: tuple[memoryview, memoryview] | None = None  # (blob, offsets) as memory views, made at first use
        self._order: tuple[np.ndarray, memoryview] | None = None  # the last order given to find, and its view

    @classmethod
    def of(cls, strings: Iterable[str]) -> Strings:
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        return cls(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets)

    def __reduce__(self) -> tuple[type[Strings], tuple[np.ndarray, np.ndarray]]:
        # The arrays alone: the memory views made for lookups are not picklable, and are made again at first use.
        return Strings, (self.blob, self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        blob, offsets = self._memoryviews()
        return _decode(bytes(blob[offsets[i]:offsets[i + 1]]))

    def _memoryviews(self) -> tuple[memoryview, memoryview]:
        """The blob and the offsets as memory views, made once without copying: indexed, they give plain bytes and
        ints, in half the time the arrays take (a query's terms are looked up, and its hits read, so)."""
        if self._views is None:
            self._views = np.ascontiguousarray(self.blob).data, np.ascontiguousarray(self.offsets).data
        return self._views

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def tolist(self) -> list[str]:
        """Every string at once (one decode of the blob)."""
        text = _decode(bytes(self.blob))
        if text.isascii() or len(text) == len(self.blob):
            bounds = self.offsets.tolist()
            return [text[a:b] for a, b in pairwise(bounds)]
        return [self[i] for i in range(len(self))]

    def find(self, key: str, order: np.ndarray | None = None) -> int | None:
        """The position of ``key``, by binary search: the strings must be in UTF-8 byte order, or ``order`` lists
        the positions in that order. ``None`` when absent."""
        target = key.encode("utf-8", "surrogatepass")
        blob, offsets = self._memoryviews()
        ranks = None
        if order is not None:
            if self._order is None or self._order[0] is not order:
                self._order = order, np.ascontiguousarray(order).data
            ranks = self._order[1]
        low, high = 0, len(offsets) - 1
        while low < high:
            middle = (low + high) // 2
            i = middle if ranks is None else ranks[middle]
            found = bytes(blob[offsets[i]:offsets[i + 1]])
            if found < target:
                low = middle + 1
            elif found > target:
                high = middle
            else:
                return int(i)
        return None

    def to_arrays(self, name: str) -> dict[str, np.ndarray]:
        return {name: np.asarray(self.blob, dtype=np.uint8), f"{name}_offsets": np.asarray(self.offsets)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], name: str) -> Strings:
        """The strings stored as ``name`` (the blob) and ``name_offsets``.

        Raises:
            KeyError: either array is missing.
            IndexCorruptError: the offsets do not run from 0 up to the blob's end.
        """
        blob, offsets = arrays[name], arrays[f"{name}_offsets"]
        if (blob.ndim != 1 or blob.dtype != np.uint8 or offsets.ndim != 1 or offsets.dtype.kind not in "iu"
                or len(offsets) < 1 or int(offsets[0]) != 0 or int(offsets[-1]) != blob.size
                or not ascending(offsets)):
            raise IndexCorruptError(f"the stored {name} do not fit their offsets; rebuild the index")
        return cls(blob, offsets)


def ascending(values: np.ndarray) -> bool:
    """Whether ``values`` never decrease (offsets into a blob, rows in file order)."""
    return len(values) < 2 or bool((values[1:] >= values[:-1]).all())


def _decode(data: bytes) -> str:
    """UTF-8 as the writer encoded it (lone surrogates kept); bytes it cannot have written are damage."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as err:
        raise IndexCorruptError(f"stored text is not the UTF-8 it was written as ({err}); rebuild the index") from None


__all__ = ["Strings", "ascending"]
