"""Kept for imports written before :mod:`codesearch.embedding`; new code imports from there."""

from __future__ import annotations

from codesearch.chunking import document_text
from codesearch.embedding.onnx import available_cores
from codesearch.embedding.transformer import Embedder, EmbedReport

__all__ = ["EmbedReport", "Embedder", "available_cores", "document_text"]
