"""What the ranking stages know about an index, computed once when it is loaded.

:class:`IndexFacts` holds, for every chunk, its file and the definitions it
holds, and for every file the words of its name and folder and the path classes
that priors act on (tests, compat shims, examples, re-export files, type
stubs, declaration modules, docs, config). Building it is one pass over the chunk records; every
stage then reads arrays and dictionaries instead of paths and texts.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property, lru_cache
from typing import Any

import numpy as np

from codesearch.chunking.symbols import SymbolScan, SymbolTable
from codesearch.keyword.tokens import split_identifier
from codesearch.scope import CONFIG, DOC, TEST, kind_of

# Path classes that priors act on (see Ranking.priors).
COMPAT = "compat"
EXAMPLE = "example"
REEXPORT = "reexport"
STUB = "stub"
DECLARATION = "declaration"
PATH_CLASSES = (TEST, COMPAT, EXAMPLE, REEXPORT, STUB, DECLARATION, DOC, CONFIG)

_COMPAT_DIRS = frozenset({"compat", "_compat", "legacy", "deprecated"})
_EXAMPLE_DIRS = frozenset({"example", "examples", "_example", "_examples", "docs_src", "samples", "sample"})
_EXAMPLE_STEMS = frozenset({"example", "examples"})
"""File stems that make a file an example wherever it lies (``lua/lazy/example.lua``), as its folder would."""
_REEXPORT_FILES = frozenset({"__init__.py", "package-info.java", "module-info.java"})
_TYPESCRIPT = (".ts", ".mts", ".cts", ".tsx")
_DECLARATION_NAMES = frozenset({"types"})
"""A TypeScript module of this stem, or in a folder of this name, declares types (``src/types/store.ts``)."""


def same_word(a: str, b: str) -> bool:
    """Whether two lowercased words are forms of one word: equal, or differing only past a shared stem.

    The shared prefix must be at least 3 letters and reach all but the last
    two letters of the shorter word, and the longer may go on past it by at
    most as many letters as the shorter has (4 at least): ``test``/``tests``,
    ``parse``/``parser``, ``preprocessed``/``preprocessing``,
    ``dependency``/``dependencies`` are forms of one word; ``cat``/``category``
    and ``form``/``formatter`` are not.
    """
    if a == b:
        return True
    short, long = min(len(a), len(b)), max(len(a), len(b))
    if short < 3:
        return False
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    return common >= 3 and common >= short - 2 and long - common <= max(4, short)


def file_stem(name: str) -> str:
    """A file name without its last extension: ``SqlMapper.Async.cs`` -> ``SqlMapper.Async``."""
    dot = name.rfind(".")
    return name[:dot] if dot > 0 else name


def squash_name(name: str) -> str:
    """A name lowercased without ``_`` and ``-``: the form in which a file stem and a query word meet."""
    return name.lower().replace("_", "").replace("-", "")


def path_key(path: str) -> tuple[str, str]:
    """What a file's path words come from: its parent folder's name and its stem (``src/http/Client.java`` ->
    ``("http", "Client")``)."""
    folder, _, name = path.rpartition("/")
    return folder.rpartition("/")[2], file_stem(name)


def path_words(path: str) -> frozenset[str]:
    """Lowercased words of a file's stem and its parent folder, identifiers split (``HttpClient`` -> http, client)."""
    return _key_words(path_key(path))


def _key_words(key: tuple[str, str]) -> frozenset[str]:
    parent, stem = key
    return _name_words(stem) | _name_words(parent)


@lru_cache(maxsize=1 << 16)
def _name_words(name: str) -> frozenset[str]:
    """The words of one name (a stem or a folder): many files share a folder, so each is split once."""
    words: set[str] = set()
    for word in re.findall(r"[A-Za-z0-9_]+", name):
        words.update(w for w in (word.lower(), *split_identifier(word)) if w)
    return frozenset(words)


