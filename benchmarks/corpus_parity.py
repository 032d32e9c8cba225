"""The corpus against single indexes on DEV, and against itself before and after a change: the cheap parity check.

Usage:
    python -m benchmarks.corpus_parity dump --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS [--trees DIR]
        --work DIR --json OUT [--build-store NAME] [--store URI] [--ray-address HOST:PORT]
    python -m benchmarks.corpus_parity compare BEFORE.json AFTER.json [--tolerance 1e-9]

``dump`` builds once (or reuses) under ``--work`` a static-tier corpus of the
DEV trees (``store``) and each repository's single static index
(``single/NAME``): minutes on two cores, the transformer never runs. It then
records:

- ``scoped`` and ``single``: every DEV query scoped to its repository on the
  corpus, and on that repository's single index (top 10, location and score);
  ``scoped_identical`` counts the queries whose two lists are the same;
- ``org``: every DEV query across all repositories, eight ways (hybrid, bm25,
  dense, without tests, a glob, a path prefix, two repositories, docs only):
  the path across repositories, with each kind of scope it applies;
- ``digest_shared``: sha256 of the corpus's chunk rows (ids, terms, static
  vectors, texts), file rows and stored keyword fits; with
  ``--build-store NAME`` a second corpus is built by the code that runs, and
  ``digest_built`` says what it holds.

With ``--store s3://...`` and ``--ray-address`` the corpus is built by a Ray
cluster into a bucket: ``compare`` of that dump with one of a local build
says whether the cluster and the bucket give the same corpus and rankings.

``compare`` of a dump made before a change with one made after (run with the
other code, on the same ``--work``) prints every ranking whose hits differ, or
whose scores differ by more than ``--tolerance``, and whether a store built
after holds what the one built before does; it exits 1 on any difference.
Scores are compared within a tolerance (default 1e-9) so that dumps of older
code still compare: before the path-words stage summed its weights in sorted
order, a set's hash order moved a score's last bit from run to run (7e-18
measured). Two processes with different hash seeds now dump the same scores
(``--tolerance 0``: 0 differences in 3,680 rankings).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import dev_arguments, read_json, write_json
from benchmarks.peer_data import export_trees, load_repos

K = 10
VARIANTS: dict[str, dict[str, Any]] = {
    "hybrid": {}, "bm25": {"mode": "bm25"}, "dense": {"mode": "dense"},
    "no-tests": {"exclude_kinds": "test"}, "glob": {"include": ["*.go", "*.py", "*.ts"]},
    "prefix-src": {"scope": "src"}, "two": {"repos": ["requests", "chi"]}, "docs": {"kinds": "doc"},
}
"""The searches across repositories, each a scope the corpus applies its own way (a prefilter, a glob after)."""


def store_digest(store: Path | str) -> dict[str, str]:
    """sha256 of a corpus's chunk rows (by chunk id), file rows and stored keyword fits (by repository), in a
    folder or a bucket (Lance finds the bucket's endpoint and keys in the ``AWS_*`` variables)."""
    import lance
    import numpy as np

    store = str(store).rstrip("/")
    table = lance.dataset(f"{store}/chunks.lance").to_table(columns=[
        "chunk_id", "repo", "path", "ordinal", "start_line", "end_line", "kind", "symbols", "def_names", "keyword_text",
        "content_key", "vector_key", "read", "static_vector", "text"])
    table = table.take(np.argsort(table["chunk_id"].to_numpy(), kind="stable"))
    chunks = hashlib.sha256()
    for name in table.column_names:
        chunks.update(name.encode())
        chunks.update(json.dumps(table[name].to_pylist(), default=str).encode())
    files = lance.dataset(f"{store}/files.lance").to_table(columns=["repo", "path", "sha256", "size", "chunks"])
    rows = sorted(zip(*(files[c].to_pylist() for c in files.column_names)))
    keywords = lance.dataset(f"{store}/keywords.lance")
    names = keywords.to_table(columns=["repo"], with_row_address=True)
    fits = hashlib.sha256()
    for repo, address in sorted(zip(names["repo"].to_pylist(), names["_rowaddr"].to_pylist())):
        [(_, blob)] = keywords.read_blobs("bm25", addresses=[address])
        fits.update(repo.encode())
        fits.update(bytes(blob))
    return {"chunks": chunks.hexdigest(), "files": hashlib.sha256(json.dumps(rows).encode()).hexdigest(),
            "keywords": fits.hexdigest()}


def dump(args: argparse.Namespace) -> int:
    from codesearch import CodeSearch
    from codesearch.corpus import Corpus

    repos = load_repos(args.semble_benchmarks)
    export_trees(repos, args.mirrors, args.trees)
    paths = [f"{r.name}={r.root}" for r in repos]
    store = args.store or str(args.work / "store")
    corpus = Corpus(store)
    if not corpus.store.exists():
        report = corpus.build(paths, args.ray_address, tier="static")
        print(f"built {store}: {report.chunks} chunks in {report.seconds:.1f} s on {report.actors} actors"
              f"{' (Ray at ' + args.ray_address + ')' if args.ray_address else ''}", file=sys.stderr)
    out: dict[str, Any] = {"scoped": {}, "single": {}, "org": {}}
    for repo in repos:
        single = CodeSearch(repo.root, index_dir=args.work / "single" / repo.name)  # type: ignore[arg-type]
        if not single.store.exists():
            single.index(tier="static")
        for task in repo.tasks:
            key = f"{repo.name}\t{task.query}"
            out["single"][key] = [[h.location, h.score] for h in single.search(task.query, k=K, refresh=False)]
            out["scoped"][key] = [[h.location, h.score] for h in corpus.search(task.query, k=K, repos=[repo.name],
                                                                               tier="static")]
        for task in repo.tasks:
            for name, options in VARIANTS.items():
                hits = corpus.search(task.query, k=K, **options)
                out["org"][f"{name}\t{repo.name}\t{task.query}"] = [[h.repo, h.location, h.score] for h in hits]
        print(f"{repo.name}: {len(repo.tasks)} queries", file=sys.stderr)
    out["scoped_identical"] = [sum(out["single"][k] == out["scoped"][k] for k in out["single"]), len(out["single"])]
    out["digest_shared"] = store_digest(store)
    if args.build_store:
        built = args.work / args.build_store
        if not built.exists():
            Corpus(built).build(paths, tier="static")
        out["digest_built"] = store_digest(built)
    write_json(args.json_out, out)
    print("scoped identical to single: {}/{}".format(*out["scoped_identical"]))
    return 0


def compare(before: dict[str, Any], after: dict[str, Any], tolerance: float) -> list[str]:
    """One line per ranking whose hits differ, or whose scores differ by more than ``tolerance``, and per store
    digest that differs; empty when the two dumps agree."""
    problems = []
    for part in ("scoped", "single", "org"):
        for key, was in before[part].items():
            now = after[part].get(key)
            if now is None or [h[:-1] for h in was] != [h[:-1] for h in now]:
                problems.append(f"{part} {key!r}: hits differ\n  before {was}\n  after  {now}")
            elif max((abs(a[-1] - b[-1]) for a, b in zip(was, now)), default=0.0) > tolerance:
                problems.append(f"{part} {key!r}: scores differ")
    if before.get("digest_shared") != after.get("digest_shared"):
        problems.append("the shared store reads otherwise (was it rebuilt?)")
    for name in ("digest_built", "digest_shared"):
        if "digest_built" in after and name in before and before[name] != after["digest_built"]:
            problems.append(f"a store built now differs from {name} before")
            break
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    d = commands.add_parser("dump", help="build (once) and rank, write the rankings and store digests")
    dev_arguments(d)
    d.add_argument("--work", type=Path, required=True, help="where the corpus and the single indexes are kept")
    d.add_argument("--build-store", help="also build a corpus of this name under --work with this code")
    d.add_argument("--store", help="the corpus to build (once) and rank: a folder or an s3:// URI (the AWS_* "
                                   "variables reach the bucket); default WORK/store")
    d.add_argument("--ray-address", help="build on the Ray cluster at HOST:PORT (default: a local Ray)")
    d.add_argument("--json", dest="json_out", type=Path, required=True)
    c = commands.add_parser("compare", help="compare two dumps")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--tolerance", type=float, default=1e-9)
    args = parser.parse_args(argv)
    if args.command == "dump":
        return dump(args)
    before, after = read_json(args.before), read_json(args.after)
    problems = compare(before, after, args.tolerance)
    for line in problems:
        print(line)
    total = sum(len(before[part]) for part in ("scoped", "single", "org"))
    print(f"{len(problems)} differences in {total} rankings; scoped identical to single: before "
          "{}/{}, after {}/{}".format(*before["scoped_identical"], *after["scoped_identical"]))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
