"""Chunking: files cut into line-bounded chunks, along their definitions where a grammar reads them.

- :mod:`~codesearch.chunking.chunks`: :class:`Chunk`, :class:`ChunkParams`, the line-window chunker (the Cython
  ``_chunker`` and its pure-Python twin ``_chunker_py``), the texts a chunk gives the model and BM25, its key;
- :mod:`~codesearch.chunking.definitions`: the definition-aware chunker on tree-sitter;
- :mod:`~codesearch.chunking.languages`: the language table (one entry a language), read by
  :mod:`~codesearch.chunking.grammars` (the generic reader and the few grammars' own);
- :mod:`~codesearch.chunking.symbols`: the symbol table that indexing builds and ranking and navigation read.
"""

from __future__ import annotations

from codesearch.chunking.chunks import (
    BACKEND,
    CHARS_PER_TOKEN,
    DEFINITION_TARGET_TOKENS,
    DEFINITIONS_VERSION,
    OVERLAP_TOKENS,
    TARGET_TOKENS,
    Chunk,
    ChunkParams,
    chunk_key,
    chunk_lines,
    chunk_text,
    document_text,
    keyword_text,
    split_lines,
    window_heads,
)

__all__ = [
    "BACKEND", "CHARS_PER_TOKEN", "DEFINITIONS_VERSION", "DEFINITION_TARGET_TOKENS", "OVERLAP_TOKENS", "TARGET_TOKENS",
    "Chunk", "ChunkParams", "chunk_key", "chunk_lines", "chunk_text", "document_text", "keyword_text", "split_lines",
    "window_heads",
]
