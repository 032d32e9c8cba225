"""Every ranking of the DEV, held-out and requests questions, written to JSON; and two such files compared.

A refactor keeps behaviour when this prints the same hits and scores before and
after it. Usage:

    python -m benchmarks.rankings dump --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS \
        [--trees DIR] [--corpora S] [--requests R] [--index-dir DIR] [--reuse] [--tiers full,static] --json OUT
    python -m benchmarks.rankings compare BEFORE.json AFTER.json [--tolerance 1e-9]

``dump`` builds (or with ``--reuse`` opens) a full index and a static-tier index
of every DEV repository, held-out corpus and the requests tree, and records for
each question the top 10 of the default hybrid ranking on both tiers and of
the keyword and dense modes, each hit as ``path:start-end`` with its score.
It also records a sha256 of each index's chunk list and arrays, so a rebuilt
index can be told apart from an equal one. ``compare`` prints every question
whose hits differ, or whose scores differ by more than ``--tolerance``, and
exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._harness import dev_arguments
from benchmarks.peer_data import export_trees, load_repos
from codesearch import CodeSearch
from codesearch.index.columns import stored_records

BENCHMARKS = Path(__file__).resolve().parent

RUNS: tuple[tuple[str, str, str], ...] = (
    # (name in the file, tier of the index, search mode)
    ("full/hybrid", "full", "hybrid"),
    ("full/bm25", "full", "bm25"),
    ("full/dense", "full", "dense"),
    ("static/hybrid", "static", "hybrid"),
)
K = 10


def corpora(args: argparse.Namespace) -> Iterator[tuple[str, Path, list[str]]]:
    """``(name, root, queries)`` of every corpus named on the command line."""
    if args.semble_benchmarks is not None:
        repos = load_repos(args.semble_benchmarks)
        export_trees(repos, args.mirrors, args.trees)
        for repo in repos:
            assert repo.root is not None
            yield f"dev/{repo.name}", repo.root, [t.query for t in repo.tasks]
    if args.corpora is not None:
        from benchmarks import quality

        folders, questions = quality.load_heldout(BENCHMARKS / "data" / "questions.json")
        for corpus, folder in folders.items():
            yield f"heldout/{corpus}", args.corpora / folder, [q.query for q in questions if q.corpus == corpus]
    if args.requests is not None:
        from benchmarks import quality

        yield "requests", args.requests, [q.query for q in quality.seed_questions(args.requests)]


def index_digest(cs: CodeSearch) -> str:
    """sha256 over a stored index's chunk records (path, lines, kind, key, symbols, text) and both tiers' vectors.

    It does not depend on how the store lays them out, so indexes of two on-disk formats compare.
    """
    snapshot = cs.store.load()
    digest = hashlib.sha256(json.dumps(stored_records(snapshot.arrays), sort_keys=True).encode("utf-8"))
    for name in ("vectors", "static_vectors"):
        array = snapshot.arrays.get(name)
        if array is not None:
            digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def dump(args: argparse.Namespace) -> int:
    out: dict[str, Any] = {"corpora": {}}
    for name, root, queries in corpora(args):
        entry: dict[str, Any] = {"queries": queries, "digests": {}, "index_s": {}, "runs": {}}
        for tier in args.tiers:
            folder = args.index_dir / f"{name.replace('/', '-')}-{tier}"
            cs = CodeSearch(root, index_dir=folder)
            if not (args.reuse and cs.store.exists()):
                started = time.perf_counter()
                cs.index(tier=tier)  # type: ignore[arg-type]
                entry["index_s"][tier] = round(time.perf_counter() - started, 2)
            entry["digests"][tier] = index_digest(cs)
            for run, run_tier, mode in RUNS:
                if run_tier != tier:
                    continue
                entry["runs"][run] = [
                    [[h.location, h.score] for h in cs.search(q, k=K, mode=mode, refresh=False)]  # type: ignore[arg-type]
                    for q in queries
                ]
        out["corpora"][name] = entry
        print(f"{name}: {len(queries)} queries, index s {entry['index_s']}", file=sys.stderr)
    args.json_out.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


def compare(before: dict[str, Any], after: dict[str, Any], tolerance: float) -> list[str]:
    """One line per question whose hits or scores differ; empty when the two runs agree."""
    problems = []
    for name, old in before["corpora"].items():
        new = after["corpora"].get(name)
        if new is None:
            problems.append(f"{name}: missing")
            continue
        for tier, digest in old["digests"].items():
            if new["digests"].get(tier) != digest:
                problems.append(f"{name} {tier}: the index differs (sha256 of chunks and arrays)")
        for run, results in old["runs"].items():
            if run not in new["runs"]:
                problems.append(f"{name} {run}: missing")
                continue
            for query, was, now in zip(old["queries"], results, new["runs"].get(run, [])):
                if [h[0] for h in was] != [h[0] for h in now]:
                    problems.append(f"{name} {run} {query!r}: hits differ\n  before {[h[0] for h in was]}\n"
                                    f"  after  {[h[0] for h in now]}")
                    continue
                worst = max((abs(a[1] - b[1]) for a, b in zip(was, now)), default=0.0)
                if worst > tolerance:
                    problems.append(f"{name} {run} {query!r}: scores differ by {worst:.3g}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    d = commands.add_parser("dump", help="index every corpus and write its rankings")
    dev_arguments(d, required=False)
    d.add_argument("--corpora", type=Path, help="the extracted sdists of benchmarks/data/fetch_corpora.py")
    d.add_argument("--requests", type=Path, help="psf/requests v2.32.3")
    d.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-rankings")
    d.add_argument("--reuse", action="store_true", help="open indexes already in --index-dir instead of rebuilding")
    d.add_argument("--tiers", type=lambda text: text.split(","), default=["full", "static"],
                   help="the tiers to build and rank, comma-separated (default full,static; static alone takes minutes)")
    d.add_argument("--json", dest="json_out", type=Path, required=True)
    c = commands.add_parser("compare", help="compare two dumps")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--tolerance", type=float, default=1e-9)
    args = parser.parse_args(argv)
    if args.command == "dump":
        if args.semble_benchmarks is not None and args.mirrors is None:
            parser.error("--semble-benchmarks needs --mirrors")
        return dump(args)
    before = json.loads(args.before.read_text(encoding="utf-8"))
    after = json.loads(args.after.read_text(encoding="utf-8"))
    problems = compare(before, after, args.tolerance)
    for line in problems:
        print(line)
    total = sum(len(q) for entry in before["corpora"].values() for q in entry["runs"].values())
    print(f"{len(problems)} differences in {total} rankings of {len(before['corpora'])} corpora")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
