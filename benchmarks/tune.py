"""Ranking variants on stored DEV indexes, chosen by the 2-fold protocol: choose on one half, report on the other.

Usage:
    python -m benchmarks.tune --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS --index-dir DIR
        [--trees DIR] [--repos chi,gson] [--variants default,coherence_boost=0.3] [--metric ndcg10]
        [--questions --corpora DIR --requests DIR [--heldout QUESTIONS.json]] [--json OUT]

Re-ranks only: nothing is indexed. ``--index-dir`` holds the indexes of an
earlier ``peer_benchmark.py`` run (its ``--index-dir``: a folder ``<repo>-int8``
per DEV repository, the int8 default, or ``<repo>`` as ``first_answer.py``
leaves it; with ``--questions`` also ``q-<corpus>`` and ``q-requests``), and
``--trees`` the trees it exported (exported again from
``--mirrors`` where missing). Each variant of :data:`VARIANTS` (a name ->
:class:`~codesearch.ranking.Ranking`) is set on the same searchers
(``cs.ranking = variant``) and scored on every DEV query, top 10, without the
stat pass, by both figures of ``peer_data`` (``ndcg10``: findable targets;
``ndcg10_all_targets``: semble's).

Then the protocol of ``benchmarks/README.md`` ("Tuning protocol") on
``--metric``: each variant's figure on fold A, fold B (``peer_data.DEV_FOLDS``)
and all of DEV; the variant chosen on fold A with its figure on fold B, and
the one chosen on B with its figure on A; the mean of those two held-back
figures against the default's, and whether the choice lands (it does not lose
there). The in-sample choice on all of DEV is printed next to it, never used.

With ``--questions``, each variant is also scored on the 62 held-out questions
and on the requests seeds (top 5 / top 10 of the ten, the two identifiers'
ranks, and whether the floor of ``quality.REQUESTS_FLOOR`` holds): reported,
never tuned on.

JSON keys: ``metric``, ``folds``, ``variants`` (per variant ``{changes,
per_repo, per_repo_all_targets, ndcg10, ndcg10_all_targets, folds, categories}``
(``categories``: per category, the mean over repositories of their queries' ``--metric``, as
``peer_data.category_means``) and with
``--questions`` ``heldout_ndcg10``, ``requests``, ``requests_floor``),
``protocol`` (``peer_data.TwoFold.as_dict``).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from benchmarks import quality as q
from benchmarks._harness import dev_arguments, table
from benchmarks.peer_data import (
    DEV_FOLDS,
    DEV_REPOSITORIES,
    MIN_GAIN,
    Verdict,
    category_means,
    export_trees,
    fold_figures,
    indexed_locations,
    load_repos,
    macro,
    query_scores,
    two_fold,
)
from codesearch import CodeSearch
from codesearch.files.kinds import CONFIG, DOC
from codesearch.ranking import DEFAULT, Ranking
from codesearch.ranking.paths import DECLARATION

BENCHMARKS = Path(__file__).resolve().parent


def _variants() -> dict[str, Ranking]:
    out = {"default": DEFAULT}
    candidates = {
        **{f"coherence_boost={v}": replace(DEFAULT, coherence_boost=v) for v in (0.25, 0.35)},
        **{f"static_share={v}": replace(DEFAULT, static_share=v) for v in (0.2, 0.35)},
        "keyword_priors=doc+config": replace(DEFAULT, keyword_priors=frozenset({DOC, CONFIG})),
        "keyword_priors=doc": replace(DEFAULT, keyword_priors=frozenset({DOC})),
        "keyword_priors=none": replace(DEFAULT, keyword_priors=frozenset()),
        **{f"path_min_share={v}": replace(DEFAULT, path_min_share=v) for v in (0.05, 0.1, 0.2)},
        **{f"declaration={v}": replace(DEFAULT, prior_multipliers={**DEFAULT.prior_multipliers, DECLARATION: v})
           for v in (0.3, 0.7, 0.85, 1.0)},
        # One step (0.05) either side of each end of the repeat range.
        **{f"diversity_similar={v}": replace(DEFAULT, diversity_similar=v)
           for v in ((0.5, 0.75), (0.6, 0.75), (0.55, 0.7), (0.55, 0.8))},
    }
    # A candidate equal to the default is the default: listed once, under that name.
    out.update({name: ranking for name, ranking in candidates.items() if ranking != DEFAULT})
    return out


VARIANTS: dict[str, Ranking] = _variants()
"""The candidates, the default first (a tie goes to it). Add a variant here to measure it."""

VERDICTS: dict[Verdict, str] = {
    "unchanged": "both halves choose the default, which stays",
    "lands": "the choice lands",
    "tie": f"a tie (within peer_data.MIN_GAIN = {MIN_GAIN}), so the default stays",
    "loses": "the choice does not land (it loses on the held-back halves)",
}
"""How each :attr:`peer_data.TwoFold.verdict` is printed."""

CATEGORIES = ("architecture", "semantic", "symbol")
"""The annotations' query categories, printed per variant (reported: the protocol chooses by the whole figure)."""


