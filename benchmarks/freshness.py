"""How fresh a search is, and what freshness costs a warm query: the stat pass, its floor, and watch mode.

Usage:
    python -m benchmarks.freshness [--files 10000] [--repo DIR] [--rounds 5] [--model minilm|none]
        [--tier full|static] [--skip-edit] [--semble-python PY --semble-model DIR] [--json OUT]

1. A generated tree of ``--files`` Python files (100 per folder), its folders
   dated a minute back: the stat pass (:func:`codesearch.files.changed_files`
   against the recorded stats) with nothing changed, median of ``--rounds``;
   goal <= 100 ms at 10,000 files. Timed both ways: the default, which stats
   the known files alone while no folder or ignore file changed
   (``stat_pass_ms``), and the full walk it falls back to (``walk_ms``).
2. For the generated tree and ``--repo``: the stat pass a long-lived searcher
   runs (a ``StatPass`` prepared once per index) against a bare ``os.stat``
   loop over the same absolute paths in the same run, over the files alone
   (the goal's floor: within 1.3x) and over files and folders (the pass stats
   both); the pure-Python twin and the one-shot ``changed_files`` beside it.
3. For the same trees: warm query p50 and p95 with ``watch=True``, with the
   stat pass (``refresh=True``) and with none (``refresh=False``), on one
   stored index (``--model``, ``--tier``); with ``--semble-python``, semble's
   warm queries on the same trees and queries (``semble_runner.py``), after.
4. ``--repo`` (default: the generated tree) indexed: one function is edited,
   then ``search`` runs; wall seconds from the write to the answer that holds
   the edit, median of ``--rounds`` edits, with the stat pass and with
   ``watch=True`` (where a search may come before the watcher's report and is
   repeated); goal < 1 s.

JSON keys: ``stat_pass_ms``, ``walk_ms``, ``files``; ``floor`` and ``warm``, each keyed by tree
(``floor_ms``, ``floor_dirs_ms``, ``pass_ms``, ``ratio``, ``ratio_dirs``, ``pass_python_ms``, ``ratio_python``,
``one_shot_ms``, ``files``, ``folders``, ``backend``; ``watch_p50_ms``, ``watch_norefresh_p50_ms``,
``stat_p50_ms``, ``norefresh_p50_ms`` and their ``_p95_ms``, ``watcher_start_s``, ``chunks``, ``tier``, ``mode``);
``edit_to_search_s``, ``edit_to_search_watch_s`` (with ``_refreshed`` and ``_searches``), ``refreshed``, ``repo``;
``semble`` keyed by tree (``p50_ms``, ``p95_ms``, ``chunks``, ``index_s``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import percentile
from codesearch import CodeSearch
from codesearch.files import changed_files, scan
from codesearch.files.kinds import kind_of


def make_tree(root: Path, files: int) -> Path:
    for n in range(files):
        folder = root / f"pkg{n // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"module_{n % 100:02d}.py").write_text(
            f"def handler_{n}(request):\n    \"\"\"Handle request number {n}.\"\"\"\n    return request.value + {n}\n")
    # A repository's folders are older than the last index; fresh ones are walked until they settle.
    past = time.time() - 60
    for folder in [root, *root.iterdir()]:
        os.utime(folder, (past, past))
    return root


def stat_pass_against_floor(root: Path, rounds: int) -> dict[str, float | int | str]:
    """The stat pass a long-lived searcher runs (a :class:`StatPass` prepared once per index, nothing changed) against
    bare ``os.stat`` loops over the same absolute paths, alternating in one process; medians in ms.

    The pass stats the folders and ignore files the walk depended on, then the files, so it is compared both with
    a loop over the files alone (``floor_ms``, the goal's floor) and with one over files and folders
    (``floor_dirs_ms``: the same system calls). Both twins of the stat table are timed; ``one_shot_ms`` is
    :func:`changed_files` preparing everything on each call, as a one-shot CLI command does.
    """
    from codesearch.files import _statpass_py
    from codesearch.files import changes as changes_module

    scanned = scan(root)
    real = str(root.resolve())
    files = [f"{real}/{p}" for p in scanned.stats]
    folders = [f"{real}/{p}" for p in scanned.walk_stats]
    stat = os.stat
    twins = {changes_module.BACKEND: changes_module.StatTable, "python": _statpass_py.StatTable}
    passes = {}
    for name, table in twins.items():
        real_table, changes_module.StatTable = changes_module.StatTable, table
        try:
            passes[name] = changes_module.StatPass(root, scanned.stats, walk_stats=scanned.walk_stats)
            assert not passes[name].changes()
        finally:
            changes_module.StatTable = real_table
    timings: dict[str, list[float]] = {"floor": [], "floor_dirs": [], "one_shot": [], **{f"pass_{n}": [] for n in passes}}
    for _ in range(rounds):
        t0 = time.perf_counter()
        for path in files:
            stat(path)
        timings["floor"].append(time.perf_counter() - t0)
        for name, prepared in passes.items():
            t0 = time.perf_counter()
            prepared.changes()
            timings[f"pass_{name}"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for path in folders:
            stat(path)
        for path in files:
            stat(path)
        timings["floor_dirs"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        changed_files(root, scanned.stats, walk_stats=scanned.walk_stats)
        timings["one_shot"].append(time.perf_counter() - t0)
    out: dict[str, float | int | str] = {f"{k}_ms": statistics.median(v) * 1000 for k, v in timings.items()}
    backend = changes_module.BACKEND
    out.update(files=len(files), folders=len(folders), backend=backend,
               pass_ms=out[f"pass_{backend}_ms"], ratio=out[f"pass_{backend}_ms"] / out["floor_ms"],  # type: ignore[operator]
               ratio_dirs=out[f"pass_{backend}_ms"] / out["floor_dirs_ms"],  # type: ignore[operator]
               ratio_python=out["pass_python_ms"] / out["floor_ms"])  # type: ignore[operator]
    return out


def print_floor(label: str, floor: dict[str, float | int | str]) -> None:
    print(f"stat pass against a bare os.stat loop, {label}: {floor['files']:,} files + {floor['folders']:,} folders "
          f"and ignore files, nothing changed")
    print(f"  bare loop, files only:        {floor['floor_ms']:7.2f} ms")
    print(f"  bare loop, files and folders: {floor['floor_dirs_ms']:7.2f} ms")
    print(f"  prepared pass ({floor['backend']}):      {floor['pass_ms']:7.2f} ms   {floor['ratio']:.2f}x the files-only "
          f"loop, {floor['ratio_dirs']:.2f}x files and folders")
    if floor["backend"] != "python":
        print(f"  prepared pass (python twin):  {floor['pass_python_ms']:7.2f} ms   {floor['ratio_python']:.2f}x")
    print(f"  one-shot changed_files:       {floor['one_shot_ms']:7.2f} ms   (prepares the paths on every call)")


def stat_pass_ms(root: Path, rounds: int) -> tuple[float, float, int]:
    """Median ms of the stat pass with nothing changed: the default (known files alone), then the full walk."""
    scanned = scan(root)
    assert scanned.walk_stats and all(mtime >= 0 for _, mtime in scanned.walk_stats.values())
    medians = []
    for walk_stats in (scanned.walk_stats, None):
        timings = []
        for _ in range(rounds):
            started = time.perf_counter()
            found = changed_files(root, scanned.stats, walk_stats=walk_stats)
            timings.append((time.perf_counter() - started) * 1000)
            assert not found
        medians.append(statistics.median(timings))
    return medians[0], medians[1], len(scanned.stats)


QUERIES = (
    "handle request number 4242", "handler_1234", "return the request value", "serialize an object to JSON",
    "TypeAdapter", "parse a date from a string", "where are HTTP request headers parsed", "JsonReader",
    "write a field name and value", "how a router matches a path with parameters", "map query results to objects",
    "format a floating point number with precision",
)
"""Warm queries: the generated tree's own words, and questions and identifiers that suit a real repository (gson)."""


def _searcher(repo: Path, index_dir: Path, model: str | None, **options: Any) -> CodeSearch:
    return CodeSearch(repo, model=model, index_dir=index_dir, **options)


def warm_queries(repo: Path, index_dir: Path, model: str | None, tier: str, rounds: int) -> dict[str, Any]:
    """Warm query latency, ms, three ways on one stored index: ``refresh=True`` (the stat pass before each search),
    ``refresh=False`` (no freshness at all: the floor) and ``watch=True`` (the watcher's report).

    Each round times every query in three blocks, in an order that rotates from round to round (a stat pass
    leaves the CPU caches colder for whatever follows it): with the stat pass and without, in a searcher with no
    watcher alive, and in a ``watch=True`` searcher built for the round, its watcher in place and caught up
    before the clock starts, closed after, where each query is also timed with ``refresh=False`` right after
    (``watch_norefresh``: the same searcher and caches, so the difference is the watch check alone). Medians
    and 95th percentiles over ``rounds`` x queries.
    """
    builder = _searcher(repo, index_dir, model)
    if model is None:
        builder.index()
    else:
        builder.index(tier=tier)  # type: ignore[arg-type]
    mode = "hybrid" if model is not None else "bm25"
    plain = _searcher(repo, index_dir, model)
    for query in QUERIES:  # load the index and the models
        plain.search(query, k=10, mode=mode)  # type: ignore[arg-type]
    timings: dict[str, list[float]] = {"stat": [], "norefresh": [], "watch": [], "watch_norefresh": []}
    refreshed = 0
    started_s: list[float] = []

    def block(cs: CodeSearch, name: str, refresh: bool | None) -> None:
        nonlocal refreshed
        for query in QUERIES:
            t0 = time.perf_counter()
            cs.search(query, k=10, mode=mode, refresh=refresh)  # type: ignore[arg-type]
            timings[name].append((time.perf_counter() - t0) * 1000)
            assert cs.last_search is not None
            refreshed += cs.last_search.refreshed

    def watched() -> None:
        nonlocal refreshed
        with _searcher(repo, index_dir, model, watch=True) as watching:
            t0 = time.perf_counter()
            watching.search(QUERIES[0], k=10, mode=mode)  # type: ignore[arg-type]
            watcher = watching._freshness._watcher
            assert watcher is not None and watcher.wait_started(60), watcher.reason if watcher else "no watcher"
            started_s.append(time.perf_counter() - t0)
            for query in QUERIES:  # the catch-up stat pass, then warm
                watching.search(query, k=10, mode=mode)  # type: ignore[arg-type]
            assert watching.status()["freshness"] == "watch"
            for query in QUERIES:  # alternating with refresh=False in the same searcher: the watch check's own cost
                for name, refresh in (("watch", None), ("watch_norefresh", False)):
                    t0 = time.perf_counter()
                    watching.search(query, k=10, mode=mode, refresh=refresh)  # type: ignore[arg-type]
                    timings[name].append((time.perf_counter() - t0) * 1000)
                    assert watching.last_search is not None
                    refreshed += watching.last_search.refreshed

    blocks: list[Callable[[], None]] = [lambda: block(plain, "stat", True), lambda: block(plain, "norefresh", False),
                                        watched]
    for n in range(rounds):
        for run in blocks[n % 3:] + blocks[:n % 3]:
            run()
    out: dict[str, Any] = {"repo": str(repo), "mode": mode, "tier": plain.last_search.tier if plain.last_search else None,
                           "queries": len(QUERIES), "rounds": rounds, "refreshed": refreshed,
                           "watcher_start_s": statistics.median(started_s), "chunks": plain.info()["chunks"]}
    for name, values in timings.items():
        out[f"{name}_p50_ms"], out[f"{name}_p95_ms"] = percentile(values, 50), percentile(values, 95)
    return out


def print_warm(label: str, warm: dict[str, Any]) -> None:
    print(f"warm queries, {label}: {warm['chunks']:,} chunks, {warm['mode']} on the {warm['tier']} tier, "
          f"{warm['queries']} queries x {warm['rounds']} rounds (p50 / p95, ms)")
    for name, what in (("watch", "watch=True (the watcher's report)"),
                       ("watch_norefresh", "  same searcher, refresh=False"),
                       ("stat", "refresh=True (a stat pass each)"), ("norefresh", "refresh=False (no freshness)")):
        print(f"  {what:<36} {warm[f'{name}_p50_ms']:7.2f} / {warm[f'{name}_p95_ms']:7.2f}")
    print(f"  (a watcher's watches were in place {warm['watcher_start_s']:.2f} s after its searcher's first search)")


def semble_warm(python: str, model: str, trees: Sequence[Path], runs: int) -> dict[str, dict[str, float]]:
    """semble's warm query latency on the same trees and queries, through ``semble_runner.py`` in semble's own
    environment (``SembleIndex.search``: no freshness check at all); per tree, p50 and p95 over the queries of each
    query's median of ``runs``, ms."""
    job = {"model": model, "top_k": 10, "latency_runs": runs,
           "repos": [{"name": str(root), "root": str(root), "queries": list(QUERIES)} for root in trees]}
    proc = subprocess.run([python, str(Path(__file__).with_name("semble_runner.py"))], input=json.dumps(job),
                          capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=True)
    out: dict[str, dict[str, float]] = {}
    for line in proc.stdout.splitlines():
        answer = json.loads(line)
        p50, p95 = percentile(answer["latencies_ms"], 50), percentile(answer["latencies_ms"], 95)
        out[answer["name"]] = {"p50_ms": p50, "p95_ms": p95, "chunks": answer["chunks"], "index_s": answer["index_s"]}
    return out


def _edit(text: str, suffix: str, marker: str) -> str:
    """``text`` with a comment line naming ``marker`` put inside its first function (after its opening line)."""
    comment = "#" if suffix in (".py", ".rb", ".sh") else "//"
    lines = text.split("\n")
    for i, line in enumerate(lines):
        stripped = line.rstrip()
        if stripped.endswith("{") or (comment == "#" and stripped.startswith(("def ", "    def ")) and stripped.endswith(":")):
            indent = " " * (len(line) - len(line.lstrip()) + 4)
            return "\n".join([*lines[: i + 1], f"{indent}{comment} {marker} keeps the cache warm", *lines[i + 1:]])
    raise SystemExit("no function to edit in the chosen file")


def edit_to_search(repo: Path, index_dir: Path, rounds: int, *, model: str | None = "minilm", tier: str = "full",
                   watch: bool = False) -> tuple[float, list[int], list[int]]:
    """Median seconds from writing an edit to the first answer that holds it, the files each refresh re-indexed,
    and how many searches it took (with ``watch``, a search right after the write may come before the watcher's
    report: the search is repeated until it answers with the edit, and the time counts all of it)."""
    cs = _searcher(repo, index_dir, model, watch=watch)
    if model is None:
        cs.index()
    else:
        cs.index(tier=tier)  # type: ignore[arg-type]
    mode = "hybrid" if model is not None else "bm25"
    sources = [p for p in sorted(repo.rglob("*")) if p.suffix in (".py", ".java", ".go", ".rs", ".ts", ".js", ".c")
               and kind_of(p.relative_to(repo).as_posix()) == "source"]
    target = max(sources, key=lambda p: p.stat().st_size)
    original = target.read_text()
    timings, refreshed, searches = [], [], []
    try:
        if watch:
            cs.search("warm up", k=1, mode=mode)  # type: ignore[arg-type]
            watcher = cs._freshness._watcher
            assert watcher is not None and watcher.wait_started(60), watcher.reason if watcher else "no watcher"
            cs.search("warm up", k=1, mode=mode)  # type: ignore[arg-type]  # the catch-up stat pass
        for n in range(rounds):
            marker = f"freshmarker{n}x{os.getpid()}"
            started = time.perf_counter()
            target.write_text(_edit(original, target.suffix, marker))
            count, fresh = 0, 0
            while True:
                hits = cs.search(marker, k=1, mode=mode)  # type: ignore[arg-type]
                count += 1
                assert cs.last_search is not None
                fresh += cs.last_search.refreshed
                if hits and marker in hits[0].text:
                    break
                assert watch and time.perf_counter() - started < 30, (marker, hits[:1])
            timings.append(time.perf_counter() - started)
            refreshed.append(fresh)
            searches.append(count)
    finally:
        target.write_text(original)
        cs.close()
    return statistics.median(timings), refreshed, searches


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repo", type=Path, help="a repository to edit and query too (default: the generated tree alone)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--model", default="minilm", help="the model, or 'none' for a keyword-only index")
    parser.add_argument("--tier", default="full", choices=("full", "static"), help="the tier indexed and queried")
    parser.add_argument("--skip-edit", action="store_true", help="leave out the edit-to-search timings")
    parser.add_argument("--semble-python", help="semble's environment's python: time its warm queries on the same trees")
    parser.add_argument("--semble-model", help="the static model semble loads (a folder)")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    model = None if args.model.lower() == "none" else args.model
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="cs-freshness-") as scratch:
        tree = make_tree(Path(scratch) / "tree", args.files)
        ms, walk_ms, files = stat_pass_ms(tree, args.rounds)
        print(f"stat pass, nothing changed: {ms:.1f} ms over {files:,} files, {walk_ms:.1f} ms walking every "
              f"folder (median of {args.rounds})")
        out.update(stat_pass_ms=ms, walk_ms=walk_ms, files=files)
        targets = {"the generated tree": tree, **({str(args.repo): args.repo} if args.repo else {})}
        out["floor"], out["warm"] = {}, {}
        for n, (label, root) in enumerate(targets.items()):
            out["floor"][str(root)] = floor = stat_pass_against_floor(root, max(args.rounds, 7))
            print_floor(label, floor)
            out["warm"][str(root)] = warm = warm_queries(root, Path(scratch) / f"warm-index-{n}", model, args.tier,
                                                         args.rounds)
            print_warm(label, warm)
        if args.semble_python:
            out["semble"] = semble_warm(args.semble_python, args.semble_model, list(targets.values()), args.rounds)
            for (label, root) in targets.items():
                theirs = out["semble"][str(root)]
                ours = out["warm"][str(root)]
                print(f"semble warm queries, {label}: {theirs['chunks']:,} chunks, p50 {theirs['p50_ms']:.2f} ms / "
                      f"p95 {theirs['p95_ms']:.2f} ms (no freshness check); codesearch watch=True p50 "
                      f"{ours['watch_p50_ms']:.2f} ms ({ours['watch_p50_ms'] / theirs['p50_ms']:.2f}x)")
        if not args.skip_edit:
            repo = args.repo or tree
            for watch in (False, True):
                seconds, refreshed, searches = edit_to_search(repo, Path(scratch) / f"edit-index-{watch}", args.rounds,
                                                              model=model, tier=args.tier, watch=watch)
                how = "watch=True" if watch else "stat pass"
                print(f"edit one function -> a search that sees it, {how}: {seconds:.3f} s (median of {args.rounds}; "
                      f"{repo}; searches {searches})")
                key = "edit_to_search_watch" if watch else "edit_to_search"
                out.update({f"{key}_s": seconds, f"{key}_refreshed": refreshed, f"{key}_searches": searches})
            out["refreshed"], out["repo"] = out["edit_to_search_refreshed"], str(repo)
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
