"""Where a warm query's time goes: one row per stage of the query path, for one tier, on one repository.

Usage:
    python -m benchmarks.query_profile [--repo PATH] [--tier full|static] [--mode hybrid|bm25|dense] [-k 10]
        [--runs 20] [--index-dir DIR] [--json OUT]

PATH defaults to ``$CODESEARCH_REQUESTS_CORPUS`` (psf/requests v2.32.3); the queries are the questions of
``seed_requests.QUESTIONS``. The index is built once (``--tier``), the models loaded and every query asked once,
then each query is timed ``--runs`` times warm without the stat pass (``refresh=False``), first as it is (the
p50 and p95 that compare with other systems), then again with every stage wrapped in a timer. A stage's time is
its own (exclusive: what it calls that has a row of its own is not counted twice), summed per search; a row gives
the median and mean of those sums over all searches and their share of the median profiled search. ``search
(rest)`` is what no stage accounts for (the facade and argument checks). Without the stat pass the query is embedded
on the calling thread (with one, on a worker while the changed files are found): the embedding row is its time.
The wrappers cost about a microsecond a call: compare the profiled total with the plain p50.

JSON keys: ``repo``, ``tier``, ``mode``, ``k``, ``runs``, ``chunks``, ``plain`` (p50, p95 and n of the plain
searches, ms), ``profiled`` (the same, with the timers), ``stages`` (one ``{stage, calls, p50_ms, mean_ms,
share}`` per row, in the path's order).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks._harness import percentiles, table, write_json
from benchmarks.seed_requests import QUESTIONS
from codesearch import CodeSearch
from codesearch.exceptions import ModelNotAvailableError
from codesearch.index import loaded as loaded_module
from codesearch.index.freshness import Freshness
from codesearch.index.loaded import LoadedIndex
from codesearch.index.session import IndexSession
from codesearch.index.tiers import Tiers
from codesearch.index.vectors import VectorSearch
from codesearch.keyword import BM25
from codesearch.ranking import pipeline, stages
from codesearch.ranking.facts import ChunkFacts

# (owner, attribute, row): the query path's stages in the order a search meets them.
STAGES: tuple[tuple[Any, str, str], ...] = (
    (CodeSearch, "search", "search (rest)"),
    (IndexSession, "answer", "answer (rest)"),
    (IndexSession, "current", "open index"),
    (Freshness, "follow", "follow the watcher"),
    (LoadedIndex, "scope_mask", "scope mask"),
    (Tiers, "answering", "tier choice"),
    (LoadedIndex, "check", "integrity check"),
    (BM25, "score", "bm25 scores"),
    (VectorSearch, "top", "dense graph"),
    (loaded_module, "rank_exactly", "dense product"),
    (loaded_module, "rank_scores", "cut lists in scope"),
    (pipeline, "candidates_from_scores", "candidates"),
    (ChunkFacts, "scoped", "facts scoped"),
    (pipeline, "rank", "rank (rest)"),
    (pipeline, "analyze_query", "query profile"),
    (stages, "list_weights", "list weights"),
    (stages, "fuse", "fusion"),
    (stages, "boost_definitions", "definitions"),
    (stages, "boost_path_words", "path words"),
    (stages, "boost_coherence", "coherence"),
    (stages, "apply_priors", "priors"),
    (stages, "diversify", "diversity"),
    (stages, "ordered", "ordered"),
    (LoadedIndex, "hit", "hit building"),
)
EMBEDDING = "query embedding"


class Profiler:
    """Exclusive time per row, per thread: a wrapped call's time less that of the wrapped calls inside it."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._local = threading.local()
        self._lock = threading.Lock()

    def wrap(self, function: Callable[..., Any], row: str) -> Callable[..., Any]:
        """``function`` timed into ``row``."""
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack = self._local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # time spent in wrapped calls inside this one
            started = self.clock()
            try:
                return function(*args, **kwargs)
            finally:
                took = self.clock() - started
                inner = stack.pop()
                if stack:
                    stack[-1] += took
                with self._lock:
                    self.seconds[row] += took - inner
                    self.calls[row] += 1

        return timed

    def take(self) -> tuple[dict[str, float], dict[str, int]]:
        """The times (ms) and calls since the last take, and a fresh start."""
        with self._lock:
            out = {row: s * 1000 for row, s in self.seconds.items()}, dict(self.calls)
            self.seconds.clear()
            self.calls.clear()
        return out


@contextmanager
def profiled(profiler: Profiler, embedders: Sequence[Any] = ()) -> Iterator[None]:
    """Every stage of :data:`STAGES` (and each of ``embedders``' ``embed_query``) timed into ``profiler``; the
    originals put back after."""
    saved: list[tuple[Any, str, Any]] = []  # (owner, name, what its own namespace held: None where it inherited)
    try:
        for owner, name, row in [*STAGES, *((e, "embed_query", EMBEDDING) for e in embedders)]:
            saved.append((owner, name, vars(owner).get(name)))
            setattr(owner, name, profiler.wrap(getattr(owner, name), row))
        yield
    finally:
        for owner, name, original in reversed(saved):
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)


