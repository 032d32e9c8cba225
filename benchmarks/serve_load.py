"""`codesearch serve` under load on loopback, and its warm API latency beside the library call's.

Usage:
    python -m benchmarks.serve_load [--repo DIR] [--model minilm|none] [--clients 16] [--seconds 60]
        [--rounds 20] [--index-dir DIR] [--json OUT]

DIR defaults to ``$CODESEARCH_REQUESTS_CORPUS`` (psf/requests v2.32.3); it is
indexed first (the transformer tier) in ``--index-dir`` (default: a new
temporary folder, removed after) when that holds no index of the tier.
Then ``codesearch serve DIR`` runs in its own process (read-only, as served by
default) and, in this process:

1. **Side by side**, one client, warm: for each of ``--rounds`` rounds, every
   query of ``seed_requests.QUESTIONS`` (ten questions about requests) is
   answered by the library (``CodeSearch.search`` on the same index, read-only
   and watched as the server's) and by ``GET /api/search`` on a kept-alive
   connection, one after the other. Each API answer is checked against the
   library's answer for the same query (``codesearch.faces.answers.search_answer``);
   ``api_minus_library_p50_ms`` is the goal's figure (within 2 ms).
2. **Load**: ``--clients`` threads, each on its own kept-alive connection,
   send the queries round robin for ``--seconds``; every answer must be a 200
   with hits (anything else counts as an error). Latencies are wall times seen
   by the clients, queueing at the server included (its searches of one
   repository take turns).

JSON keys: ``repo``, ``model``, ``tier``, ``side_by_side`` (``library_p50_ms``,
``api_p50_ms``, ``api_minus_library_p50_ms``, their ``_p99_ms``, ``rounds``,
``queries``, ``equal_answers``), ``load`` (``clients``, ``seconds``,
``requests``, ``errors``, ``rps``, ``p50_ms``, ``p99_ms``, ``max_ms``,
``error_samples``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by the nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def start_server(args: Sequence[str], timeout: float = 120.0, env: dict[str, str] | None = None,
                 log: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """``codesearch serve ARGS --port 0`` in a subprocess (with ``env``, else this one's); its base URL once it
    listens. ``log``: a file that gets all it prints, for as long as it runs.

    Raises:
        RuntimeError: it exited or said nothing within ``timeout`` seconds (with what it printed).
    """
    process = subprocess.Popen([sys.executable, "-m", "codesearch.faces.cli", "serve", *args, "--port", "0"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    said: list[str] = []
    found: list[str] = []
    handle = open(log, "w") if log is not None else None  # noqa: SIM115 - kept open while the server runs

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if handle is not None:
                handle.write(line)
                handle.flush()
            elif not found:
                said.append(line)
            if line.startswith("codesearch serve: http://") and not found:
                found.append(line.split()[2].rstrip("/"))

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not found and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    if not found:
        process.kill()
        process.wait()
        printed = log.read_text() if log is not None else "".join(said)
        raise RuntimeError("codesearch serve did not start: " + printed[-2000:])
    return process, found[0]


def stop_server(process: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """Terminate ``process`` (a server, or any child), killing it if it has not exited within ``timeout`` s."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Client:
    """One kept-alive HTTP connection to the server."""

    def __init__(self, base: str, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base)
        self.connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        self.headers = headers or {}

    def get(self, path: str, **params: Any) -> tuple[int, bytes]:
        query = urlencode(params, doseq=True)
        try:
            self.connection.request("GET", f"{path}?{query}" if query else path, headers=self.headers)
            response = self.connection.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException):
            self.connection.close()  # the next request reconnects
            raise

    def close(self) -> None:
        self.connection.close()


def load(base: str, queries: Sequence[str], *, clients: int = 16, seconds: float = 60.0,
         requests_per_client: int | None = None, params: dict[str, Any] | None = None,
         headers: dict[str, str] | None = None) -> dict[str, Any]:
    """``clients`` threads sending ``GET /api/search`` round robin over ``queries`` for ``seconds`` (or
    ``requests_per_client`` each); latencies and errors (a status other than 200, an answer without hits, or a
    failed connection)."""
    latencies: list[float] = []
    errors: list[str] = []
    guard = threading.Lock()
    stop = time.monotonic() + seconds
    start = threading.Barrier(clients)

    def worker(n: int) -> None:
        client = Client(base, headers)
        mine: list[float] = []
        bad: list[str] = []
        start.wait()
        sent = 0
        while (time.monotonic() < stop) if requests_per_client is None else sent < requests_per_client:
            query = queries[(n + sent) % len(queries)]
            began = time.perf_counter()
            try:
                status, body = client.get("/api/search", q=query, **(params or {}))
                if status != 200:
                    bad.append(f"{status}: {body[:200]!r}")
                elif not json.loads(body)["hits"]:
                    bad.append(f"no hits for {query!r}")
            except (OSError, http.client.HTTPException, ValueError) as exc:
                bad.append(f"{type(exc).__name__}: {exc}")
            mine.append(time.perf_counter() - began)
            sent += 1
        client.close()
        with guard:
            latencies.extend(mine)
            errors.extend(bad)

    began = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    ms = [t * 1000 for t in latencies]
    return {"clients": clients, "seconds": round(wall, 2), "requests": len(ms), "errors": len(errors),
            "rps": round(len(ms) / wall, 1) if wall else 0.0,
            "p50_ms": round(quantile(ms, 0.5), 2) if ms else None, "p99_ms": round(quantile(ms, 0.99), 2) if ms else None,
            "max_ms": round(max(ms), 2) if ms else None, "error_samples": errors[:5]}


