"""The chunk records of an index as columns: one array per field, texts and names as UTF-8 blobs.

Stored as plain ``.npy`` arrays, they open memory-mapped: nothing is built
per chunk when an index opens, and a query reads the text of the hits it
returns only (:meth:`ChunkColumns.text`). Chunks are in file order (files
sorted by path, each file's chunks by line), so a file's chunks are one
contiguous run (:meth:`ChunkColumns.rows_of_file`).
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesearch.exceptions import IndexCorruptError
from codesearch.files.kinds import KINDS
from codesearch.strings import Strings, ascending

KIND_CODES: Mapping[str, int] = {kind: code for code, kind in enumerate(KINDS)}


@dataclass
class ChunkColumns:
    """Every chunk's file, lines, kind, model-input key, symbols and text; every file's path, hash and stat.

    Attributes:
        paths: each file's path relative to the root.
        file_sha256: each file's sha256, raw (``(files, 32)`` uint8).
        file_size: each file's size in bytes when read.
        file_mtime: each file's modification time (ns) when read.
        file_of: each chunk's file number.
        start: each chunk's first line (1-based).
        end: each chunk's last line.
        kind: each chunk's kind, as a code into :data:`codesearch.files.kinds.KINDS`.
        key: each chunk's model-input key: sha256 of its document text, raw (``(chunks, 32)`` uint8).
        symbols: every chunk's symbols, chunk after chunk.
        symbol_start: chunk ``i``'s symbols are ``symbols[symbol_start[i]:symbol_start[i + 1]]``.
        texts: each chunk's text.
    """

    paths: Strings
    file_sha256: np.ndarray
    file_size: np.ndarray
    file_mtime: np.ndarray
    file_of: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray
    key: np.ndarray
    symbols: Strings
    symbol_start: np.ndarray
    texts: Strings

    _FIELDS = ("file_sha256", "file_size", "file_mtime", "file_of", "start", "end", "kind", "key", "symbol_start")

    def __len__(self) -> int:
        return len(self.file_of)

    @property
    def n_files(self) -> int:
        return len(self.paths)

    def text_files(self) -> list[str]:
        """The files indexed as text (the file table also keeps the stat of those skipped for their content)."""
        read = np.flatnonzero(np.asarray(self.file_sha256).any(axis=1))
        paths = self.paths.tolist()
        return [paths[i] for i in read.tolist()]

    def path(self, i: int) -> str:
        """Chunk ``i``'s file path."""
        return self.paths[int(self.file_of[i])]

    def kind_name(self, i: int) -> str:
        return KINDS[int(self.kind[i])]

    def symbols_of(self, i: int) -> tuple[str, ...]:
        return tuple(self.symbols[j] for j in range(int(self.symbol_start[i]), int(self.symbol_start[i + 1])))

    def text(self, i: int) -> str:
        return self.texts[i]

    def key_hex(self, i: int) -> str:
        return bytes(self.key[i]).hex()

    def key_hexes(self) -> list[str]:
        """Every chunk's key, hex."""
        return [bytes(key).hex() for key in np.asarray(self.key)]

    def rows_of_file(self, number: int) -> range:
        """The chunks of file ``number`` (one contiguous run)."""
        first = int(np.searchsorted(self.file_of, number, side="left"))
        return range(first, int(np.searchsorted(self.file_of, number, side="right")))

    def window_heads(self) -> dict[int, int]:
        """Which chunks are later windows of one long definition: ``{row: row of its first window}``.

        As :func:`codesearch.chunking.window_heads`: a chunk that starts inside
        the chunk before it in the same file and records the same, non-empty
        symbols continues that definition.
        """
        same_file = self.file_of[1:] == self.file_of[:-1]
        inside = (self.start[1:] > self.start[:-1]) & (self.start[1:] <= self.end[:-1])
        counts = np.diff(self.symbol_start)
        candidates = np.flatnonzero(same_file & inside & (counts[1:] > 0) & (counts[1:] == counts[:-1])) + 1
        heads: dict[int, int] = {}
        for row in candidates.tolist():
            if self.symbols_of(row) == self.symbols_of(row - 1):
                heads[row] = heads.get(row - 1, row - 1)
        return heads

    def record(self, i: int) -> dict[str, Any]:
        """Chunk ``i`` as the JSON record earlier versions stored (path, lines, kind, key, symbols, text)."""
        return {"path": self.path(i), "start_line": int(self.start[i]), "end_line": int(self.end[i]),
                "kind": self.kind_name(i), "key": self.key_hex(i), "symbols": list(self.symbols_of(i)),
                "text": self.text(i)}

    def records(self) -> list[dict[str, Any]]:
        return [self.record(i) for i in range(len(self))]

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {f"chunk_{name}": np.asarray(getattr(self, name)) for name in self._FIELDS}
        for name in ("paths", "symbols", "texts"):
            arrays.update(getattr(self, name).to_arrays(f"chunk_{name}"))
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> ChunkColumns:
        """The columns a store generation holds (memory-mapped or not; nothing is copied).

        Raises:
            IndexCorruptError: a column is missing or does not fit the others.
        """
        try:
            columns = cls(
                paths=Strings.from_arrays(arrays, "chunk_paths"),
                symbols=Strings.from_arrays(arrays, "chunk_symbols"),
                texts=Strings.from_arrays(arrays, "chunk_texts"),
                **{name: arrays[f"chunk_{name}"] for name in cls._FIELDS},
            )
        except KeyError as err:
            raise IndexCorruptError(f"the index has no {err.args[0]} (an index from an older codesearch); "
                                    "re-run `codesearch index`") from None
        problem = columns._misfit()
        if problem:
            raise IndexCorruptError(f"the stored chunk columns do not fit together ({problem}); "
                                    "re-run `codesearch index`")
        return columns

    def _misfit(self) -> str | None:
        """What in the columns contradicts the rest (sizes, file numbers, kinds, lines, symbol offsets), or
        ``None``. Vectorised over the per-chunk columns only (no text is read): a few milliseconds at 100k chunks."""
        fields = {name: getattr(self, name) for name in self._FIELDS}
        n, files = len(self.file_of), len(self.paths)
        if (any(fields[name].ndim != 1 or len(fields[name]) != n for name in ("file_of", "start", "end", "kind"))
                or len(self.texts) != n or len(self.symbol_start) != n + 1
                or any(len(fields[name]) != files for name in ("file_sha256", "file_size", "file_mtime"))
                or self.key.shape != (n, 32) or self.file_sha256.shape != (files, 32)):
            return "sizes"
        if n and (int(self.file_of[0]) < 0 or int(self.file_of[-1]) >= files or not ascending(self.file_of)):
            return "file numbers out of order or range"
        if n and int(self.kind.max()) >= len(KIND_CODES):
            return "an unknown kind"
        if n and (int(self.start.min()) < 1 or bool((self.end < self.start).any())):
            return "line numbers"
        starts = self.symbol_start
        if int(starts[0]) != 0 or int(starts[-1]) != len(self.symbols) or not ascending(starts):
            return "symbol offsets"
        return None


