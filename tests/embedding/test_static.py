"""The static tier: distilled once from the real MiniLM, embedding exactly as model2vec does."""

from __future__ import annotations

import os

import numpy as np
import pytest

from codesearch.embedding import distill
from codesearch.embedding.catalogue import resolve_model
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
def test_the_distillation_is_cached_and_fingerprinted() -> None:
    # A model without a shipped static tier is distilled once, into the cache.
    spec = resolve_model("minilm", static=None)
    distilled = StaticEmbedder(spec, export_progress=False)
    found = distill.find_static(spec)
    assert found is not None and found.path == distilled.export.path and found.cached
    again = StaticEmbedder(spec)
    assert again.fingerprint == distilled.fingerprint and again.dim == distilled.dim == distill.STATIC_PCA_DIMS
    assert "static" in found.path.name


def test_minilm_answers_first_searches_from_its_shipped_static_tier(static: StaticEmbedder) -> None:
    """The catalogue's minilm reads the static tier fitted on code that ships in codesearch_models (no distillation,
    no torch); its vectors are the fit's rounded to float16, stored as float32 so that loading converts nothing."""
    from codesearch.embedding.catalogue import static_folder

    folder = static_folder(resolve_model("minilm"))
    assert folder is not None and folder.name == "minilm-code-static" and (folder / "MODEL_CARD.md").is_file()
    assert static.export.path == folder and static.embeddings.dtype == np.float32 and static.dim == 256
    stored = np.load(folder / "embeddings.npy")
    assert stored.dtype == np.float32 and np.array_equal(stored.astype(np.float16).astype(np.float32), stored)
    assert static.fingerprint != StaticEmbedder(resolve_model("minilm", static=None)).fingerprint
    with pytest.raises(Exception, match="not in"):
        static_folder(resolve_model("minilm", static=str(folder.parent / "missing")))


@pytest.mark.slow
def test_an_index_of_an_earlier_static_tier_is_recomputed_not_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Upgrading codesearch to a new shipped static tier: the next search of an index built with the old one (the
    model2vec distillation) recomputes its static vectors instead of refusing the index; read-only, it refuses."""
    from codesearch import CodeSearch
    from codesearch.exceptions import ModelMismatchError

    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.py").write_text('def parse_header(value):\n    """Parse one header."""\n    return value\n')
    old = CodeSearch(tmp_path / "repo", model=resolve_model("minilm", static=None), index_dir=tmp_path / "idx")
    old.index(tier="static")
    before = old.info()["static_fingerprint"]
    with pytest.raises(ModelMismatchError, match="another export"):
        CodeSearch(tmp_path / "repo", index_dir=tmp_path / "idx", read_only=True).search("header")
    now = CodeSearch(tmp_path / "repo", index_dir=tmp_path / "idx")
    assert now.search("parse one header")[0].path == "a.py"
    assert now.info()["static_fingerprint"] == now.static_embedder.fingerprint != before


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


@pytest.mark.slow
def test_a_static_model_fitted_to_texts_comes_closer_to_their_targets_and_loads_from_its_folder(
    static: StaticEmbedder, embed_code_chunks: list[str], tmp_path
) -> None:
    """fit_static: each text's mean of fitted token vectors comes closer to its target than the distilled model's,
    the folder it is saved in reads back, and a text's tokens are what embed_documents averages."""
    from codesearch.training.static_fit import fit_static, save_static

    # More texts than the static model has dimensions, so that no linear map of the distilled vectors fits them all.
    texts = list(dict.fromkeys(line.strip() for chunk in embed_code_chunks for line in chunk.splitlines()
                               if len(line.split()) >= 3))[:600]
    assert len(texts) == 600
    ids = static.token_ids(texts)
    assert all(0 < len(t) <= MAX_TOKENS for t in ids)
    mean = static.embeddings[ids[0]].mean(axis=0)
    np.testing.assert_allclose(static.embed_documents(texts[:1])[0], mean / np.linalg.norm(mean), atol=1e-6)
    rng = np.random.default_rng(0)
    targets = rng.normal(size=(len(texts), 48)).astype(np.float32)  # any text vectors: the fit follows them
    fitted, figures = fit_static(static, texts, targets, ridge=0.01, iterations=60, progress=False)
    # The vectors live in the targets' top directions: at most as many as the static model's, or the texts'.
    assert fitted.shape == (static.embeddings.shape[0], 48)
    assert figures["cosine_fitted"] > figures["cosine_distilled"] + 0.1
    folder = save_static(static, fitted, tmp_path / "fitted", figures)
    loaded = StaticEmbedder.from_folder(folder, "minilm")
    np.testing.assert_array_equal(loaded.embeddings, fitted)
    assert loaded.fingerprint != static.fingerprint and loaded.embed_documents(texts).shape == (len(texts), 48)
    with pytest.raises(Exception, match="no complete static model"):
        StaticEmbedder.from_folder(tmp_path, "minilm")
