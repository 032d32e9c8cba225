"""Embedding models: the catalogue, the transformer tier on onnxruntime, and the static tier.

Modules, one job each:

- :mod:`~codesearch.embedding.catalogue`: :class:`ModelSpec` and the models known by name;
- :mod:`~codesearch.embedding.onnx`: the onnxruntime session and tokenizer (nothing else touches them);
- :mod:`~codesearch.embedding.transformer`: :class:`Embedder`, texts into the transformer's vectors;
- :mod:`~codesearch.embedding.static`: :class:`StaticEmbedder`, the static tier's vectors;
- :mod:`~codesearch.embedding.export`: ONNX export, fusing and int8 quantisation into the cache;
- :mod:`~codesearch.embedding.gate`: the int8 quality gate and its pinned calibration text;
- :mod:`~codesearch.embedding.distill`: the static model, distilled with model2vec into the cache.
"""

from __future__ import annotations

from codesearch.embedding.catalogue import DEFAULT_MODEL, MODELS, ModelSpec, resolve_model
from codesearch.embedding.onnx import available_cores
from codesearch.embedding.static import StaticEmbedder
from codesearch.embedding.transformer import Embedder, EmbedReport

__all__ = ["DEFAULT_MODEL", "MODELS", "EmbedReport", "Embedder", "ModelSpec", "StaticEmbedder", "available_cores",
           "resolve_model"]
