"""Definition-aware chunks per language on the DEV repositories: symbol share, fallbacks, NDCG@10 gained.

    python benchmarks/languages.py --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS \\
        [--trees DIR] [--repos chi,gson] [--ndcg --index-dir DIR] [--json OUT]

For each DEV repository of the peer benchmark (one language each), the
chunker's report as ``codesearch stats`` gives it: files and chunks of the
repository's language, the share of chunks that carry symbols, and the files
that fell back to line windows with the reason. With ``--ndcg`` it also builds
the full index (int8, the default ranking) twice, once with definition chunks
and once with the published line windows, and scores both on the repository's
annotated queries (semble's metric), so the table shows what definition-aware
chunking is worth per language. The definitions index goes to
``INDEX_DIR/NAME-int8``, where the peer benchmark puts it, so one run of each
shares it.

JSON keys: ``languages`` (per language ``{repo, files, chunks, symbol_share,
fallbacks, ndcg10_definitions, ndcg10_lines, delta}``), ``min_symbol_share``.
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

BENCHMARKS = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCHMARKS))

from peer_benchmark import table  # noqa: E402
from peer_data import DEV_REPOSITORIES, Repo, export_trees, load_repos, ndcg_at_10  # noqa: E402

from codesearch import CodeSearch  # noqa: E402
from codesearch.stats import repo_stats  # noqa: E402

TOP_K = 10


def language_report(repo: Repo) -> dict[str, Any]:
    """The chunker's report for the repository's own language."""
    stats = repo_stats(repo.root).languages.get(repo.language)
    if stats is None:
        return {"files": 0, "chunks": 0, "symbol_share": 0.0, "fallbacks": {}}
    return {"files": stats.files, "chunks": stats.chunks, "symbol_share": stats.symbol_share,
            "fallbacks": dict(Counter(stats.fallbacks.values()))}


def ndcg(repo: Repo, index_dir: Path, chunking: str) -> float:
    """Mean NDCG@10 over the repository's queries, full tier, for one chunking."""
    cs = CodeSearch(repo.root, index_dir=index_dir, int8=True, chunking=chunking)  # type: ignore[arg-type]
    cs.index()
    indexed = [(c["path"], c["start_line"], c["end_line"]) for c in cs.store.load().chunks]
    scores = []
    for task in repo.tasks:
        hits = cs.search(task.query, k=TOP_K, refresh=False)
        scores.append(ndcg_at_10([(h.path, h.start_line, h.end_line) for h in hits], task.targets, indexed))
    return statistics.fmean(scores)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--semble-benchmarks", type=Path, required=True, help="semble's benchmarks/ folder")
    parser.add_argument("--mirrors", type=Path, required=True, help="folder of fetched mirrors (owner+name/repo)")
    parser.add_argument("--trees", type=Path, help="where to export the pinned trees (default: a scratch folder)")
    parser.add_argument("--repos", help="comma-separated subset of the DEV list")
    parser.add_argument("--ndcg", action="store_true", help="also index each repository both ways and score them")
    parser.add_argument("--index-dir", type=Path, help="where the indexes go (with --ndcg; default: a scratch folder)")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)

    names = args.repos.split(",") if args.repos else list(DEV_REPOSITORIES)
    repos = load_repos(args.semble_benchmarks, names)
    scratch = Path(tempfile.mkdtemp(prefix="codesearch-languages-"))
    export_trees(repos, args.mirrors, args.trees or scratch / "trees")
    index_root = args.index_dir or scratch / "indexes"

    languages: dict[str, dict[str, Any]] = {}
    for repo in repos:
        print(f"{repo.name} ({repo.language}) ...", file=sys.stderr, flush=True)
        entry = {"repo": repo.name, **language_report(repo)}
        if args.ndcg:
            entry["ndcg10_definitions"] = ndcg(repo, index_root / f"{repo.name}-int8", "definitions")
            entry["ndcg10_lines"] = ndcg(repo, index_root / f"{repo.name}-int8-lines", "lines")
            entry["delta"] = entry["ndcg10_definitions"] - entry["ndcg10_lines"]
        languages[repo.language] = entry

    headers = ["language", "repo", "files", "chunks", "with symbols", "fallbacks"]
    if args.ndcg:
        headers += ["NDCG lines", "NDCG definitions", "delta"]
    rows = []
    for language, e in sorted(languages.items()):
        fallbacks = ", ".join(f"{n} {reason}" for reason, n in sorted(e["fallbacks"].items())) or "-"
        row = [language, e["repo"], e["files"], e["chunks"], f"{e['symbol_share']:.0%}", fallbacks]
        if args.ndcg:
            row += [f"{e['ndcg10_lines']:.3f}", f"{e['ndcg10_definitions']:.3f}", f"{e['delta']:+.3f}"]
        rows.append(row)
    print("\nDefinition-aware chunks per language (DEV repositories, each repository's own language)\n")
    print(table(headers, rows))
    lowest = min(e["symbol_share"] for e in languages.values())
    print(f"\nlowest share of chunks with symbols: {lowest:.0%}")
    if args.ndcg:
        mean = statistics.fmean
        print(f"macro NDCG@10: lines {mean(e['ndcg10_lines'] for e in languages.values()):.3f}, "
              f"definitions {mean(e['ndcg10_definitions'] for e in languages.values()):.3f}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"languages": languages, "min_symbol_share": lowest}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
