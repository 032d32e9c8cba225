"""The ONNX runtime embedder against sentence-transformers (torch), and its contract."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from codesearch.chunking import document_text
from codesearch.embedding import Embedder, EmbedReport
from codesearch.embedding.catalogue import resolve_model
from codesearch.embedding.onnx import tokenizer_text
from codesearch.exceptions import ExportError, ModelNotAvailableError


def test_document_text_is_path_newline_text() -> None:
    assert document_text("src/a.py", "x = 1\ny = 2") == "src/a.py\nx = 1\ny = 2"


APACHE = """/*
 * Copyright (C) 2018 The Gson authors
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 */

package com.google.gson.internal;
"""


@pytest.mark.parametrize(
    ("text", "model_reads"),
    [
        (APACHE, "package com.google.gson.internal;\n"),
        ("# Copyright 2024 Acme\n# SPDX-License-Identifier: MIT\nimport os\n", "import os\n"),
        ("<!-- Licensed to the ASF -->\n<project/>", "<project/>"),
        ("-- Copyright (c) 2020\nmodule Main where", "module Main where"),
        # Kept: a comment that documents the code, a licence that is the whole chunk, a licence after code.
        ("# the helper below parses netrc files\ndef netrc(): ...", "# the helper below parses netrc files\ndef netrc(): ..."),
        ("/* Copyright 2018 */\n", "/* Copyright 2018 */\n"),
        ("#include <uv.h>\n/* Copyright Joyent */\nint x;", "#include <uv.h>\n/* Copyright Joyent */\nint x;"),
    ],
)
def test_document_text_leaves_a_leading_licence_header_out(text: str, model_reads: str) -> None:
    assert document_text("src/A.java", text) == "src/A.java\n" + model_reads


def test_report_prints_what_happened() -> None:
    report = EmbedReport(chunks=3, median_tokens=120.0, max_tokens=900, truncated=1, seconds=0.5, tokens=500)
    assert str(report) == "3 chunks, tokens median 120 / max 900, 1 truncated, 0.50 s"


def test_no_export_and_no_torch_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from codesearch.embedding import export

    monkeypatch.setattr(export, "_EXPORT_MODULES", ("codesearch_no_such_module",))
    with pytest.raises(ExportError, match="pip install"):
        Embedder("minilm", cache_dir=tmp_path)


# --- MiniLM: ONNX fp32 against sentence-transformers ------------------------------------


@pytest.mark.slow
def test_onnx_matches_sentence_transformers_on_real_code(  # type: ignore[no-untyped-def]
    minilm_embedder, minilm_sentence_transformer, embed_code_chunks
) -> None:
    assert len(embed_code_chunks) >= 100
    got = minilm_embedder.embed_documents(embed_code_chunks)
    want = minilm_sentence_transformer.encode(embed_code_chunks, batch_size=32, normalize_embeddings=True)
    assert got.dtype == np.float32 and got.shape == (len(embed_code_chunks), 384)
    cosines = (got * want).sum(axis=1)
    assert cosines.min() >= 0.9999, cosines.min()
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    report = minilm_embedder.last_report
    assert report.chunks == len(embed_code_chunks) and report.truncated > 50  # most chunks exceed 128 tokens


@pytest.mark.slow
def test_pooling_is_the_mask_weighted_mean_before_normalising(  # type: ignore[no-untyped-def]
    minilm_embedder, embed_code_chunks
) -> None:
    """Unnormalised vectors equal transformers' token vectors averaged over the attention mask."""
    torch = pytest.importorskip("torch")
    from transformers import AutoModel, AutoTokenizer

    texts = embed_code_chunks[:8] + [t[:200] for t in embed_code_chunks[:8]]  # padded in torch
    folder = minilm_embedder.spec.local_path()
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(texts, truncation=True, max_length=minilm_embedder.spec.max_length, padding=True,
                      return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    mean = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    raw = Embedder(resolve_model("minilm", normalize=False), export_progress=False)
    assert raw.export.path == minilm_embedder.export.path  # pooling is applied after the graph
    got = raw.embed_documents(texts)
    np.testing.assert_allclose(got, mean, rtol=1e-3, atol=2e-5)
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-2)
    # CLS pooling of the same tokens is a different vector: the pooling choice is what is tested.
    cls = hidden[:, 0].numpy()
    assert ((got * cls).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(cls, axis=1)).max() < 0.99


