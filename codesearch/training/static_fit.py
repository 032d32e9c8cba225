"""The static tier fitted on code: token vectors whose per-text means come close to the transformer's text vectors.

model2vec distils a static model by running each vocabulary token through the transformer alone; a text's static
vector is then the mean of its tokens' vectors (:class:`~codesearch.embedding.static.StaticEmbedder`). A token's
meaning inside code (``self``, ``err``, ``::``) is not what it means alone, so :func:`fit_static` fits the token
vectors to texts instead, in the spirit of model2vec's tokenlearn: given texts (code chunks and doc comments, never
from the benchmark) and the transformer's vectors of them, it finds token vectors ``E`` minimising

    ``|| M E - Y ||^2 + ridge * || E - E0 A ||^2``

where ``M`` averages each text's token rows (the static tier's own tokens), ``Y`` is the transformer's vectors
projected on their top ``dim`` directions, and ``E0 A`` is the distilled model mapped into that space by least
squares -- the prior that tokens the texts never hold keep. The normal equations are solved by conjugate gradients,
all columns at once (sparse products only; minutes on two cores for ~100k texts).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from codesearch.cache import MANIFEST_FILE, publish, sha256_files
from codesearch.embedding.distill import STATIC_EMBEDDINGS_FILE, STATIC_FORMAT
from codesearch.embedding.onnx import TOKENIZER_FILE
from codesearch.embedding.static import StaticEmbedder


def _mean_operator(ids: Sequence[Sequence[int]], vocabulary: int) -> Any:
    """The sparse ``(texts, vocabulary)`` matrix whose row ``i`` averages text ``i``'s token rows."""
    from scipy import sparse

    rows = np.repeat(np.arange(len(ids)), [len(t) for t in ids])
    cols = np.fromiter((t for text in ids for t in text), dtype=np.int64, count=len(rows))
    weights = np.repeat([1.0 / len(t) if t else 0.0 for t in ids], [len(t) for t in ids])
    return sparse.csr_matrix((weights.astype(np.float32), (rows, cols)), shape=(len(ids), vocabulary))


def fit_static(static: StaticEmbedder, texts: Sequence[str], targets: np.ndarray, *, ridge: float = 0.05,
               iterations: int = 80, progress: bool = True) -> tuple[np.ndarray, dict[str, float]]:
    """Token vectors fitted so that each text's mean comes close to its target (see the module docstring).

    Args:
        static: the distilled static model: its tokenizer and its vectors, the prior.
        texts: the texts, as the index gives them to the models (``path`` newline code; a query as it is).
        targets: the transformer's vectors of ``texts``, one row each.
        ridge: how strongly a token stays at its prior (per unit of the mean operator's weight).
        iterations: conjugate-gradient steps.
        progress: a progress bar.

    Returns:
        ``(embeddings, figures)``: the ``(vocabulary, d)`` float32 vectors (``d`` the static model's dimension, or
        fewer where the targets span fewer directions), and the mean cosine of the texts' static vectors with
        their projected targets before and after the fit.
    """
    from tqdm.auto import tqdm

    ids = static.token_ids(texts)
    keep = [i for i, t in enumerate(ids) if t]
    ids = [ids[i] for i in keep]
    y_full = np.asarray(targets, dtype=np.float64)[keep]
    e0 = static.embeddings.astype(np.float64)
    vocabulary, dim = e0.shape
    # The targets' top directions span the space the fitted vectors live in.
    _, _, directions = np.linalg.svd(y_full[: min(len(y_full), 50_000)], full_matrices=False)
    dim = min(dim, directions.shape[0])
    projection = directions[:dim].T
    y = y_full @ projection
    m = _mean_operator(ids, vocabulary)
    # The prior: the distilled vectors mapped into that space by least squares on the texts' means.
    means0 = m @ e0
    align = np.linalg.solve(means0.T @ means0 + 1e-6 * np.eye(e0.shape[1]), means0.T @ y)
    prior = e0 @ align

    def cosine(vectors: np.ndarray) -> float:
        a = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        b = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
        return float((a * b).sum(axis=1).mean())

    mt = m.T.tocsr()
    scale = ridge * max(float(m.multiply(m).sum()) / vocabulary, 1e-12)  # ridge relative to the data's weight per token

    def normal(e: np.ndarray) -> np.ndarray:
        return mt @ (m @ e) + scale * e

    rhs = mt @ y + scale * prior
    e = prior.copy()
    r = rhs - normal(e)
    p = r.copy()
    rr = (r * r).sum(axis=0)
    for _ in tqdm(range(iterations), desc="fit static vectors", disable=not progress, leave=False):
        q = normal(p)
        alpha = rr / np.maximum((p * q).sum(axis=0), 1e-30)
        e += p * alpha
        r -= q * alpha
        rr_new = (r * r).sum(axis=0)
        p = r + p * (rr_new / np.maximum(rr, 1e-30))
        rr = rr_new
    figures = {"cosine_distilled": cosine(m @ prior), "cosine_fitted": cosine(m @ e), "texts": float(len(ids))}
    return e.astype(np.float32), figures


