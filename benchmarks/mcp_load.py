"""The MCP server under load: concurrent client sessions over stdio, mixed tools and bad calls; p50 and p99 per tool.

Usage:
    python -m benchmarks.mcp_load [--repo DIR] [--files 200] [--clients 8] [--calls 40] [--timeout 300] [--json OUT]

Each client is a session of the official SDK's stdio client with its own ``codesearch mcp`` process (a stdio
server answers one session), all reading one keyword index built first (``--index-dir ... --read-only``, as agents
sharing a CI-built index do). Each makes ``--calls`` calls, going round :data:`CALLS` from its own starting point:
``search``, ``find_definition``, ``find_references``, ``index_status``, and bad calls (a ``repo`` outside the
server's roots, a glob that does not compile, ``k: true``, no query) whose right answer is a one-line tool error.
A session is lost when it fails to start, dies or has not finished within ``--timeout`` seconds; a call is lost
when it raises instead of answering; an answer is unexpected when it is an error where a result was due, or the
reverse, or an error of more than one line. Prints a table and, with ``--json``, writes it.

JSON keys: ``clients``, ``calls_per_client``, ``sessions_completed``, ``sessions_lost``, ``calls_answered``,
``calls_lost``, ``unexpected`` (a few examples in ``unexpected_examples``), ``p50_ms``, ``p99_ms``, ``per_tool``
(each: ``calls``, ``errors``, ``p50_ms``, ``p99_ms``), ``start_p50_s`` (a session's start: process, imports,
handshake), ``wall_s``, ``repo``, ``files``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from benchmarks._harness import percentile

CALLS: list[tuple[str, dict[str, Any], bool]] = [  # (tool, arguments, whether a tool error is the right answer)
    ("search", {"query": "handle the request value", "mode": "bm25", "k": 5}, False),
    ("find_definition", {"name": "handler_1"}, False),
    ("search", {"query": "x", "repo": "/"}, True),
    ("find_references", {"name": "handler_2", "compact": True}, False),
    ("search", {"query": "x", "include": ["[z-a]"]}, True),
    ("index_status", {}, False),
    ("search", {"query": "x", "k": True}, True),
    ("search", {"query": "request path", "mode": "bm25", "max_lines": 2, "max_tokens": 400}, False),
    ("search", {}, True),
    ("find_definition", {"name": "no_such_name_anywhere"}, False),
]


def make_tree(root: Path, files: int) -> Path:
    """``files`` small Python modules, 50 to a folder."""
    for n in range(files):
        folder = root / f"pkg{n // 50:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"module_{n % 50:02d}.py").write_text(
            f"def handler_{n}(request):\n    \"\"\"Handle request number {n}.\"\"\"\n    return request.value + {n}\n\n\n"
            f"def caller_{n}(request):\n    return handler_{(n + 1) % files}(request).path\n")
    return root


async def _client(number: int, argv: list[str], env: dict[str, str], calls: int, log: Path,
                  results: list[dict[str, Any]]) -> None:
    """One session: start, handshake, ``calls`` calls round :data:`CALLS`; what happened goes into ``results``."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=argv, env=env)
    record: dict[str, Any] = {"client": number, "completed": False, "latencies": [], "lost": 0, "unexpected": []}
    results.append(record)
    started = time.perf_counter()
    with open(log, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            record["start_s"] = time.perf_counter() - started
            for i in range(calls):
                tool, arguments, error_due = CALLS[(number + i) % len(CALLS)]
                began = time.perf_counter()
                try:
                    answer = await session.call_tool(tool, arguments)
                except Exception as exc:
                    record["lost"] += 1
                    record["unexpected"].append(f"{tool} {arguments}: {type(exc).__name__}: {exc}")
                    continue
                record["latencies"].append((tool, bool(answer.is_error), (time.perf_counter() - began) * 1000))
                text = answer.content[0].text if answer.content else ""
                if bool(answer.is_error) != error_due or (answer.is_error and "\n" in text.strip()):
                    record["unexpected"].append(f"{tool} {arguments}: {text[:200]}")
            record["completed"] = True


async def _load(argv: list[str], env: dict[str, str], clients: int, calls: int, timeout: float,
                logs: Path) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []

    async def guarded(number: int) -> None:
        with contextlib.suppress(Exception):  # a session that dies is counted as lost, not raised
            await _client(number, argv, env, calls, logs / f"server{number}.log", results)

    with anyio.move_on_after(timeout):
        async with anyio.create_task_group() as group:
            for number in range(clients):
                group.start_soon(guarded, number)
    return results


def run_load(repo: Path, index_dir: Path, *, clients: int = 8, calls: int = 40, timeout: float = 300.0,
             logs: Path | None = None, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``clients`` concurrent sessions of ``calls`` calls each against ``codesearch mcp repo`` reading the keyword
    index at ``index_dir`` (read-only); the figures of the module's JSON."""
    argv = ["-m", "codesearch.faces.cli", "mcp", str(repo), "--model", "none", "--index-dir", str(index_dir), "--read-only"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    with tempfile.TemporaryDirectory(prefix="cs-mcp-load-") as scratch:
        began = time.perf_counter()
        results = anyio.run(_load, argv, env, clients, calls, timeout, logs or Path(scratch))
        wall = time.perf_counter() - began
    latencies = [entry for record in results for entry in record["latencies"]]
    unexpected = [text for record in results for text in record["unexpected"]]
    completed = sum(record["completed"] for record in results)

    def percentiles(values: list[float]) -> tuple[float | None, float | None]:
        if not values:
            return None, None
        return round(percentile(values, 50), 2), round(percentile(values, 99), 2)

    per_tool = {}
    for tool in dict.fromkeys(tool for tool, _, _ in CALLS):
        mine = [entry for entry in latencies if entry[0] == tool]
        p50, p99 = percentiles([ms for _, _, ms in mine])
        per_tool[tool] = {"calls": len(mine), "errors": sum(error for _, error, _ in mine), "p50_ms": p50, "p99_ms": p99}
    p50, p99 = percentiles([ms for _, _, ms in latencies])
    starts = [record["start_s"] for record in results if "start_s" in record]
    return {
        "clients": clients, "calls_per_client": calls, "sessions_completed": completed,
        "sessions_lost": clients - completed, "calls_answered": len(latencies),
        "calls_lost": clients * calls - len(latencies),  # raised instead of answering, or never made
        "unexpected": len(unexpected), "unexpected_examples": unexpected[:5], "p50_ms": p50, "p99_ms": p99,
        "per_tool": per_tool, "start_p50_s": round(float(np.median(starts)), 2) if starts else None,
        "wall_s": round(wall, 2), "repo": str(repo),
    }


def print_table(result: dict[str, Any]) -> None:
    print(f"{result['clients']} sessions x {result['calls_per_client']} calls: {result['sessions_completed']} completed, "
          f"{result['sessions_lost']} lost; {result['calls_answered']} calls answered, {result['calls_lost']} lost, "
          f"{result['unexpected']} unexpected; session start p50 {result['start_p50_s']} s; wall {result['wall_s']} s")
    print(f"{'tool':<16} {'calls':>6} {'errors':>7} {'p50 ms':>8} {'p99 ms':>8}")
    for tool, row in result["per_tool"].items():
        print(f"{tool:<16} {row['calls']:>6} {row['errors']:>7} {row['p50_ms'] or 0:>8.1f} {row['p99_ms'] or 0:>8.1f}")
    print(f"{'all':<16} {result['calls_answered']:>6} {'':>7} {result['p50_ms'] or 0:>8.1f} {result['p99_ms'] or 0:>8.1f}")
    for example in result["unexpected_examples"]:
        print(f"  unexpected: {example}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, help="a repository to serve (default: a generated tree of --files)")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    from codesearch import CodeSearch

    with tempfile.TemporaryDirectory(prefix="cs-mcp-load-") as scratch:
        repo = args.repo or make_tree(Path(scratch) / "tree", args.files)
        index_dir = Path(scratch) / "index"
        report = CodeSearch(repo, model=None, index_dir=index_dir).index()
        (index_dir / "LOCK").unlink(missing_ok=True)
        result = run_load(repo, index_dir, clients=args.clients, calls=args.calls, timeout=args.timeout)
        result["files"] = report.files
    print_table(result)
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["sessions_lost"] == result["calls_lost"] == result["unexpected"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
