"""What the ranking stages know about a store's files and chunks: the same two objects for either store.

:class:`FileFacts` holds, per file, what its path says (stem, path words, path
classes and their priors: :mod:`codesearch.ranking.paths`), computed on first
use. :class:`ChunkFacts` maps each chunk to its file and holds the symbol
table; it is what the stages read (the :class:`RankingFacts` protocol). A
single index builds both once when it is loaded, with whole-index arrays; a
corpus keeps the :class:`FileFacts` of the repositories searched and maps a
query's candidates to them. Every stage then reads arrays and dictionaries
instead of paths and texts.
"""

from __future__ import annotations

import copy
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from codesearch.chunking.symbols import SymbolScan, SymbolTable
from codesearch.ranking.paths import file_stem, key_words, path_classes, path_key, path_words, same_word, squash_name

Symbols = SymbolTable | SymbolScan
"""A symbol table, or a scan that answers as one."""


class RankingFacts(Protocol):
    """What the ranking stages read about chunks and files, whole-index where the stage needs it."""

    @property
    def file_of(self) -> np.ndarray | Mapping[int, int]:
        """Chunk -> its file's number."""
        ...

    @property
    def stems(self) -> Sequence[str]:
        """File number -> its lowercased stem."""
        ...

    @property
    def files(self) -> Sequence[str]:
        """The files (only their count is read: path words weigh by file frequency)."""
        ...

    def files_matching(self, word: str) -> Collection[int]:
        """Files whose stem or parent folder holds a form of ``word``."""
        ...

    def files_named(self, name: str) -> Sequence[int]:
        """Files whose whole stem is ``name``, squashed."""
        ...

    def defining(self, names: Iterable[str]) -> dict[int, str]:
        """Chunks in scope that define any of ``names`` (case-insensitive), with the name as written there."""
        ...

    def chunk_priors(self, multipliers: Mapping[str, float]) -> np.ndarray | Mapping[int, float]:
        """Per chunk, the product of the multipliers of its file's path classes."""
        ...

    def files_of(self, chunks: list[int]) -> list[int]:
        """Each of ``chunks``' file number."""
        ...


def gather(table: np.ndarray | Mapping[int, Any], keys: list[int]) -> list[Any]:
    """``table[key]`` for each of ``keys`` as plain values: one gather from an index's array (numpy numbers made
    Python's), one lookup each from a mapping (a query's candidates)."""
    if isinstance(table, np.ndarray):
        return table[keys].tolist() if keys else []
    return [table[key] for key in keys]


def _line_starts(lines: Sequence[str]) -> list[int]:
    """Where each of ``lines`` starts in ``"\\n".join(lines)``."""
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    return starts


