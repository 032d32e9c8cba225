"""Symbol navigation, token budgets and the shared index, measured on the DEV repositories of semble's benchmark.

Usage:
    python -m benchmarks.navigation --semble-benchmarks DIR [--mirrors DIR] [--trees DIR] [--repos a,b]
        [--index-dir DIR] [--references gson,libuv] [--identifiers 50] [--shared REPO] [--json OUT]

1. ``definitions``: :meth:`CodeSearch.definitions` on every query of the DEV
   ``symbol`` category: the share whose first hit matches an annotated target
   (``peer_data.Target.matches``: a path suffix, and the lines when the target
   has them), also counted from the symbol table alone (without the textual
   declaration lines that answer a name the table lacks), and the p50 time of
   the call on a loaded index (no stat pass); goals >= 0.95 and <= 2 ms.
2. ``references``: :meth:`CodeSearch.references` (uncapped) on ``--identifiers``
   identifiers of each ``--references`` repository, half drawn (seed 0) from its
   symbol table and half from the words of its files (keywords, locals, common
   names: the long lists), against ``grep -wnF`` over the indexed files: the share of grep's
   lines found (recall), of ours that grep also finds (precision), and the p50
   time; goals: every line, <= 5 ms.
3. ``budget``: every DEV query, answered by ``search`` (bm25), ``definitions``
   and ``references``, fitted to 500, 2000 and 8000 tokens with the CLI's and
   the MCP SDK's JSON: how many answers came out over (goal 0), and NDCG@10
   (semble's, all targets) of the bm25 ranking read back from the full answer,
   the compact one, and the compact one at each budget.
4. ``shared``: ``--shared`` (default: the first repository) indexed with keywords
   and the static tier (the real MiniLM static model) in one folder, copied with
   ``cp -r`` (new file times) to another: a read-only searcher's first search
   (seconds, chunks embedded, bytes written to the index folder), its second
   search, and a writable ``index`` of the copy (chunks embedded).

Indexes 1-3 are keyword-only (navigation reads the symbol table and the
keyword postings; no model is loaded). Timings are wall-clock on this
machine, medians of single calls.

JSON keys: ``definitions``, ``references``, ``budget``, ``shared`` (each as printed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import percentile
from benchmarks.peer_data import DEV_REPOSITORIES, Repo, export_trees, load_repos, ndcg_at_10_all_targets
from codesearch import CodeSearch
from codesearch.chunking.symbols import definition_names
from codesearch.faces.answers import estimate_tokens, fit_to_budget, hits_data, pretty_json, symbol_answer
from codesearch.index.columns import ChunkColumns

BUDGETS = (500, 2000, 8000)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w{2,}")


def p50(values: Sequence[float]) -> float:
    """The median of ``values`` to 0.001 (NaN for none)."""
    return round(percentile(values, 50), 3) if values else float("nan")


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def locate_trees(repos: list[Repo], trees: Path, mirrors: Path | None) -> None:
    """Each repository's tree: exported from its mirror at the pin when ``mirrors`` is given, else as found in ``trees``."""
    if mirrors is not None:
        export_trees(repos, mirrors, trees)
        return
    for repo in repos:
        target = trees / repo.name
        repo.root = target / repo.benchmark_root if repo.benchmark_root else target
        if not repo.root.is_dir():
            raise SystemExit(f"no tree at {repo.root}: pass --mirrors to export it")


def keyword_searcher(repo: Repo, index_dir: Path) -> CodeSearch:
    assert repo.root is not None
    cs = CodeSearch(repo.root, model=None, index_dir=index_dir / repo.name)
    cs.index()
    return cs


