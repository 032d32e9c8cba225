"""What the ranking stages know about an index, computed once when it is loaded.

:class:`IndexFacts` holds, for every chunk, its file and the definitions it
holds, and for every file the words of its name and folder and the path classes
that priors act on (tests, compat shims, examples, re-export files, type
stubs, docs, config). Building it is one pass over the chunk records; every
stage then reads arrays and dictionaries instead of paths and texts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from codesearch.keyword.tokens import split_identifier
from codesearch.scope import CONFIG, DOC, TEST, kind_of

# Path classes that priors act on (see Ranking.priors).
COMPAT = "compat"
EXAMPLE = "example"
REEXPORT = "reexport"
STUB = "stub"
PATH_CLASSES = (TEST, COMPAT, EXAMPLE, REEXPORT, STUB, DOC, CONFIG)

_COMPAT_DIRS = frozenset({"compat", "_compat", "legacy", "deprecated"})
_EXAMPLE_DIRS = frozenset({"example", "examples", "_example", "_examples", "docs_src", "samples", "sample"})
_REEXPORT_FILES = frozenset({"__init__.py", "package-info.java", "module-info.java"})
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


def path_words(path: str) -> frozenset[str]:
    """Lowercased words of a file's stem and its parent folder, identifiers split (``HttpClient`` -> http, client)."""
    parts = path.split("/")
    stem = file_stem(parts[-1])
    words: set[str] = set()
    for name in (stem, parts[-2] if len(parts) > 1 else ""):
        for word in re.findall(r"[A-Za-z0-9_]+", name):
            words.update(w for w in (word.lower(), *split_identifier(word)) if w)
    return frozenset(words)


def path_classes(path: str, kind: str | None = None) -> frozenset[str]:
    """The path classes of a file: ``test``, ``compat``, ``example``, ``reexport``, ``stub``, ``doc``, ``config``."""
    parts = path.split("/")
    dirs, name = parts[:-1], parts[-1]
    kind = kind or kind_of(path)
    found = {kind} & {TEST, DOC, CONFIG}
    if any(d.lower() in _COMPAT_DIRS for d in dirs):
        found.add(COMPAT)
    if any(d.lower() in _EXAMPLE_DIRS for d in dirs):
        found.add(EXAMPLE)
    if name in _REEXPORT_FILES:
        found.add(REEXPORT)
    if name.endswith((".d.ts", ".d.mts", ".d.cts", ".pyi")):
        found.add(STUB)
    return frozenset(found)


@dataclass(frozen=True, slots=True)
class Definition:
    """A chunk that defines a name: which chunk, and the name as written there."""

    chunk: int
    name: str


class IndexFacts:
    """Per-chunk and per-file facts that ranking stages read.

    Args:
        chunks: the chunk records of an index, each with ``path`` and
            optionally ``kind`` and ``symbols``.

    Attributes:
        files: distinct file paths, in first-seen order.
        file_of: int array, the file number of each chunk.
        chunks_of: the chunk numbers of each file, in order.
        words: per file, the words of its stem and parent folder.
        classes: per file, its path classes.
        stems: per file, the lowercased stem (file name without its last extension).
        definitions: lowercased name -> the chunks that define it.
    """

    def __init__(self, chunks: Sequence[Mapping[str, Any]]) -> None:
        file_index: dict[str, int] = {}
        file_of = np.empty(len(chunks), dtype=np.int64)
        self.files: list[str] = []
        self.chunks_of: list[list[int]] = []
        self.classes: list[frozenset[str]] = []
        self.definitions: dict[str, list[Definition]] = {}
        for i, chunk in enumerate(chunks):
            path = chunk["path"]
            number = file_index.get(path)
            if number is None:
                number = file_index[path] = len(self.files)
                self.files.append(path)
                self.chunks_of.append([])
                self.classes.append(path_classes(path, chunk.get("kind")))
            file_of[i] = number
            self.chunks_of[number].append(i)
            for symbol in chunk.get("symbols", ()):
                for name in definition_names(symbol):
                    entries = self.definitions.setdefault(name.lower(), [])
                    if not entries or entries[-1].chunk != i:
                        entries.append(Definition(i, name))
        self.file_of = file_of
        self.words: list[frozenset[str]] = [path_words(p) for p in self.files]
        self._word_buckets: dict[str, dict[str, list[int]]] = {}
        for number, words in enumerate(self.words):
            for word in words:
                self._word_buckets.setdefault(word[:3], {}).setdefault(word, []).append(number)
        self._files_matching: dict[str, frozenset[int]] = {}
        self.stems: list[str] = [file_stem(p.rsplit("/", 1)[-1]).lower() for p in self.files]
        self._named: dict[str, list[int]] = {}
        for number, stem in enumerate(self.stems):
            for name in {squash_name(stem), squash_name(stem).rstrip("s")}:
                self._named.setdefault(name, []).append(number)
        self._prior_cache: dict[tuple[tuple[str, float], ...], np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.file_of)

    def files_named(self, name: str) -> list[int]:
        """Files whose whole stem is ``name``, squashed (``http_client.py``, ``HttpClient.java``, ``httpclients.go``)."""
        return self._named.get(name, [])

    def files_matching(self, word: str) -> frozenset[int]:
        """Files whose stem or parent folder holds a form of ``word`` (see :func:`same_word`); cached."""
        found = self._files_matching.get(word)
        if found is None:
            numbers: set[int] = set()
            for candidate, files in self._word_buckets.get(word[:3], {}).items():
                if same_word(word, candidate):
                    numbers.update(files)
            found = self._files_matching[word] = frozenset(numbers)
        return found

    def defining(self, names: Iterable[str]) -> dict[int, str]:
        """Chunks that define any of ``names`` (case-insensitive), with the name as the chunk writes it."""
        found: dict[int, str] = {}
        for name in names:
            for entry in self.definitions.get(name.lower(), ()):
                found.setdefault(entry.chunk, entry.name)
        return found

    def scoped(self, mask: np.ndarray | None) -> IndexFacts:
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


class _ScopedFacts(IndexFacts):
    """An :class:`IndexFacts` whose symbol table answers only for the chunks of a scope (shares the rest)."""

    def __init__(self, facts: IndexFacts, mask: np.ndarray) -> None:
        self.__dict__.update(facts.__dict__)
        self._mask = mask

    def defining(self, names: Iterable[str]) -> dict[int, str]:
        return {chunk: name for chunk, name in super().defining(names).items() if self._mask[chunk]}


__all__ = [
    "PATH_CLASSES",
    "QUALIFIERS",
    "Definition",
    "IndexFacts",
    "definition_names",
    "file_stem",
    "path_classes",
    "path_words",
    "same_word",
    "squash_name",
]
