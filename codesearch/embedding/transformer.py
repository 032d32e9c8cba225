"""The transformer tier: texts into L2-normalised float32 vectors with an exported ONNX model.

:class:`Embedder` finds the model's export in the cache (exporting it on first
use, which needs the ``export`` extra) and embeds documents and queries through
:class:`~codesearch.embedding.onnx.OnnxEncoder`. Embedding imports neither
torch, transformers nor optimum.
"""

from __future__ import annotations

import hashlib
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from codesearch.embedding.catalogue import DEFAULT_MODEL, ModelSpec, resolve_model
from codesearch.embedding.export import export_model, find_export
from codesearch.embedding.onnx import OnnxEncoder
from codesearch.exceptions import ModelNotAvailableError
from codesearch.jsonfiles import sha256_json


@dataclass(frozen=True, slots=True)
class EmbedReport:
    """What one :meth:`Embedder.embed_documents` call did.

    Attributes:
        chunks: texts embedded.
        median_tokens: median tokens per text before truncation.
        max_tokens: most tokens in one text before truncation.
        truncated: texts longer than the model's maximum length.
        seconds: wall time, tokenizing included.
        tokens: tokens the model actually read (after truncation).
    """

    chunks: int
    median_tokens: float
    max_tokens: int
    truncated: int
    seconds: float
    tokens: int = 0

    def __str__(self) -> str:
        return (
            f"{self.chunks} chunks, tokens median {self.median_tokens:g} / max {self.max_tokens}, "
            f"{self.truncated} truncated, {self.seconds:.2f} s"
        )


class Embedder:
    """Embed documents and queries with one model.

    Args:
        model: a catalogue name (``"minilm"``, ``"bge-small"``, ``"bge-m3"``), a
            Hugging Face id, a local directory or a :class:`ModelSpec`.
        int8: use the int8 export when it passed the quality gate (else fp32,
            with a warning).
        cache_dir: the cache root; defaults to ``$CODESEARCH_CACHE_DIR`` or the
            user cache dir.
        threads: worker threads, each running the session on one core;
            defaults to the available cores.
        providers: onnxruntime execution providers, best first (default: the CPU's).
        export_progress: show a progress bar if the model has to be exported.

    Raises:
        ModelNotAvailableError: the model cannot be found, downloaded or loaded.
        ExportError: the model has no cached export and exporting failed or
            needs the ``export`` extra.

    Example:
        >>> emb = Embedder("minilm")                                  # doctest: +SKIP
        >>> emb.embed_documents([document_text("a.py", "x = 1")]).shape  # doctest: +SKIP
        (1, 384)
    """

    def __init__(
        self,
        model: str | ModelSpec = DEFAULT_MODEL,
        int8: bool = False,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        providers: Sequence[str] | None = None,
        export_progress: bool = True,
    ) -> None:
        self.spec = resolve_model(model)
        found = find_export(self.spec, int8, cache_dir)
        if found is None:
            found = export_model(
                self.spec, int8=int8, progress=export_progress, cache_dir=cache_dir
            )
        self.export = found
        self.int8 = found.int8_used
        if int8 and not found.int8_used and found.gate is not None:
            warnings.warn(
                f"int8 {self.spec.name} did not pass the quality gate (mean cosine "
                f"{found.gate['mean_cos']:.4f}, min {found.gate['min_cos']:.4f}); using fp32",
                RuntimeWarning,
                stacklevel=2,
            )
        self._encoder = OnnxEncoder(found.onnx_path, found.path, self.spec, threads, providers)
        self.dim = self._encoder.dim
        if self.spec.dim is not None and self.spec.dim != self.dim:
            raise ModelNotAvailableError(
                f"{self.spec.name} gives {self.dim}-dim vectors, not {self.spec.dim}; "
                f"pass dim={self.dim} or the right model"
            )
        self.fingerprint = self._fingerprint()
        self.last_report: EmbedReport | None = None

    def embed_documents(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed document texts (see :func:`document_text`).

        Returns:
            A float32 array of shape ``(len(texts), dim)``, one L2-normalised row
            per text, in input order. Also sets :attr:`last_report`.
        """
        started = time.perf_counter()
        prefix = self.spec.document_prefix
        inputs = [prefix + t for t in texts] if prefix else list(texts)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(inputs), desc=f"embed {self.spec.name}", unit="chunk")
        try:
            vectors, counts, tokens = self._encoder.encode(inputs, bar)
        finally:
            if bar is not None:
                bar.close()
        self.last_report = EmbedReport(
            chunks=len(inputs),
            median_tokens=float(np.median(counts)) if len(counts) else 0.0,
            max_tokens=int(counts.max()) if len(counts) else 0,
            truncated=int((counts > self.spec.max_length).sum()),
            seconds=time.perf_counter() - started,
            tokens=tokens,
        )
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query, with the model's query prefix.

        Returns:
            A float32 vector of shape ``(dim,)``, L2-normalised.
        """
        return self._encoder.encode([self.spec.query_prefix + text])[0][0]

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Return each text's token count (special tokens included) before truncation."""
        return self._encoder.tokenize(texts)[1]

    def __repr__(self) -> str:
        kind = "int8" if self.int8 else "fp32"
        return f"Embedder({self.spec.name!r}, {kind}, dim={self.dim}, fingerprint={self.fingerprint[:12]})"

    def _fingerprint(self) -> str:
        """sha256 over the graph, the tokenizer and every setting that changes vectors."""
        tokenizer = hashlib.sha256(self.export.tokenizer_path.read_bytes()).hexdigest()
        material = {
            "onnx_sha256": self.export.onnx_sha256,
            "tokenizer_sha256": tokenizer,
            "pooling": self.spec.pooling,
            "normalize": self.spec.normalize,
            "query_prefix": self.spec.query_prefix,
            "document_prefix": self.spec.document_prefix,
            "max_length": self.spec.max_length,
        }
        return sha256_json(material)


__all__ = ["EmbedReport", "Embedder"]
