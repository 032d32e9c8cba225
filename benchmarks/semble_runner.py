"""The semble side of the peer benchmark: runs inside semble's own virtual environment.

semble 0.7 needs ``huggingface-hub>=1.0`` and codesearch's export extra needs
``<1.0``, so ``peer_benchmark.py`` runs this script with semble's python
(``--semble-python``) and talks to it through JSON: a job on stdin, one JSON
object per repository on stdout. It imports only the standard library,
semble, and its own folder's ``_harness.py`` (memory and folder sizes), and
ranks nothing itself: the caller scores the returned locations with the same
metric it uses for codesearch.

Job::

    {"model": "/path/to/static-model", "top_k": 10, "latency_runs": 5,
     "repos": [{"name": "chi", "root": "/data/chi", "queries": ["Mux", ...]}]}

Output per repository::

    {"name": "chi", "index_s": 0.41, "chunks": 512, "latencies_ms": [...],
     "results": [[["mux.go", 1, 40], ...], ...]}   # one list per query, best first

A serving job (``monorepo.py``) opens an index that semble's CLI saved in its
cache, answers warm queries and reports times and memory::

    {"kind": "serve", "model": "/path/to/static-model", "root": "/data/size-10000",
     "cache": "/tmp/semble-cache", "queries": ["Mux", ...], "latency_runs": 3, "top_k": 10}

Output, one JSON object: ``import_s``, ``model_load_s``, ``validate_s``
(``get_validated_cache``: semble walks the tree and compares every file's
mtime with the cache before it loads it), ``open_s`` (``load_from_disk`` with
the model already loaded), ``timings_ms``, ``revalidate_ms`` and
``stat_floor_ms`` (medians of 7, alternating: the same check again, and a
bare ``os.stat`` over the cached files), ``files``, ``chunks``,
``index_bytes``, ``rss`` and ``peak_rss`` (``VmRSS``/``VmHWM`` after the queries).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time

from _harness import folder_bytes, proc_status  # this script's folder is first on sys.path (it runs by its path)


def serve(job: dict) -> dict:
    """Open semble's cached index of ``job["root"]`` in this new process, answer warm queries, report."""
    started = time.perf_counter()
    os.environ["SEMBLE_CACHE_LOCATION"] = job["cache"]
    os.environ["SEMBLE_MODEL_NAME"] = job["model"]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from semble import SembleIndex
    from semble.cache import get_validated_cache
    from semble.index.dense import load_model
    from semble.types import ContentType

    out: dict = {"import_s": time.perf_counter() - started}
    root, content = job["root"], (ContentType.CODE,)  # the CLI's default content, as its first answer built it
    t0 = time.perf_counter()
    load_model(job["model"])  # cached by semble: load_from_disk below reuses it
    out["model_load_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    cached = get_validated_cache(root, job["model"], content)
    out["validate_s"] = time.perf_counter() - t0
    if cached is None:
        raise SystemExit(f"no valid semble index of {root} in {job['cache']}")
    t0 = time.perf_counter()
    index = SembleIndex.load_from_disk(cached)
    out["open_s"] = time.perf_counter() - t0
    top_k, runs = int(job.get("top_k", 10)), int(job.get("latency_runs", 3))
    for query in job["queries"]:  # one warm-up pass
        index.search(query, top_k=top_k)
    timings = []
    for _ in range(runs):
        for query in job["queries"]:
            t0 = time.perf_counter()
            index.search(query, top_k=top_k)
            timings.append((time.perf_counter() - t0) * 1000)
    out["timings_ms"] = timings
    out.update(proc_status())
    with open(os.path.join(cached, "metadata.json"), encoding="utf-8") as handle:
        files = [os.path.join(os.path.realpath(root), p) for p in json.load(handle)["files"]]
    revalidate, floor = [], []
    for _ in range(7):
        t0 = time.perf_counter()
        get_validated_cache(root, job["model"], content)
        revalidate.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        for path in files:
            os.stat(path)
        floor.append((time.perf_counter() - t0) * 1000)
    out.update(revalidate_ms=statistics.median(revalidate), stat_floor_ms=statistics.median(floor), files=len(files),
               chunks=len(index.chunks), index_bytes=folder_bytes(str(cached)))
    return out


def main() -> None:
    job = json.load(sys.stdin)
    if job.get("kind") == "serve":
        print(json.dumps(serve(job)), flush=True)
        return
    # A fresh cache per run, so every index is built, never loaded.
    os.environ["SEMBLE_CACHE_LOCATION"] = tempfile.mkdtemp(prefix="semble-bench-cache-")
    os.environ["SEMBLE_MODEL_NAME"] = job["model"]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from semble import SembleIndex

    top_k = int(job.get("top_k", 10))
    runs = int(job.get("latency_runs", 5))
    for repo in job["repos"]:
        started = time.perf_counter()
        index = SembleIndex.from_path(repo["root"], model_path=job["model"])
        index_s = time.perf_counter() - started
        results, latencies = [], []
        for query in repo["queries"]:
            timings = []
            hits = []
            for _ in range(runs):
                t0 = time.perf_counter()
                hits = index.search(query, top_k=top_k)
                timings.append((time.perf_counter() - t0) * 1000)
            latencies.append(statistics.median(timings))
            results.append([[h.chunk.file_path, h.chunk.start_line, h.chunk.end_line] for h in hits])
        locations = [[c.file_path, c.start_line, c.end_line] for c in index.chunks]
        print(json.dumps({"name": repo["name"], "index_s": index_s, "chunks": len(index.chunks),
                          "latencies_ms": latencies, "results": results, "indexed": locations}), flush=True)


if __name__ == "__main__":
    main()
