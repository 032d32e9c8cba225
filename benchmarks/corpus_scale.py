"""The corpus at scale: quality parity with single indexes on DEV, ANN recall, and a 10k / 100k / 1M chunk curve.

Usage:
    python -m benchmarks.corpus_scale --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS [--trees DIR]
        [--work DIR] [--single-indexes DIR] [--sizes 10k,100k,1m] [--latency-queries 100] [--json OUT]
    python -m benchmarks.corpus_scale --refresh-only --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS
        [--sizes 10k,100k] [--json OUT]          # the build and a refresh after 1% of files changed, alone
    python -m benchmarks.corpus_scale --builds-only --sizes 1m --build-rounds 1 --no-ceiling [--two-first] ...
                                                 # a million real chunks (the trees x100) built with 1 and 2 actors

What it runs (every build and refresh in a new process with its own local
Ray, so the driver's memory is its own; throughput is chunks written over
the pipeline's seconds, Ray's start, the actors' start and model loading
included (``ray_start_s`` says how long Ray took; the streaming figure leaves it
out; the working figure leaves the actors' start out too: from the first
repository an actor began to the last the driver received, the pace a long
build keeps); the static builds' rounds also run the actors' work in one and in two
plain processes at once, no Ray, for the machine's own ceiling):

1. **Quality parity** on the 18 DEV repositories of semble's benchmark
   (``peer_data``; never any other): every repository indexed alone by
   ``CodeSearch`` (the library default, int8 transformer; and its static tier)
   and all 18 in one corpus built with the transformer tier. Each DEV query is
   searched scoped to its repository (``repos=[name]``) and org-wide (all 18;
   a hit from another repository counts as a miss), and scored by
   ``peer_data.ndcg_at_10`` exactly as ``peer_benchmark.py`` scores it.
   Org-wide also with exact vector search instead of the vector index.
2. **Keywords across repositories**: Lance's full-text index (its own BM25,
   k1 = 1.2) against an exact BM25 with the library's formula over the same
   chunks: overlap of the top 100 and identical top 10.
3. **ANN**: recall@100 of the vector index (IVF_FLAT, probing 30-60 partitions,
   as a search probes it) against exact search, per vector column, on the same
   sample of DEV queries at every size (``--latency-queries``, 100; per query in ``recalls``).
4. **Scale curve**: 10k chunks = the 18 DEV trees (built with 1 and 2
   actors, static tier, and with 2 actors for the transformer tier); 100k =
   the DEV trees copied 10 times on disk and built through Ray like any
   repositories (static tier; the copies' chunks are real, only repeated);
   1M = the rows of the 10k transformer-tier corpus replicated 100 times with
   new repository names and chunk ids (nothing is cut or embedded again: the
   transformer's and the static model's vectors are reused from the
   replicated chunks). Per size: build throughput, a refresh of the whole
   corpus after 1% of its text files changed (time and its share of the
   build's, rows written and their share, whether it needed Ray), query p50/p95 org-wide (the sample's second
   pass; the first, which may read the index from disk, as ``org_*_first_pass_ms``) and scoped
   (cold: a repository's first query reads its view; warm: after), store
   size, driver peak memory (VmHWM, reset per step) and each actor's.

Timings on a shared 2-core machine are noisy; each size runs once.
JSON keys: ``quality`` (per system macro ``ndcg10`` and per repository),
``keywords``, ``ann``, ``sizes`` (per size: ``build``, ``refresh``,
``latency``, ``store_mb``, ``ann``), ``notes``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._harness import dev_arguments, folder_mb, percentiles, timed
from benchmarks.peer_data import K, Repo, export_trees, load_repos, macro, ndcg_at_10
from codesearch import CodeSearch
from codesearch.corpus import Corpus
from codesearch.corpus.schema import CHUNKS, FILES, RepoFacts, chunk_id

DEPTH = 100
MISS = ("\0", 0, 0)


# -- measuring ----------------------------------------------------------------------------


def run_corpus(store: Path, command: str, paths: Sequence[str], **options: Any) -> dict[str, Any]:
    """``Corpus(store).build`` or ``.refresh`` in a new process (its own local Ray, so its memory is the driver's
    alone), with throughput and memory figures."""
    import subprocess

    script = ("import json, sys; from codesearch.corpus import Corpus; "
              f"r = Corpus(sys.argv[1]).{command}(sys.argv[2:] or None, **{options!r}); "
              "print('REPORT ' + json.dumps(r.as_dict()))")
    proc = subprocess.run([sys.executable, "-c", script, str(store), *paths], capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("REPORT ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"error: corpus {command} failed:\n{proc.stderr[-3000:]}")
    return with_projection(json.loads(lines[-1][len("REPORT "):]))


def with_projection(report: dict[str, Any]) -> dict[str, Any]:
    """A report with its wall-clock throughput and, from CPU accounting, what it would be on idle cores.

    On a shared machine the wall clock says how busy the others were; each
    actor's CPU seconds on its repositories do not. On ``n`` idle cores the
    pipeline takes at least its busiest actor's CPU seconds, and at least all
    the CPU seconds spent meanwhile (the driver's too, while the repositories
    stream: Ray's start is left out) over ``n``:
    ``projected = chunks / max(busiest actor, (actors + driver) / n)``, ``n``
    this machine's cores (the local Ray's CPUs). ``stream_chunks_per_s``: the
    wall clock from the first repository handed out to the last merged (the
    actors' start included, Ray's start and stop not).
    """
    workers = list(report["workers"].values())
    out = {**report, "chunks_per_s": round(report["inserted"] / max(report["pipeline_s"], 1e-9), 1),
           "driver_peak_mb": report["driver_peak_rss_mb"], "worker_peak_mb": sorted(w["peak_rss_mb"] for w in workers)}
    if report.get("stream_s"):
        out["stream_chunks_per_s"] = round(report["inserted"] / report["stream_s"], 1)
    if report.get("work_s"):
        out["work_chunks_per_s"] = round(report["inserted"] / report["work_s"], 1)
    if workers and all("cpu_s" in w for w in workers):
        busiest = max(w["cpu_s"] for w in workers)
        driver = report["driver_stream_cpu_s"] if report.get("stream_s") else report.get(
            "driver_pipeline_cpu_s", report.get("driver_cpu_s", 0.0))
        total = sum(w["cpu_s"] for w in workers) + driver
        cores = os.cpu_count() or 1
        out["actor_cpu_s"] = sorted(w["cpu_s"] for w in workers)
        out["per_actor_chunks_per_cpu_s"] = round(report["inserted"] / max(sum(w["cpu_s"] for w in workers), 1e-9), 1)
        out["projected_chunks_per_s"] = round(report["inserted"] / max(busiest, total / cores, 1e-9), 1)
    return out


# -- quality --------------------------------------------------------------------------------


def locations(hits: Sequence[Any], repo: str | None = None) -> list[tuple[str, int, int]]:
    return [(h.path, h.start_line, h.end_line) if repo is None or h.repo == repo else MISS for h in hits]


def quality(repos: Sequence[Repo], corpus: Corpus, single: dict[str, CodeSearch], static: dict[str, CodeSearch]
            ) -> dict[str, Any]:
    """Macro NDCG@10 per system over the DEV repositories (each query scoped, and org-wide)."""
    systems: dict[str, dict[str, float]] = {name: {} for name in (
        "single default", "corpus scoped (full)", "single static", "corpus scoped (static)",
        "corpus org-wide (full, ANN)", "corpus org-wide (full, exact)", "corpus org-wide (static, ANN)")}
    identical = {"full": 0, "static": 0, "queries": 0}
    for repo in repos:
        indexed = single[repo.name].locations()
        scores: dict[str, list[float]] = {name: [] for name in systems}
        for task in repo.tasks:
            runs = {
                "single default": locations(single[repo.name].search(task.query, k=K, refresh=False)),
                "corpus scoped (full)": locations(corpus.search(task.query, k=K, repos=[repo.name])),
                "single static": locations(static[repo.name].search(task.query, k=K, refresh=False)),
                "corpus scoped (static)": locations(corpus.search(task.query, k=K, repos=[repo.name], tier="static")),
                "corpus org-wide (full, ANN)": locations(corpus.search(task.query, k=K), repo.name),
                "corpus org-wide (full, exact)": locations(corpus.search(task.query, k=K, exact=True), repo.name),
                "corpus org-wide (static, ANN)": locations(corpus.search(task.query, k=K, tier="static"), repo.name),
            }
            identical["queries"] += 1
            identical["full"] += runs["single default"] == runs["corpus scoped (full)"]
            identical["static"] += runs["single static"] == runs["corpus scoped (static)"]
            for name, found in runs.items():
                scores[name].append(ndcg_at_10(found, task.targets, indexed))
        for name, per_repo in systems.items():
            per_repo[repo.name] = sum(scores[name]) / len(scores[name])
        print(f"  {repo.name:<10} " + "  ".join(f"{systems[n][repo.name]:.3f}" for n in systems), file=sys.stderr)
    return {"macro": {name: round(macro(values), 4) for name, values in systems.items()},
            "per_repo": {name: {r: round(v, 4) for r, v in values.items()} for name, values in systems.items()},
            "identical_top10": identical}


# -- keywords and ANN ------------------------------------------------------------------------


def keyword_parity(corpus: Corpus, queries: Sequence[str]) -> dict[str, Any]:
    """Lance's full-text index against an exact BM25 (the library's formula) over every chunk of the corpus."""
    from codesearch.corpus.keywords import full_text
    from codesearch.keyword.arrow import fit_term_column
    from codesearch.topk import top_k

    ds = corpus.store.open(CHUNKS, corpus.store.manifest().versions[CHUNKS])
    table = ds.to_table(columns=["chunk_id", "keyword_text"])
    ids = np.asarray(table["chunk_id"].to_numpy())
    bm25 = fit_term_column(table["keyword_text"])
    overlaps, same10 = [], 0
    for query in queries:
        exact = ids[top_k(bm25.score(query), DEPTH, above=0.0)].tolist()
        found = full_text(ds, query, None, DEPTH, ["chunk_id"])["chunk_id"].to_pylist()
        if exact:
            overlaps.append(len(set(exact) & set(found)) / len(exact))
            same10 += exact[:10] == found[:10]
    return {"queries": len(overlaps), "overlap_at_100": round(float(np.mean(overlaps)), 4),
            "identical_top10": same10, "fts_constants": "k1=1.2 b=0.75 idf=ln(1+(N-df+0.5)/(df+0.5))",
            "library_constants": "k1=1.5 b=0.75 rank_bm25 idf with epsilon floor"}


def ann_recall(corpus: Corpus, column: str, queries: np.ndarray) -> dict[str, Any]:
    """recall@100 of the vector index (as the search queries it) against exact search over the same rows."""
    from codesearch.corpus.indexes import nearest_options

    ds = corpus.store.open(CHUNKS, corpus.store.manifest().versions[CHUNKS])
    where = "read = true" if column == "vector" else None
    # Exact top 100 per query, the table read in batches (never whole in memory).
    best = [np.empty(0, dtype=np.int64) for _ in queries]
    best_s = [np.empty(0, dtype=np.float32) for _ in queries]
    for batch in ds.to_batches(columns=["chunk_id", column], filter=where, batch_size=65536):
        ids = np.asarray(batch.column(0).to_numpy())
        vectors = np.asarray(batch.column(1).flatten().to_numpy(zero_copy_only=False),
                             dtype=np.float32).reshape(len(ids), -1)
        scores = vectors @ queries.T
        for q in range(len(queries)):
            s = np.concatenate([best_s[q], scores[:, q]])
            i = np.concatenate([best[q], ids])
            keep = np.argsort(-s, kind="stable")[:DEPTH]
            best[q], best_s[q] = i[keep], s[keep]
    recalls, ties, times = [], [], []
    indexed = any(column in str(index) for index in ds.describe_indices()) if hasattr(ds, "describe_indices") else None
    for q, vector in enumerate(queries):
        nearest = {**nearest_options(ds, column), "q": vector, "k": DEPTH}
        found, ms = timed(lambda nearest=nearest: ds.to_table(nearest=nearest, columns=["chunk_id", column],
                                                              filter=where, prefilter=where is not None,
                                                              disable_scoring_autoprojection=True))
        times.append(ms)
        recalls.append(len(set(found["chunk_id"].to_pylist()) & set(best[q].tolist())) / DEPTH)
        # Where chunks repeat (the replicated corpus), many rows tie with the 100th: a row as close as it counts.
        vectors = np.asarray(found[column].combine_chunks().flatten().to_numpy(zero_copy_only=False),
                             dtype=np.float32).reshape(found.num_rows, -1)
        ties.append(float(np.sum(vectors @ vector >= best_s[q][-1] - 1e-6)) / DEPTH)
    return {"column": column, "rows": ds.count_rows(where), "index": indexed, "recall_at_100": round(float(np.mean(recalls)), 4),
            "min_recall": round(float(np.min(recalls)), 4), "recalls": [round(r, 3) for r in recalls],
            "recall_at_100_ties": round(float(np.mean(ties)), 4),
            "ann_ms": percentiles(times)}


# -- latency and refresh ------------------------------------------------------------------------


def latency(corpus: Corpus, tasks: Sequence[tuple[str, str]], full: bool) -> dict[str, Any]:
    """Query times: org-wide (static tier, and the transformer's where the corpus has it; a first pass over the
    sample, then the figure, a second), scoped cold and warm."""
    out: dict[str, Any] = {}
    corpus.search("warm up the models", k=10, tier="static")
    if full:
        corpus.search("warm up the models", k=10)
    # Org-wide, two passes over the sample per tier: the first reads the index's partitions from disk where the
    # page cache lost them (another job ran since), the second is a serving process's steady state.
    for key, tier in (("org_static", "static"), *((("org_full", "full"),) if full else ())):
        for name in (f"{key}_first_pass_ms", f"{key}_ms"):
            out[name] = percentiles([timed(lambda q=q, tier=tier: corpus.search(q, k=10, tier=tier))[1]
                                     for _, q in tasks])
    corpus._views.clear()
    cold, warm = [], []
    seen: set[str] = set()
    for repo, query in tasks:
        ms = timed(lambda repo=repo, query=query: corpus.search(query, k=10, repos=[repo], tier="static"))[1]
        (warm if repo in seen else cold).append(ms)
        seen.add(repo)
    out["scoped_static_cold_ms"] = percentiles(cold)
    out["scoped_static_warm_ms"] = percentiles(warm)
    if full:
        corpus._views.clear()
        cold, warm, seen = [], [], set()
        for repo, query in tasks:
            ms = timed(lambda repo=repo, query=query: corpus.search(query, k=10, repos=[repo]))[1]
            (warm if repo in seen else cold).append(ms)
            seen.add(repo)
        out["scoped_full_cold_ms"] = percentiles(cold)
        out["scoped_full_warm_ms"] = percentiles(warm)
    return out


CEILING_SCRIPT = """
import json, sys, time
from codesearch.chunking import ChunkParams
from codesearch.corpus.build import RepoWorker, WorkerSpec, cpu_seconds
from codesearch.corpus.driver import parse_paths
from codesearch.files.walk import MAX_FILE_BYTES
store, paths = sys.argv[1], sys.argv[2:]
spec = WorkerSpec(model="minilm", static=None, int8=True, tier="static", chunking="definitions",
                  chunk_params=ChunkParams.for_chunking("definitions"), max_file_bytes=MAX_FILE_BYTES, static_dim=256,
                  full_dim=384, model_fp="ceiling", store_uri=store)
