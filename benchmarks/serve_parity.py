"""`codesearch serve`'s API against the CLI's `--json` on semble's DEV queries: the same answers, query by query.

Usage:
    python -m benchmarks.serve_parity --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS [--trees DIR]
        [--repos chi,gson] [--per-repo 5] [--index-dir DIR] [--json OUT]

For each DEV repository (``peer_data``; trees exported as ``peer_benchmark.py`` does) the index is built once
(the transformer tier, in ``--index-dir/REPO``), then ``codesearch serve TREE --index-dir ...`` runs (read-only,
as served by default) and, for the repository's first ``--per-repo`` annotated queries (0: all),
``GET /api/search?q=QUERY`` is compared with ``codesearch search QUERY TREE --index-dir ... --json --no-refresh``
run in a new process: the whole JSON bodies are compared, scores to 1e-9 of their size (``exact`` counts the
answers equal to the last bit: the two processes may embed a query a rounding apart). Also
``/api/definitions`` against ``codesearch def`` for the
first word of each query that the index defines.

JSON keys: ``repos`` (per repository ``queries``, ``equal``, ``differences``), ``queries``, ``equal``, ``exact``,
``with_hits``, ``definitions``, ``definitions_equal``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import dev_arguments
from benchmarks.peer_data import DEV_REPOSITORIES, export_trees, load_repos
from benchmarks.serve_load import Client, start_server, stop_server
from codesearch import CodeSearch


def same_answer(api: Any, cli: Any) -> bool:
    """Equal JSON, scores equal to 1e-9 of their size: the API's process and the CLI's may embed a query a last bit
    apart (onnxruntime's rounding), which moves a fused score in its 17th digit and nothing else."""
    if isinstance(api, dict) and isinstance(cli, dict):
        return api.keys() == cli.keys() and all(
            math.isclose(api[k], cli[k], rel_tol=1e-9) if k == "score" and isinstance(api[k], float)
            else same_answer(api[k], cli[k]) for k in api)
    if isinstance(api, list) and isinstance(cli, list):
        return len(api) == len(cli) and all(same_answer(a, c) for a, c in zip(api, cli))
    return bool(api == cli)


def cli_json(*args: str) -> Any:
    """``codesearch ARGS --json`` in a new process, its parsed output."""
    done = subprocess.run([sys.executable, "-m", "codesearch.faces.cli", *args, "--json"], capture_output=True,
                          text=True, check=False, env=dict(os.environ, PYTHONUNBUFFERED="1"), timeout=300)
    if done.returncode != 0:
        return {"exit": done.returncode, "stderr": done.stderr.strip()[-300:]}
    return json.loads(done.stdout)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    dev_arguments(parser)
    parser.add_argument("--repos", default=",".join(DEV_REPOSITORIES))
    parser.add_argument("--per-repo", type=int, default=5, help="queries per repository (0: all)")
    parser.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-serve-parity")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    repos = load_repos(args.semble_benchmarks, [n.strip() for n in args.repos.split(",") if n.strip()])
    export_trees(repos, args.mirrors, args.trees)
    out: dict[str, Any] = {"repos": {}}
    total = equal = exact = definitions = definitions_equal = with_hits = 0
    for repo in repos:
        index_dir = args.index_dir / repo.name
        shutil.rmtree(index_dir, ignore_errors=True)
        CodeSearch(repo.root, index_dir=index_dir).index()
        process, base = start_server([str(repo.root), "--index-dir", str(index_dir)])
        client = Client(base)
        differences: list[str] = []
        tasks = repo.tasks if args.per_repo == 0 else repo.tasks[: args.per_repo]
        try:
            for task in tasks:
                status, body = client.get("/api/search", q=task.query)
                api = json.loads(body) if status == 200 else {"status": status}
                cli = cli_json("search", task.query, str(repo.root), "--index-dir", str(index_dir), "--no-refresh")
                total += 1
                with_hits += bool(api.get("hits"))
                exact += api == cli
                if same_answer(api, cli):
                    equal += 1
                else:
                    differences.append(task.query)
                word = next((w for w in task.query.replace("(", " ").split() if w[:1].isupper()), None)
                if word is None:
                    continue
                status, body = client.get("/api/definitions", name=word)
                api_def = json.loads(body) if status == 200 else {"status": status}
                cli_def = cli_json("def", word, str(repo.root), "--index-dir", str(index_dir))
                definitions += 1
                definitions_equal += api_def == cli_def
        finally:
            client.close()
            stop_server(process)
        out["repos"][repo.name] = {"queries": len(tasks), "equal": len(tasks) - len(differences),
                                   "differences": differences}
        print(f"{repo.name}: {len(tasks) - len(differences)}/{len(tasks)} search answers equal", file=sys.stderr)
    out.update(queries=total, equal=equal, exact=exact, with_hits=with_hits, definitions=definitions,
               definitions_equal=definitions_equal)
    print(f"\n/api/search equal to `codesearch search --json` on {equal} of {total} DEV queries "
          f"({len(repos)} repositories; {with_hits} with hits; {exact} equal to the last bit of every score); "
          "/api/definitions equal to `codesearch def --json` on "
          f"{definitions_equal} of {definitions}")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0 if equal == total and definitions_equal == definitions else 1


if __name__ == "__main__":
    sys.exit(main())