def path_classes(path: str, kind: str | None = None) -> frozenset[str]:
    """The path classes of a file: ``test``, ``compat``, ``example``, ``reexport``, ``stub``, ``declaration``,
    ``doc``, ``config``.

    A ``declaration`` file is a TypeScript module of type declarations by
    its name: ``types.ts`` or any module in a ``types`` folder (redux's
    ``src/types/store.ts``), where an interface and its documentation answer
    for code that lives elsewhere. A test or a stub (``.d.ts``) is not one:
    those classes have their own priors, which would otherwise stack.

    ``kind`` is the file's :func:`~codesearch.scope.kind_of`, when the caller has it already.
    """
    folder, _, name = path.rpartition("/")
    found = {kind or kind_of(path)} & {TEST, DOC, CONFIG}
    from_folders = _folder_classes(folder)
    found |= from_folders - {DECLARATION}
    if name in _REEXPORT_FILES:
        found.add(REEXPORT)
    if file_stem(name).lower() in _EXAMPLE_STEMS:
        found.add(EXAMPLE)
    if name.endswith((".d.ts", ".d.mts", ".d.cts", ".pyi")):
        found.add(STUB)
    if not found & {TEST, STUB} and _is_declaration(name, from_folders):
        found.add(DECLARATION)
    return frozenset(found)


def _is_declaration(name: str, from_folders: frozenset[str]) -> bool:
    """Whether a file is a TypeScript module of type declarations by its name or its folders' classes (see
    :func:`path_classes`)."""
    if not name.lower().endswith(_TYPESCRIPT):
        return False
    return file_stem(name).lower() in _DECLARATION_NAMES or DECLARATION in from_folders


@lru_cache(maxsize=1 << 16)
def _folder_classes(folder: str) -> frozenset[str]:
    """The classes a file takes from its folders (``compat``, ``example``; ``declaration``, which only a TypeScript
    file keeps, :func:`_is_declaration`): the files of a folder share them."""
    dirs = [d.lower() for d in folder.split("/")] if folder else []
    found = set()
    if any(d in _COMPAT_DIRS for d in dirs):
        found.add(COMPAT)
    if any(d in _EXAMPLE_DIRS for d in dirs):
        found.add(EXAMPLE)
    if any(d in _DECLARATION_NAMES for d in dirs):
        found.add(DECLARATION)
    return frozenset(found)



def _line_starts(lines: Sequence[str]) -> list[int]:
    """Where each of ``lines`` starts in ``"\\n".join(lines)``."""
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    return starts