began, cpu = time.perf_counter(), cpu_seconds()
for _ in RepoWorker(spec).bundle([(name, root, None) for name, root in parse_paths(paths)]):
    pass
print("CEILING " + json.dumps({"seconds": time.perf_counter() - began, "cpu_s": cpu_seconds() - cpu}))
"""


def process_ceiling(paths: Sequence[str], scratch: Path) -> dict[str, Any]:
    """The actors' work on this machine without Ray: every repository of ``paths`` walked, cut, embedded (static
    tier) and written as fragments by :class:`~codesearch.corpus.build.RepoWorker` in one plain process, then the
    same repositories split in two halves of equal bytes run by two processes at once. ``ratio`` = one process's
    seconds over the slower of the two: what two actors could reach here if Ray cost nothing (the shared cores'
    own ceiling, which a noisy neighbour lowers for both alike)."""
    import subprocess

    from codesearch.corpus.driver import parse_paths
    from codesearch.files.scan import list_files

    roots = dict(zip(paths, (root for _, root in parse_paths(paths))))  # NAME=PATH or PATH
    sizes = {p: sum(f.size for f in list_files(roots[p]).files) for p in paths}  # the bytes an actor reads
    halves: list[list[str]] = [[], []]
    for path in sorted(paths, key=lambda p: -sizes[p]):
        min(halves, key=lambda h: sum(sizes[p] for p in h)).append(path)

    def start(group: Sequence[str], name: str) -> subprocess.Popen[str]:
        store = scratch / name
        shutil.rmtree(store, ignore_errors=True)
        store.mkdir(parents=True)
        return subprocess.Popen([sys.executable, "-c", CEILING_SCRIPT, str(store), *group], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})

    def finish(proc: subprocess.Popen[str]) -> dict[str, float]:
        out, err = proc.communicate()
        lines = [line for line in out.splitlines() if line.startswith("CEILING ")]
        if proc.returncode != 0 or not lines:
            raise SystemExit(f"error: the ceiling run failed:\n{err[-3000:]}")
        return json.loads(lines[-1][len("CEILING "):])

    one = finish(start(paths, "one"))
    two = [finish(proc) for proc in [start(half, f"half{i}") for i, half in enumerate(halves)]]
    shutil.rmtree(scratch, ignore_errors=True)
    slower = max(t["seconds"] for t in two)
    return {"one_s": round(one["seconds"], 2), "one_cpu_s": round(one["cpu_s"], 2),
            "two_s": [round(t["seconds"], 2) for t in two], "two_cpu_s": [round(t["cpu_s"], 2) for t in two],
            "ratio": round(one["seconds"] / slower, 3)}


def actor_builds(work: Path, label: str, paths: dict[str, list[str]], rounds: dict[str, int],
                 with_ceiling: bool = True, two_first: bool = False) -> dict[str, Any]:
    """Builds of ``paths`` with 1 and 2 actors per tier, in turn ``rounds[tier]`` times, the order swapped every
    round (a noisy minute or a drift weighs on both alike): each count's median round by throughput, and the
    medians of the rounds' side-by-side ratios (``<tier>_actor_speedup``, ``_stream``, ``_work``, ``_projected``).
    The full tier's 2-actor store stays as ``full10k``. ``with_ceiling``: the static rounds also run the same work in
    plain processes (the machine's own ratio); ``two_first``: the first round builds with 2 actors first."""
    build: dict[str, Any] = {}
    names = {"chunks_per_s": "", "stream_chunks_per_s": "_stream", "work_chunks_per_s": "_work",
             "projected_chunks_per_s": "_projected", "ceiling": "_ceiling"}
    for tier, tier_paths in paths.items():
        speedups: dict[str, list[float]] = {}
        runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
        for round_ in range(rounds[tier]):
            built = {}
            for actors in ((1, 2) if (round_ + two_first) % 2 == 0 else (2, 1)):  # ABAB..., so a drift weighs on both alike
                store = work / (f"{tier}{label}-a{actors}" if (tier, actors) != ("full", 2) else f"full{label}")
                shutil.rmtree(store, ignore_errors=True)
                facts = built[actors] = run_corpus(store, "build", tier_paths, tier=tier, actors=actors)
                runs[actors].append(facts)
                print(f"{label} {tier}, {actors} actor(s), round {round_ + 1}: {facts['chunks_per_s']} chunks/s, "
                      f"streaming {facts.get('stream_chunks_per_s')}", file=sys.stderr)
            for key in names:
                if key in built[1] and key in built[2]:
                    speedups.setdefault(key, []).append(round(built[2][key] / built[1][key], 3))
            if tier == "static" and with_ceiling:  # the same round: what the machine itself allows two processes
                ceiling = process_ceiling(tier_paths, work / f"ceiling{label}")
                build.setdefault("static_process_ceiling_rounds", []).append(ceiling)
                speedups.setdefault("ceiling", []).append(ceiling["ratio"])
                print(f"{label} static, the same work in 1 and 2 plain processes: {ceiling}", file=sys.stderr)
        for actors, facts_list in runs.items():  # the median round by throughput (the lower of two) stands for it
            chosen = build[f"{tier}_{actors}_actor"] = sorted(facts_list, key=lambda r: r["chunks_per_s"])[
                (len(facts_list) - 1) // 2]
            if len(facts_list) > 1:
                chosen["rounds_chunks_per_s"] = [r["chunks_per_s"] for r in facts_list]
        for key, values in speedups.items():
            build[f"{tier}_actor_speedup{names[key]}"] = round(statistics.median(values), 3)
            if len(values) > 1:
                build[f"{tier}_actor_speedup{names[key]}_rounds"] = values
    return build


def edit_one_percent(corpus: Corpus, seed: int = 7) -> tuple[list[str], int]:
    """Append a line to 1% of the corpus's files (uniformly drawn); the repositories touched and the files edited."""
    ds = corpus.store.open(FILES, corpus.store.manifest().versions[FILES])
    table = ds.to_table(columns=["repo", "path"], filter="chunks IS NOT NULL")  # text files (binaries are recorded)
    pairs = list(zip(table["repo"].to_pylist(), table["path"].to_pylist()))
    rng = random.Random(seed)
    chosen = rng.sample(pairs, max(1, len(pairs) // 100))
    roots = {name: facts.root for name, facts in corpus.store.manifest().repos.items()}
    touched = set()
    for repo, path in chosen:
        with open(Path(roots[repo]) / path, "a", encoding="utf-8") as handle:
            handle.write(f"\n// corpus-scale refresh marker {rng.random()}\n")
        touched.add(repo)
    return sorted(touched), len(chosen)


def refresh_facts(corpus: Corpus, build_s: float | None = None) -> dict[str, Any]:
    """Edit 1% of the files, then refresh the whole corpus (every repository, as CI would) in a new process;
    ``build_s``: the build's seconds, for the ratio the issue's goal states (≤ 10%)."""
    repos, files = edit_one_percent(corpus)
    report = run_corpus(Path(corpus.store.uri), "refresh", [], actors=2)
    rows = report["inserted"] + report["deleted"]
    return {"files_edited": files, "repos_touched": len(repos), "seconds": report["seconds"],
            "build_s": build_s, "of_build": round(report["seconds"] / build_s, 4) if build_s else None,
            "rows_share": round(rows / max(corpus.status()["chunks"], 1), 4), "ray": report.get("ray"),
            "unchanged_repos": report.get("unchanged_repos"), "hashed_files": report.get("hashed_files"),
            "pipeline_s": report["pipeline_s"], "optimize_s": report["optimize_s"],
            "keywords_s": report.get("keywords_s"), "cleanup_s": report.get("cleanup_s"),
            "chunk_rows_written": report["inserted"], "chunk_rows_deleted": report["deleted"],
            "file_rows_written": report["file_rows"], "embedded_static": report["embedded_static"],
            "embedded_full": report["embedded_full"], "driver_peak_mb": report["driver_peak_mb"]}


# -- corpora ---------------------------------------------------------------------------------------


def copy_trees(repos: Sequence[Repo], dest: Path, copies: int) -> list[str]:
    """``copies`` copies of every DEV tree under ``dest`` (``NAME-rI``), as ``NAME-rI=PATH`` arguments."""
    out = []
    for i in range(copies):
        for repo in repos:
            target = dest / f"{repo.name}-r{i}"
            if not target.exists():
                shutil.copytree(repo.root, target, symlinks=True)  # type: ignore[arg-type]
            out.append(f"{repo.name}-r{i}={target}")
    return out


def replicate(source: Corpus, dest: Path, copies: int) -> Corpus:
    """A corpus of ``copies`` replicas of ``source``'s rows (new repository names and chunk ids; vectors reused)."""
    import lance
    import pyarrow as pa

    from codesearch.corpus.store import CorpusStore

    shutil.rmtree(dest, ignore_errors=True)
    manifest = source.store.manifest()
    store = CorpusStore(dest)
    for name, key in ((CHUNKS, True), (FILES, False)):
        ds = source.store.open(name, manifest.versions[name])

        def batches(ds: Any = ds, key: bool = key) -> Any:
            for i in range(copies):
                for batch in ds.to_batches(batch_size=32768):
                    repos = [f"{r}-x{i}" for r in batch.column("repo").to_pylist()]
                    table = pa.Table.from_batches([batch]).set_column(batch.schema.get_field_index("repo"), "repo",
                                                                      pa.array(repos))
                    if key:
                        ids = [chunk_id(r, p, s, e, c) for r, p, s, e, c in zip(
                            repos, *(batch.column(n).to_pylist() for n in ("path", "start_line", "end_line",
                                                                          "content_key")))]
                        table = table.set_column(0, table.schema.field(0), pa.array(ids, type=pa.int64()))
                    yield from table.to_batches()

        reader = pa.RecordBatchReader.from_batches(ds.schema, batches())
        lance.write_dataset(reader, store.table_uri(name), schema=ds.schema, max_rows_per_file=1 << 20)
    manifest.repos = {f"{name}-x{i}": RepoFacts(**vars(facts)) for i in range(copies)
                      for name, facts in manifest.repos.items()}
    manifest.versions = {name: store.latest(name).version for name in (CHUNKS, FILES)}  # type: ignore[union-attr]
    store.write_manifest(manifest)
    replica = Corpus(dest, model=source.model)
    with replica.store.writer() as writer:
        writer.optimize(has_full=manifest.full is not None)
        add_keywords(replica, writer, sorted(manifest.repos))
        manifest.versions = dict(writer.versions)
        replica.store.write_manifest(manifest)
    return replica


def add_keywords(corpus: Corpus, writer: Any, repos: list[str]) -> None:
    """Each repository's BM25 fitted and stored, as the writer of a build does after its commits."""
    from codesearch.corpus.keywords import fit_keywords
    from codesearch.corpus.schema import KEYWORD_SCHEMA, KEYWORDS

    writer.append(KEYWORDS, fit_keywords(corpus.store.uri, {}, writer.versions[CHUNKS], repos), KEYWORD_SCHEMA)


# -- the run -----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    dev_arguments(parser)
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-corpus-scale")
    parser.add_argument("--single-indexes", type=Path,
                        help="indexes of an earlier peer run (NAME-int8, NAME-static) to copy instead of embedding again")
    parser.add_argument("--sizes", default="10k,100k,1m")
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--build-rounds", type=int, default=3,
                        help="static 10k builds with 1 and 2 actors, in turn, this many times (medians reported)")
    parser.add_argument("--measure-only", action="store_true",
                        help="only query latency and ANN recall again, on the stores an earlier run left in --work")
    parser.add_argument("--refresh-1m", action="store_true",
                        help="only a refresh of the replicated 1M corpus left in --work (18 repositories)")
    parser.add_argument("--refresh-only", action="store_true",
                        help="only the static builds at --sizes (10k, 100k) and a refresh after editing 1%% of files")
    parser.add_argument("--builds-only", action="store_true",
                        help="only the builds with 1 and 2 actors at --sizes (10k: both tiers; 100k and 1m: the "
                             "static tier, the trees copied 10 and 100 times on disk); the rest of an earlier --json "
                             "is kept")
    parser.add_argument("--no-ceiling", action="store_true",
                        help="with --builds-only: leave out the plain-process runs of the 1m builds' work")
    parser.add_argument("--two-first", action="store_true",
                        help="with --builds-only at 1m: the first round builds with 2 actors first (a second run "
                             "swaps the first run's order)")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    sizes = [s.strip().lower() for s in args.sizes.split(",") if s.strip()]
    args.work.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"sizes": {}, "notes": []}
    if (args.builds_only or args.measure_only or args.refresh_1m) and args.json_out and args.json_out.exists():
        out = json.loads(args.json_out.read_text())

    def save() -> None:
        if args.json_out:
            args.json_out.write_text(json.dumps(out, indent=1))

    if args.refresh_1m:
        refresh_replicated(args, out, save)
        print_tables(out)
        return 0
    if args.refresh_only:
        refresh_only(args, sizes, out, save)
        return 0
    if args.measure_only:
        remeasure(args, out, save)
        print_tables(out)
        return 0

    try:
        repos = load_repos(args.semble_benchmarks)
        export_trees(repos, args.mirrors, args.trees)
        tasks = [(r.name, t.query) for r in repos for t in r.tasks]
        sample = random.Random(1).sample(tasks, min(args.latency_queries, len(tasks)))

        # 1. the single-repository references, in this run
        single, static = single_indexes(repos, args)
        print("single-repository indexes ready", file=sys.stderr)

        # 2. 10k: the DEV trees, static tier with 1 and 2 actors, then the transformer tier with 2 actors
        trees10 = copy_trees(repos, args.work / "trees", 1)
        size: dict[str, Any] = {"build": {}}
        if not args.builds_only or "10k" in sizes:
            size["build"] = actor_builds(args.work, "10k", {"static": trees10, "full": [f"{r.name}={r.root}" for r in repos]},
                                         {"static": args.build_rounds, "full": 1})
            out["sizes"].setdefault("10k", {})["build"] = size["build"]
            save()
        if args.builds_only and "100k" in sizes:  # the static tier where the actors' start weighs less
            trees100 = copy_trees(repos, args.work / "trees", 10)
            out["sizes"].setdefault("100k", {})["build"] = actor_builds(args.work, "100k", {"static": trees100},
                                                                        {"static": args.build_rounds})
            save()
        if args.builds_only and "1m" in sizes:  # a million real chunks through Ray: 100 copies of the trees on disk
            trees1m = copy_trees(repos, args.work / "trees", 100)
            out["sizes"].setdefault("1m", {})["build"] = actor_builds(args.work, "1m", {"static": trees1m},
                                                                      {"static": args.build_rounds},
                                                                      with_ceiling=not args.no_ceiling,
                                                                      two_first=args.two_first)
            save()
        shutil.rmtree(args.work / "full10k-a1", ignore_errors=True)
        if args.builds_only:
            return 0
        full_store = args.work / "full10k"
        corpus = Corpus(full_store)
        out["sizes"]["10k"] = size
        save()

        out["quality"] = quality(repos, corpus, single, static)
        print(json.dumps(out["quality"]["macro"], indent=1), file=sys.stderr)
        save()
        out["keywords"] = keyword_parity(corpus, [q for _, q in sample])
        static_q = np.stack([corpus.tiers.static_embedder.embed_query(q) for _, q in sample]).astype(np.float32)
        full_q = np.stack([corpus.tiers.embedder.embed_query(q) for _, q in sample]).astype(np.float32)
        size["ann"] = [ann_recall(corpus, "static_vector", static_q), ann_recall(corpus, "vector", full_q)]
        size["latency"] = latency(corpus, sample, full=True)
        size["store_mb"] = folder_mb(full_store)
        static10 = Corpus(args.work / "static10k-a2")
        size["refresh"] = refresh_facts(static10)
        size["chunks"] = corpus.status()["chunks"]
        save()

        if "100k" in sizes:
            trees100 = copy_trees(repos, args.work / "trees", 10)
            store = args.work / "static100k"
            shutil.rmtree(store, ignore_errors=True)
            big = Corpus(store)
            size = {"build": {"static_2_actor": run_corpus(store, "build", trees100, tier="static", actors=2)}}
            print(f"100k static: {size['build']['static_2_actor']['chunks_per_s']} chunks/s", file=sys.stderr)
            size["chunks"] = big.status()["chunks"]
            size["ann"] = [ann_recall(big, "static_vector", static_q)]
            size["latency"] = latency(big, [(f"{r}-r0", q) for r, q in sample], full=False)
            size["store_mb"] = folder_mb(store)
            size["refresh"] = refresh_facts(big)
            out["sizes"]["100k"] = size
            save()

        if "1m" in sizes:
            started = time.perf_counter()
            huge = replicate(corpus, args.work / "replicated1m", 100)
            size = {"build": {"replicated_s": round(time.perf_counter() - started, 1)}}
            size["chunks"] = huge.status()["chunks"]
            print(f"1M replicated: {size['chunks']} chunks in {size['build']['replicated_s']} s", file=sys.stderr)
            size["ann"] = [ann_recall(huge, "static_vector", static_q), ann_recall(huge, "vector", full_q)]
            size["latency"] = latency(huge, [(f"{r}-x0", q) for r, q in sample], full=True)
            size["store_mb"] = folder_mb(args.work / "replicated1m")
            out["sizes"]["1m"] = size
            out["notes"].append("1m: rows of the 10k transformer-tier corpus replicated 100 times (new repository "
                                "names and chunk ids); nothing cut or embedded again, both tiers' vectors reused")
            save()
    finally:
        save()
    print_tables(out)
    save()
    return 0


def refresh_only(args: argparse.Namespace, sizes: Sequence[str], out: dict[str, Any], save: Callable[[], None]) -> None:
    """The static build of the DEV trees (10k: one copy; 100k: ten), then a refresh after 1% of files were edited,
    each in a new process: seconds, the refresh's share of the build's, and its share of rows written."""
    repos = load_repos(args.semble_benchmarks)
    export_trees(repos, args.mirrors, args.trees)
    rows = []
    for size, copies in (("10k", 1), ("100k", 10)):
        if size not in sizes:
            continue
        trees = copy_trees(repos, args.work / f"refresh-trees-{size}", copies)
        store = args.work / f"refresh-{size}"
        shutil.rmtree(store, ignore_errors=True)
        build = run_corpus(store, "build", trees, tier="static", actors=2)
        facts = refresh_facts(Corpus(store), build["seconds"])
        out["sizes"].setdefault(size, {})["refresh"] = facts
        save()
        rows.append([size, f"{build['inserted']:,}", f"{build['seconds']:.1f}", f"{facts['seconds']:.2f}",
                     f"{facts['of_build']:.1%}", f"{facts['files_edited']}",
                     f"{facts['chunk_rows_written']}+{facts['chunk_rows_deleted']}+{facts['file_rows_written']}",
                     f"{facts['rows_share']:.2%}", "yes" if facts["ray"] else "no"])
        shutil.rmtree(args.work / f"refresh-trees-{size}", ignore_errors=True)
        shutil.rmtree(store, ignore_errors=True)
    header = ["size", "chunks", "build s", "refresh s", "of build", "files edited", "rows (chunks in+out+files)",
              "of rows", "Ray"]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    for line in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(line, widths)))


