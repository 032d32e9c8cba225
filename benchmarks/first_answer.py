"""Seconds to a first answer on a repository never indexed: the codesearch and semble CLIs, side by side.

Usage:
    python -m benchmarks.first_answer --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS
        --semble-python VENV/bin/python [--semble-model DIR] [--trees DIR] [--repos chi,gson]
        [--rounds 3] [--json OUT]

Per DEV repository (see ``peer_benchmark.py`` for where the data comes from),
in one run:

- ``first_answer_s``: wall seconds of ``codesearch search QUERY ROOT --json`` in
  a new process with an empty index folder (process start, scan, chunking,
  static tier and the answer included), and ``semble_first_answer_s`` for
  ``semble search QUERY ROOT`` with an empty semble cache. Both sides
  have their models on disk already (codesearch's ONNX export and static
  distillation, semble's static model), as after installing; the two commands
  alternate, ``--rounds`` times, and the median counts. QUERY is the
  repository's first annotated query.
- NDCG@10 over all its annotated queries of the first tier alone
  (``first_tier_ndcg10``: keywords and static vectors), of the full index
  (``full_ndcg10``: the transformer tier added) and of semble
  (``semble_ndcg10``); macro over repositories.
- full index seconds (the transformer tier on top of the static one, int8).
- embedding throughput of the transformer, fp32 and int8, over the same
  chunks (tokens/s and chunks/s).
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

from benchmarks._harness import dev_arguments, table
from benchmarks.peer_benchmark import distill_semble_model, load_models, run_semble, score_semble
from benchmarks.peer_data import DEV_REPOSITORIES, Repo, export_trees, indexed_locations, load_repos, macro, query_ndcgs
from codesearch import CodeSearch


def timed(command: Sequence[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(command[:3])} ... failed:\n{proc.stderr[-1500:]}")
    return seconds


def first_answers(repo: Repo, semble_python: str, semble_model: Path, rounds: int) -> tuple[float, float]:
    """Median wall seconds of each CLI's first answer on ``repo``, fresh index caches, alternating."""
    query = repo.tasks[0].query
    semble_cli = str(Path(semble_python).with_name("semble"))
    ours, theirs = [], []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(prefix="cs-first-") as scratch:
            index_dir = Path(scratch) / "index"
            env = {**os.environ, "HF_HUB_OFFLINE": "1"}
            ours.append(timed([sys.executable, "-m", "codesearch.faces.cli", "search", query, str(repo.root), "--json",
                               "--index-dir", str(index_dir)], env))
            semble_env = {**env, "SEMBLE_CACHE_LOCATION": str(Path(scratch) / "semble"),
                          "SEMBLE_MODEL_NAME": str(semble_model)}
            theirs.append(timed([semble_cli, "search", query, str(repo.root)], semble_env))
    return statistics.median(ours), statistics.median(theirs)


def tier_quality(repo: Repo, index_root: Path) -> dict[str, Any]:
    """NDCG@10 of the static tier alone and of the full index, and the full tier's index seconds."""
    index_dir = index_root / repo.name
    shutil.rmtree(index_dir, ignore_errors=True)
    cs = CodeSearch(repo.root, index_dir=index_dir, refresh=False)

    def score() -> float:
        return statistics.fmean(query_ndcgs(cs, repo, indexed_locations(cs)))

    cs.static_embedder  # noqa: B018 - loaded outside the timings
    static_report = cs.index(tier="static")
    first = score()
    assert cs.last_search is not None and cs.last_search.tier == "static"
    cs.embedder  # noqa: B018
    started = time.perf_counter()
    cs.index(tier="full")
    full_s = time.perf_counter() - started
    full = score()
    assert cs.last_search is not None and cs.last_search.tier == "full"
    return {"first_tier_ndcg10": first, "full_ndcg10": full, "static_index_s": static_report.seconds,
            "full_index_s": full_s, "chunks": static_report.chunks}