@pytest.mark.slow
def test_truncation_and_token_counts_follow_the_models_tokenizer(  # type: ignore[no-untyped-def]
    minilm_embedder, embed_code_chunks
) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_embedder.spec.local_path())
    texts = embed_code_chunks[:40]
    counts = minilm_embedder.token_counts(texts)
    assert counts.tolist() == [len(tokenizer(t)["input_ids"]) for t in texts]
    limit = minilm_embedder.spec.max_length
    ids, _ = minilm_embedder._encoder.tokenize(texts)
    assert ids == [tokenizer(t, truncation=True, max_length=limit)["input_ids"] for t in texts]
    minilm_embedder.embed_documents(texts)
    report = minilm_embedder.last_report
    assert report.truncated == int((counts > limit).sum()) > 0
    assert report.max_tokens == counts.max() and report.median_tokens == float(np.median(counts))
    assert report.tokens == int(np.minimum(counts, limit).sum()) and report.seconds > 0


@pytest.mark.slow
@pytest.mark.parametrize("fixture", ["minilm_embedder", "minilm_int8_embedder"])
def test_a_vector_does_not_depend_on_the_other_texts(  # type: ignore[no-untyped-def]
    fixture: str, request: pytest.FixtureRequest, embed_code_chunks
) -> None:
    """Also for int8, whose activation scale would otherwise cover a whole batch."""
    embedder = request.getfixturevalue(fixture)
    texts = embed_code_chunks[:20] + ["x = 1", "def f():\n    return 2", "x = 1"]
    together = embedder.embed_documents(texts)
    alone = np.stack([embedder.embed_documents([t])[0] for t in texts])
    assert np.array_equal(together, alone)
    order = np.random.default_rng(0).permutation(len(texts))
    assert np.array_equal(embedder.embed_documents([texts[i] for i in order]), together[order])
    assert np.array_equal(together[-1], together[-3])


