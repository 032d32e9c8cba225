"""The transformer on PyTorch, for GPUs: the same tokens and pooling as the ONNX encoder, in half precision.

A corpus's GPU actors embed millions of chunks; onnxruntime's CUDA build is not always there, PyTorch usually is.
:class:`TorchEncoder` reads the model's own weights (the folder the export was made from), takes the tokens
:func:`codesearch.embedding.onnx.tokenize` gives (so both encoders read the same input), runs batches of similar
length in float16 on the GPU (float32 on a CPU) and pools as the spec says. Its vectors match the CPU's int8
vectors to within the int8 gate's tolerance; ``benchmarks/gpu_embed.py`` measures both and their throughput.

Only this module imports torch and transformers for embedding, and only when an encoder is made.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from codesearch.embedding.catalogue import ModelSpec
from codesearch.embedding.onnx import load_tokenizer, tokenize
from codesearch.embedding.vectors import l2_normalize
from codesearch.exceptions import ModelNotAvailableError

BATCH_TOKENS = 64 * 1024
"""Tokens per forward pass (rows × the batch's longest text): large enough to fill a GPU, small enough for any."""


class TorchEncoder:
    """One transformer on PyTorch: texts in, pooled vectors out (the interface of ``OnnxEncoder``).

    Args:
        folder: the model's weights folder (``config.json``, weights, ``tokenizer.json``), as the catalogue locates it.
        spec: pooling, normalisation and maximum length.
        device: ``"cuda"``, ``"cuda:1"``, ``"cpu"``; default: the first GPU, else the CPU.
        half: run in float16 (default: on a GPU).
        batch_tokens: tokens per forward pass.

    Raises:
        ModelNotAvailableError: torch or transformers is missing, or the folder holds no model they can load.
    """

    def __init__(self, folder: Path, spec: ModelSpec, device: str | None = None, half: bool | None = None,
                 batch_tokens: int = BATCH_TOKENS) -> None:
        try:
            import torch
            from transformers import AutoModel
        except ImportError as exc:
            raise ModelNotAvailableError(f"the PyTorch encoder needs torch and transformers ({exc})") from exc
        self.spec = spec
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.half = self.device.type == "cuda" if half is None else half
        self.batch_tokens = batch_tokens
        self.tokenizer = load_tokenizer(folder)
        try:
            model = AutoModel.from_pretrained(str(folder), torch_dtype=torch.float32)
        except (OSError, ValueError) as exc:
            raise ModelNotAvailableError(f"transformers cannot load {folder} ({exc})") from exc
        self.model = (model.half() if self.half else model).to(self.device).eval()
        self.dim = int(model.config.hidden_size)
        self._token_types = "token_type_ids" in inspect.signature(model.forward).parameters
        self._torch = torch

    def tokenize(self, texts: Sequence[str]) -> tuple[list[list[int]], np.ndarray]:
        """Token ids truncated to the maximum length, and the untruncated counts."""
        return tokenize(self.tokenizer, texts, self.spec.max_length)

    def encode(self, texts: Sequence[str], progress: Any = None) -> tuple[np.ndarray, np.ndarray, int]:
        """Embed ``texts`` in batches of similar length.

        Returns:
            ``(vectors, counts, tokens)`` as ``OnnxEncoder.encode``: float32 vectors in input order (normalised if
            the spec says so), untruncated token counts, and the tokens the model read (padding not counted).
        """
        torch = self._torch
        ids, counts = self.tokenize(texts)
        vectors = np.zeros((len(ids), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for rows in self._batches(ids):
                width = max(len(ids[r]) for r in rows)
                input_ids = torch.zeros((len(rows), width), dtype=torch.long)
                mask = torch.zeros((len(rows), width), dtype=torch.long)
                for i, r in enumerate(rows):
                    input_ids[i, : len(ids[r])] = torch.as_tensor(ids[r])
                    mask[i, : len(ids[r])] = 1
                input_ids, mask = input_ids.to(self.device, non_blocking=True), mask.to(self.device, non_blocking=True)
                extra = {"token_type_ids": torch.zeros_like(input_ids)} if self._token_types else {}
                hidden = self.model(input_ids=input_ids, attention_mask=mask, **extra).last_hidden_state.float()
                if self.spec.pooling == "cls":
                    pooled = hidden[:, 0]
                else:
                    weights = mask.unsqueeze(-1).float()
                    pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
                vectors[rows] = pooled.cpu().numpy()
                if progress is not None:
                    progress.update(len(rows))
        if self.spec.normalize:
            l2_normalize(vectors)
        return vectors, counts, sum(len(t) for t in ids)

    def _batches(self, ids: list[list[int]]) -> Iterator[list[int]]:
        """Rows sorted by length, cut so that rows × the longest stays within ``batch_tokens``."""
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        start = 0
        while start < len(order):
            width = max(1, len(ids[order[start]]))
            size = max(1, self.batch_tokens // width)
            yield order[start : start + size]
            start += size


__all__ = ["BATCH_TOKENS", "TorchEncoder"]
