"""Turn text into L2-normalised float32 vectors with an exported ONNX model.

This module alone owns the onnxruntime ``InferenceSession`` and the fast
tokenizer. :class:`Embedder` finds the model's export in the cache (exporting it
on first use, which needs the ``export`` extra) and embeds documents and
queries. Embedding imports neither torch, transformers nor optimum.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesearch import export as _export
from codesearch.chunking import document_text
from codesearch.exceptions import ModelNotAvailableError
from codesearch.models import DEFAULT_MODEL, ModelSpec, resolve_model


def available_cores() -> int:
    """Return the number of CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


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


class _OnnxEncoder:
    """One exported graph with its tokenizer: texts in, pooled vectors out."""

    def __init__(self, onnx_path: Path, folder: Path, spec: ModelSpec, threads: int | None = None):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.spec = spec
        self.tokenizer = Tokenizer.from_file(str(folder / _export.TOKENIZER_FILE))
        self.tokenizer.no_truncation()
        self.tokenizer.no_padding()
        config = _export._read_json(folder / _export.CONFIG_FILE) or {}
        # One session, run by one worker thread per core, each call single-threaded:
        # on code chunks this beat one call at a time on all cores by 10-20% (no
        # synchronisation inside each operator, and one text's activations stay in
        # its core's L2). A lone text (a query) runs on one core.
        self.workers = threads or available_cores()
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        manifest = _export._read_json(folder / _export.MANIFEST_FILE) or {}
        try:
            self.session = ort.InferenceSession(
                str(onnx_path),
                options,
                providers=["CPUExecutionProvider"],
                disabled_optimizers=list(manifest.get("disabled_optimizers", [])),
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise ModelNotAvailableError(
                f"onnxruntime cannot load {onnx_path} ({exc}); delete {folder} to export again"
            ) from exc
        self.inputs = {i.name for i in self.session.get_inputs()}
        output = self.session.get_outputs()[0]
        self.output = output.name
        width = output.shape[-1] if output.shape else None
        self.dim = width if isinstance(width, int) else int(config.get("hidden_size", 0))
        if self.dim < 1:
            raise ModelNotAvailableError(
                f"cannot tell the vector size of {onnx_path}; delete {folder} to export again"
            )

    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], np.ndarray]:
        """Return token ids truncated to the maximum length, and the untruncated counts."""
        limit = self.spec.max_length
        # encode_batch_fast (tokenizers >= 0.21) skips the character offsets we never use.
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        encodings = encode(list(texts))
        ids: list[list[int]] = []
        counts = np.empty(len(encodings), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            tokens = encoding.ids
            counts[row] = len(tokens)
            if len(tokens) > limit:
                # Cut the text but keep the closing special tokens, as the tokenizer's
                # own truncation does (it truncates before adding them).
                trail = _run_length(encoding.special_tokens_mask[::-1])
                tokens = tokens[: max(limit - trail, 1)] + tokens[len(tokens) - trail :]
            ids.append(tokens)
        return ids, counts

    def encode(
        self, texts: Sequence[str], progress: Any = None
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Embed ``texts``, one text per worker thread at a time.

        Returns:
            ``(vectors, counts, tokens)``: pooled (and, if the spec says so,
            normalised) float32 vectors in input order, untruncated token counts,
            and the number of tokens the model read.
        """
        ids, counts = self.tokenize(texts)
        vectors = np.zeros((len(ids), self.dim), dtype=np.float32)

        def run(batch: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
            rows, input_ids, mask = batch
            feed = {"input_ids": input_ids, "attention_mask": mask}
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(input_ids)
            vectors[rows] = _pool(self.session.run([self.output], feed)[0], self.spec.pooling)
            if progress is not None:
                progress.update(len(rows))

        batches = list(self._batches(ids))
        if self.workers > 1 and len(batches) > 1:
            with ThreadPoolExecutor(self.workers, thread_name_prefix="codesearch-embed") as pool:
                for _ in pool.map(run, batches):
                    pass
        else:
            for batch in batches:
                run(batch)
        if self.spec.normalize:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors, counts, sum(int(b[1].size) for b in batches)

    def _batches(self, ids: list[list[int]]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """One text per session call, longest first (so the workers finish together).

        Nothing is ever padded, so the exported graph's attention needs no mask
        (see :func:`codesearch.export._drop_attention_masks`). Measured here, one
        text per call is as fast as batches of 4 or 32 for fp32 and int8, and it
        makes every vector independent of the other texts: int8's dynamic
        activation scale covers one text, not a whole batch.
        """
        for row in sorted(range(len(ids)), key=lambda i: -len(ids[i])):
            input_ids = np.array([ids[row]], dtype=np.int64)
            yield np.array([row]), input_ids, np.ones_like(input_ids)


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
        export_progress: bool = True,
    ) -> None:
        self.spec = resolve_model(model)
        found = _export.find_export(self.spec, int8, cache_dir)
        if found is None:
            found = _export.export_model(
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
        self._encoder = _OnnxEncoder(found.onnx_path, found.path, self.spec, threads)
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
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()


def _pool(hidden: np.ndarray, pooling: str) -> np.ndarray:
    """Pool unpadded token vectors ``(batch, length, dim)`` into ``(batch, dim)`` float32."""
    if pooling == "cls":
        return np.ascontiguousarray(hidden[:, 0, :], dtype=np.float32)
    return hidden.mean(axis=1, dtype=np.float32)


def _run_length(flags: Sequence[int]) -> int:
    """Count the leading ones in ``flags`` (special tokens, given a reversed mask)."""
    n = 0
    for flag in flags:
        if flag != 1:
            break
        n += 1
    return n


__all__ = [
    "EmbedReport",
    "Embedder",
    "available_cores",
    "document_text",
]