def parse_variant(spec: str) -> Ranking:
    """A variant named in :data:`VARIANTS`, or written as knobs: ``coherence_boost=0.3;keyword_priors={'doc'}``.

    Raises:
        SystemExit: an unknown knob or a value Python cannot read.
    """
    if spec in VARIANTS:
        return VARIANTS[spec]
    knobs: dict[str, Any] = {}
    names = {f.name for f in fields(Ranking)}
    for part in spec.split(";"):
        name, _, text = part.partition("=")
        if name not in names:
            raise SystemExit(f"error: {name!r} is no Ranking knob; knobs: {', '.join(sorted(names))}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            raise SystemExit(f"error: cannot read {text!r} for {name}") from None
        knobs[name] = frozenset(value) if isinstance(value, (set, frozenset)) else value
    return replace(DEFAULT, **knobs)


def split_variants(text: str) -> list[str]:
    """The comma-separated variants of ``--variants``; a comma inside brackets belongs to a value.

    >>> split_variants("default, diversity_similar=(0.5, 0.7);diversity_decay=0.5,coherence_boost=0.3")
    ['default', 'diversity_similar=(0.5, 0.7);diversity_decay=0.5', 'coherence_boost=0.3']
    """
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += (char in "([{") - (char in ")]}")
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def changes(ranking: Ranking) -> dict[str, Any]:
    """The knobs where ``ranking`` differs from the default, JSON-ready."""
    out = {}
    for f in fields(Ranking):
        value, default = getattr(ranking, f.name), getattr(DEFAULT, f.name)
        if value != default:
            out[f.name] = sorted(value) if isinstance(value, frozenset) else (
                dict(value) if isinstance(value, Mapping) else value)
    return out


def dev_index_folder(index_dir: Path, name: str) -> Path:
    """Where a DEV repository's default index is stored: ``<repo>-int8`` (the peer benchmark), else ``<repo>``."""
    peer = index_dir / f"{name}-int8"
    return peer if peer.is_dir() else index_dir / name


def open_stored(root: Path, index_dir: Path, options: Mapping[str, Any]) -> CodeSearch:
    """A searcher over a stored full-tier index, without the stat pass (so nothing is re-indexed).

    Raises:
        SystemExit: no index there, or not a full-tier one.
    """
    cs = CodeSearch(root, index_dir=index_dir, refresh=False, **options)
    if not cs.store.exists():
        raise SystemExit(f"error: no stored index at {index_dir}: run peer_benchmark.py with --index-dir "
                         f"{index_dir.parent} first")
    tier = cs.store.load().manifest.get("tier")
    if tier != "full":
        raise SystemExit(f"error: the index at {index_dir} is the {tier} tier; tune.py re-ranks full-tier indexes")
    return cs


def main(argv: Sequence[str] | None = None, *, searcher_options: Mapping[str, Any] | None = None) -> int:
    """Run the protocol; ``searcher_options`` go to every ``CodeSearch`` (the smoke test's stand-in model)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    dev_arguments(parser)
    parser.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-peer-indexes",
                        help="the peer benchmark's --index-dir (folders <repo>-int8, q-<corpus>, q-requests)")
    parser.add_argument("--repos", default=",".join(DEV_REPOSITORIES), help="comma-separated DEV repositories")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="comma-separated names from tune.VARIANTS, or knobs: 'coherence_boost=0.3;static_share=0.3'")
    parser.add_argument("--metric", choices=("ndcg10", "ndcg10_all_targets"), default="ndcg10",
                        help="the figure the protocol chooses by")
    parser.add_argument("--questions", action="store_true",
                        help="also report every variant on the 62 held-out questions and the requests seeds")
    parser.add_argument("--corpora", type=Path, help="the extracted sdists of benchmarks/data/fetch_corpora.py")
    parser.add_argument("--heldout", type=Path, default=BENCHMARKS / "data" / "questions.json",
                        help="the held-out questions (default: the 62 of benchmarks/data/questions.json)")
    parser.add_argument("--requests", type=Path, help="psf/requests v2.32.3 (git archive)")
    parser.add_argument("--model", help="the model the stored indexes were built with (default: the library's)")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    wanted = split_variants(args.variants)
    unknown = [n for n in wanted if n not in VARIANTS and "=" not in n]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r}; variants are {', '.join(VARIANTS)} or knobs written as name=value")
    if args.questions and args.corpora is None:
        parser.error("--questions needs --corpora (benchmarks/data/fetch_corpora.py)")
    variants = {name: parse_variant(name) for name in ["default", *(n for n in wanted if n != "default")]}
    options = dict(searcher_options or {})
    if args.model:
        options["model"] = args.model

    repos = load_repos(args.semble_benchmarks, [n.strip() for n in args.repos.split(",") if n.strip()])
    export_trees(repos, args.mirrors, args.trees)
    scored: dict[str, dict[str, dict[str, float]]] = {name: {"ndcg10": {}, "ndcg10_all_targets": {}} for name in variants}
    per_query: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
    for repo in repos:
        print(f"{repo.name}: {len(variants)} variants ...", file=sys.stderr)
        assert repo.root is not None
        cs = open_stored(repo.root, dev_index_folder(args.index_dir, repo.name), options)
        indexed = indexed_locations(cs)
        for name, ranking in variants.items():
            cs.ranking = ranking
            found = query_scores(cs, repo, indexed, refresh=False)
            per_query[name][repo.name] = getattr(found, args.metric)
            for metric, value in found.means().items():
                scored[name][metric][repo.name] = value

    out: dict[str, Any] = {"metric": args.metric, "folds": {f: list(m) for f, m in DEV_FOLDS.items()}, "variants": {}}
    for name, ranking in variants.items():
        out["variants"][name] = {
            "changes": changes(ranking), "per_repo": scored[name]["ndcg10"],
            "per_repo_all_targets": scored[name]["ndcg10_all_targets"], "ndcg10": macro(scored[name]["ndcg10"]),
            "ndcg10_all_targets": macro(scored[name]["ndcg10_all_targets"]), "folds": fold_figures(scored[name][args.metric]),
            "categories": category_means(per_query[name], {repo.name: repo.tasks for repo in repos})}

    if args.questions:
        folders, heldout = q.load_heldout(args.heldout)
        searchers = {corpus: open_stored(args.corpora / folder, args.index_dir / f"q-{corpus}", options)
                     for corpus, folder in folders.items()}
        seeds = q.seed_questions(args.requests) if args.requests else None
        requests_cs = open_stored(args.requests, args.index_dir / "q-requests", options) if args.requests else None
        for name, ranking in variants.items():
            print(f"questions: {name} ...", file=sys.stderr)
            for cs in [*searchers.values(), *([requests_cs] if requests_cs else [])]:
                cs.ranking = ranking
            entry = out["variants"][name]
            entry["heldout_ndcg10"] = q.heldout_ndcg10(searchers, heldout)
            if requests_cs is not None and seeds is not None:
                entry["requests"] = q.seeds_summary(requests_cs, seeds)
                entry["requests_floor"] = q.requests_floor_met(entry["requests"])

    headers = ["variant", "fold A", "fold B", "full DEV", "DEV all targets" if args.metric == "ndcg10" else "DEV findable",
               *CATEGORIES]
    other = "ndcg10_all_targets" if args.metric == "ndcg10" else "ndcg10"
    rows = []
    for name, v in out["variants"].items():
        row = [name, *(f"{v['folds'][k]:.4f}" if v["folds"][k] is not None else "n/a" for k in ("A", "B", "dev")),
               f"{v[other]:.4f}", *(f"{v['categories'].get(c, float('nan')):.4f}" for c in CATEGORIES)]
        if args.questions:
            row.append(f"{v['heldout_ndcg10']:.3f}")
            if "requests" in v:
                r = v["requests"]
                row += [f"{r['top5']}/{r['questions']}, {r['top10']}/{r['questions']}", str(r["identifier_ranks"]),
                        "yes" if v["requests_floor"] else "NO"]
        rows.append(row)
    if args.questions:
        headers.append("held-out (reported)")
        if args.requests:
            headers += ["requests top 5, 10", "identifiers", "floor"]
    print(f"\nvariants on the stored DEV indexes ({args.metric}; folds: peer_data.DEV_FOLDS)\n")
    print(table(headers, rows))

    if not all(any(r.name in fold for r in repos) for fold in DEV_FOLDS.values()):
        print("\n2-fold protocol: a fold has no repository in this run (run all of DEV)")
        out["protocol"] = None
    else:
        protocol = two_fold({name: scored[name][args.metric] for name in variants}, baseline="default")
        out["protocol"] = protocol.as_dict()
        print("\n2-fold protocol (choose on one half, report on the other; a tie goes to the default)\n")
        print(table(["chosen on", "variant", "there", "reported on", "held back"],
                    [[c.chosen_on, c.variant, f"{c.chosen_figure:.4f}", c.reported_on, f"{c.held_back_figure:.4f}"]
                     for c in protocol.choices]))
        verdict = protocol.verdict
        assert verdict is not None  # the default is the baseline
        print(f"\nmean of the held-back halves {protocol.held_back_mean:.4f} against the default's "
              f"{protocol.baseline_held_back:.4f}: {VERDICTS[verdict]}; chosen on all of DEV (in sample, "
              f"not a result): {protocol.dev_choice} at {protocol.dev_figure:.4f}")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
