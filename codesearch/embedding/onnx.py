"""The onnxruntime session and the fast tokenizer of one exported graph.

This module alone creates an ``InferenceSession`` and loads a ``tokenizers``
tokenizer (fastembed's ``onnx_model.py`` plays the same part):
:class:`OnnxEncoder` takes texts and gives pooled vectors, and
:func:`load_tokenizer` gives the static tier its tokenizer.

A tokenizer takes valid Unicode only (a Rust string cannot hold a lone
surrogate: ``tokenizers`` refuses such a ``str`` with a ``TypeError``), and a
Python ``str`` here may hold one: a file name that is not UTF-8 keeps each
such byte as a surrogate escape (``os.fsdecode``), and so does a query typed
with one. Every text reaches a tokenizer through :func:`tokenizer_text`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from codesearch.cache import MANIFEST_FILE
from codesearch.embedding.catalogue import ModelSpec
from codesearch.embedding.vectors import l2_normalize, pool
from codesearch.exceptions import ModelNotAvailableError
from codesearch.jsonfiles import read_json

ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "config.json"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def tokenizer_text(text: str) -> str:
    """``text`` as a tokenizer may take it: each lone surrogate (a byte that was not UTF-8) becomes U+FFFD."""
    if text.isascii() or _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def load_tokenizer(folder: Path) -> Any:
    """The fast tokenizer (``tokenizers.Tokenizer``) saved in ``folder``, without truncation or padding.

    Raises:
        Exception: what ``tokenizers`` raises for a missing or unreadable file.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def available_cores() -> int:
    """Return the number of CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


class OnnxEncoder:
    """One exported graph with its tokenizer: texts in, pooled vectors out.

    Args:
        onnx_path: the graph.
        folder: the export folder holding ``tokenizer.json``, ``config.json``
            and ``manifest.json`` (onnxruntime fusions to leave off).
        spec: pooling, normalisation and maximum length.
        threads: worker threads, each running the session on one core;
            defaults to the available cores.
        providers: onnxruntime execution providers, best first (default: the
            CPU's; a corpus's GPU actors pass CUDA's first).

    Raises:
        ModelNotAvailableError: onnxruntime cannot load the graph, or its vector size is unknown.
    """

    def __init__(self, onnx_path: Path, folder: Path, spec: ModelSpec, threads: int | None = None,
                 providers: Sequence[str] | None = None):
        import onnxruntime as ort

        self.spec = spec
        self.tokenizer = load_tokenizer(folder)
        config = read_json(folder / CONFIG_FILE) or {}
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
        manifest = read_json(folder / MANIFEST_FILE) or {}
        try:
            self.session = ort.InferenceSession(
                str(onnx_path),
                options,
                providers=list(providers or ["CPUExecutionProvider"]),
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
        return tokenize(self.tokenizer, texts, self.spec.max_length)

    def encode(self, texts: Sequence[str], progress: Any = None) -> tuple[np.ndarray, np.ndarray, int]:
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
            vectors[rows] = pool(self.session.run([self.output], feed)[0], self.spec.pooling)
            if progress is not None:
                progress.update(len(rows))

        batches = list(self._batches(ids))
        if self.workers > 1 and len(batches) > 1:
            with ThreadPoolExecutor(self.workers, thread_name_prefix="codesearch-embed") as workers:
                for _ in workers.map(run, batches):
                    pass
        else:
            for batch in batches:
                run(batch)
        if self.spec.normalize:
            l2_normalize(vectors)
        return vectors, counts, sum(int(b[1].size) for b in batches)

    def _batches(self, ids: list[list[int]]) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """One text per session call, longest first (so the workers finish together).

        Nothing is ever padded, so the exported graph's attention needs no mask
        (see :func:`codesearch.embedding.export.drop_attention_masks`). Measured
        here, one text per call is as fast as batches of 4 or 32 for fp32 and
        int8, and it makes every vector independent of the other texts: int8's
        dynamic activation scale covers one text, not a whole batch.
        """
        for row in sorted(range(len(ids)), key=lambda i: -len(ids[i])):
            input_ids = np.array([ids[row]], dtype=np.int64)
            yield np.array([row]), input_ids, np.ones_like(input_ids)


def tokenize(tokenizer: Any, texts: Sequence[str], limit: int) -> tuple[list[list[int]], np.ndarray]:
    """Token ids of ``texts`` truncated to ``limit`` tokens (closing special tokens kept), and the untruncated counts.

    Every encoder of the transformer (onnxruntime here, PyTorch in :mod:`codesearch.embedding.torch_encoder`)
    reads the tokens this function gives, so both see the same input.
    """
    # encode_batch_fast (tokenizers >= 0.21) skips the character offsets we never use.
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    encodings = encode([tokenizer_text(text) for text in texts])
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


def _run_length(flags: Sequence[int]) -> int:
    """Count the leading ones in ``flags`` (special tokens, given a reversed mask)."""
    n = 0
    for flag in flags:
        if flag != 1:
            break
        n += 1
    return n


__all__ = ["CONFIG_FILE", "ONNX_FILE", "TOKENIZER_FILE", "OnnxEncoder", "available_cores", "load_tokenizer", "tokenize",
           "tokenizer_text"]
