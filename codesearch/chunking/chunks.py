"""Cut a file's text into line-bounded chunks reported as ``path:start-end``.

The work is done by one of two twins with the same API: the Cython extension
``codesearch.chunking._chunker`` (fast) or the pure-Python ``codesearch.chunking._chunker_py``
(reference). Importing this module picks the extension and falls back to the
twin with a warning if it was not built; ``CODESEARCH_PUREPYTHON=1`` forces the
twin. :data:`BACKEND` says which one is in use.
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

if os.environ.get("CODESEARCH_PUREPYTHON") == "1":
    from codesearch.chunking._chunker_py import chunk_lines, split_lines

    BACKEND = "python"
else:
    try:
        from codesearch.chunking._chunker import chunk_lines, split_lines  # type: ignore[no-redef]

        BACKEND = "cython"
    except ImportError:  # pragma: no cover - depends on how the package was built
        warnings.warn(
            "codesearch: the Cython chunker is not built; using the slower pure-Python twin "
            "(reinstall with a C compiler and Cython to get it)",
            RuntimeWarning,
            stacklevel=2,
        )
        from codesearch.chunking._chunker_py import chunk_lines, split_lines

        BACKEND = "python"

TARGET_TOKENS = 700
OVERLAP_TOKENS = 80
CHARS_PER_TOKEN = 4
DEFINITION_TARGET_TOKENS = 400
"""The budget of definition-aware chunks: smaller than the line windows' 700, since a
definition needs no neighbours for context and the transformer reads only its first
tokens (measured on the peer benchmark, 128-token inputs: DEV NDCG@10 / held-out 0.868 /
0.680 at 400, 0.867 / 0.670 at 550, 0.862 / 0.639 at 700)."""
DEFINITIONS_VERSION = 4
"""Raised whenever definition-aware cutting changes (the language table, node kinds): an
index made by another version cuts its files again (unchanged chunk texts keep their
vectors). 2: Python definitions under module-level ``if``/``try`` blocks; 3: ``.h`` files
that read as C++ are cut as C++, JS/TS constants and Lua tables are definitions; 4: a C/C++
"definition" whose name cannot be one (a macro misread as a type) gives the definitions
inside it instead."""


@dataclass(frozen=True, slots=True)
class ChunkParams:
    """Sizes of the line-window chunker, in (approximate) model tokens."""

    target_tokens: int = TARGET_TOKENS
    overlap_tokens: int = OVERLAP_TOKENS
    chars_per_token: int = CHARS_PER_TOKEN

    def __post_init__(self) -> None:
        if self.target_tokens < 1 or self.chars_per_token < 1 or self.overlap_tokens < 0:
            raise ValueError(f"invalid chunk parameters: {self}")

    @classmethod
    def for_chunking(cls, chunking: str) -> ChunkParams:
        """The default sizes of a chunking: definitions get a 400-token budget, line windows 700."""
        return cls(target_tokens=DEFINITION_TARGET_TOKENS) if chunking == "definitions" else cls()


@dataclass(frozen=True, slots=True)
class Chunk:
    """A run of whole lines of one file (or, for a line too long to take whole, of its pieces: see
    :func:`chunk_lines`).

    Attributes:
        path: the file's path relative to the scanned root, with ``/`` separators; a name that is not UTF-8
            holds surrogate escapes (``os.fsdecode``).
        start_line: first line, 1-based, as an editor numbers it.
        end_line: last line, inclusive (a window of one long line starts and ends on it).
        text: the lines joined by ``"\\n"``.
        symbols: names of the definitions this chunk holds, when known.
    """

    path: str
    start_line: int
    end_line: int
    text: str
    symbols: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


# A comment block at the very start of a chunk (C/Java block, HTML/XML, or a run of line comments) ...
_LEADING_COMMENT = re.compile(r"\s*(?:/\*.*?\*/|<!--.*?-->|(?:[ \t]*(?://|#|--|;)[^\n]*(?:\n|$))+)", re.S)
# ... that is a licence header, not documentation of the code below it.
_LICENSE_WORDS = re.compile(r"copyright|licen[cs]e|spdx|permission is hereby granted", re.I)


def document_text(path: str, text: str) -> str:
    """The text given to the model for a chunk: its path, a newline, then its text without a leading licence header.

    Models read only a chunk's first tokens (128 for MiniLM), and in many
    repositories every file's first chunk opens with the same licence: left
    in, it is all the model would see of them. Keyword search still reads it.
    """
    header = _LEADING_COMMENT.match(text)
    if header and _LICENSE_WORDS.search(header.group()) and text[header.end():].strip():
        text = text[header.end():].lstrip("\n")
    return f"{path}\n{text}"


def chunk_key(document: str) -> bytes:
    """A chunk's identity: the sha256 of its :func:`document_text`, the exact text the model reads (an unchanged
    text keeps its vectors in every tier and store)."""
    return hashlib.sha256(document.encode("utf-8", "surrogatepass")).digest()


def keyword_text(path: str, text: str) -> str:
    """The text BM25 indexes for a chunk: :func:`document_text`, then the file's stem twice and its last three folders.

    File and folder names say what a file is about more often than any one
    word inside it, so they count a little more than once.
    """
    parts = path.split("/")
    name = parts[-1]
    dot = name.rfind(".")
    stem = name[:dot] if dot > 0 else name
    return f"{path}\n{text}\n{stem} {stem} {' '.join(parts[:-1][-3:])}"


def window_heads(chunks: Sequence[Chunk]) -> dict[int, int]:
    """Which chunks are later windows of one long definition: ``{row: row of its first window}``.

    The definition chunker cuts a definition over its budget into line windows
    that overlap the window before by ``overlap_tokens`` and all record the
    definition's symbols; every other chunk starts after the chunk before it.
    So a chunk that starts inside the previous chunk of its file and records
    the same, non-empty symbols continues that definition. ``chunks`` is in
    file order, as the chunkers return it.

    The transformer reads only a chunk's first tokens, so it reads such a
    definition once, by its first window (its signature and doc), and the
    later windows share that vector; keywords still read every window.
    """
    heads: dict[int, int] = {}
    for row in range(1, len(chunks)):
        chunk, before = chunks[row], chunks[row - 1]
        if (chunk.symbols and chunk.symbols == before.symbols and chunk.path == before.path
                and before.start_line < chunk.start_line <= before.end_line):
            heads[row] = heads.get(row - 1, row - 1)
    return heads


def chunk_text(path: str, text: str, params: ChunkParams = ChunkParams()) -> list[Chunk]:
    """Cut one file's text into :class:`Chunk` objects.

    Returns:
        The chunks in file order; whitespace-only windows are left out, so an
        empty or blank file gives none.
    """
    return [
        Chunk(path, start, end, body)
        for start, end, body in chunk_lines(
            text, params.target_tokens, params.overlap_tokens, params.chars_per_token
        )
    ]


__all__ = [
    "BACKEND", "DEFINITION_TARGET_TOKENS", "Chunk", "ChunkParams", "chunk_key", "chunk_lines", "chunk_text", "document_text",
    "keyword_text", "split_lines", "window_heads",
]
