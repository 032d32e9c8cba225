"""How fresh a search is: the stat pass before each search, and the time from an edit to a search that sees it.

Usage:
    python benchmarks/freshness.py [--files 10000] [--repo DIR] [--rounds 5] [--json OUT]

1. A generated tree of ``--files`` Python files (100 per folder), its folders
   dated a minute back: the stat pass (:func:`codesearch.scan.changed_files`
   against the recorded stats) with nothing changed, median of ``--rounds``;
   goal <= 100 ms at 10,000 files. Timed both ways: the default, which stats
   the known files alone while no folder or ignore file changed
   (``stat_pass_ms``), and the full walk it falls back to (``walk_ms``).
2. ``--repo`` (default: the generated tree) indexed in full (int8): one function
   is edited, then ``search`` runs with its refresh; wall seconds from the
   write to the answer that holds the edit, median of ``--rounds`` edits;
   goal < 1 s.

3. The stat pass a long-lived searcher runs (prepared once per index) against a
   bare ``os.stat`` loop over the same absolute paths in the same run, over the
   files alone and over files and folders (the pass stats both); goal: within
   1.3x of the files-only loop.

JSON keys: ``stat_pass_ms``, ``walk_ms``, ``files``, ``edit_to_search_s``, ``refreshed``, ``repo``, ``floor``
(``floor_ms``, ``floor_dirs_ms``, ``pass_ms``, ``ratio``, ``ratio_dirs``, ``pass_python_ms``, ``ratio_python``,
``one_shot_ms``, ``files``, ``folders``, ``backend``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from codesearch import CodeSearch
from codesearch.files import changed_files, scan
from codesearch.scope import kind_of


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


def edit_to_search(repo: Path, index_dir: Path, rounds: int) -> tuple[float, list[int]]:
    cs = CodeSearch(repo, index_dir=index_dir)
    cs.index()
    sources = [p for p in sorted(repo.rglob("*")) if p.suffix in (".py", ".java", ".go", ".rs", ".ts", ".js", ".c")
               and kind_of(p.relative_to(repo).as_posix()) == "source"]
    target = max(sources, key=lambda p: p.stat().st_size)
    original = target.read_text()
    timings, refreshed = [], []
    try:
        for n in range(rounds):
            marker = f"freshmarker{n}x{os.getpid()}"
            started = time.perf_counter()
            target.write_text(_edit(original, target.suffix, marker))
            hits = cs.search(marker, k=1)
            timings.append(time.perf_counter() - started)
            assert hits and marker in hits[0].text, (marker, hits[:1])
            assert cs.last_search is not None
            refreshed.append(cs.last_search.refreshed)
    finally:
        target.write_text(original)
    return statistics.median(timings), refreshed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--repo", type=Path, help="a repository to edit (default: the generated tree)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cs-freshness-") as scratch:
        tree = make_tree(Path(scratch) / "tree", args.files)
        ms, walk_ms, files = stat_pass_ms(tree, args.rounds)
        print(f"stat pass, nothing changed: {ms:.1f} ms over {files:,} files, {walk_ms:.1f} ms walking every "
              f"folder (median of {args.rounds})")
        floor = stat_pass_against_floor(tree, max(args.rounds, 7))
        print_floor("the generated tree", floor)
        repo = args.repo or tree
        seconds, refreshed = edit_to_search(repo, Path(scratch) / "index", args.rounds)
        print(f"edit one function -> a search that sees it: {seconds:.3f} s (median of {args.rounds}; {repo})")
    if args.json_out:
        args.json_out.write_text(json.dumps({"stat_pass_ms": ms, "walk_ms": walk_ms, "files": files, "edit_to_search_s": seconds,
                                             "refreshed": refreshed, "repo": str(repo), "floor": floor}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
