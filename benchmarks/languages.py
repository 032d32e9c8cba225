"""Definition-aware chunks per language on the DEV repositories: symbol share, fallbacks, NDCG@10 gained.

    python -m benchmarks.languages --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS \\
        [--trees DIR] [--repos chi,gson] [--also DIR ...] [--ndcg --index-dir DIR] [--json OUT]

Over the DEV trees of the peer benchmark, the chunker's report as
``codesearch stats`` gives it, summed per language: files, chunks, the share
of chunks that carry symbols, and the files that fell back to line windows by
reason. With ``--ndcg`` it also builds
the full index (int8, the default ranking) twice, once with definition chunks
and once with the published line windows, and scores both on the repository's
annotated queries (``ndcg10`` of ``peer_data``: the ideal over the targets the
index can find, not semble's all-targets figure), so the table shows what definition-aware
chunking is worth per language. The definitions index goes to
``INDEX_DIR/NAME-int8``, where the peer benchmark puts it, so one run of each
shares it.

JSON keys: ``languages`` (per language found in the trees ``{repos, files,
chunks, with_symbols, symbol_share, fallbacks}``), ``min_symbol_share``; with
``--ndcg`` also ``repos`` (per repository ``{language, ndcg10_definitions,
ndcg10_lines, delta}``; the language is semble's label).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks._harness import table
from benchmarks.peer_data import DEV_REPOSITORIES, Repo, export_trees, indexed_locations, load_repos, query_ndcgs
from codesearch import CodeSearch
from codesearch.stats import repo_stats


def language_reports(roots: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """The chunker's report per language, summed over the trees (a repository holds several)."""
    totals: dict[str, dict[str, Any]] = {}
    for name, root in roots.items():
        for language, stats in repo_stats(root).languages.items():
            if language == "other":
                continue
            entry = totals.setdefault(language, {"repos": [], "files": 0, "chunks": 0, "with_symbols": 0,
                                                 "fallbacks": Counter()})
            entry["repos"].append(name)
            entry["files"] += stats.files
            entry["chunks"] += stats.chunks
            entry["with_symbols"] += stats.chunks_with_symbols
            entry["fallbacks"].update(stats.fallbacks.values())
    for entry in totals.values():
        entry["symbol_share"] = entry["with_symbols"] / entry["chunks"] if entry["chunks"] else 0.0
        entry["fallbacks"] = dict(entry["fallbacks"])
    return dict(sorted(totals.items()))


def ndcg(repo: Repo, index_dir: Path, chunking: str) -> float:
    """Mean NDCG@10 over the repository's queries, full tier, for one chunking."""
    cs = CodeSearch(repo.root, index_dir=index_dir, int8=True, chunking=chunking)  # type: ignore[arg-type]
    cs.index()
    return statistics.fmean(query_ndcgs(cs, repo, indexed_locations(cs), refresh=False))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--semble-benchmarks", type=Path, required=True, help="semble's benchmarks/ folder")
    parser.add_argument("--mirrors", type=Path, required=True, help="folder of fetched mirrors (owner+name/repo)")
    parser.add_argument("--trees", type=Path, help="where to export the pinned trees (default: a scratch folder)")
    parser.add_argument("--repos", help="comma-separated subset of the DEV list")
    parser.add_argument("--ndcg", action="store_true", help="also index each repository both ways and score them")
    parser.add_argument("--index-dir", type=Path, help="where the indexes go (with --ndcg; default: a scratch folder)")
    parser.add_argument("--also", type=Path, nargs="*", default=[],
                        help="more trees for the language table (e.g. the held-out sdists, requests)")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)

    names = args.repos.split(",") if args.repos else list(DEV_REPOSITORIES)
    repos = load_repos(args.semble_benchmarks, names)
    scratch = Path(tempfile.mkdtemp(prefix="codesearch-languages-"))
    export_trees(repos, args.mirrors, args.trees or scratch / "trees")
    index_root = args.index_dir or scratch / "indexes"

    roots = {repo.name: repo.root for repo in repos if repo.root is not None}
    roots.update({path.name: path for path in args.also})
    languages = language_reports(roots)
    rows = [[language, ", ".join(e["repos"]), e["files"], e["chunks"], f"{e['symbol_share']:.1%}",
             ", ".join(f"{n} {reason}" for reason, n in sorted(e["fallbacks"].items())) or "-"]
            for language, e in languages.items()]
    print("\nDefinition-aware chunks per language, over the DEV trees\n")
    print(table(["language", "repositories", "files", "chunks", "with symbols", "fallbacks"], rows))
    lowest = min(e["symbol_share"] for e in languages.values())
    print(f"\nlowest share of chunks with symbols: {lowest:.1%}")
    result: dict[str, Any] = {"languages": languages, "min_symbol_share": lowest}

    if args.ndcg:
        repos_out: dict[str, dict[str, Any]] = {}
        for repo in repos:
            print(f"{repo.name}: definitions, then line windows ...", file=sys.stderr, flush=True)
            definitions = ndcg(repo, index_root / f"{repo.name}-int8", "definitions")
            lines = ndcg(repo, index_root / f"{repo.name}-int8-lines", "lines")
            repos_out[repo.name] = {"language": repo.language, "ndcg10_definitions": definitions,
                                    "ndcg10_lines": lines, "delta": definitions - lines}
        rows = [[e["language"], name, f"{e['ndcg10_lines']:.3f}", f"{e['ndcg10_definitions']:.3f}", f"{e['delta']:+.3f}"]
                for name, e in sorted(repos_out.items(), key=lambda item: item[1]["language"])]
        mean = statistics.fmean
        rows.append(["macro", "", f"{mean(e['ndcg10_lines'] for e in repos_out.values()):.3f}",
                     f"{mean(e['ndcg10_definitions'] for e in repos_out.values()):.3f}",
                     f"{mean(e['delta'] for e in repos_out.values()):+.3f}"])
        print("\nNDCG@10 per repository (full tier, int8, default ranking): line windows against definitions\n")
        print(table(["language", "repo", "lines", "definitions", "delta"], rows))
        result["repos"] = repos_out
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