def refresh_replicated(args: argparse.Namespace, out: dict[str, Any], save: Callable[[], None]) -> None:
    """A refresh of the 1M-row corpus: its 18 ``-x0`` repositories re-read from the ``-r0`` tree copies, which the
    10k and 100k refreshes edited (the replicated rows have no trees of their own)."""
    repos = load_repos(args.semble_benchmarks)
    paths = [f"{r.name}-x0={args.work / 'trees' / (r.name + '-r0')}" for r in repos]
    report = run_corpus(args.work / "replicated1m", "refresh", paths, actors=2)
    out["sizes"]["1m"]["refresh"] = {
        "files_edited": report["changed_files"], "repos_touched": report["repos"], "seconds": report["seconds"],
        "pipeline_s": report["pipeline_s"], "optimize_s": report["optimize_s"], "chunk_rows_written": report["inserted"],
        "chunk_rows_deleted": report["deleted"], "file_rows_written": report["file_rows"],
        "embedded_static": report["embedded_static"], "embedded_full": report["embedded_full"],
        "driver_peak_mb": report["driver_peak_mb"], "note": "18 repositories re-read from edited tree copies"}
    save()


def single_indexes(repos: Sequence[Repo], args: argparse.Namespace) -> tuple[dict[str, CodeSearch], dict[str, CodeSearch]]:
    """Each DEV repository indexed alone (the library default, and its static tier): under ``--work``, copied from
    ``--single-indexes`` where it holds them, made otherwise."""
    single: dict[str, CodeSearch] = {}
    static: dict[str, CodeSearch] = {}
    for repo in repos:
        for tag, kind in (("int8", single), ("static", static)):
            folder = args.work / "single" / f"{repo.name}-{tag}"
            if args.single_indexes and not folder.exists() and (args.single_indexes / f"{repo.name}-{tag}").exists():
                shutil.copytree(args.single_indexes / f"{repo.name}-{tag}", folder)
            kind[repo.name] = CodeSearch(repo.root, index_dir=folder)  # type: ignore[arg-type]
            kind[repo.name].index(tier="full" if tag == "int8" else "static")
    return single, static


