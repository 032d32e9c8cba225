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

    @classmethod
    def of(cls, strings: Iterable[str]) -> Strings:
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        return cls(np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> str:  # type: ignore[override]
        return bytes(self.blob[self.offsets[i]:self.offsets[i + 1]]).decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        return iter(self.tolist())

    def tolist(self) -> list[str]:
        """Every string at once (one decode of the blob)."""
        text = bytes(self.blob).decode("utf-8", "surrogatepass")
        if text.isascii() or len(text) == len(self.blob):
            bounds = self.offsets.tolist()
            return [text[a:b] for a, b in pairwise(bounds)]
        return [self[i] for i in range(len(self))]

    def find(self, key: str, order: np.ndarray | None = None) -> int | None:
        """The position of ``key``, by binary search: the strings must be in UTF-8 byte order, or ``order`` lists
        the positions in that order. ``None`` when absent."""
        target = key.encode("utf-8", "surrogatepass")
        blob, offsets = self.blob, self.offsets
        low, high = 0, len(self)
        while low < high:
            middle = (low + high) // 2
            i = int(order[middle]) if order is not None else middle
            found = bytes(blob[offsets[i]:offsets[i + 1]])
            if found < target:
                low = middle + 1
            elif found > target:
                high = middle
            else:
                return i
        return None

    def to_arrays(self, name: str) -> dict[str, np.ndarray]:
        return {name: np.asarray(self.blob, dtype=np.uint8), f"{name}_offsets": np.asarray(self.offsets)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], name: str) -> Strings:
        blob, offsets = arrays[name], arrays[f"{name}_offsets"]
        if blob.ndim != 1 or offsets.ndim != 1 or len(offsets) < 1 or int(offsets[-1]) != blob.size:
            raise IndexCorruptError(f"the stored {name} do not fit their offsets; rebuild the index")
        return cls(blob, offsets)


__all__ = ["Strings"]
