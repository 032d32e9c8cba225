"""What a file's path says to the ranking: its words, its stem, and the path classes that priors act on.

Path classes are tests, compat shims, examples, re-export files, type stubs,
declaration modules, docs and config (:func:`path_classes`); path words are
the identifier-split words of a file's stem and its parent folder
(:func:`path_words`). :class:`~codesearch.ranking.facts.FileFacts` computes
them once per file of a store.
"""

from __future__ import annotations

import re
from functools import lru_cache

from codesearch.files.kinds import CONFIG, DOC, TEST, kind_of
from codesearch.keyword.tokens import split_identifier

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
    return key_words(path_key(path))


def key_words(key: tuple[str, str]) -> frozenset[str]:
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

    ``kind`` is the file's :func:`~codesearch.files.kinds.kind_of`, when the caller has it already.
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


__all__ = [
    "COMPAT",
    "DECLARATION",
    "EXAMPLE",
    "PATH_CLASSES",
    "REEXPORT",
    "STUB",
    "file_stem",
    "key_words",
    "path_classes",
    "path_key",
    "path_words",
    "same_word",
    "squash_name",
]
