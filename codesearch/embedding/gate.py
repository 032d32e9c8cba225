"""The int8 quality gate: an int8 graph is kept only if its vectors stay close to fp32's on real code.

The calibration text is a pinned list of Python standard library modules
(:data:`CALIBRATION_FILES`), cut by the line chunker: real code that does not
move when codesearch's own modules do (the gate once read ``codesearch/*.py``,
so every refactor silently changed what it tested).
"""

from __future__ import annotations

import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from codesearch.embedding.catalogue import ModelSpec
from codesearch.embedding.onnx import ONNX_FILE, OnnxEncoder
from codesearch.embedding.vectors import l2_normalize
from codesearch.exceptions import ExportError

GATE_MEAN_COS = 0.985
"""The int8 model's mean cosine to fp32 over the calibration chunks must reach this.

0.985 rather than 0.99: with onnxruntime 1.32 MiniLM's per-channel int8 scored
0.9897 on the earlier calibration text (0.9938 with the onnxruntime before), and
on the peer benchmark it ranks as well as fp32 (NDCG@10 of the two within
0.002) while embedding 1.7x as fast as fp32 (the next setup, feed-forward
outputs in fp32, only 1.3x). Broken setups stay refused by ``GATE_MIN_COS``
(quantised embeddings: min cosine 0.79)."""

GATE_MIN_COS = 0.97
"""Every calibration chunk's cosine between int8 and fp32 must reach this."""

CALIBRATION_CHUNKS = 128
"""How many chunks the gate compares."""

CALIBRATION_FILES = (
    "json/decoder.py",
    "json/encoder.py",
    "textwrap.py",
    "shlex.py",
    "fnmatch.py",
    "csv.py",
    "configparser.py",
    "argparse.py",
    "dataclasses.py",
    "pathlib.py",
    "functools.py",
    "http/client.py",
)
"""Standard library modules, in order, whose line chunks are the calibration text (183 chunks on Python 3.11)."""


def calibration_texts(limit: int = CALIBRATION_CHUNKS) -> list[str]:
    """Up to ``limit`` real code chunks, as document texts, from :data:`CALIBRATION_FILES`.

    Raises:
        ExportError: fewer than 16 chunks could be read.
    """
    from codesearch.chunking import chunk_text, document_text

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    for name in CALIBRATION_FILES:
        try:
            source = (stdlib / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.extend(document_text(name, chunk.text) for chunk in chunk_text(name, source))
        if len(texts) >= limit:
            break
    if len(texts) < 16:
        raise ExportError(
            f"found only {len(texts)} code chunks in the Python standard library at {stdlib} to check int8 "
            "quality against; export without --int8"
        )
    return texts[:limit]


def int8_gate(
    fp32_dir: Path,
    int8_onnx: Path,
    spec: ModelSpec,
    texts: Sequence[str],
    mean_cos: float = GATE_MEAN_COS,
    min_cos: float = GATE_MIN_COS,
) -> dict[str, Any]:
    """Compare an int8 graph with the fp32 export on ``texts``.

    Args:
        fp32_dir: an fp32 export folder (graph, tokenizer, config).
        int8_onnx: the int8 graph; it shares the folder's tokenizer and config.
        spec: gives pooling and maximum length.
        texts: document texts, e.g. from :func:`calibration_texts`.
        mean_cos: the least mean cosine that passes.
        min_cos: the least per-text cosine that passes.

    Returns:
        ``{"passed", "mean_cos", "min_cos", "chunks", "thresholds"}``.
    """
    inputs = [spec.document_prefix + t for t in texts]
    reference = l2_normalize(OnnxEncoder(fp32_dir / ONNX_FILE, fp32_dir, spec).encode(inputs)[0])
    candidate = l2_normalize(OnnxEncoder(int8_onnx, fp32_dir, spec).encode(inputs)[0])
    cosines = np.asarray((reference * candidate).sum(axis=1))
    mean, low = float(cosines.mean()), float(cosines.min())
    return {
        "passed": bool(mean >= mean_cos and low >= min_cos),
        "mean_cos": round(mean, 6),
        "min_cos": round(low, 6),
        "chunks": len(texts),
        "thresholds": {"mean_cos": mean_cos, "min_cos": min_cos},
    }


__all__ = ["CALIBRATION_CHUNKS", "CALIBRATION_FILES", "GATE_MEAN_COS", "GATE_MIN_COS", "calibration_texts", "int8_gate"]
