"""Embedding models side by side on DEV under the 2-fold protocol: which model is the default.

Usage:
    python -m benchmarks.models --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS --trees DIR
        --index-dir DIR --models minilm,code-minilm,/path/to/folder [--repos ...] [--no-static]
        [--questions --corpora DIR --requests DIR] [--json OUT]

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


def _label(model: str) -> str:
    return Path(model).name if "/" in model else model


def run_model(model: str, repos: Sequence[pb.Repo], index_root: Path, *, static: bool) -> dict[str, Any]:
    """Index every repository with ``model`` (full tier, then static tier alone) and score the default ranking."""
    options = {"model": model}
    tag = _label(model)
    full: dict[str, Any] = {}
    stat: dict[str, Any] = {}
    for repo in repos:
        print(f"{tag}: {repo.name} (full tier) ...", file=sys.stderr)
        full[repo.name] = pb.run_codesearch(repo, index_root / tag, "int8", {"default": DEFAULT}, options)
        if static:
            print(f"{tag}: {repo.name} (static tier) ...", file=sys.stderr)
            found = pb.run_static(repo, index_root / tag, options)
            if found is None:
                raise SystemExit(f"error: {model} has no static tier here")
            stat[repo.name] = found
    out = {"full": _tier({n: r["rankings"]["default"] for n, r in full.items()}, repos,
                         sum(r["index_s"] for r in full.values()))}
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--semble-benchmarks", type=Path, required=True)
    parser.add_argument("--mirrors", type=Path, required=True)
    parser.add_argument("--trees", type=Path, required=True)
    parser.add_argument("--index-dir", type=Path, required=True)
    parser.add_argument("--models", required=True, help="comma-separated catalogue names or model folders; first = baseline")
    parser.add_argument("--repos", default=",".join(DEV_REPOSITORIES))
    parser.add_argument("--no-static", action="store_true", help="skip the static tier")
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
        results[model] = run_model(model, repos, args.index_dir, static=not args.no_static)
        if args.questions:
            found = pb.run_questions(args.corpora, args.requests, args.index_dir / _label(model), "int8",
                                     {**(searcher_options or {}), "model": model})
            results[model].update(found)

    base = models[0]
    rows = []
    for model in models:
        r = results[model]
        full, folds = r["full"], r["full"]["folds"]
        row = [_label(model), f"{folds['A']:.4f}", f"{folds['B']:.4f}", f"{folds['held_back_mean']:.4f}",
               f"{full['ndcg10']:.4f}"]
        row += [f"{full['categories'].get(c, float('nan')):.3f}" for c in ("semantic", "architecture", "symbol")]
        row += [f"{full['index_s']:.1f}", f"{full['index_s'] / results[base]['full']['index_s']:.2f}"]
        if "static" in r:
            st = r["static"]["folds"]
            row += [f"{st['A']:.4f}", f"{st['B']:.4f}", f"{st['held_back_mean']:.4f}",
                    f"{folds['A'] - st['A']:+.3f} / {folds['B'] - st['B']:+.3f}", f"{r['static']['index_s']:.1f}"]
        if args.questions:
            seeds = r.get("requests") or {}
            row += [f"{r['heldout_ndcg10']:.3f}", f"{seeds.get('top5', '-')}/{seeds.get('top10', '-')}"]
        rows.append(row)
    headers = ["model", "fold A", "fold B", "held-back mean", "full DEV", "semantic", "architecture", "symbol",
               "index s", "index ratio"]
    if not args.no_static:
        headers += ["static A", "static B", "static mean", "full - static (A / B)", "static index s"]
    if args.questions:
        headers += ["held-out 62", "seeds top5/top10"]
    print("\nModels on DEV (same run; default ranking; NDCG@10 over findable targets)\n")
    print(pb.table(headers, rows))

    protocol = {"full": _protocol(results, "full")}
    if not args.no_static:
        protocol["static"] = _protocol(results, "static")
    for tier, found in protocol.items():
        picks = ", ".join(f"on {c['chosen_on']}: {_label(c['variant'])} -> {c['held_back_figure']:.4f} on {c['reported_on']}"
                          for c in found["choices"])
        print(f"\nprotocol, {tier} tier: {picks}; held-back mean {found['held_back_mean']:.4f} against the "
              f"baseline's {found['baseline_held_back']:.4f}: {found['verdict']}")

    if args.json_out:
        out = {"models": results, "protocol": protocol,
               "index_ratio": {m: results[m]["full"]["index_s"] / results[base]["full"]["index_s"] for m in models}}
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(out, indent=2, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