class ColumnsWriter:
    """Collects chunk columns file by file, in file order, without a Python object per chunk kept."""

    def __init__(self) -> None:
        self._paths: list[str] = []
        self._file_sha: list[bytes] = []
        self._file_size: list[int] = []
        self._file_mtime: list[int] = []
        self._file_of = array("i")
        self._start = array("i")
        self._end = array("i")
        self._kind = bytearray()
        self._key = bytearray()
        self._symbols: list[str] = []
        self._symbol_start = [0]
        self._text = bytearray()
        self._text_offsets = [0]

    def __len__(self) -> int:
        return len(self._kind)

    def add_file(self, path: str, sha256: bytes, size: int, mtime_ns: int) -> int:
        """Start a file; returns its number."""
        self._paths.append(path)
        self._file_sha.append(sha256)
        self._file_size.append(size)
        self._file_mtime.append(mtime_ns)
        return len(self._paths) - 1

    def add_chunk(self, file: int, start: int, end: int, kind: str, key: bytes, symbols: Sequence[str], text: str) -> int:
        """Add a chunk of the file last started; returns its number."""
        self._file_of.append(file)
        self._start.append(start)
        self._end.append(end)
        self._kind.append(KIND_CODES[kind])
        self._key += key
        self._symbols.extend(symbols)
        self._symbol_start.append(len(self._symbols))
        self._text += text.encode("utf-8", "surrogatepass")
        self._text_offsets.append(len(self._text))
        return len(self._kind) - 1

    def finish(self) -> ChunkColumns:
        """The columns; they share the writer's buffers, so nothing more may be added."""
        n = len(self)
        return ChunkColumns(
            paths=Strings.of(self._paths),
            file_sha256=np.frombuffer(b"".join(self._file_sha), dtype=np.uint8).reshape(len(self._paths), 32),
            file_size=np.array(self._file_size, dtype=np.int64),
            file_mtime=np.array(self._file_mtime, dtype=np.int64),
            file_of=np.array(self._file_of, dtype=np.int32),
            start=np.array(self._start, dtype=np.int32),
            end=np.array(self._end, dtype=np.int32),
            kind=np.frombuffer(self._kind, dtype=np.uint8),
            key=np.frombuffer(self._key, dtype=np.uint8).reshape(n, 32),
            symbols=Strings.of(self._symbols),
            symbol_start=np.array(self._symbol_start, dtype=np.int64),
            texts=Strings(np.frombuffer(self._text, dtype=np.uint8), np.array(self._text_offsets, dtype=np.int64)),
        )


def stored_records(arrays: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """Every chunk of a stored generation's arrays as a JSON record (path, lines, kind, key, symbols, text).

    For tools and tests that read an index's chunks wholesale; a searcher reads columns.
    """
    return ChunkColumns.from_arrays(arrays).records()


__all__ = ["KIND_CODES", "ChunkColumns", "ColumnsWriter", "stored_records"]