def remeasure(args: argparse.Namespace, out: dict[str, Any], save: Callable[[], None]) -> None:
    """Quality, latency and ANN recall again on the stores of an earlier run (after a change to the search path)."""
    repos = load_repos(args.semble_benchmarks)
    if (args.work / "full10k").exists():
        export_trees(repos, args.mirrors, args.trees)
        single, static = single_indexes(repos, args)
        out["quality"] = quality(repos, Corpus(args.work / "full10k"), single, static)
        print(json.dumps(out["quality"]["macro"], indent=1), file=sys.stderr)
        save()
    tasks = [(r.name, t.query) for r in repos for t in r.tasks]
    sample = random.Random(1).sample(tasks, min(args.latency_queries, len(tasks)))
    for size, folder, suffix, full in (("10k", "full10k", "", True), ("100k", "static100k", "-r0", False),
                                       ("1m", "replicated1m", "-x0", True)):
        if size not in out["sizes"] or not (args.work / folder).exists():
            continue
        corpus = Corpus(args.work / folder)
        static_q = np.stack([corpus.tiers.static_embedder.embed_query(q) for _, q in sample]).astype(np.float32)
        ann = [ann_recall(corpus, "static_vector", static_q)]
        if full:
            full_q = np.stack([corpus.tiers.embedder.embed_query(q) for _, q in sample]).astype(np.float32)
            ann.append(ann_recall(corpus, "vector", full_q))
        out["sizes"][size]["ann"] = ann
        out["sizes"][size]["latency"] = latency(corpus, [(f"{r}{suffix}", q) for r, q in sample], full=full)
        print(f"{size}: {json.dumps(out['sizes'][size]['latency'])}", file=sys.stderr)
        save()