class FileFacts:
    """Per-file facts the stages read, each computed on first use.

    Args:
        paths: the files, numbered by their place.
        kinds: each file's kind where known (spares :func:`~codesearch.files.kinds.kind_of` per file).

    Attributes:
        files: the paths.
        words: per file, the words of its stem and parent folder.
        classes: per file, its path classes.
        stems: per file, the lowercased stem (file name without its last extension).
    """

    def __init__(self, paths: Sequence[str], kinds: Sequence[str | None] | None = None) -> None:
        self.files = list(paths)
        self._kinds = kinds
        self._named: dict[str, list[int]] = {}
        self._files_matching: dict[str, frozenset[int]] = {}
        self._priors: dict[tuple[tuple[str, float], ...], np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.files)

    @cached_property
    def classes(self) -> list[frozenset[str]]:
        if self._kinds is None:
            return [path_classes(p) for p in self.files]
        return [path_classes(p, kind) for p, kind in zip(self.files, self._kinds)]

    @cached_property
    def words(self) -> list[frozenset[str]]:
        return [path_words(path) for path in self.files]

    @cached_property
    def stems(self) -> list[str]:
        return [file_stem(p.rsplit("/", 1)[-1]).lower() for p in self.files]

    @cached_property
    def _name_keys(self) -> tuple[list[tuple[str, str]], list[list[int]], str, list[int]]:
        """The distinct ``(parent folder, stem)`` pairs of the files (what a file's path words are made of), the
        files of each, and the pairs lowercased as ``parent/stem``, one per line, with where each line starts.

        Each path word is a piece of its lowercased pair, so a query word's first three letters found there name
        every pair that may hold a form of it (:func:`same_word` needs them shared): only those pairs' words are
        split, once per pair however many files share it (``index.ts`` in many folders of one name, a repository's
        copies across a corpus), and the text searched holds no folders above the parent."""
        index: dict[tuple[str, str], int] = {}
        keys: list[tuple[str, str]] = []
        files_of: list[list[int]] = []
        for number, path in enumerate(self.files):
            key = path_key(path)
            found = index.get(key)
            if found is None:
                found = index[key] = len(keys)
                keys.append(key)
                files_of.append([])
            files_of[found].append(number)
        lowered = [f"{parent}/{stem}".lower() for parent, stem in keys]
        return keys, files_of, "\n".join(lowered), _line_starts(lowered)

    @cached_property
    def _squashed_stems(self) -> tuple[list[str], list[list[int]], str, list[int]]:
        """The distinct squashed stems, the files of each, and the stems one per line with where each line starts
        (see :meth:`files_named`)."""
        squashed = squash_name("\n".join(self.stems)).split("\n")
        if len(squashed) != len(self.stems):  # a stem with a line break in it
            squashed = [squash_name(stem) for stem in self.stems]
        index: dict[str, list[int]] = {}
        for number, stem in enumerate(squashed):
            index.setdefault(stem, []).append(number)
        names = list(index)
        return names, list(index.values()), "\n".join(names), _line_starts(names)

    def files_named(self, name: str) -> list[int]:
        """Files whose whole stem is ``name``, squashed (``http_client.py``, ``HttpClient.java``, ``httpclients.go``),
        or is ``name`` and trailing ``s``, in file order: found where ``name`` occurs in the squashed stems, then
        checked."""
        found = self._named.get(name)
        if found is None:
            names, files_of, text, starts = self._squashed_stems
            found = []
            at = text.find(name)
            while at >= 0:
                k = bisect_right(starts, at) - 1
                if names[k] == name or names[k].rstrip("s") == name:
                    found.extend(files_of[k])
                at = text.find(name, starts[k + 1]) if k + 1 < len(starts) else -1
            found.sort()
            self._named[name] = found
        return found

    def files_matching(self, word: str) -> frozenset[int]:
        """Files whose stem or parent folder holds a form of ``word`` (see :func:`same_word`); cached."""
        found = self._files_matching.get(word)
        if found is None:
            numbers: list[int] = []
            prefix = word[:3]
            keys, files_of, text, starts = self._name_keys
            at = text.find(prefix) if prefix else -1
            while at >= 0:
                k = bisect_right(starts, at) - 1
                if any(c[:3] == prefix and same_word(word, c) for c in key_words(keys[k])):
                    numbers.extend(files_of[k])
                at = text.find(prefix, starts[k + 1]) if k + 1 < len(starts) else -1
            found = self._files_matching[word] = frozenset(numbers)
        return found

    def priors(self, multipliers: Mapping[str, float]) -> np.ndarray:
        """Per file, the product of the multipliers of its path classes (cached per multiplier set)."""
        key = tuple(sorted(multipliers.items()))
        cached = self._priors.get(key)
        if cached is None:
            cached = np.ones(len(self.files), dtype=np.float64)
            for number, classes in enumerate(self.classes):
                for name in classes:
                    cached[number] *= multipliers.get(name, 1.0)
            self._priors[key] = cached
        return cached


class _Lazy:
    """A symbol table given as a function, built when a search first needs one (shared by a facts' scoped views)."""

    def __init__(self, symbols: Symbols | Callable[[], SymbolTable]) -> None:
        self.value = symbols

    def get(self) -> Symbols:
        if not isinstance(self.value, (SymbolTable, SymbolScan)):
            self.value = self.value()
        return self.value


