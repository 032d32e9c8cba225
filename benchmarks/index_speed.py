"""Full index time against an earlier codesearch, side by side on the DEV repositories.

Usage:
    python -m benchmarks.index_speed --semble-benchmarks SEMBLE/benchmarks --mirrors MIRRORS
        --baseline-src OLD_CHECKOUT [--trees DIR] [--repos chi,gson] [--rounds 1] [--json OUT]

``--baseline-src`` is a checkout of an earlier codesearch (for the ranking
issue: commit 26486c0, the session-2 default) with its Cython chunker built in
place (``python setup.py build_ext --inplace``); it runs with this
environment's packages and its own code first on ``PYTHONPATH``. Each
repository is indexed from an empty index folder by the baseline (int8) and by
this checkout (its default: static tier plus int8 transformer tier), and with
``--baseline-fp32`` also by the baseline with fp32 (its default then), in
separate processes, alternating, with every model exported beforehand; the
wall time of ``index()`` counts. JSON keys: ``baseline_s``, ``current_s``,
``baseline_fp32_s`` (totals), ``ratio``, ``ratio_fp32``, ``repos``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import dev_arguments, table
from benchmarks.peer_data import DEV_REPOSITORIES, export_trees, load_repos

_TIMER = """
import json, sys, time
from codesearch import CodeSearch
cs = CodeSearch(sys.argv[1], index_dir=sys.argv[2], int8=sys.argv[3] == "int8")
cs.embedder
getattr(cs, "static_embedder", None)
started = time.perf_counter()
report = cs.index()
import codesearch
print(json.dumps({"seconds": time.perf_counter() - started, "chunks": report.chunks, "code": codesearch.__file__}))
"""


def timed_index(root: Path, src: Path | None, export: str = "int8") -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory(prefix="cs-index-speed-") as scratch:
        # Run from the scratch folder: `python -c` puts the working directory first on sys.path, and here
        # that would import this checkout ahead of the baseline on PYTHONPATH.
        proc = subprocess.run([sys.executable, "-c", _TIMER, str(root), str(Path(scratch) / "index"), export],
                              capture_output=True, text=True, env=env, cwd=scratch)
    if proc.returncode != 0:
        raise SystemExit(f"error: indexing {root} failed:\n{proc.stderr[-1500:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    dev_arguments(parser)
    parser.add_argument("--baseline-src", type=Path, required=True)
    parser.add_argument("--repos", default=",".join(DEV_REPOSITORIES))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--baseline-fp32", action="store_true", help="also time the baseline's fp32 (its default)")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)

    repos = load_repos(args.semble_benchmarks, [n.strip() for n in args.repos.split(",") if n.strip()])
    export_trees(repos, args.mirrors, args.trees)
    baseline_code = timed_index(repos[0].root, args.baseline_src)["code"]  # every export made before any timing
    current_code = timed_index(repos[0].root, None)["code"]
    if Path(str(baseline_code)).resolve().parent.parent != args.baseline_src.resolve():
        raise SystemExit(f"error: the baseline ran {baseline_code}, not the code under {args.baseline_src}")
    print(f"baseline: {baseline_code}\ncurrent: {current_code}", file=sys.stderr)
    if args.baseline_fp32:
        timed_index(repos[0].root, args.baseline_src, "fp32")
    per_repo = {}
    for repo in repos:
        base, cur, fp32 = [], [], []
        for _ in range(args.rounds):
            base.append(timed_index(repo.root, args.baseline_src))
            cur.append(timed_index(repo.root, None))
            if args.baseline_fp32:
                fp32.append(timed_index(repo.root, args.baseline_src, "fp32"))
        per_repo[repo.name] = {
            "baseline_s": min(b["seconds"] for b in base), "current_s": min(c["seconds"] for c in cur),
            "baseline_chunks": base[0]["chunks"], "current_chunks": cur[0]["chunks"],
            **({"baseline_fp32_s": min(f["seconds"] for f in fp32)} if fp32 else {}),
        }
        print(f"{repo.name}: {per_repo[repo.name]}", file=sys.stderr)
    baseline = sum(v["baseline_s"] for v in per_repo.values())
    current = sum(v["current_s"] for v in per_repo.values())
    rows = [[n, f"{v['baseline_s']:.1f}", f"{v['current_s']:.1f}", f"{v['current_s'] / v['baseline_s']:.2f}",
             v["baseline_chunks"], v["current_chunks"]] for n, v in per_repo.items()]
    rows.append(["total", f"{baseline:.1f}", f"{current:.1f}", f"{current / baseline:.2f}",
                 sum(v["baseline_chunks"] for v in per_repo.values()),
                 sum(v["current_chunks"] for v in per_repo.values())])
    print(table(["repo", "baseline s", "current s", "ratio", "baseline chunks", "current chunks"], rows))
    result = {"baseline_s": baseline, "current_s": current, "ratio": current / baseline, "repos": per_repo}
    if args.baseline_fp32:
        fp32_total = sum(v["baseline_fp32_s"] for v in per_repo.values())
        result.update(baseline_fp32_s=fp32_total, ratio_fp32=current / fp32_total)
        print(f"baseline fp32 (its default then): {fp32_total:.1f} s; current / baseline fp32 = {current / fp32_total:.2f}")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