def side_by_side(base: str, repo: Path, model: str | None, queries: Sequence[str], rounds: int,
                 index_dir: Path | None = None) -> dict[str, Any]:
    """Warm library and API latencies of the same queries, alternating, and whether their answers agree."""
    from codesearch import CodeSearch
    from codesearch.faces.answers import search_answer

    searcher = CodeSearch(repo, model=model, read_only=True, watch=True, index_dir=index_dir)
    client = Client(base)
    mode = "bm25" if model is None else "hybrid"
    library: list[float] = []
    api: list[float] = []
    equal = 0
    for round_number in range(rounds + 1):  # round 0 warms both up
        for query in queries:
            began = time.perf_counter()
            hits = searcher.search(query, k=10, mode=mode)
            lib_ms = (time.perf_counter() - began) * 1000
            expected = search_answer(query, [(str(searcher.root), searcher.last_search)], hits)
            began = time.perf_counter()
            status, body = client.get("/api/search", q=query, k=10, mode=mode)
            api_ms = (time.perf_counter() - began) * 1000
            if round_number == 0:
                continue
            library.append(lib_ms)
            api.append(api_ms)
            equal += status == 200 and json.loads(body) == expected
    client.close()
    searcher.close()
    return {"rounds": rounds, "queries": len(queries), "equal_answers": f"{equal}/{len(api)}",
            "library_p50_ms": round(statistics.median(library), 2), "api_p50_ms": round(statistics.median(api), 2),
            "api_minus_library_p50_ms": round(statistics.median(api) - statistics.median(library), 2),
            "library_p99_ms": round(quantile(library, 0.99), 2), "api_p99_ms": round(quantile(api, 0.99), 2)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=os.environ.get("CODESEARCH_REQUESTS_CORPUS"))
    parser.add_argument("--model", default="minilm", help="minilm (hybrid) or none (keywords, bm25)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--index-dir", type=Path, default=None)
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    if args.repo is None or not args.repo.is_dir():
        parser.error("give --repo DIR or set CODESEARCH_REQUESTS_CORPUS")
    from benchmarks.seed_requests import QUESTIONS
    from codesearch import CodeSearch

    model = None if args.model == "none" else args.model
    repo = args.repo.resolve()
    with tempfile.TemporaryDirectory(prefix="serve-load-") as scratch:
        index_dir = args.index_dir or Path(scratch) / "index"
        indexer = CodeSearch(repo, model=model, index_dir=index_dir)
        if not indexer.store.exists() or indexer.info()["tier"] != ("keyword" if model is None else "full"):
            indexer.index()
        tier = indexer.info()["tier"]
        indexer.close()
        queries = [q.query for q in QUESTIONS]
        process, base = start_server([str(repo), "--model", args.model, "--index-dir", str(index_dir)])
        try:
            pair = side_by_side(base, repo, model, queries, args.rounds, index_dir)
            loaded = load(base, queries, clients=args.clients, seconds=args.seconds,
                          params={"k": 10, "mode": "bm25" if model is None else "hybrid"})
        finally:
            stop_server(process)
    out = {"repo": str(repo), "model": args.model, "tier": tier, "side_by_side": pair, "load": loaded}
    print(f"{'':<26}{'p50 ms':>9}{'p99 ms':>9}")
    print(f"{'library, warm':<26}{pair['library_p50_ms']:>9}{pair['library_p99_ms']:>9}")
    print(f"{'API, warm, one client':<26}{pair['api_p50_ms']:>9}{pair['api_p99_ms']:>9}")
    print(f"API - library p50: {pair['api_minus_library_p50_ms']} ms; answers equal: {pair['equal_answers']}")
    under_load = f"{loaded['clients']} clients, {loaded['seconds']} s"
    print(f"{under_load:<26}{loaded['p50_ms']:>9}{loaded['p99_ms']:>9}"
          f"   {loaded['requests']} requests, {loaded['rps']} /s, {loaded['errors']} errors")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n")
    return 0 if loaded["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
