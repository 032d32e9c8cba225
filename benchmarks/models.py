"""Embedding models side by side on DEV under the 2-fold protocol: which model is the default.

Usage:
    python -m benchmarks.models --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS --trees DIR
        --index-dir DIR --models minilm,code-minilm,/path/to/folder,minilm@/path/to/static [--repos ...]
        [--no-static | --static-only] [--questions --corpora DIR --requests DIR] [--json OUT]
    python -m benchmarks.models combine A.json B.json ...   # several runs' models as one table and protocol

``MODEL@FOLDER`` runs MODEL with the static tier saved in FOLDER (a fitted one, see
``codesearch.training.static_fit``) instead of the model's model2vec distillation.

Every model (a catalogue name or a model folder, the first listed the current default) indexes each DEV tree
afresh with the full tier (int8 export, the default ranking) and, unless ``--no-static``, with its static tier
alone (the model2vec distillation of that model: what a first search answers from). Both tiers are scored with
both NDCG@10 figures (``peer_data``) and split by the fixed folds: the protocol chooses a model on each fold and
reports it on the other (``peer_data.two_fold``, the first model the baseline), for the full tier and the static
tier separately. Printed per model: fold A, fold B, the mean of the held-back halves, full DEV, the semantic /
architecture / symbol means, index seconds (full and static, summed over DEV; ratios to the first model, same
run), the transformer's gain over its static tier on each fold, and with ``--questions`` the 62 held-out
questions and the requests seeds (reported, never chosen on).

JSON keys: ``models`` (per model ``{full: {per_repo, per_repo_all_targets, folds, categories, index_s},
static: {...}, heldout_ndcg10, requests}``), ``protocol`` (``full`` and ``static``: the choices, held-back
mean and verdict against the first model), ``index_ratio`` (full-tier index seconds over the first model's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks import peer_benchmark as pb
from benchmarks.peer_data import (
    DEV_FOLDS,
    DEV_REPOSITORIES,
    category_means,
    export_trees,
    fold_figures,
    load_repos,
    macro,
    two_fold,
)
from codesearch.ranking import DEFAULT


def model_label(model: str) -> str:
    """A ``--models`` entry as tables and index folders name it (the last part of each path)."""
    return "@".join(Path(part).name if "/" in part else part for part in model.split("@"))


def model_options(model: str) -> dict[str, Any]:
    """``CodeSearch`` options of a ``--models`` entry: ``MODEL``, ``MODEL@STATIC_FOLDER`` (a static tier saved in a
    folder, e.g. one fitted by ``codesearch.training.static_fit``) or ``MODEL@distilled`` (the model2vec
    distillation instead of the static tier the model ships)."""
    name, _, static_folder = model.partition("@")
    if not static_folder:
        return {"model": name}
    if static_folder == "distilled":  # the model2vec distillation, whatever static tier the model ships
        from codesearch.embedding.catalogue import resolve_model

        return {"model": resolve_model(name, static=None)}
    from codesearch.embedding.static import StaticEmbedder

    return {"model": name, "static": StaticEmbedder.from_folder(static_folder, name)}


def run_model(model: str, repos: Sequence[pb.Repo], index_root: Path, *, static: bool,
              full: bool = True) -> dict[str, Any]:
    """Index every repository with ``model`` (full tier, then static tier alone) and score the default ranking."""
    options = model_options(model)
    tag = model_label(model)
    scored: dict[str, Any] = {}
    stat: dict[str, Any] = {}
    for repo in repos:
        if full:
            print(f"{tag}: {repo.name} (full tier) ...", file=sys.stderr)
            scored[repo.name] = pb.run_codesearch(repo, index_root / tag, "int8", {"default": DEFAULT}, options)
        if static:
            print(f"{tag}: {repo.name} (static tier) ...", file=sys.stderr)
            found = pb.run_static(repo, index_root / tag, options)
            if found is None:
                raise SystemExit(f"error: {model} has no static tier here")
            stat[repo.name] = found
    out: dict[str, Any] = {}
    if full:
        out["full"] = _tier({n: r["rankings"]["default"] for n, r in scored.items()}, repos,
                            sum(r["index_s"] for r in scored.values()))
    if static:
        out["static"] = _tier(stat, repos, sum(r["index_s"] for r in stat.values()))
    return out


def _tier(scored: Mapping[str, Mapping[str, Any]], repos: Sequence[pb.Repo], index_s: float) -> dict[str, Any]:
    per_repo = {n: s["ndcg10"] for n, s in scored.items()}
    tasks = {r.name: r.tasks for r in repos}
    per_query = {n: s["per_query"]["ndcg10"] for n, s in scored.items()}
    return {"per_repo": per_repo, "per_repo_all_targets": {n: s["ndcg10_all_targets"] for n, s in scored.items()},
            "folds": fold_figures(per_repo), "ndcg10": macro(per_repo),
            "categories": category_means(per_query, tasks), "index_s": index_s}


def _protocol(models: Mapping[str, Mapping[str, Any]], tier: str) -> dict[str, Any]:
    per_repo = {m: r[tier]["per_repo"] for m, r in models.items() if tier in r}
    found = two_fold(per_repo, DEV_FOLDS, baseline=next(iter(per_repo)))
    return {"choices": [dataclasses.asdict(c) for c in found.choices], "held_back_mean": found.held_back_mean,
            "baseline_held_back": found.baseline_held_back, "verdict": found.verdict,
            "dev_choice": found.dev_choice}


def main(argv: Sequence[str] | None = None, *, searcher_options: Mapping[str, Any] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "combine":
        return combine([Path(p) for p in argv[1:]])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--semble-benchmarks", type=Path, required=True)
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--trees", type=Path, required=True)
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--models", required=True, help="comma-separated catalogue names or model folders; first = baseline")
    parser.add_argument("--repos", default=",".join(DEV_REPOSITORIES))
    parser.add_argument("--no-static", action="store_true", help="skip the static tier")
    parser.add_argument("--static-only", action="store_true", help="only the static tier")
    parser.add_argument("--questions", action="store_true")
    parser.add_argument("--corpora", type=Path)
    parser.add_argument("--requests", type=Path)
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    if args.questions and args.corpora is None:
        parser.error("--questions needs --corpora")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    repos = load_repos(args.semble_benchmarks, [n.strip() for n in args.repos.split(",") if n.strip()])
    export_trees(repos, args.mirrors, args.trees)

    results: dict[str, dict[str, Any]] = {}
    for model in models:
        results[model] = run_model(model, repos, args.index_dir, static=not args.no_static, full=not args.static_only)
        if args.questions and not args.static_only:
            found = pb.run_questions(args.corpora, args.requests, args.index_dir / model_label(model), "int8",
                                     {**(searcher_options or {}), **model_options(model)})
            results[model].update(found)
    report(results, models, questions=args.questions and not args.static_only)
    if args.json_out:
        write_json(args.json_out, results, models)
    return 0


def _tier_cells(r: dict[str, Any], tier: str, base: dict[str, Any]) -> list[str]:
    if tier not in r:
        return ["-"] * 9
    t, folds = r[tier], r[tier]["folds"]
    cells = [f"{folds['A']:.4f}", f"{folds['B']:.4f}", f"{folds['held_back_mean']:.4f}", f"{t['ndcg10']:.4f}"]
    cells += [f"{t['categories'].get(c, float('nan')):.3f}" for c in ("semantic", "architecture", "symbol")]
    ratio = t["index_s"] / base[tier]["index_s"] if tier in base and base[tier]["index_s"] else float("nan")
    return cells + [f"{t['index_s']:.1f}", f"{ratio:.2f}"]


def report(results: dict[str, dict[str, Any]], models: Sequence[str], *, questions: bool = False) -> None:
    """Print each tier's table and the protocol's verdict per tier (the first model the baseline)."""
    base = results[models[0]]
    for tier in ("full", "static"):
        if not any(tier in results[m] for m in models):
            continue
        rows = []
        for model in models:
            r = results[model]
            row = [model_label(model), *_tier_cells(r, tier, base)]
            if tier == "full" and "static" in r and "full" in r:
                row.append(f"{r['full']['folds']['A'] - r['static']['folds']['A']:+.3f} / "
                           f"{r['full']['folds']['B'] - r['static']['folds']['B']:+.3f}")
            elif tier == "full" and any("static" in results[m] for m in models):
                row.append("-")  # combined runs: this model's static tier was not measured
            if tier == "full" and questions:
                seeds = r.get("requests") or {}
                row += [f"{r.get('heldout_ndcg10', float('nan')):.3f}",
                        f"{seeds.get('top5', '-')}/{seeds.get('top10', '-')}"]
            rows.append(row)
        headers = ["model", "fold A", "fold B", "held-back mean", "full DEV", "semantic", "architecture", "symbol",
                   "index s", "index ratio"]
        if tier == "full" and any("static" in results[m] for m in models):
            headers.append("over static (A / B)")
        if tier == "full" and questions:
            headers += ["held-out 62", "seeds top5/top10"]
        print(f"\n{tier} tier on DEV (same run; default ranking; NDCG@10 over findable targets)\n")
        print(pb.table(headers, rows))
        if all(tier in results[m] for m in models):
            found = _protocol(results, tier)
            picks = ", ".join(f"on {c['chosen_on']}: {model_label(c['variant'])} -> {c['held_back_figure']:.4f} on "
                              f"{c['reported_on']}" for c in found["choices"])
            print(f"\nprotocol, {tier} tier: {picks}; held-back mean {found['held_back_mean']:.4f} against the "
                  f"baseline's {found['baseline_held_back']:.4f}: {found['verdict']}")


def write_json(path: Path, results: dict[str, dict[str, Any]], models: Sequence[str]) -> None:
    """The JSON the module docstring names."""
    base = results[models[0]]
    protocol = {tier: _protocol(results, tier) for tier in ("full", "static") if all(tier in results[m] for m in models)}
    ratio = {m: results[m]["full"]["index_s"] / base["full"]["index_s"] for m in models
             if "full" in results[m] and "full" in base}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"models": results, "protocol": protocol, "index_ratio": ratio}, indent=2, default=str)
                    + "\n", encoding="utf-8")


def combine(paths: Sequence[Path]) -> int:
    """Print and protocol several JSON files of this script as one run (models measured one at a time; NDCG is
    deterministic, index times are comparable only within a file)."""
    results: dict[str, dict[str, Any]] = {}
    for path in paths:
        results.update(json.loads(path.read_text("utf-8"))["models"])
    report(results, list(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
