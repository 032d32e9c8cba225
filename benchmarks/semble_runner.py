"""The semble side of the peer benchmark: runs inside semble's own virtual environment.

semble 0.7 needs ``huggingface-hub>=1.0`` and codesearch's export extra needs
``<1.0``, so ``peer_benchmark.py`` runs this script with semble's python
(``--semble-python``) and talks to it through JSON: a job on stdin, one JSON
object per repository on stdout. It imports only the standard library and
semble, and ranks nothing itself: the caller scores the returned locations with
the same metric it uses for codesearch.

Job::

    {"model": "/path/to/static-model", "top_k": 10, "latency_runs": 5,
     "repos": [{"name": "chi", "root": "/data/chi", "queries": ["Mux", ...]}]}

Output per repository::

    {"name": "chi", "index_s": 0.41, "chunks": 512, "latencies_ms": [...],
     "results": [[["mux.go", 1, 40], ...], ...]}   # one list per query, best first
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time


def main() -> None:
    job = json.load(sys.stdin)
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