def save_static(static: StaticEmbedder, embeddings: np.ndarray, out: str | os.PathLike[str],
                figures: dict[str, Any] | None = None, *, float16: bool = False) -> Path:
    """Write a static model folder ``StaticEmbedder.from_folder`` reads: ``embeddings`` with ``static``'s tokenizer
    (in float16 with ``float16``: half the size, the same rankings on DEV)."""
    target = Path(out)
    scratch = target.parent / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    try:
        np.save(scratch / STATIC_EMBEDDINGS_FILE,
                np.ascontiguousarray(embeddings, dtype=np.float16 if float16 else np.float32), allow_pickle=False)
        shutil.copyfile(static.export.path / TOKENIZER_FILE, scratch / TOKENIZER_FILE)
        base = json.loads((static.export.path / MANIFEST_FILE).read_text("utf-8"))
        files = [scratch / STATIC_EMBEDDINGS_FILE, scratch / TOKENIZER_FILE]
        manifest = {
            "format": STATIC_FORMAT, "key": target.name, "model": base.get("model"), "dim": int(embeddings.shape[1]),
            "normalize": True, "median_token_length": base.get("median_token_length", 4),
            "unk_token_id": base.get("unk_token_id"), "sha256": sha256_files(files),
            "fitted_from": base.get("sha256"), "fit": figures or {}, "dtype": "float16" if float16 else "float32",
        }
        publish(scratch, target, [p.name for p in files], manifest)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


DEFAULT_RIDGE = 0.2
"""The ridge chosen on DEV's folds for MiniLM (0.01, 0.05, 0.2, 1.0 measured; both folds chose 0.2)."""


MIN_TEXTS = 10_000
"""Fewer texts than this leave the fit's top directions unsettled (a text adds at most one; the shipped fit read
110,962): :func:`fit_model_static` refuses them and ``codesearch train`` keeps the distillation instead."""


def read_texts(pairs: str | os.PathLike[str]) -> list[str]:
    """The texts of a training view (``codesearch.training.pipeline.training_view``): every code, then every query."""
    import gzip

    with gzip.open(pairs, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return [r["code"] for r in rows] + [r["query"] for r in rows]


def fit_model_static(model: Any, pairs: str | os.PathLike[str], out: str | os.PathLike[str], *,
                     ridge: float = DEFAULT_RIDGE, float16: bool = False, progress: bool = True) -> dict[str, Any]:
    """Fit ``model``'s static tier on a training view's texts, targets from its int8 transformer; save it in ``out``.

    Returns the figures written into the folder's manifest (cosines before and after, texts, seconds).

    Raises:
        ValueError: fewer than :data:`MIN_TEXTS` texts.
    """
    import time

    from codesearch.embedding import Embedder

    texts = read_texts(pairs)
    if len(texts) < MIN_TEXTS:
        raise ValueError(f"{len(texts):,} texts are too few to fit a static tier on (at least {MIN_TEXTS:,})")
    started = time.perf_counter()
    targets = Embedder(model, int8=True, export_progress=progress).embed_documents(texts, progress=progress)
    embedded = time.perf_counter() - started
    static = StaticEmbedder(_distilled(model), export_progress=progress)
    fitted, figures = fit_static(static, texts, targets, ridge=ridge, progress=progress)
    found: dict[str, Any] = {**figures, "ridge": ridge, "embed_seconds": round(embedded, 1),
                             "fit_seconds": round(time.perf_counter() - started - embedded, 1)}
    save_static(static, fitted, out, found, float16=float16)
    return found


def _distilled(model: Any) -> Any:
    """``model`` with its static tier to be distilled (the prior a fit starts from), whatever it ships."""
    import dataclasses

    from codesearch.embedding.catalogue import resolve_model

    return dataclasses.replace(resolve_model(model), static=None)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m codesearch.training.static_fit``: fit a model's static tier on a training view and save it."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m codesearch.training.static_fit", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="minilm", help="the transformer whose vectors the fit follows")
    parser.add_argument("--pairs", required=True, help="a training view's train.jsonl.gz (codesearch train's work folder)")
    parser.add_argument("--out", required=True, help="the static model folder to write")
    parser.add_argument("--ridge", type=float, default=DEFAULT_RIDGE)
    parser.add_argument("--float16", action="store_true", help="store the vectors in float16 (as shipped)")
    args = parser.parse_args(argv)
    figures = fit_model_static(args.model, args.pairs, args.out, ridge=args.ridge, float16=args.float16)
    print(json.dumps(figures), file=sys.stdout)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())


__all__ = ["DEFAULT_RIDGE", "MIN_TEXTS", "fit_model_static", "fit_static", "read_texts", "save_static"]