class IndexFacts:
    """Per-chunk and per-file facts that ranking stages read.

    Args:
        chunks: the chunk records of an index, each with ``path`` and
            optionally ``kind`` and ``symbols`` (or see :meth:`from_columns`).

    Attributes:
        files: the paths of the files that have chunks, in chunk order.
        file_of: int array, the file number of each chunk.
        symbols: the symbol table (:class:`SymbolTable`).
        chunks_of: the chunk numbers of each file, in order.
        words: per file, the words of its stem and parent folder.
        classes: per file, its path classes.
        stems: per file, the lowercased stem (file name without its last extension).

    The per-file facts are computed on first use, so an index opens without them.
    """

    def __init__(self, chunks: Sequence[Mapping[str, Any]]) -> None:
        file_index: dict[str, int] = {}
        file_of = np.empty(len(chunks), dtype=np.int64)
        files: list[str] = []
        for i, chunk in enumerate(chunks):
            number = file_index.setdefault(chunk["path"], len(files))
            if number == len(files):
                files.append(chunk["path"])
            file_of[i] = number
        self._setup(files, file_of, SymbolTable.build((i, c.get("symbols", ())) for i, c in enumerate(chunks)))

    @classmethod
    def from_columns(cls, paths: Sequence[str], file_of: np.ndarray,
                     symbols: SymbolTable | SymbolScan | Callable[[], SymbolTable],
                     kinds: Sequence[str | None] | None = None) -> IndexFacts:
        """Facts of an index stored as columns: every file's path (chunked or not), each chunk's file number, and
        where known each file's kind (its chunks'; spares :func:`~codesearch.scope.kind_of` per file on open).
        ``symbols`` may be a function that builds the table, called when a search first needs it (a query naming
        no identifier never does)."""
        has_chunks = np.bincount(file_of, minlength=len(paths)) > 0
        renumber = np.cumsum(has_chunks) - 1
        facts = cls.__new__(cls)
        keep = has_chunks.tolist()
        facts._setup([p for p, k in zip(paths, keep) if k], renumber[file_of], symbols,
                     [kind for kind, k in zip(kinds, keep) if k] if kinds is not None else None)
        return facts

    def _setup(self, files: list[str], file_of: np.ndarray, symbols: SymbolTable | SymbolScan | Callable[[], SymbolTable],
               kinds: list[str | None] | None = None) -> None:
        self.files = files
        self.file_of = file_of
        self._symbols = symbols
        self._kinds = kinds
        self._named: dict[str, list[int]] = {}
        self._files_matching: dict[str, frozenset[int]] = {}
        self._prior_cache: dict[tuple[tuple[str, float], ...], np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.file_of)

    @property
    def symbols(self) -> SymbolTable | SymbolScan:
        """The symbol table (:class:`SymbolTable`, or a :class:`SymbolScan` answering as one), built on first use
        when it was given as a function."""
        if not isinstance(self._symbols, (SymbolTable, SymbolScan)):
            self._symbols = self._symbols()
        return self._symbols

    @cached_property
    def chunks_of(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in self.files]
        for i, number in enumerate(self.file_of.tolist()):
            out[number].append(i)
        return out

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
                if any(c[:3] == prefix and same_word(word, c) for c in _key_words(keys[k])):
                    numbers.extend(files_of[k])
                at = text.find(prefix, starts[k + 1]) if k + 1 < len(starts) else -1
            found = self._files_matching[word] = frozenset(numbers)
        return found

    def defining(self, names: Iterable[str]) -> dict[int, str]:
        """Chunks that define any of ``names`` (case-insensitive), with the name as the chunk writes it."""
        found: dict[int, str] = {}
        for name in names:
            for entry in self.symbols.get(name.lower()):
                found.setdefault(entry.chunk, entry.name)
        return found

    def scoped(self, mask: np.ndarray | None) -> IndexFacts | _ScopedFacts:
        """These facts as a search scoped to ``mask`` sees them: :meth:`defining` finds only chunks in scope."""
        return self if mask is None else _ScopedFacts(self, mask)

    def chunk_priors(self, multipliers: Mapping[str, float]) -> np.ndarray:
        """Per chunk, the product of the multipliers of its file's path classes (cached per multiplier set).

        Ranking asks for it on every query, so the per-file products and their
        spread over the chunks are computed once per index.
        """
        key = tuple(sorted(multipliers.items()))
        cached = self._prior_cache.get(key)
        if cached is None:
            per_file = np.ones(len(self.files), dtype=np.float64)
            for number, classes in enumerate(self.classes):
                for name in classes:
                    per_file[number] *= multipliers.get(name, 1.0)
            cached = self._prior_cache[key] = per_file[self.file_of]
        return cached


class _ScopedFacts:
    """An :class:`IndexFacts` seen by a scoped search: its symbol table answers only for chunks in scope."""

    def __init__(self, facts: IndexFacts, mask: np.ndarray) -> None:
        self._facts = facts
        self._mask = mask

    @property
    def file_of(self) -> np.ndarray:
        return self._facts.file_of

    @property
    def stems(self) -> list[str]:
        return self._facts.stems

    @property
    def files(self) -> list[str]:
        return self._facts.files

    def files_matching(self, word: str) -> frozenset[int]:
        return self._facts.files_matching(word)

    def files_named(self, name: str) -> list[int]:
        return self._facts.files_named(name)

    def chunk_priors(self, multipliers: Mapping[str, float]) -> np.ndarray:
        return self._facts.chunk_priors(multipliers)

    def defining(self, names: Iterable[str]) -> dict[int, str]:
        return {chunk: name for chunk, name in self._facts.defining(names).items() if self._mask[chunk]}


__all__ = [
    "PATH_CLASSES",
    "IndexFacts",
    "file_stem",
    "path_classes",
    "path_key",
    "path_words",
    "same_word",
    "squash_name",
]
