"""Exporting to ONNX: both architectures against their torch forward, the cache, the lock, the int8 gate."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from codesearch import cache
from codesearch.embedding import export, gate
from codesearch.embedding.catalogue import resolve_model
from codesearch.exceptions import ExportError, ModelNotAvailableError


def _torch_vectors(folder: Path, texts: list[str], max_length: int, pooling: str) -> np.ndarray:
    """The reference: transformers' own forward on a padded batch, pooled with the attention mask."""
    torch = pytest.importorskip("torch")
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    if pooling == "cls":
        return hidden[:, 0].numpy()
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return ((hidden * mask).sum(1) / mask.sum(1)).numpy()


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


# --- cache keys and lookup (no torch needed) ----------------------------------------


def test_cache_root_prefers_argument_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODESEARCH_CACHE_DIR", str(tmp_path / "env"))
    assert cache.cache_root() == tmp_path / "env"
    assert cache.cache_root(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.delenv("CODESEARCH_CACHE_DIR")
    assert cache.cache_root().name == "codesearch"


def test_export_key_covers_options_and_library_versions(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = resolve_model("minilm")
    fp32, int8 = export.export_key(spec), export.export_key(spec, int8=True)
    assert fp32.startswith("minilm-fp32-") and int8.startswith("minilm-int8-")
    assert fp32 == export.export_key(spec) and fp32[-16:] != int8[-16:]
    # Pooling, prefixes and length act after the graph: same export, different fingerprint.
    assert export.export_key(resolve_model("minilm", max_length=128, query_prefix="q: ")) == fp32
    real = export._library_versions()
    monkeypatch.setattr(export, "_library_versions", lambda: {**real, "onnxruntime": "0.0.1"})
    assert export.export_key(spec) != fp32


def test_find_export_in_an_empty_cache_finds_nothing(tmp_path: Path) -> None:
    assert export.find_export("minilm", cache_dir=tmp_path) is None


def test_exporting_without_torch_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export, "_EXPORT_MODULES", ("torch", "codesearch_no_such_module"))
    with pytest.raises(ExportError, match=r"codesearch_no_such_module: pip install torch==2\.13\.0"):
        export.export_model("minilm", cache_dir=tmp_path, progress=False)
    assert not (tmp_path / "models").exists()


def test_an_offline_hub_model_says_to_pass_a_local_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("optimum.exporters.onnx")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = resolve_model("codesearch-tests/no-such-model", pooling="mean")
    with pytest.raises(ModelNotAvailableError, match="huggingface-cli download codesearch-tests/no-such-model"):
        export.export_model(spec, cache_dir=tmp_path, progress=False)
    # A catalogue model is pointed at the folder with its catalogue settings kept.
    renamed = resolve_model("bge-small", source="codesearch-tests/no-such-bge")
    with pytest.raises(ModelNotAvailableError, match=r"resolve_model\('bge-small', source='DIR'\)"):
        export.export_model(renamed, cache_dir=tmp_path, progress=False)


# --- real exports ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bert", "xlmr"])
def test_tiny_models_match_their_torch_forward(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """BERT with CLS pooling (like bge-small) and XLM-RoBERTa (like bge-m3), exported offline."""
    from codesearch.embedding import Embedder

    folder: Path = request.getfixturevalue(f"embed_tiny_{kind}_dir")
    import codesearch

    sources = sorted(Path(codesearch.__file__).parent.rglob("*.py"))
    texts = [p.read_text(encoding="utf-8")[:1500] for p in sources][:12]
    texts += [t[:60] for t in texts] + ["x = 1", "def f():\n    return 2"]
    for pooling in ("cls", "mean"):
        spec = resolve_model(str(folder), pooling=pooling, max_length=64, normalize=False)
        embedder = Embedder(spec, cache_dir=tmp_path, export_progress=False)
        got = embedder.embed_documents(texts)
        want = _torch_vectors(folder, texts, 64, pooling)
        assert got.shape == want.shape == (len(texts), 32)
        assert _cosines(got, want).min() >= 0.9999
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
        # Truncation really happened (long texts) and texts differ in the output.
        assert embedder.last_report is not None and embedder.last_report.truncated >= 12
        assert _cosines(got[:1], got[-1:])[0] < 0.999
    manifest = json.loads((embedder.export.path / export.MANIFEST_FILE).read_text())
    assert manifest["fused"].get("MultiHeadAttention") == 2, manifest["fused"]
    assert manifest["unmasked_attention"] == 2


@pytest.mark.slow
def test_exports_are_cached_and_complete(embed_tiny_bert_dir: Path, tmp_path: Path) -> None:
    spec = resolve_model(str(embed_tiny_bert_dir), pooling="cls", max_length=64)
    first = export.export_model(spec, cache_dir=tmp_path, progress=False)
    assert not first.cached and first.path.parent == tmp_path / "models"
    again = export.export_model(spec, cache_dir=tmp_path, progress=False)
    assert again.cached and again.path == first.path and again.onnx_sha256 == first.onnx_sha256
    found = export.find_export(spec, cache_dir=tmp_path)
    assert found is not None and found.cached and found.path == first.path
    names = sorted(p.name for p in first.path.iterdir())
    assert names == ["config.json", "manifest.json", "model.onnx", "tokenizer.json"]
    manifest = json.loads((first.path / "manifest.json").read_text())
    assert manifest["key"] == first.path.name and manifest["versions"]["onnxruntime"]
    assert manifest["files"]["model.onnx"] == first.onnx_path.stat().st_size
    assert not list(tmp_path.glob("models/.*tmp*"))  # scratch folders are cleaned up
    # A damaged export (a file of the wrong size) is not trusted.
    with first.onnx_path.open("ab") as handle:
        handle.write(b"\0")
    assert export.find_export(spec, cache_dir=tmp_path) is None


@pytest.mark.slow
def test_two_processes_export_once(embed_tiny_bert_dir: Path, tmp_path: Path) -> None:
    """Both wait on the lock while it is held; then one exports and the other finds its export."""
    from codesearch._lock import FileLock

    spec = resolve_model(str(embed_tiny_bert_dir), pooling="cls", max_length=64)
    target = tmp_path / "models" / export.export_key(spec)
    target.parent.mkdir(parents=True)
    code = (
        "import json, sys\n"
        "from codesearch.embedding.export import export_model\n"
        "from codesearch.embedding.catalogue import resolve_model\n"
        f"r = export_model(resolve_model({str(embed_tiny_bert_dir)!r}, pooling='cls', max_length=64),"
        f" cache_dir={str(tmp_path)!r})\n"
        "print(json.dumps({'cached': r.cached, 'path': str(r.path)}))\n"
    )
    held = FileLock(str(target) + ".lock")
    held.acquire(0)
    try:
        procs = [
            subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        for proc in procs:  # each says it is waiting before the lock is released
            assert proc.stderr is not None
            line = proc.stderr.readline()
            while line and "waiting for another process" not in line:
                line = proc.stderr.readline()
            assert "waiting for another process" in line
    finally:
        held.release()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(r["cached"] for r in results) == [False, True]
    assert {r["path"] for r in results} == {str(target)}


@pytest.mark.slow
def test_graphs_over_two_gigabytes_go_to_an_external_data_file(
    embed_tiny_bert_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bge-m3's fp32 graph is 2.2 GB, over protobuf's limit; a tiny model takes the same path here."""
    from codesearch.embedding import Embedder

    spec = resolve_model(str(embed_tiny_bert_dir), pooling="cls", max_length=64)
    inline = Embedder(spec, cache_dir=tmp_path / "inline", export_progress=False)
    monkeypatch.setattr(export, "_EXTERNAL_DATA_LIMIT", 0)
    external = Embedder(spec, cache_dir=tmp_path / "external", export_progress=False)
    files = sorted(p.name for p in external.export.path.iterdir())
    assert files == ["config.json", "manifest.json", "model.onnx", "model.onnx.data", "tokenizer.json"]
    assert external.export.onnx_path.stat().st_size < 100_000  # the weights are in the .data file
    texts = ["def f(x):\n    return x + 1", "class A:\n    pass"]
    np.testing.assert_allclose(external.embed_documents(texts), inline.embed_documents(texts), atol=1e-6)
    data = external.export.path / "model.onnx.data"
    assert external.export.onnx_sha256 == cache.sha256_files([external.export.onnx_path, data])
    # A truncated data file makes the export untrusted.
    data.write_bytes(data.read_bytes()[:-4])
    assert export.find_export(spec, cache_dir=tmp_path / "external") is None


@pytest.mark.slow
def test_a_length_beyond_the_position_table_is_refused(embed_tiny_xlmr_dir: Path, tmp_path: Path) -> None:
    spec = resolve_model(str(embed_tiny_xlmr_dir), pooling="cls", max_length=129)
    with pytest.raises(ExportError, match="pass max_length=128 or less"):
        export.export_model(spec, cache_dir=tmp_path, progress=False)


# --- the int8 quality gate ----------------------------------------------------------------


def test_calibration_text_is_real_code_from_the_pinned_files_only() -> None:
    texts = gate.calibration_texts()
    assert len(texts) == gate.CALIBRATION_CHUNKS
    # The pinned standard library files, in order: moving codesearch's own modules cannot change what the gate tests.
    sources = [t.split("\n", 1)[0] for t in texts]
    assert sources[0] == gate.CALIBRATION_FILES[0] and set(sources) <= set(gate.CALIBRATION_FILES)
    assert sources == sorted(sources, key=gate.CALIBRATION_FILES.index)
    assert not any(s.startswith("codesearch/") for s in sources)
    assert sum("def " in t or "class " in t for t in texts) > 0.8 * len(texts)


@pytest.mark.slow
def test_int8_passes_the_gate_on_minilm(minilm_int8_embedder, minilm_embedder) -> None:  # type: ignore[no-untyped-def]
    result = minilm_int8_embedder.export
    verdict = result.gate
    assert result.int8_used and minilm_int8_embedder.int8
    assert verdict["passed"] and verdict["chunks"] == gate.CALIBRATION_CHUNKS
    assert verdict["mean_cos"] >= gate.GATE_MEAN_COS and verdict["min_cos"] >= gate.GATE_MIN_COS
    # Every weight MatMul (Q, K, V, output, two feed-forward; 6 layers) runs on int8 -- or, where the
    # gate needed the second setup, all but the six after GELU, which stay fp32.
    onnx = pytest.importorskip("onnx")
    graph = onnx.load(str(result.onnx_path), load_external_data=False).graph
    int8_matmuls = sum(node.op_type == "MatMulInteger" for node in graph.node)
    fp32_matmuls = sum(node.op_type == "MatMul" for node in graph.node)
    expected = {"per-channel": (36, 0), "per-channel, ffn-out fp32": (30, 6)}[verdict["setup"]]
    assert (int8_matmuls, fp32_matmuls) == expected
    assert result.onnx_sha256 != minilm_embedder.export.onnx_sha256


@pytest.mark.slow
def test_the_gate_compares_against_fp32(minilm_embedder) -> None:  # type: ignore[no-untyped-def]
    texts = gate.calibration_texts(32)
    folder = minilm_embedder.export.path
    same = gate.int8_gate(folder, folder / export.ONNX_FILE, minilm_embedder.spec, texts)
    assert same["passed"] and same["min_cos"] > 0.99999 and same["chunks"] == 32
    strict = gate.int8_gate(folder, folder / export.ONNX_FILE, minilm_embedder.spec, texts, min_cos=1.01)
    assert not strict["passed"]


@pytest.mark.slow
def test_a_broken_int8_setup_is_refused_and_fp32_kept(
    minilm_embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    """Per-tensor weights and quantised embeddings: the naive setup that lost min cosine 0.79."""
    naive = ({"name": "naive per-tensor", "per_channel": False, "op_types": None},)
    monkeypatch.setattr(export, "_QUANT_SETUPS", naive)
    with pytest.warns(RuntimeWarning, match="failed the quality gate"):
        result = export.export_model("minilm", int8=True, out=tmp_path / "out", progress=False)
    assert result.int8_requested and not result.int8_used
    assert not result.gate["passed"] and result.gate["setup"] == "naive per-tensor"
    assert result.gate["mean_cos"] < gate.GATE_MEAN_COS
    assert result.onnx_sha256 == minilm_embedder.export.onnx_sha256  # the fp32 graph, as exported
    assert "int8" in str(result) and "kept fp32" in str(result)


@pytest.mark.slow
def test_the_next_setup_is_tried_when_one_fails(
    minilm_embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    naive = {"name": "naive per-tensor", "per_channel": False, "op_types": None}
    careful = {"name": "per-channel, ffn-out fp32", "per_channel": True, "exclude_ffn_out": True}
    monkeypatch.setattr(export, "_QUANT_SETUPS", (naive, careful))
    result = export.export_model("minilm", int8=True, out=tmp_path / "out", progress=False)
    assert result.int8_used and result.gate["setup"] == careful["name"]
    assert [a["passed"] for a in result.gate["attempts"]] == [False, True]
    onnx = pytest.importorskip("onnx")
    graph = onnx.load(str(result.onnx_path), load_external_data=False).graph
    ops = [node.op_type for node in graph.node]
    # The six feed-forward down projections (after GELU) stayed fp32, the other 30 are int8.
    assert ops.count("MatMulInteger") == 30 and ops.count("MatMul") == 6