def measure_definitions(searchers: dict[str, CodeSearch], repos: list[Repo]) -> dict[str, Any]:
    rows, timings, misses = [], [], []
    for repo in repos:
        cs = searchers[repo.name]
        cs.definitions("warm-up", refresh=False)
        tasks = [t for t in repo.tasks if t.category == "symbol"]
        first = table = 0
        for task in tasks:
            started = time.perf_counter()
            found = cs.definitions(task.query, refresh=False)
            timings.append(_ms(time.perf_counter() - started))
            top = found[0] if found else None
            if top is not None and any(t.matches(top.path, top.start_line, top.end_line) for t in task.targets):
                first += 1
                table += not found.textual
            if top is None or not any(t.matches(top.path, top.start_line, top.end_line) for t in task.targets) \
                    or found.textual:
                misses.append({"repo": repo.name, "query": task.query, "got": top.location if top else None,
                               "textual": found.textual, "targets": [t.path for t in task.targets]})
        if tasks:
            rows.append({"repo": repo.name, "queries": len(tasks), "rank1": first, "rank1_symbol_table": table})
    total = sum(r["queries"] for r in rows)
    rank1, table_only = sum(r["rank1"] for r in rows), sum(r["rank1_symbol_table"] for r in rows)
    return {"queries": total, "rank1": rank1, "rank1_share": round(rank1 / total, 4) if total else None,
            "rank1_symbol_table": table_only, "rank1_symbol_table_share": round(table_only / total, 4) if total else None,
            "p50_ms": p50(timings), "max_ms": max(timings, default=None), "per_repo": rows, "misses": misses}


def _grep_w(root: Path, files: list[str], name: str) -> set[tuple[str, int]]:
    """``grep -wnF`` of ``name`` over ``files`` (relative to ``root``): (path, line) of each matching line."""
    found: set[tuple[str, int]] = set()
    for start in range(0, len(files), 500):
        proc = subprocess.run(["grep", "-wnFH", "-e", name, "--", *files[start:start + 500]], cwd=root,
                              capture_output=True, env={**os.environ, "LC_ALL": "C.UTF-8"})
        if proc.returncode not in (0, 1):
            raise SystemExit(proc.stderr.decode(errors="replace"))
        for line in proc.stdout.decode("utf-8", errors="replace").splitlines():
            path, number, _ = line.split(":", 2)
            found.add((path, int(number)))
    return found


