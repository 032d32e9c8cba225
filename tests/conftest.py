"""Shared fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REQUESTS_CORPUS_ENV = "CODESEARCH_REQUESTS_CORPUS"


@pytest.fixture(scope="session")
def requests_corpus() -> Path:
    """A checkout of psf/requests v2.32.3, from ``$CODESEARCH_REQUESTS_CORPUS``."""
    path = os.environ.get(REQUESTS_CORPUS_ENV)
    if not path or not Path(path).is_dir():
        pytest.skip(f"set {REQUESTS_CORPUS_ENV} to a psf/requests v2.32.3 checkout")
    return Path(path)


class HashingEmbedder:
    """A deterministic stand-in for the ONNX model in tests of the search logic.

    Each word of the text (lowercased, identifiers split on ``_``) is hashed into
    one of ``dim`` buckets; vectors are L2-normalised. Texts sharing words are
    similar, so rankings are meaningful, and it costs microseconds. Real-model
    behaviour is tested separately against the exported MiniLM.
    """

    def __init__(self, name: str = "hashing", dim: int = 256, salt: str = "") -> None:
        from types import SimpleNamespace

        self.spec = SimpleNamespace(name=name)
        self.dim = dim
        self.salt = salt
        self.fingerprint = f"{name}-{dim}-{salt}"
        self.calls: list[int] = []

    def _vector(self, text: str):  # type: ignore[no-untyped-def]
        import hashlib
        import re

        import numpy as np

        vec = np.zeros(self.dim, dtype=np.float32)
        for word in re.findall(r"[a-z0-9]+", text.lower().replace("_", " ")):
            digest = hashlib.blake2b((self.salt + word).encode(), digest_size=4).digest()
            vec[int.from_bytes(digest, "little") % self.dim] += 1.0
        norm = float(np.linalg.norm(vec))
        return vec / norm if norm else vec

    def embed_documents(self, texts, progress=False):  # type: ignore[no-untyped-def]
        import numpy as np

        self.calls.append(len(texts))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts])

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        return self._vector(text)


@pytest.fixture
def hashing_embedder() -> HashingEmbedder:
    return HashingEmbedder()
