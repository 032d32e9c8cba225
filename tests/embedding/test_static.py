"""The static tier: distilled once from the real MiniLM, embedding exactly as model2vec does."""

from __future__ import annotations

import os

import numpy as np
import pytest

from codesearch.embedding import distill
from codesearch.embedding.static import MAX_TOKENS, StaticEmbedder


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder("minilm", export_progress=False)


@pytest.mark.slow
def test_static_vectors_equal_model2vec_on_real_code(static: StaticEmbedder, embed_code_chunks: list[str]) -> None:
    model2vec = pytest.importorskip("model2vec")
    reference = model2vec.StaticModel(vectors=static.embeddings, tokenizer=static.tokenizer, normalize=True)
    texts = [*embed_code_chunks[:60], "", "x", "a" * 5000, "日本語のコメント"]
    ours = static.embed_documents(texts)
    np.testing.assert_allclose(ours, reference.encode(texts, max_length=MAX_TOKENS), atol=1e-6)
    assert ours.shape == (len(texts), static.dim) and ours.dtype == np.float32
    assert np.allclose(np.linalg.norm(ours[:60], axis=1), 1.0, atol=1e-5)
    assert static.embed_query(texts[0]).tolist() == ours[0].tolist()  # one text at a time, the same vector


@pytest.mark.slow
def test_the_distillation_is_cached_and_fingerprinted(static: StaticEmbedder) -> None:
    found = distill.find_static("minilm")
    assert found is not None and found.path == static.export.path and found.cached
    again = StaticEmbedder("minilm")
    assert again.fingerprint == static.fingerprint and again.dim == static.dim == distill.STATIC_PCA_DIMS
    assert "static" in found.path.name


@pytest.mark.slow
def test_static_vectors_find_related_code(static: StaticEmbedder) -> None:
    docs = [
        "net/retry.py\ndef retry_with_backoff(call, attempts):\n    for n in range(attempts):\n        time.sleep(2 ** n)",
        "ui/colors.py\ndef blend(a, b):\n    return (a + b) / 2",
        "io/csv.py\ndef read_rows(path):\n    with open(path) as f:\n        return list(csv.reader(f))",
    ]
    scores = static.embed_documents(docs) @ static.embed_query("retry a failing call with exponential backoff")
    assert int(np.argmax(scores)) == 0


def test_a_text_holding_a_byte_that_is_not_utf8_is_embedded_as_with_a_replacement(static: StaticEmbedder) -> None:
    # The path of a file whose name is not UTF-8 (os.fsdecode: a surrogate escape) reached the tokenizer, which
    # refused it with a TypeError; a query typed with such a byte did too.
    texts = [os.fsdecode(b"src/bad\xffname.py\ndef fetch():\n    return 1"), os.fsdecode(b"redirect \xff")]
    replaced = ["src/bad\ufffdname.py\ndef fetch():\n    return 1", "redirect \ufffd"]
    assert static.embed_documents(texts).tolist() == static.embed_documents(replaced).tolist()
    assert static.embed_query(texts[1]).tolist() == static.embed_query(replaced[1]).tolist()