class ChunkFacts:
    """The :class:`RankingFacts` of a store's chunks: which file each is in, and which names they define.

    Args:
        files: the files' facts.
        file_of: each chunk's file number: an array over every chunk of an
            index, or a mapping over the chunks one query ranks.
        symbols: the symbol table, or a function that builds it (called when a
            search first needs it: a query naming no identifier never does).

    Attributes:
        file_facts: ``files``.
        files, stems, classes, words: the files' (see :class:`FileFacts`).
        file_of: ``file_of``.
        chunks_of: the chunk numbers of each file, in order (an array ``file_of`` only).

    :meth:`scoped` gives the facts a scoped search reads: the same, but
    :meth:`defining` finds only chunks in scope.
    """

    def __init__(self, files: FileFacts, file_of: np.ndarray | Mapping[int, int],
                 symbols: Symbols | Callable[[], SymbolTable]) -> None:
        self.file_facts = files
        self.files = files.files
        self.file_of = file_of
        self._symbols = _Lazy(symbols)
        self._mask: np.ndarray | None = None
        self._chunk_priors: dict[tuple[tuple[str, float], ...], np.ndarray] = {}

    @classmethod
    def of_records(cls, chunks: Sequence[Mapping[str, Any]]) -> ChunkFacts:
        """Facts of chunk records, each with ``path`` and optionally ``symbols``, in chunk order."""
        file_index: dict[str, int] = {}
        file_of = np.empty(len(chunks), dtype=np.int64)
        files: list[str] = []
        for i, chunk in enumerate(chunks):
            number = file_index.setdefault(chunk["path"], len(files))
            if number == len(files):
                files.append(chunk["path"])
            file_of[i] = number
        return cls(FileFacts(files), file_of, SymbolTable.build((i, c.get("symbols", ())) for i, c in enumerate(chunks)))

    @classmethod
    def from_columns(cls, paths: Sequence[str], file_of: np.ndarray, symbols: Symbols | Callable[[], SymbolTable],
                     kinds: Sequence[str | None] | None = None) -> ChunkFacts:
        """Facts of an index stored as columns: every file's path (chunked or not), each chunk's file number, and
        where known each file's kind (its chunks'). Files without chunks are left out (renumbered)."""
        has_chunks = np.bincount(file_of, minlength=len(paths)) > 0
        renumber = np.cumsum(has_chunks) - 1
        keep = has_chunks.tolist()
        files = FileFacts([p for p, k in zip(paths, keep) if k],
                          [kind for kind, k in zip(kinds, keep) if k] if kinds is not None else None)
        return cls(files, renumber[file_of], symbols)

    def __len__(self) -> int:
        return len(self.file_of)

    @property
    def stems(self) -> list[str]:
        return self.file_facts.stems

    @property
    def classes(self) -> list[frozenset[str]]:
        return self.file_facts.classes

    @property
    def words(self) -> list[frozenset[str]]:
        return self.file_facts.words

    @property
    def symbols(self) -> Symbols:
        """The symbol table (:class:`SymbolTable`, or a :class:`SymbolScan` answering as one)."""
        return self._symbols.get()

    @cached_property
    def chunks_of(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.files]
        for i, number in enumerate(np.asarray(self.file_of).tolist()):
            out[number].append(i)
        return out

    def files_matching(self, word: str) -> frozenset[int]:
        return self.file_facts.files_matching(word)

    def files_named(self, name: str) -> list[int]:
        return self.file_facts.files_named(name)

    def defining(self, names: Iterable[str]) -> dict[int, str]:
        """Chunks (in scope, for :meth:`scoped` facts) that define any of ``names`` (case-insensitive), with the
        name as the chunk writes it."""
        found: dict[int, str] = {}
        symbols = self.symbols
        for name in names:
            for entry in symbols.get(name.lower()):
                found.setdefault(entry.chunk, entry.name)
        if self._mask is not None:
            mask = self._mask
            return {chunk: name for chunk, name in found.items() if mask[chunk]}
        return found

    def scoped(self, mask: np.ndarray | None) -> ChunkFacts:
        """These facts as a search scoped to ``mask`` sees them: :meth:`defining` finds only chunks in scope (the
        symbol table and the caches are shared)."""
        if mask is None:
            return self
        view = copy.copy(self)
        view._mask = mask
        return view

    def files_of(self, chunks: list[int]) -> list[int]:
        """Each of ``chunks``' file number, gathered at once (the stages read it for every candidate)."""
        return gather(self.file_of, chunks)

    def chunk_priors(self, multipliers: Mapping[str, float]) -> np.ndarray | dict[int, float]:
        """Per chunk, the product of the multipliers of its file's path classes: an array (cached per multiplier set:
        ranking asks on every query) over an index's chunks, a dictionary over a query's."""
        per_file = self.file_facts.priors(multipliers)
        if isinstance(self.file_of, Mapping):
            return {chunk: float(per_file[number]) for chunk, number in self.file_of.items()}
        key = tuple(sorted(multipliers.items()))
        cached = self._chunk_priors.get(key)
        if cached is None:
            cached = self._chunk_priors[key] = per_file[self.file_of]
        return cached


__all__ = ["ChunkFacts", "FileFacts", "RankingFacts", "Symbols", "gather"]