def measure_references(searchers: dict[str, CodeSearch], names: Sequence[str], identifiers: int) -> dict[str, Any]:
    rows, timings = [], []
    grep_lines = ours_lines = common = exact = 0
    for name in names:
        cs = searchers[name]
        snapshot = cs.store.load()
        columns = ChunkColumns.from_arrays(snapshot.arrays)
        files = sorted(columns.text_files())
        symbols = sorted({definition_names(s)[-1] for s in columns.symbols.tolist()})
        named = [s for s in symbols if _IDENTIFIER.fullmatch(s)]
        words = sorted({w for f in files for w in _IDENTIFIER.findall((cs.root / f).read_text("utf-8", "replace"))})
        rng = random.Random(0)
        picked = rng.sample(named, min(identifiers // 2, len(named)))
        picked += rng.sample([w for w in words if w not in picked], min(identifiers - len(picked), len(words)))
        cs.references("warm_up", refresh=False)
        for identifier in picked:
            started = time.perf_counter()
            found = cs.references(identifier, k=10**9, refresh=False)
            timings.append(_ms(time.perf_counter() - started))
            ours = {(h.path, line) for h in found for line in h.lines}
            theirs = _grep_w(cs.root, files, identifier)
            grep_lines += len(theirs)
            ours_lines += len(ours)
            common += len(ours & theirs)
            exact += ours == theirs
            if ours != theirs:
                rows.append({"repo": name, "identifier": identifier, "missed": sorted(theirs - ours)[:5],
                             "extra": sorted(ours - theirs)[:5]})
    return {"identifiers": len(timings), "repos": list(names), "grep_lines": grep_lines,
            "found_lines": ours_lines, "recall": round(common / grep_lines, 4) if grep_lines else None,
            "precision": round(common / ours_lines, 4) if ours_lines else None, "identical": exact,
            "p50_ms": p50(timings), "max_ms": max(timings, default=None), "differences": rows[:20]}


def measure_budget(searchers: dict[str, CodeSearch], repos: list[Repo]) -> dict[str, Any]:
    from codesearch.faces.mcp_server import sdk_text

    over = answers = 0
    ndcg: dict[str, list[float]] = {"full": [], "compact": [], **{f"compact@{b}": [] for b in BUDGETS}}
    for repo in repos:
        cs = searchers[repo.name]
        for task in repo.tasks:
            hits = cs.search(task.query, k=10, mode="bm25", refresh=False)
            shaped = {"full": hits_data(hits), "compact": hits_data(hits, compact=True)}
            for form, data in shaped.items():
                ndcg[form].append(ndcg_at_10_all_targets(_locations(data), task.targets))
            word = task.query.split()[0]
            candidates = [{"query": task.query, "hits": shaped["full"]}, {"query": task.query, "hits": shaped["compact"]},
                          symbol_answer(cs.definitions(task.query, refresh=False), max_lines=40)]
            if _IDENTIFIER.fullmatch(word):
                candidates.append(symbol_answer(cs.references(word, k=20, refresh=False), max_lines=40))
            for budget in BUDGETS:
                compact = fit_to_budget({"query": task.query, "hits": shaped["compact"]}, budget)
                ndcg[f"compact@{budget}"].append(ndcg_at_10_all_targets(_locations(compact["hits"]), task.targets))
                for answer in candidates:
                    for dumps in (pretty_json, sdk_text):
                        fitted = fit_to_budget(answer, budget, dumps)
                        answers += 1
                        over += estimate_tokens(dumps(fitted)) > budget
    return {"answers": answers, "over_budget": over, "budgets": list(BUDGETS),
            "ndcg10_bm25": {form: round(statistics.fmean(values), 4) for form, values in ndcg.items()}}


def _locations(hits: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    found = []
    for hit in hits:
        path, lines = hit["location"].rsplit(":", 1)
        start, end = lines.split("-")
        found.append((path, int(start), int(end)))
    return found


class _Counting:
    """An embedder that counts the texts it embeds (to show a moved index embeds none)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.texts = inner, 0
        self.fingerprint, self.dim, self.spec = inner.fingerprint, inner.dim, inner.spec

    def embed_documents(self, texts: Sequence[str], progress: bool = False) -> Any:
        self.texts += len(texts)
        return self.inner.embed_documents(texts, progress)

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)


def measure_shared(repo: Repo, work: Path, models: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """The shared-index run; ``models`` (transformer, static) stand in for MiniLM and its static model."""
    if models is None:
        from codesearch.embedding.static import StaticEmbedder

        models = ("minilm", StaticEmbedder("minilm"))
    model, static = models
    assert repo.root is not None
    built, moved = work / "built", work / "moved"
    shutil.rmtree(work, ignore_errors=True)
    built.mkdir(parents=True)
    subprocess.run(["cp", "-r", str(repo.root), str(built / "repo")], check=True)
    started = time.perf_counter()
    report = CodeSearch(built / "repo", model=model, static=static, index_dir=built / "index").index(tier="static")
    build_s = time.perf_counter() - started
    subprocess.run(["cp", "-r", str(built), str(moved)], check=True)  # new paths, new file times
    before = {p: p.stat().st_size for p in (moved / "index").rglob("*") if p.is_file()}
    counting = _Counting(static)
    started = time.perf_counter()
    reader = CodeSearch(moved / "repo", model=model, static=counting, index_dir=moved / "index", read_only=True)
    reader.search(repo.tasks[0].query, k=10)
    first_s = time.perf_counter() - started
    info = reader.last_search
    started = time.perf_counter()
    reader.search(repo.tasks[-1].query, k=10)
    second_s = time.perf_counter() - started
    after = {p: p.stat().st_size for p in (moved / "index").rglob("*") if p.is_file()}
    writer = _Counting(static)
    update = CodeSearch(moved / "repo", model=model, static=writer, index_dir=moved / "index").index(tier="static")
    return {"repo": repo.name, "files": report.files, "chunks": report.chunks, "build_s": round(build_s, 3),
            "read_only_first_search_s": round(first_s, 3), "refreshed_in_memory": info.refreshed if info else None,
            "embedded_read_only": counting.texts, "index_unchanged": before == after,
            "second_search_s": round(second_s, 3), "writable_reindex_embedded": update.static_embedded + update.embedded,
            "writable_reindex_s": update.seconds}


def main(argv: Sequence[str] | None = None, models: tuple[Any, Any] | None = None) -> int:
    """Run every measurement; ``models`` (transformer, static) stand in for MiniLM in the shared-index run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--semble-benchmarks", type=Path, required=True, help="semble's benchmarks/ folder")
    parser.add_argument("--mirrors", type=Path, help="folder of git mirrors; without it --trees must hold the exports")
    parser.add_argument("--trees", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-peer-trees")
    parser.add_argument("--repos", default=",".join(DEV_REPOSITORIES), help="comma-separated DEV repositories")
    parser.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-navigation")
    parser.add_argument("--references", default="gson,libuv", help="repositories whose identifiers are grepped")
    parser.add_argument("--identifiers", type=int, default=50, help="identifiers per --references repository")
    parser.add_argument("--shared", help="the repository of the shared-index run (default: the first)")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)

    repos = load_repos(args.semble_benchmarks, [n for n in args.repos.split(",") if n])
    locate_trees(repos, args.trees, args.mirrors)
    searchers = {repo.name: keyword_searcher(repo, args.index_dir) for repo in repos}

    definitions = measure_definitions(searchers, repos)
    print(f"\nfind_definition on the {definitions['queries']} DEV symbol queries (goal: rank 1 >= 0.95, p50 <= 2 ms)")
    print(f"{'repository':<12} {'queries':>7} {'rank 1':>7} {'of which symbol table':>22}")
    for row in definitions["per_repo"]:
        print(f"{row['repo']:<12} {row['queries']:>7} {row['rank1']:>7} {row['rank1_symbol_table']:>22}")
    print(f"{'all':<12} {definitions['queries']:>7} {definitions['rank1']:>7} {definitions['rank1_symbol_table']:>22}")
    print(f"rank 1 share {definitions['rank1_share']:.3f} ({definitions['rank1_symbol_table_share']:.3f} from the "
          f"symbol table alone, the rest from declaration lines); p50 {definitions['p50_ms']:.2f} ms, "
          f"max {definitions['max_ms']:.2f} ms")
    for miss in definitions["misses"]:
        how = "textual " if miss["textual"] else ""
        print(f"  {how}{'hit' if miss['textual'] and miss['got'] else 'miss'} {miss['repo']}: {miss['query']!r} -> "
              f"{miss['got']} (targets {', '.join(miss['targets'])})")

    names = [n for n in args.references.split(",") if n in searchers]
    references = measure_references(searchers, names, args.identifiers)
    print(f"\nfind_references on {references['identifiers']} identifiers of {', '.join(names)} against grep -wnF "
          "(goal: every line, p50 <= 5 ms)")
    print(f"grep lines {references['grep_lines']}, found {references['found_lines']}, recall {references['recall']}, "
          f"precision {references['precision']}, identical {references['identical']}/{references['identifiers']}, "
          f"p50 {references['p50_ms']:.2f} ms, max {references['max_ms']:.2f} ms")
    for row in references["differences"]:
        print(f"  {row['repo']} {row['identifier']}: missed {row['missed']} extra {row['extra']}")

    budget = measure_budget(searchers, repos)
    print(f"\nbudgets {budget['budgets']}: {budget['answers']} answers fitted (CLI and MCP JSON), "
          f"{budget['over_budget']} over")
    print("NDCG@10 (bm25, all targets): " + ", ".join(f"{k} {v:.4f}" for k, v in budget["ndcg10_bm25"].items()))

    shared_repo = next(r for r in repos if r.name == (args.shared or repos[0].name))
    shared = measure_shared(shared_repo, args.index_dir / "shared", models)
    print(f"\nshared index ({shared['repo']}: {shared['files']} files, {shared['chunks']} chunks, keywords + static "
          f"tier built in {shared['build_s']:.2f} s), copied with cp -r, read-only:")
    print(f"first search {shared['read_only_first_search_s']:.3f} s ({shared['refreshed_in_memory']} files re-read, "
          f"{shared['embedded_read_only']} chunks embedded, index folder unchanged: {shared['index_unchanged']}); "
          f"second search {shared['second_search_s']:.3f} s; a writable index of the copy embedded "
          f"{shared['writable_reindex_embedded']} in {shared['writable_reindex_s']:.2f} s")

    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps({"definitions": definitions, "references": references, "budget": budget,
                                             "shared": shared}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