def _timed_searches(cs: CodeSearch, queries: Sequence[str], runs: int, mode: str, k: int,
                    after: Callable[[], None] = lambda: None) -> list[float]:
    """Each query ``runs`` times, warm and without the stat pass: the milliseconds of each search."""
    took = []
    for _ in range(runs):
        for query in queries:
            started = time.perf_counter()
            cs.search(query, k=k, mode=mode, refresh=False)  # type: ignore[arg-type]
            took.append((time.perf_counter() - started) * 1000)
            after()
    return took


def profile(cs: CodeSearch, queries: Sequence[str], *, tier: str, runs: int, mode: str, k: int) -> dict[str, Any]:
    """The plain and profiled timings of ``queries`` on ``cs`` (indexed, models loaded), and one row per stage."""
    for query in queries:  # warm: the index opened, the query worker started, the caches filled
        cs.search(query, k=k, mode=mode, refresh=False)  # type: ignore[arg-type]
    plain = _timed_searches(cs, queries, runs, mode, k)
    profiler = Profiler()
    per_search: list[tuple[dict[str, float], dict[str, int]]] = []
    embedders = []
    if mode != "bm25":  # the models that embed a query on this tier (the static one beside the transformer's too)
        embedders = [cs.embedder] if tier == "full" else []
        try:
            embedders.append(cs.static_embedder)
        except ModelNotAvailableError:  # a searcher without a static tier
            if tier == "static":
                raise
    with profiled(profiler, embedders):
        total = _timed_searches(cs, queries, runs, mode, k, after=lambda: per_search.append(profiler.take()))
    median_total = statistics.median(total)
    rows = []
    for row in [r for _, _, r in STAGES] + [EMBEDDING]:
        times = [t.get(row, 0.0) for t, _ in per_search]
        calls = sum(c.get(row, 0) for _, c in per_search) / len(per_search)
        if not calls:
            continue
        p50 = statistics.median(times)
        rows.append({"stage": row, "calls": round(calls, 2), "p50_ms": round(p50, 4),
                     "mean_ms": round(statistics.fmean(times), 4),
                     "share": round(p50 / median_total, 4) if median_total else 0.0})
    return {"plain": percentiles(plain, digits=3), "profiled": percentiles(total, digits=3), "stages": rows}


def main(argv: Sequence[str] | None = None, *, searcher_options: Mapping[str, Any] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=os.environ.get("CODESEARCH_REQUESTS_CORPUS"),
                        help="the repository (default: $CODESEARCH_REQUESTS_CORPUS)")
    parser.add_argument("--tier", choices=["full", "static"], default="full")
    parser.add_argument("--mode", choices=["hybrid", "bm25", "dense"], default="hybrid")
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--runs", type=int, default=20, help="timed searches of each query (each way)")
    parser.add_argument("--index-dir", type=Path, help="where the index is built (default: a temporary folder)")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    if args.repo is None or not Path(args.repo).is_dir():
        parser.error("--repo: no repository (pass one, or set CODESEARCH_REQUESTS_CORPUS)")
    queries = [q.query for q in QUESTIONS]
    with tempfile.TemporaryDirectory(prefix="query-profile-") as scratch:
        cs = CodeSearch(args.repo, index_dir=args.index_dir or Path(scratch) / "index", **dict(searcher_options or {}))
        cs.index(tier=args.tier)
        found = profile(cs, queries, tier=args.tier, runs=args.runs, mode=args.mode, k=args.k)
        chunks = cs.info()["chunks"]
        cs.close()
    out = {"repo": str(args.repo), "tier": args.tier, "mode": args.mode, "k": args.k, "runs": args.runs,
           "chunks": chunks, **found}
    plain, timed = found["plain"], found["profiled"]
    print(f"{args.repo}: {chunks} chunks, {args.tier} tier, {args.mode}, top {args.k}; {len(queries)} queries x "
          f"{args.runs} warm searches, no stat pass", file=sys.stderr)
    print(table(["stage", "calls", "p50 ms", "mean ms", "share"],
                [[r["stage"], f"{r['calls']:g}", f"{r['p50_ms']:.3f}", f"{r['mean_ms']:.3f}", f"{r['share']:.1%}"]
                 for r in found["stages"]],
                title=f"search p50 {plain['p50']:.3f} ms (p95 {plain['p95']:.3f}); profiled {timed['p50']:.3f} ms"))
    if args.json_out:
        write_json(args.json_out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
