"""The symbol table: which chunks define which names, as indexing builds it and ranking and navigation read it.

A chunk's symbols are the qualified names the definition chunker gave it
(:mod:`codesearch.chunking.definitions`); each answers to the names of
:func:`definition_names` (``Session.send`` to itself and ``send``).
:class:`SymbolTable` keeps them as arrays a store writes and memory-maps;
:class:`SymbolScan` gives the same answers from the chunks' symbols without
building the table (a repository opened for one query).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from codesearch.exceptions import IndexCorruptError
from codesearch.strings import Strings, ascending

QUALIFIERS = re.compile(r"::|\\|->|\.|#|:")
"""What separates the parts of a qualified name in the languages indexed: ``::``, ``\\``, ``->``, ``.``, ``#``, ``:``."""


def definition_names(symbol: str) -> tuple[str, ...]:
    """The names a definition answers to, as written: ``Session.send`` -> (``Session.send``, ``send``).

    Rust impls (``impl fmt::Display for Foo``) answer to the type; Go methods
    with a pointer receiver (``(*Client).Do``) lose the decoration.
    """
    text = symbol.strip()
    if text.startswith("impl "):
        text = text[5:].rsplit(" for ", 1)[-1]
    text = text.replace("(*", "").replace(")", "").replace("(", "")
    last = QUALIFIERS.split(text)[-1].strip("*& ")
    return (text, last) if last and last != text else (text,)


@dataclass(frozen=True, slots=True)
class Definition:
    """A chunk that defines a name: which chunk, and the name as written there."""

    chunk: int
    name: str


class SymbolTable:
    """Lowercased definition name -> the chunks that define it, with the name as each writes it.

    Kept as arrays (names in byte order, so a lookup is a binary search), it is
    built once when an index is built and opens without a Python object per name.
    """

    def __init__(self, names: Strings, start: np.ndarray, chunks: np.ndarray, written: Strings) -> None:
        self.names, self.start, self.chunks, self.written = names, start, chunks, written

    @classmethod
    def build(cls, symbols: Iterable[tuple[int, Iterable[str]]]) -> SymbolTable:
        """From ``(chunk, its symbols)`` in chunk order: each symbol answers to its :func:`definition_names`."""
        table: dict[str, list[Definition]] = {}
        for chunk, names in symbols:
            for symbol in names:
                for name in definition_names(symbol):
                    lower = name.lower()
                    entries = table.setdefault(lower, [])
                    if not entries or entries[-1].chunk != chunk:
                        entries.append(Definition(chunk, name))
        keys = sorted(table, key=lambda k: k.encode("utf-8", "surrogatepass"))
        entries = [entry for key in keys for entry in table[key]]
        start = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum([len(table[key]) for key in keys], out=start[1:])
        return cls(Strings.of(keys), start, np.array([e.chunk for e in entries], dtype=np.int32),
                   Strings.of(e.name for e in entries))

    def get(self, lower: str) -> list[Definition]:
        """The definitions of a lowercased name, in chunk order (empty when none)."""
        found = self.names.find(lower)
        if found is None:
            return []
        return [Definition(int(self.chunks[j]), self.written[j]) for j in range(int(self.start[found]),
                                                                               int(self.start[found + 1]))]

    def __contains__(self, lower: object) -> bool:
        return isinstance(lower, str) and self.names.find(lower) is not None

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {**self.names.to_arrays("symtab_names"), "symtab_start": self.start, "symtab_chunks": self.chunks,
                **self.written.to_arrays("symtab_written")}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], chunks: int | None = None) -> SymbolTable:
        """The table a store generation holds, over ``chunks`` chunks (when given, every entry must name one).

        Raises:
            KeyError: an array is missing (an index from an older codesearch).
            IndexCorruptError: the arrays do not fit together.
        """
        table = cls(Strings.from_arrays(arrays, "symtab_names"), arrays["symtab_start"], arrays["symtab_chunks"],
                    Strings.from_arrays(arrays, "symtab_written"))
        start, entries = table.start, table.chunks
        if (start.ndim != 1 or entries.ndim != 1 or len(start) != len(table.names) + 1 or int(start[0]) != 0
                or int(start[-1]) != len(entries) or len(table.written) != len(entries) or not ascending(start)
                or (chunks is not None and len(entries) and (int(entries.min()) < 0 or int(entries.max()) >= chunks))):
            raise IndexCorruptError("the stored symbol table does not fit together; re-run `codesearch index`")
        return table


class SymbolScan:
    """A :class:`SymbolTable`'s answers found name by name in the chunks' symbols, without building the table.

    What a repository opened for one query needs: building the whole table
    calls :func:`definition_names` on every symbol (about 10 ms per 1,000
    chunks), while a query names one or two identifiers. A name is looked for
    as a substring of every symbol at once (lowercased, Go's pointer receivers
    undecorated, as :func:`definition_names` writes them), and only the symbols
    that hold it, or any character beyond ASCII (whose lowercase may read
    otherwise alone) or a newline, are split: :meth:`get` returns what
    ``SymbolTable.build(symbols).get(name)`` returns.

    Args:
        symbols: each chunk's symbols (``None`` or empty for none), in chunk order.
    """

    def __init__(self, symbols: Sequence[Sequence[str] | None]) -> None:
        self._symbols = symbols
        self._joined: str | None = None
        self._found: dict[str, list[Definition]] = {}

    def _prepare(self) -> None:
        chunk_of: list[int] = []
        texts: list[str] = []
        for chunk, names in enumerate(self._symbols):
            if names:
                chunk_of.extend([chunk] * len(names))
                texts.extend(names)
        self._chunk_of, self._texts = chunk_of, texts
        # One line per symbol ("(*", ")" and "(" hold no newline, so removing them never joins two lines). A symbol
        # written over lines (a Rust impl for a tuple type) is searched with spaces for its newlines, and always split.
        joined = "\n".join(texts)
        over_lines: list[int] = []
        if joined.count("\n") != max(len(texts) - 1, 0):
            over_lines = [i for i, text in enumerate(texts) if "\n" in text]
            joined = "\n".join(text.replace("\n", " ") for text in texts)
        joined = joined.lower().replace("(*", "").replace(")", "").replace("(", "")
        lines = joined.split("\n")
        self._starts = np.cumsum([0] + [len(line) + 1 for line in lines[:-1]]).tolist() if texts else []
        self._always = [i for i, text in enumerate(texts) if not text.isascii()] + over_lines
        self._joined = joined

    def get(self, lower: str) -> list[Definition]:
        """The definitions of a lowercased name, in chunk order (empty when none)."""
        found = self._found.get(lower)
        if found is not None:
            return found
        if self._joined is None:
            self._prepare()
        joined, starts = self._joined, self._starts
        assert joined is not None
        holding = set(self._always) if lower else set(range(len(self._texts)))
        at = joined.find(lower) if lower else -1
        while at >= 0:
            line = bisect_right(starts, at) - 1
            holding.add(line)
            at = joined.find(lower, starts[line + 1]) if line + 1 < len(starts) else -1
        found = []
        for i in sorted(holding):
            chunk = self._chunk_of[i]
            for name in definition_names(self._texts[i]):
                if name.lower() == lower and (not found or found[-1].chunk != chunk):
                    found.append(Definition(chunk, name))
        self._found[lower] = found
        return found

    def __contains__(self, lower: object) -> bool:
        return isinstance(lower, str) and bool(self.get(lower))


__all__ = ["QUALIFIERS", "Definition", "SymbolScan", "SymbolTable", "definition_names"]
