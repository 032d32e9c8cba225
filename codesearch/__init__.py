"""codesearch: find code by meaning and by keyword in a local repository."""

from __future__ import annotations

from codesearch.chunking import BACKEND as CHUNKER_BACKEND
from codesearch.chunking import Chunk, ChunkParams, chunk_text
from codesearch.exceptions import (
    CodeSearchError,
    EmptyRepositoryError,
    ExportError,
    IndexCancelledError,
    IndexCorruptError,
    IndexLockedError,
    IndexNotFoundError,
    IndexReadOnlyError,
    IndexWriteError,
    ModelMismatchError,
    ModelNotAvailableError,
    NotFittedError,
    RootNotFoundError,
)
from codesearch.multi import MultiSearch
from codesearch.search import CodeSearch
from codesearch.types import Hit, IndexReport, SearchInfo, SymbolHits

__version__ = "0.1.0"

__all__ = [
    "CodeSearch",
    "MultiSearch",
    "Hit",
    "IndexReport",
    "SearchInfo",
    "SymbolHits",
    "CHUNKER_BACKEND",
    "Chunk",
    "ChunkParams",
    "chunk_text",
    "CodeSearchError",
    "EmptyRepositoryError",
    "ExportError",
    "IndexCancelledError",
    "IndexCorruptError",
    "IndexLockedError",
    "IndexNotFoundError",
    "IndexWriteError",
    "IndexReadOnlyError",
    "ModelMismatchError",
    "ModelNotAvailableError",
    "NotFittedError",
    "RootNotFoundError",
]