def throughput(repos: Sequence[Repo], limit: int = 400) -> dict[str, dict[str, float]]:
    """Transformer chunks/s and tokens/s, fp32 and int8, over the same chunks (up to ``limit``)."""
    from codesearch.chunking import document_text
    from codesearch.chunking.definitions import chunk_definitions
    from codesearch.embedding import Embedder
    from codesearch.files import scan

    texts: list[str] = []
    for repo in repos:
        for source in scan(repo.root).files:
            texts.extend(document_text(c.path, c.text) for c in chunk_definitions(source.path, source.text))
    texts = texts[:limit]
    out = {}
    for name, int8 in (("fp32", False), ("int8", True)):
        embedder = Embedder("minilm", int8=int8)
        embedder.embed_documents(texts[:8])  # warm up
        embedder.embed_documents(texts)
        report = embedder.last_report
        assert report is not None
        out[name] = {"chunks": report.chunks, "seconds": report.seconds, "chunks_per_s": report.chunks / report.seconds,
                     "tokens_per_s": report.tokens / report.seconds}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    dev_arguments(parser)
    parser.add_argument("--semble-python", required=True)
    parser.add_argument("--semble-model", type=Path, default=Path(tempfile.gettempdir()) / "semble-static-minilm")
    parser.add_argument("--repos", default=",".join(DEV_REPOSITORIES))
    parser.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-first-answer")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)

    repos = load_repos(args.semble_benchmarks, [n.strip() for n in args.repos.split(",") if n.strip()])
    export_trees(repos, args.mirrors, args.trees)
    if not (args.semble_model / "config.json").is_file():
        distill_semble_model(args.semble_python, args.semble_model)
    # Both sides' models on disk before any timing: codesearch's exports and static model.
    load_models(CodeSearch(repos[0].root, index_dir=args.index_dir / "warm-up"))

    semble_raw = run_semble(args.semble_python, args.semble_model, repos)
    rows, per_repo = [], {}
    for repo in repos:
        print(f"{repo.name} ...", file=sys.stderr)
        ours, theirs = first_answers(repo, args.semble_python, args.semble_model, args.rounds)
        quality = tier_quality(repo, args.index_dir)
        semble = score_semble(repo, semble_raw[repo.name])
        per_repo[repo.name] = {"first_answer_s": ours, "semble_first_answer_s": theirs, "ratio": ours / theirs,
                               "semble_ndcg10": semble["ndcg10"], "semble_index_s": semble["index_s"], **quality}
        rows.append([repo.name, f"{ours:.2f}", f"{theirs:.2f}", f"{ours / theirs:.2f}", f"{quality['first_tier_ndcg10']:.3f}",
                     f"{quality['full_ndcg10']:.3f}", f"{semble['ndcg10']:.3f}", f"{quality['full_index_s']:.1f}"])
    macros = {key: macro({n: v[key] for n, v in per_repo.items()})
              for key in ("first_tier_ndcg10", "full_ndcg10", "semble_ndcg10")}
    rows.append(["macro", "", "", f"max {max(v['ratio'] for v in per_repo.values()):.2f}",
                 f"{macros['first_tier_ndcg10']:.3f}", f"{macros['full_ndcg10']:.3f}", f"{macros['semble_ndcg10']:.3f}",
                 f"{sum(v['full_index_s'] for v in per_repo.values()):.1f}"])
    print("\nfirst answer on a repository never indexed (wall s, process start included; median of "
          f"{args.rounds}), and NDCG@10 per tier\n")
    print(table(["repo", "codesearch s", "semble s", "ratio", "first tier", "full", "semble", "full index s"], rows))
    speed = throughput(repos)
    print("\ntransformer throughput on the same chunks\n")
    print(table(["export", "chunks", "chunks/s", "tokens/s"],
                [[name, v["chunks"], f"{v['chunks_per_s']:.1f}", f"{v['tokens_per_s']:.0f}"] for name, v in speed.items()]))
    result = {"repos": per_repo, **macros, "throughput": speed,
              "first_answer_s": {n: v["first_answer_s"] for n, v in per_repo.items()},
              "semble_first_answer_s": {n: v["semble_first_answer_s"] for n, v in per_repo.items()},
              "max_ratio": max(v["ratio"] for v in per_repo.values())}
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