@pytest.mark.slow
def test_empty_input_and_queries(minilm_embedder) -> None:  # type: ignore[no-untyped-def]
    empty = minilm_embedder.embed_documents([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert minilm_embedder.last_report.chunks == 0
    query = minilm_embedder.embed_query("how are redirects handled")
    assert query.shape == (384,) and query.dtype == np.float32
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    # MiniLM has no query prefix: a query is embedded like a document of the same text.
    np.testing.assert_allclose(query, minilm_embedder.embed_documents(["how are redirects handled"])[0], atol=1e-6)


@pytest.mark.slow
def test_the_query_prefix_is_prepended(embed_tiny_bert_dir: Path, tmp_path: Path) -> None:
    spec = resolve_model(str(embed_tiny_bert_dir), pooling="cls", max_length=64, query_prefix="query: ")
    embedder = Embedder(spec, cache_dir=tmp_path, export_progress=False)
    with_prefix = embedder.embed_documents(["query: where is the lock"])[0]
    np.testing.assert_allclose(embedder.embed_query("where is the lock"), with_prefix, atol=1e-6)
    assert not np.allclose(embedder.embed_documents(["where is the lock"])[0], with_prefix, atol=1e-3)


@pytest.mark.slow
def test_progress_bar_is_shown_on_request(minilm_embedder, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    minilm_embedder.embed_documents(["a = 1", "b = 2"])
    assert "embed minilm" not in capsys.readouterr().err
    minilm_embedder.embed_documents(["a = 1", "b = 2"], progress=True)
    assert "embed minilm" in capsys.readouterr().err


@pytest.mark.slow
def test_fingerprint_identifies_graph_tokenizer_and_settings(  # type: ignore[no-untyped-def]
    minilm_embedder, minilm_int8_embedder
) -> None:
    fingerprint = minilm_embedder.fingerprint
    assert len(fingerprint) == 64 and int(fingerprint, 16) >= 0
    assert Embedder("minilm", export_progress=False).fingerprint == fingerprint
    assert minilm_int8_embedder.fingerprint != fingerprint
    for change in ({"max_length": 64}, {"query_prefix": "q: "}, {"pooling": "cls"}, {"normalize": False}):
        assert Embedder(resolve_model("minilm", **change), export_progress=False).fingerprint != fingerprint
    assert minilm_embedder.dim == 384 and minilm_embedder.spec.name == "minilm"


@pytest.mark.slow
def test_a_wrong_dimension_is_reported(minilm_embedder) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ModelNotAvailableError, match="384-dim vectors, not 768"):
        Embedder(resolve_model("minilm", dim=768), export_progress=False)


@pytest.mark.slow
def test_int8_stays_close_to_fp32_on_real_code(  # type: ignore[no-untyped-def]
    minilm_embedder, minilm_int8_embedder, embed_code_chunks
) -> None:
    fp32 = minilm_embedder.embed_documents(embed_code_chunks)
    int8 = minilm_int8_embedder.embed_documents(embed_code_chunks)
    cosines = (fp32 * int8).sum(axis=1)
    assert cosines.mean() >= 0.99 and cosines.min() >= 0.97
    assert cosines.min() < 0.99999  # it really is a different (quantised) model


@pytest.mark.slow
@pytest.mark.parametrize("int8", [False, True])
def test_embedding_from_the_cache_never_imports_torch(minilm_int8_embedder, int8: bool) -> None:  # type: ignore[no-untyped-def]
    code = (
        "import sys\n"
        "from codesearch.embedding import Embedder\n"
        f"e = Embedder('minilm', int8={int8})\n"
        "assert e.int8 == " + str(int8) + "\n"
        "e.embed_documents(['src/a.py\\nx = 1', 'src/b.py\\ndef f(): pass'])\n"
        "e.embed_query('where is x set')\n"
        "heavy = ('torch', 'transformers', 'optimum', 'sentence_transformers')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ), check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


@pytest.mark.slow
def test_benchmark_script_runs_and_writes_its_json(minilm_int8_embedder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("sentence_transformers")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("transformer.py", "catalogue.py"):
        (corpus / name).write_text((ROOT / "codesearch" / "embedding" / name).read_text(encoding="utf-8"))
    out = tmp_path / "out.json"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.embed_speed", "--corpus", str(corpus),
         "--repeat", "1", "--limit", "6", "--json", str(out)],
        capture_output=True, text=True, timeout=600, check=False, cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    keys = {"chunks", "torch_s", "onnx_fp32_s", "onnx_int8_s", "fp32_speedup", "int8_speedup",
            "fp32_min_cos", "int8_min_cos", "int8_mean_cos"}
    assert keys <= set(result) and result["chunks"] == 6
    assert result["fp32_min_cos"] >= 0.9999 and result["int8_min_cos"] >= 0.97
    assert "onnxruntime int8" in run.stdout


@pytest.mark.slow
def test_the_pytorch_encoder_reads_the_same_tokens_as_onnx(  # type: ignore[no-untyped-def]
    minilm_embedder, minilm_int8_embedder, embed_code_chunks
) -> None:
    """The GPU actors' encoder (PyTorch; float32 on this CPU, float16 on a GPU) agrees with the ONNX graphs."""
    pytest.importorskip("torch")
    from codesearch.embedding.torch_encoder import TorchEncoder

    texts = embed_code_chunks[:60] + ["x = 1", "def f():\n    return 2"]
    encoder = TorchEncoder(minilm_embedder.spec.local_path(), minilm_embedder.spec, device="cpu", batch_tokens=2048)
    got, counts, tokens = encoder.encode(texts)
    want = minilm_embedder.embed_documents(texts)
    assert got.shape == want.shape and counts.tolist() == minilm_embedder.token_counts(texts).tolist()
    assert tokens == minilm_embedder.last_report.tokens  # the same truncation, padding not counted
    assert (got * want).sum(axis=1).min() >= 0.9999  # padded batches give the unpadded vectors
    int8 = minilm_int8_embedder.embed_documents(texts)
    assert (got * int8).sum(axis=1).min() >= 0.98  # within the int8 gate's tolerance of fp32


def test_a_text_holding_a_byte_that_is_not_utf8_is_tokenized_with_a_replacement(minilm_int8_embedder) -> None:  # type: ignore[no-untyped-def]
    # A path that is not UTF-8 (os.fsdecode keeps the byte as a surrogate escape), or a query typed with one.
    query, replaced = os.fsdecode(b"redirect \xff after post"), "redirect \ufffd after post"
    assert minilm_int8_embedder.embed_query(query).tolist() == minilm_int8_embedder.embed_query(replaced).tolist()
    documents = minilm_int8_embedder.embed_documents([os.fsdecode(b"src/bad\xffname.py\ndef f():\n    return 1")])
    assert documents.shape == (1, minilm_int8_embedder.dim) and np.isfinite(documents).all()
    assert tokenizer_text("plain \udcff\ud800 text") == "plain \ufffd\ufffd text"
    assert tokenizer_text("é plain") == "é plain"