def print_tables(out: dict[str, Any]) -> None:
    q = out.get("quality")
    if q:
        print("\nQuality: macro NDCG@10 over the 18 DEV repositories (each query scoped to its repository, or org-wide)")
        for name, value in q["macro"].items():
            print(f"  {name:<32} {value:.4f}")
        ident = q["identical_top10"]
        print(f"  identical top 10, scoped vs single: full {ident['full']}/{ident['queries']}, "
              f"static {ident['static']}/{ident['queries']}")
    if out.get("keywords"):
        kw = out["keywords"]
        print(f"\nFull-text index vs exact BM25 over the 10k corpus: overlap@100 {kw['overlap_at_100']}, "
              f"identical top 10 {kw['identical_top10']}/{kw['queries']}")
    print("\nScale curve")
    header = ["size", "chunks", "build chunks/s", "refresh s (rows)", "org p50/p95 ms", "scoped warm p50/p95 ms",
              "scoped cold p50", "store MB", "driver MB", "worker MB", "ANN recall@100"]
    print("  " + " | ".join(header))
    for name, size in out["sizes"].items():
        build = size.get("build", {})
        speeds = ", ".join(f"{k}: {v['chunks_per_s']}" for k, v in build.items() if isinstance(v, dict))
        if "replicated_s" in build:
            speeds = f"replicated in {build['replicated_s']} s"
        refresh = size.get("refresh")
        lat = size.get("latency", {})
        org = lat.get("org_static_ms", {})
        warm = lat.get("scoped_static_warm_ms", {})
        drivers = [v.get("driver_peak_mb") for v in build.values() if isinstance(v, dict)] or [None]
        workers = [m for v in build.values() if isinstance(v, dict) for m in v.get("worker_peak_mb", [])]
        row = [name, size.get("chunks"), speeds,
               f"{refresh['seconds']} ({refresh['chunk_rows_written']}+{refresh['file_rows_written']})" if refresh else "-",
               f"{org.get('p50')}/{org.get('p95')}", f"{warm.get('p50')}/{warm.get('p95')}",
               lat.get("scoped_static_cold_ms", {}).get("p50"), size.get("store_mb"), max((d for d in drivers if d), default="-"),
               max(workers) if workers else "-", ", ".join(f"{a['column']} {a['recall_at_100']}" for a in size.get("ann", []))]
        print("  " + " | ".join(str(c) for c in row))
        for tier in ("static", "full"):
            ratios = {label: build.get(f"{tier}_actor_speedup{suffix}") for label, suffix in
                      (("wall", ""), ("streaming", "_stream"), ("working (actors' start left out)", "_work"),
                       ("projected", "_projected"),
                       ("the same work in 2 plain processes / 1", "_ceiling"))}
            if any(ratios.values()):
                rounds = len(build.get(f"{tier}_actor_speedup_rounds", [])) or 1
                print(f"    {tier}: 2 actors / 1 actor, " + ", ".join(f"{k} {v}" for k, v in ratios.items() if v)
                      + (f" (medians of {rounds} rounds)" if rounds > 1 else ""))
        if "org_full_ms" in lat:
            print(f"    transformer tier: org p50/p95 {lat['org_full_ms']['p50']}/{lat['org_full_ms']['p95']} ms, "
                  f"scoped warm {lat['scoped_full_warm_ms']['p50']}/{lat['scoped_full_warm_ms']['p95']} ms"
                  + (f", scoped cold p50 {lat['scoped_full_cold_ms']['p50']} ms" if "scoped_full_cold_ms" in lat else ""))
    for note in out.get("notes", []):
        print(f"  note: {note}")


if __name__ == "__main__":
    raise SystemExit(main())
