"""A first answer from an earlier codesearch and from this one, alternated: the no-regression check of a change.

Usage:
    python -m benchmarks.first_answer_versions --baseline-src OLD_CHECKOUT [--baseline-module codesearch.cli]
        TREE [TREE ...] [--rounds 7] [--query "where are errors reported"] [--json OUT]

``OLD_CHECKOUT`` is a checkout of an earlier codesearch with its Cython extensions built in place; it runs with this
environment's packages and its own code first on ``PYTHONPATH`` (its command-line module was ``codesearch.cli``
before the faces package). For each tree, ``codesearch search QUERY TREE --json --index-dir EMPTY`` runs in a new
process (process start, scan, chunking, the static tier and the answer: what a first search costs), the baseline and
this checkout in turn, ``--rounds`` times; the median counts. Processes start in a neutral folder so neither side's
checkout shadows the other's. JSON keys: ``trees`` (per tree ``baseline_s``, ``current_s``, ``ratio``),
``max_ratio``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import ROOT, table


def first_answer_s(src: Path, module: str, tree: Path, query: str) -> float:
    """Wall seconds of one ``search`` in a new process with ``src`` first on ``PYTHONPATH`` and an empty index."""
    index = Path(tempfile.mkdtemp(prefix="codesearch-first-"))
    try:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", module, "search", query, str(tree), "--json", "--index-dir",
                               str(index)], env=dict(os.environ, PYTHONPATH=str(src)), cwd=tempfile.gettempdir(),
                              capture_output=True, text=True, check=False, timeout=600)
        seconds = time.perf_counter() - started
    finally:
        shutil.rmtree(index, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit(f"error: {module} from {src} failed on {tree}: {done.stderr.strip()[-300:]}")
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--baseline-src", type=Path, required=True)
    parser.add_argument("--baseline-module", default="codesearch.cli")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--query", default="where are errors reported")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    sides = {"baseline": (args.baseline_src.resolve(), args.baseline_module),
             "current": (ROOT, "codesearch.faces.cli")}
    out: dict[str, Any] = {"trees": {}}
    for tree in args.trees:
        times: dict[str, list[float]] = {side: [] for side in sides}
        for _ in range(args.rounds):
            for side, (src, module) in sides.items():
                times[side].append(first_answer_s(src, module, tree, args.query))
        baseline, current = (statistics.median(times[s]) for s in ("baseline", "current"))
        out["trees"][str(tree)] = {"baseline_s": baseline, "current_s": current, "ratio": current / baseline}
    out["max_ratio"] = max(t["ratio"] for t in out["trees"].values())
    print(table(["tree", "baseline s", "current s", "ratio"],
                [[Path(t).name, f"{v['baseline_s']:.3f}", f"{v['current_s']:.3f}", f"{v['ratio']:.3f}"]
                 for t, v in out["trees"].items()]))
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
