"""codesearch and semble on one large tree at growing sizes (~10k to ~270k chunks), in one run per size.

Usage:
    python -m benchmarks.monorepo prepare --dest DATA [--mirrors /work/.mirror] [--sizes 10000,30000,90000,270000]
    python -m benchmarks.monorepo run --data DATA --sizes 10000 --semble-python VENV/bin/python
        [--semble-model DIR] [--transformer/--no-transformer] [--max-transformer-chunks N]
        [--rounds 3] [--latency-runs 3] [--json OUT] [--plot OUT.png]

``prepare`` exports whole repositories from their git mirrors (``MIRRORS/OWNER+NAME/repo``,
what the session's ``fetch`` makes) into ``DATA/base/OWNER+NAME``, counts each one's
chunks with codesearch's own chunker (the count ``codesearch stats`` gives) and
hashes every chunk text, then composes each size ``DATA/size-N`` from whole
repositories in a fixed order (``REPOSITORIES``: the 18 DEV repositories, then
large ones that semble's benchmark does not hold), each taken when it still fits
the target (+10%). Where the real repositories run out, replicas of them follow in
the same order under ``copy-2/``, ``copy-3/`` ...; the output says so, and records
the share of unique chunk texts (a replica repeats every text; the model input
also holds the path, so an index keyed by it embeds replicas again). Sizes are
hard-linked copies (``cp -al``) of ``base``. Nothing fetched is committed.

``run`` measures, per size, codesearch and semble side by side:

- first answer: a new process with an empty index cache (models on disk on both
  sides, as after installing) runs ``codesearch search QUERY ROOT --json`` (the
  static tier answers first) and ``semble search QUERY ROOT -k 10``, alternating,
  ``--rounds`` times (median); wall seconds with process start, the peak RSS of
  that process (``os.wait4``'s ``ru_maxrss``: what ``/usr/bin/time -v`` prints as
  "Maximum resident set size"; the largest single process) and the peak of the
  whole process tree's summed RSS, sampled every 20 ms with psutil (semble's CLI
  chunks in 4 worker processes on large trees), and CPU seconds (user + system,
  children included), and when the answer reached stdout (semble's CLI saves its
  index after printing it, inside the process's wall time);
- transformer tier: ``codesearch index ROOT`` on top of that static index, wall
  seconds and peak RSS (semble has none); ``--no-transformer`` or more chunks
  than ``--max-transformer-chunks`` skip it, and the later steps then run on the
  static tier;
- open: in a new serving process, the first keyword search of the stored index
  (``refresh=False``) minus the median of the same search repeated: reading the
  index from disk and building what a query needs, models excluded (``model_load_s``
  is the first hybrid search minus the warm one). For semble: ``SembleIndex.load_from_disk``
  after its model was loaded (semble caches the loaded model), and its cache
  check (``get_validated_cache``: walk and stat every file) apart;
- warm queries: ``QUERIES`` (30 questions and identifiers over the tree's
  languages, speed only), ``--latency-runs`` each, p50/p95 over every timing:
  codesearch with the stat pass (``refresh=True``), without it (``refresh=False``)
  alternating, and with ``watch=True`` in its own process when the constructor
  has that argument; semble's ``SembleIndex.search`` (no freshness check; its MCP
  server revalidates with ``get_validated_cache`` at most every 3x build time,
  timed as ``revalidate_ms``);
- the stat pass against its floor: ``cs.changes()`` (nothing changed) against a
  bare ``os.stat`` loop over the index's files in the same process,
  alternating, median of 7 each;
- serving RSS: the RSS of that serving process after the warm queries;
- index size on disk: codesearch's index folder; semble's cache folder (semble
  0.7 saves its index there after the CLI's first answer);
- per chunk: each number over the chunks each system indexed.

Prints a table per size and a per-chunk table; ``--json`` writes every number
(``sizes[N][system][metric]``, ``per_chunk``, ``composition``); ``--plot`` a PNG
of peak RSS and first-answer time against chunks for both systems.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._harness import (
    folder_bytes,
    median_ms,
    percentile,
    proc_status,
    script_command,
    script_env,
    table,
)

BENCHMARKS = Path(__file__).resolve().parent

# The union's repositories, in the order sizes take them: the 18 DEV repositories (whole), then large public
# repositories outside semble's benchmark, chosen for a mix of languages (go, python, typescript, rust, c, java).
# django/django, golang/go, microsoft/TypeScript, scikit-learn, godot and nestjs exceed the fetch limit (500 MiB).
DEV_MIRRORS: tuple[str, ...] = (
    "reduxjs+redux", "go-chi+chi", "google+gson", "Seldaek+monolog", "rack+rack", "tokio-rs+axum", "trpc+trpc",
    "DapperLib+Dapper", "ktorio+ktor", "circe+circe", "SnapKit+SnapKit", "fmtlib+fmt", "elixir-plug+plug",
    "libuv+libuv", "bats-core+bats-core", "xmonad+xmonad", "folke+lazy.nvim", "Hejsil+zig-clap",
)  # fmt: skip
LARGE_MIRRORS: tuple[str, ...] = (
    "prometheus+prometheus", "vuejs+core", "sphinx-doc+sphinx", "rust-lang+cargo", "python+mypy", "git+git",
    "spring-projects+spring-framework",
)  # fmt: skip
REPOSITORIES = DEV_MIRRORS + LARGE_MIRRORS
DEFAULT_SIZES = (10_000, 30_000, 90_000, 270_000)
FIT = 1.10  # a repository joins a size while the size stays within 10% above its target; a size is done at 1/FIT
COUNTS_FILE = "counts.json"
SIZES_FILE = "sizes.json"


# -- prepare ---------------------------------------------------------------------------


def export_repository(mirror: Path, dest: Path) -> dict[str, Any]:
    """Export the newest commit of the bare repository ``mirror`` into ``dest`` (kept when already exported).

    ``git archive`` stops at the first blob a snapshot mirror lacks (its largest files may be absent), so blobs
    are read one by one with ``git cat-file --batch`` and the missing ones left out and counted. Symbolic links
    and submodules are left out too (neither system follows links by default).

    Returns:
        ``{"revision", "missing_blobs", "left_out_links"}``; the revision is also written beside the tree
        as ``dest.name + ".revision"``.
    """
    stamp = dest.with_name(dest.name + ".revision")
    git = ["git", "--git-dir", str(mirror)]
    head = subprocess.check_output([*git, "rev-parse", "HEAD"], text=True).strip()
    if dest.is_dir() and stamp.is_file():
        stored = json.loads(stamp.read_text())
        if stored.get("revision") == head:
            return stored
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    blobs: list[tuple[str, str, str]] = []  # (sha, mode, path)
    links = 0
    for entry in subprocess.check_output([*git, "ls-tree", "-r", "-z", head]).split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        mode, kind, sha = meta.decode().split()
        if kind == "blob" and mode in ("100644", "100755"):
            blobs.append((sha, mode, os.fsdecode(path)))
        else:
            links += 1
    proc = subprocess.Popen([*git, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    feeder = threading.Thread(target=_feed, args=(proc.stdin, [sha for sha, _, _ in blobs]), daemon=True)
    feeder.start()
    missing = 0
    for _, mode, path in blobs:
        header = proc.stdout.readline().split()
        if len(header) < 3 or header[1] != b"blob":
            missing += 1
            continue
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)  # the newline after each object
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        if mode == "100755":
            target.chmod(0o755)
    feeder.join()
    proc.stdout.close()
    proc.wait()
    facts = {"revision": head, "missing_blobs": missing, "left_out_links": links}
    stamp.write_text(json.dumps(facts))
    return facts


def _feed(stdin: Any, shas: Sequence[str]) -> None:
    for sha in shas:
        stdin.write(f"{sha}\n".encode())
    stdin.close()


def _cut_file():  # type: ignore[no-untyped-def]
    """codesearch's definition chunker (the one its index and ``codesearch stats`` use)."""
    from codesearch.chunking.definitions import cut_file

    return cut_file


def count_chunks(root: Path) -> tuple[dict[str, Any], list[int]]:
    """Chunk every file under ``root`` as an index would; counts and a 64-bit hash of each chunk's text.

    Returns:
        ``{"files", "bytes", "chunks", "languages": {name: chunks}}`` and the chunk text hashes, in scan order.
    """
    from codesearch.files import scan

    cut_file = _cut_file()
    result = scan(root)
    languages: Counter[str] = Counter()
    digests: list[int] = []
    for source in result.files:
        cut = cut_file(source.path, source.text)
        languages[cut.language or "other"] += len(cut.chunks)
        digests.extend(int.from_bytes(hashlib.blake2b(c.text.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                                      "little") for c in cut.chunks)
    facts = {"files": len(result.files), "bytes": result.bytes, "chunks": len(digests),
             "languages": dict(languages.most_common())}
    return facts, digests


@dataclass
class Size:
    """One size of the union: the whole repositories it holds (a replica's folder is ``copy-N/OWNER+NAME``)."""

    target: int
    folders: list[str] = field(default_factory=list)
    chunks: int = 0

    @property
    def replicas(self) -> int:
        """How many folders are replicas of a real repository."""
        return sum(1 for f in self.folders if f.startswith("copy-"))


def compose(target: int, counts: dict[str, int], order: Sequence[str] = REPOSITORIES, max_copies: int = 50) -> Size:
    """Take whole repositories in ``order`` while the total stays within ``FIT`` of ``target``; replicas after.

    Replicas (``copy-2/NAME``, ``copy-3/NAME`` ...) repeat the real repositories in the same order and are
    taken by the same rule, once every real one has been offered.
    """
    size = Size(target)
    for copy in range(1, max_copies + 1):
        for name in order:
            chunks = counts.get(name, 0)
            if chunks and size.chunks + chunks <= target * FIT:
                size.folders.append(name if copy == 1 else f"copy-{copy}/{name}")
                size.chunks += chunks
            if size.chunks >= target / FIT:
                return size
    return size


def unique_share(folders: Sequence[str], digests: dict[str, Sequence[int]]) -> float:
    """Share of distinct chunk texts among all chunks of ``folders``."""
    seen: set[int] = set()
    total = 0
    for folder in folders:
        these = digests[folder.split("/")[-1]]
        seen.update(these)
        total += len(these)
    return len(seen) / total if total else 1.0


def materialise(size: Size, base: Path, dest: Path) -> None:
    """Hard-link each folder of ``size`` from ``base`` into ``dest`` (``cp -al``), dropping any other folder."""
    wanted = set(size.folders)
    if dest.is_dir():
        present = {p.relative_to(dest).as_posix() for p in dest.iterdir() if not p.name.startswith("copy-")}
        present |= {p.relative_to(dest).as_posix() for p in dest.glob("copy-*/*")}
        for stale in present - wanted:
            shutil.rmtree(dest / stale)
        for copy in dest.glob("copy-*"):
            if not any(copy.iterdir()):
                copy.rmdir()
    for folder in size.folders:
        target = dest / folder
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["cp", "-al", str(base / folder.split("/")[-1]), str(target)], check=True)


def prepare(dest: Path, mirrors: Path, sizes: Sequence[int], names: Sequence[str] = REPOSITORIES) -> dict[str, Any]:
    """Export, count and compose: ``DEST/base/NAME``, ``DEST/base/counts.json``, ``DEST/size-N``, ``DEST/sizes.json``.

    Returns:
        What ``sizes.json`` holds: per size its folders, chunks, replicas and unique text share, and the counts.
    """
    base = dest / "base"
    base.mkdir(parents=True, exist_ok=True)
    counts_path = base / COUNTS_FILE
    known = json.loads(counts_path.read_text()) if counts_path.is_file() else {}
    digests: dict[str, list[int]] = {}
    for name in names:
        mirror = mirrors / name / "repo"
        if not mirror.is_dir():
            print(f"{name}: no mirror at {mirror}; left out (fetch it first)", file=sys.stderr)
            continue
        exported = export_repository(mirror, base / name)
        digest_file = base / f"{name}.digests"
        if known.get(name, {}).get("revision") == exported["revision"] and digest_file.is_file():
            digests[name] = [int(x, 16) for x in digest_file.read_text().split()]
            continue
        print(f"{name}: counting chunks ...", file=sys.stderr)
        facts, digests[name] = count_chunks(base / name)
        digest_file.write_text("\n".join(f"{d:016x}" for d in digests[name]))
        known[name] = {**exported, **facts}
        counts_path.write_text(json.dumps(known, indent=2))
    counts = {name: known[name]["chunks"] for name in names if name in digests}
    out: dict[str, Any] = {"repositories": {name: known[name] for name in counts}, "sizes": {}}
    for target in sizes:
        size = compose(target, counts, [n for n in names if n in counts])
        materialise(size, base, dest / f"size-{target}")
        out["sizes"][str(target)] = {"folders": size.folders, "chunks": size.chunks, "replicas": size.replicas,
                                     "unique_text_share": unique_share(size.folders, digests),
                                     "languages": _languages(size, known)}
    (dest / SIZES_FILE).write_text(json.dumps(out, indent=2))
    return out


def _languages(size: Size, known: dict[str, Any]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for folder in size.folders:
        total.update(known[folder.split("/")[-1]]["languages"])
    return dict(total.most_common())


# -- measuring a process -------------------------------------------------------------------

# Questions and identifiers over the union's languages; speed only, so no relevance labels.
QUERIES: tuple[str, ...] = (
    "where are HTTP request headers parsed",
    "middleware that recovers from panics",
    "how a router matches a path with parameters",
    "serialize an object to JSON with a custom type adapter",
    "TypeAdapter",
    "log record formatter with context",
    "rack middleware that handles sessions",
    "extract typed path parameters from a request",
    "Router",
    "subscribe to store changes and unsubscribe",
    "dispatch an action to the reducer",
    "map query results to objects",
    "websocket session close reason",
    "decode json into a case class",
    "make constraints for a view's edges",
    "format a floating point number with precision",
    "uv_loop_init",
    "run a test file and report failures",
    "manage window layout in a tiling window manager",
    "lazy load a plugin on an event",
    "parse command line flags",
    "scrape targets and store time series samples",
    "PromQL query evaluation engine",
    "reactive effect tracking dependencies",
    "resolve a cross reference to a documentation object",
    "resolve dependencies from the registry lockfile",
    "type check a function call with overloads",
    "SemanticAnalyzer",
    "read an object from the packed object database",
    "bean definition registry post processor",
)  # fmt: skip
FIRST_QUERY = QUERIES[0]
TOP_K = 10
MiB = 1 << 20


@dataclass(frozen=True)
class Measured:
    """One finished process: wall seconds (start included), when its stdout began, CPU seconds, its peak RSS and its
    process tree's, in bytes.

    ``peak_rss`` is ``os.wait4``'s ``ru_maxrss``, the number ``/usr/bin/time -v`` prints as "Maximum resident set
    size": the largest single process among it and the children it waited for. ``tree_peak_rss`` is the largest
    sum of RSS over the process and all its descendants, sampled every ``interval`` seconds, and never less than
    ``peak_rss`` (sampling can miss a short peak). ``cpu_s`` is user + system time of the process and its children:
    on shared cores it varies less than wall time, and it shows work spread over worker processes.
    """

    seconds: float
    first_output_s: float
    cpu_s: float
    peak_rss: int
    tree_peak_rss: int
    stdout: str
    stderr: str


class _TreeSampler(threading.Thread):
    def __init__(self, pid: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak = pid, interval, 0
        self.done = threading.Event()

    def run(self) -> None:
        import psutil

        try:
            top = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self.done.is_set():
            total = 0
            try:
                for proc in [top, *top.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):  # a child that ended between the two calls
                        total += proc.memory_info().rss
            except psutil.Error:
                return
            self.peak = max(self.peak, total)
            self.done.wait(self.interval)


def measure(command: Sequence[str], env: dict[str, str], *, input_text: str | None = None,
            interval: float = 0.02) -> Measured:
    """Run ``command`` to its end; wall time, CPU time, peak RSS (``wait4``) and sampled process-tree peak RSS.

    The child's Python output is unbuffered, so ``first_output_s`` is when its answer reached stdout: semble's
    CLI prints its answer and then saves its index, which the process's wall time includes.

    Raises:
        SystemExit: the command failed (its stderr's tail is in the message).
    """
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=err, env={**env, "PYTHONUNBUFFERED": "1"})
        sampler = _TreeSampler(proc.pid, interval)
        sampler.start()
        reader = _Reader(proc.stdout)
        reader.start()
        if input_text is not None:
            assert proc.stdin is not None
            proc.stdin.write(input_text.encode())
            proc.stdin.close()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.done.set()
        sampler.join()
        reader.join()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(command[:4])} ... exited {proc.returncode}:\n{stderr[-2000:]}")
    peak = usage.ru_maxrss * 1024
    first_output = (reader.first_at - started) if reader.first_at is not None else seconds
    return Measured(seconds, first_output, usage.ru_utime + usage.ru_stime, peak, max(peak, sampler.peak),
                    reader.text(), stderr)


class _Reader(threading.Thread):
    """Reads a pipe to its end; notes when the first byte came."""

    def __init__(self, pipe: Any) -> None:
        super().__init__(daemon=True)
        self.pipe, self.parts, self.first_at = pipe, [], None

    def run(self) -> None:
        while chunk := self.pipe.read1(1 << 16):
            if self.first_at is None:
                self.first_at = time.perf_counter()
            self.parts.append(chunk)
        self.pipe.close()

    def text(self) -> str:
        return b"".join(self.parts).decode(errors="replace")


def read_tree(root: Path) -> int:
    """Read every file under ``root`` once, so that neither side's timing pays cold disk reads; bytes read."""
    total = 0
    for folder, _, files in os.walk(root):
        for name in files:
            try:
                with open(os.path.join(folder, name), "rb") as handle:
                    while chunk := handle.read(1 << 20):
                        total += len(chunk)
            except OSError:
                pass
    return total


# -- the two systems ---------------------------------------------------------------------------


def warm_cache_models() -> Path:
    """The models folder of codesearch's cache (``$CODESEARCH_CACHE_DIR`` or the user cache): ``<cache>/models``."""
    env = os.environ.get("CODESEARCH_CACHE_DIR")
    if env:
        return Path(env).expanduser() / "models"
    import platformdirs

    return Path(platformdirs.user_cache_dir("codesearch")) / "models"


class CodesearchSide:
    """codesearch through its CLI (first answer, transformer tier) and a serving process (``_serve`` below).

    Args:
        model: the model name for ``--model`` (``None``: keyword-only, no tiers of vectors).
        models: the warm cache's models folder, linked into every fresh cache as ``<cache>/models``.
    """

    name = "codesearch"

    def __init__(self, model: str | None, models: Path) -> None:
        self.model = model
        self.models = models
        script = Path(sys.executable).with_name("codesearch")
        self.cli = [str(script)] if script.is_file() else [sys.executable, "-m", "codesearch.faces.cli"]

    def _env(self, cache: Path) -> dict[str, str]:
        cache.mkdir(parents=True, exist_ok=True)
        if self.models.is_dir() and not (cache / "models").exists():
            (cache / "models").symlink_to(self.models, target_is_directory=True)
        return {**os.environ, "CODESEARCH_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}

    def _model_args(self, search: bool = False) -> list[str]:
        """``--model``; a keyword-only search also needs ``--mode bm25``."""
        return ["--model", self.model] if self.model else ["--model", "none", *(["--mode", "bm25"] if search else [])]

    def index_dir(self, cache: Path) -> Path:
        return cache / "index"

    def warm_up(self, scratch: Path) -> None:
        """Export and distil the models into the warm cache if they are missing, outside every timing."""
        tree = scratch / "warm-up-tree"
        tree.mkdir(parents=True, exist_ok=True)
        (tree / "hello.py").write_text("def hello(name):\n    \"\"\"Greet someone.\"\"\"\n    return f'hello {name}'\n")
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        index = ["--index-dir", str(scratch / "warm-up-index")]
        measure([*self.cli, "search", "greet", str(tree), "--json", *index, *self._model_args(search=True)], env)
        if self.model is not None:
            measure([*self.cli, "index", str(tree), "--quiet", "--json", *index, *self._model_args()], env)

    def first_answer(self, root: Path, query: str, cache: Path) -> dict[str, Any]:
        """``codesearch search QUERY ROOT --json`` with an empty index cache (models linked in)."""
        run = measure([*self.cli, "search", query, str(root), "--json", "--index-dir", str(self.index_dir(cache)),
                       *self._model_args(search=True)], self._env(cache))
        answer = json.loads(run.stdout)
        return {"seconds": run.seconds, "output_s": run.first_output_s, "cpu_s": run.cpu_s, "peak_rss": run.peak_rss,
                "tree_peak_rss": run.tree_peak_rss, "tier": answer.get("tier"), "hits": len(answer.get("hits", []))}

    def transformer(self, root: Path, cache: Path) -> dict[str, Any]:
        """``codesearch index ROOT`` over the first answer's static index: the transformer tier added."""
        run = measure([*self.cli, "index", str(root), "--quiet", "--json", "--index-dir", str(self.index_dir(cache)),
                       *self._model_args()], self._env(cache))
        report = json.loads(run.stdout)
        return {"seconds": run.seconds, "cpu_s": run.cpu_s, "peak_rss": run.peak_rss, "tree_peak_rss": run.tree_peak_rss,
                "embedded": report.get("embedded"), "tier": report.get("tier")}

    def supports_watch(self) -> bool:
        import inspect

        from codesearch import CodeSearch

        return "watch" in inspect.signature(CodeSearch).parameters

    def serve(self, root: Path, cache: Path, queries: Sequence[str], runs: int, *, watch: bool = False) -> dict[str, Any]:
        """A new process opens the stored index, answers warm queries and reports (see :func:`serve_codesearch`)."""
        job = {"root": str(root), "index_dir": str(self.index_dir(cache)), "model": self.model, "queries": list(queries),
               "latency_runs": runs, "watch": watch}
        run = measure([*script_command("monorepo"), "_serve"], script_env(self._env(cache)),
                      input_text=json.dumps(job))
        return {**json.loads(run.stdout.strip().splitlines()[-1]), "index_bytes": folder_bytes(self.index_dir(cache))}


class SembleSide:
    """semble 0.7 through its CLI (first answer) and ``semble_runner.py``'s serving job, in semble's environment."""

    name = "semble"

    def __init__(self, python: str, model: Path) -> None:
        self.python = python
        self.model = model
        self.cli = str(Path(python).with_name("semble"))

    def first_answer(self, root: Path, query: str, cache: Path) -> dict[str, Any]:
        """``semble search QUERY ROOT -k 10`` with an empty cache; it saves its index there after answering."""
        env = {**os.environ, "SEMBLE_CACHE_LOCATION": str(cache), "SEMBLE_MODEL_NAME": str(self.model),
               "HF_HUB_OFFLINE": "1"}
        cache.mkdir(parents=True, exist_ok=True)
        run = measure([self.cli, "search", query, str(root), "-k", str(TOP_K)], env)
        answer = json.loads(run.stdout)
        return {"seconds": run.seconds, "output_s": run.first_output_s, "cpu_s": run.cpu_s, "peak_rss": run.peak_rss,
                "tree_peak_rss": run.tree_peak_rss, "hits": len(answer.get("results", []))}

    def serve(self, root: Path, cache: Path, queries: Sequence[str], runs: int) -> dict[str, Any]:
        job = {"kind": "serve", "model": str(self.model), "root": str(root), "cache": str(cache),
               "queries": list(queries), "latency_runs": runs, "top_k": TOP_K}
        run = measure([self.python, str(BENCHMARKS / "semble_runner.py")], {**os.environ, "HF_HUB_OFFLINE": "1"},
                      input_text=json.dumps(job))
        return json.loads(run.stdout.strip().splitlines()[-1])


def serve_codesearch(job: dict[str, Any]) -> dict[str, Any]:
    """The serving process: open the stored index, answer warm queries, time the stat pass against ``os.stat``.

    ``open_s`` is the first keyword search (``refresh=False``) less the median of the same search repeated:
    reading the index and building what a query needs, with no model loaded. ``model_load_s`` is the first
    search of the default mode less the warm one. Warm timings alternate ``refresh=True`` (the stat pass) and
    ``refresh=False``; with ``watch`` the searcher is built with ``watch=True`` and searched with its defaults.
    """
    started = time.perf_counter()
    from codesearch import CodeSearch

    out: dict[str, Any] = {"import_s": time.perf_counter() - started}
    model, queries, runs = job["model"], job["queries"], int(job["latency_runs"])
    options: dict[str, Any] = {"index_dir": job["index_dir"], "model": model}
    if job["watch"]:
        options["watch"] = True
    t0 = time.perf_counter()
    cs = CodeSearch(job["root"], **options)
    out["construct_s"] = time.perf_counter() - t0
    mode = "hybrid" if model else "bm25"
    t0 = time.perf_counter()
    cs.search(queries[0], k=TOP_K, mode="bm25", refresh=False)
    first = time.perf_counter() - t0
    out["open_s"] = first - median_ms(lambda: cs.search(queries[0], k=TOP_K, mode="bm25", refresh=False), 5) / 1000
    t0 = time.perf_counter()
    cs.search(queries[1], k=TOP_K, mode=mode, refresh=False)
    first = time.perf_counter() - t0
    out["model_load_s"] = first - median_ms(lambda: cs.search(queries[1], k=TOP_K, mode=mode, refresh=False), 5) / 1000
    for query in queries:  # one warm-up pass
        cs.search(query, k=TOP_K, mode=mode, refresh=False)
    out["tier"] = cs.last_search.tier if cs.last_search else None
    timings: dict[str, list[float]] = {"watch": []} if job["watch"] else {"refresh": [], "norefresh": []}
    for _ in range(runs):
        for query in queries:
            for name, values in timings.items():
                t0 = time.perf_counter()
                if name == "watch":
                    cs.search(query, k=TOP_K, mode=mode)
                else:
                    cs.search(query, k=TOP_K, mode=mode, refresh=name == "refresh")
                values.append((time.perf_counter() - t0) * 1000)
    out["timings_ms"] = timings
    out.update(proc_status())
    out["chunks"] = cs.info()["chunks"]
    if not job["watch"]:
        out.update(served_stat_pass(cs))
    return out


def served_stat_pass(cs: Any, rounds: int = 7) -> dict[str, Any]:
    """codesearch's stat pass (``cs.changes()``, nothing changed) against a bare ``os.stat`` loop over the index's
    files, alternating; medians in ms. ``stat_floor_dirs_ms`` also stats the folders the pass checks."""
    manifest = cs.store.read_manifest()
    root = str(cs.root.resolve())
    files = [os.path.join(root, p) for p in sorted({path for path, _, _ in cs.locations()})]
    folders = [os.path.join(root, p) for p in manifest.get("walk_stats") or {}]
    passes, floors, with_dirs = [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        changes = cs.changes()
        passes.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        for path in files:
            os.stat(path)
        floors.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        for path in files:
            os.stat(path)
        for path in folders:
            os.stat(path)
        with_dirs.append((time.perf_counter() - t0) * 1000)
    stat_pass, floor = statistics.median(passes), statistics.median(floors)
    return {"stat_pass_ms": stat_pass, "stat_floor_ms": floor, "stat_floor_dirs_ms": statistics.median(with_dirs),
            "stat_pass_ratio": stat_pass / floor if floor else None, "files": len(files), "folders": len(folders),
            "changed_files": len(changes)}


# -- one size, both systems --------------------------------------------------------------------


def quantiles(timings: Sequence[float]) -> tuple[float, float]:
    """The median and the 95th percentile of ``timings``."""
    return percentile(timings, 50), percentile(timings, 95)


def run_size(root: Path, cs: CodesearchSide, semble: Any, scratch: Path, *, rounds: int, runs: int,
             transformer: bool, max_transformer_chunks: int, queries: Sequence[str] = QUERIES) -> dict[str, Any]:
    """Every measurement of one size, both systems in this run; ``{"codesearch": {...}, "semble": {...}, "notes"}``."""
    notes: list[str] = []
    load_before = os.getloadavg()[0]
    read_tree(root)
    firsts: dict[str, list[dict[str, Any]]] = {cs.name: [], semble.name: []}
    caches: dict[str, Path] = {}
    for r in range(rounds):
        for side in (cs, semble) if r % 2 == 0 else (semble, cs):
            print(f"  first answer, round {r + 1}: {side.name} ...", file=sys.stderr)
            cache = scratch / f"{side.name}-{r}"
            firsts[side.name].append(side.first_answer(root, queries[0], cache))
            if side.name in caches:
                shutil.rmtree(caches[side.name], ignore_errors=True)
            caches[side.name] = cache

    ours: dict[str, Any] = _first_answer_metrics(firsts[cs.name])
    ours["first_answer_tier"] = firsts[cs.name][-1].get("tier")
    from codesearch import CodeSearch

    chunks = CodeSearch(root, index_dir=cs.index_dir(caches[cs.name]), model=cs.model).info()["chunks"]
    skip = ("keyword-only run (--model none)" if cs.model is None else "--no-transformer" if not transformer
            else f"{chunks} chunks > --max-transformer-chunks {max_transformer_chunks}"
            if chunks > max_transformer_chunks else None)
    if skip is None:
        print("  transformer tier: codesearch index ...", file=sys.stderr)
        tier = cs.transformer(root, caches[cs.name])
        ours.update(transformer_s=tier["seconds"], transformer_cpu_s=tier["cpu_s"], transformer_peak_rss=tier["peak_rss"],
                    transformer_tree_peak_rss=tier["tree_peak_rss"], transformer_embedded=tier["embedded"])
    else:
        ours.update(transformer_s=None, transformer_cpu_s=None, transformer_peak_rss=None, transformer_tree_peak_rss=None)
        notes.append(f"transformer tier not built ({skip}): codesearch's later numbers are of the static tier")

    print("  serving: codesearch ...", file=sys.stderr)
    served = cs.serve(root, caches[cs.name], queries, runs)
    p50, p95 = quantiles(served["timings_ms"]["refresh"])
    p50_plain, p95_plain = quantiles(served["timings_ms"]["norefresh"])
    ours.update(chunks=served["chunks"], tier=served["tier"], import_s=served["import_s"],
                construct_s=served["construct_s"], open_s=served["open_s"], model_load_s=served["model_load_s"],
                query_p50_ms=p50, query_p95_ms=p95, query_norefresh_p50_ms=p50_plain, query_norefresh_p95_ms=p95_plain,
                freshness_ms=served["stat_pass_ms"], stat_floor_ms=served["stat_floor_ms"],
                stat_floor_dirs_ms=served["stat_floor_dirs_ms"], freshness_over_floor=served["stat_pass_ratio"],
                files=served["files"], folders=served["folders"], serving_rss=served["rss"],
                serving_peak_rss=served["peak_rss"], index_bytes=served["index_bytes"])
    if cs.supports_watch():
        print("  serving: codesearch watch=True ...", file=sys.stderr)
        watched = cs.serve(root, caches[cs.name], queries, runs, watch=True)
        p50, p95 = quantiles(watched["timings_ms"]["watch"])
        ours.update(query_watch_p50_ms=p50, query_watch_p95_ms=p95, watch_serving_rss=watched["rss"])
    else:
        ours.update(query_watch_p50_ms=None, query_watch_p95_ms=None, watch_serving_rss=None)
        notes.append("CodeSearch has no watch argument yet: no watch=True timings")

    print("  serving: semble ...", file=sys.stderr)
    theirs: dict[str, Any] = _first_answer_metrics(firsts[semble.name])
    sserved = semble.serve(root, caches[semble.name], queries, runs)
    p50, p95 = quantiles(sserved["timings_ms"])
    theirs.update(chunks=sserved["chunks"], transformer_s=None, transformer_cpu_s=None, transformer_peak_rss=None,
                  transformer_tree_peak_rss=None,
                  import_s=sserved["import_s"], open_s=sserved["open_s"], model_load_s=sserved["model_load_s"],
                  validate_s=sserved["validate_s"], query_p50_ms=p50, query_p95_ms=p95,
                  freshness_ms=sserved["revalidate_ms"], stat_floor_ms=sserved["stat_floor_ms"],
                  freshness_over_floor=sserved["revalidate_ms"] / sserved["stat_floor_ms"] if sserved["stat_floor_ms"]
                  else None, files=sserved["files"], serving_rss=sserved["rss"], serving_peak_rss=sserved["peak_rss"],
                  index_bytes=sserved["index_bytes"])
    # The cores are shared: the 1-minute load average before and after says how quiet the run was.
    load = (load_before, os.getloadavg()[0])
    notes.append(f"load average {load[0]:.1f} before, {load[1]:.1f} after (on {os.cpu_count()} cores)")
    return {"root": str(root), "codesearch": ours, "semble": theirs, "notes": notes, "load_average": load}


def _first_answer_metrics(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    return {"first_answer_s": statistics.median([r["seconds"] for r in runs]),
            "first_answer_rounds_s": [r["seconds"] for r in runs],
            "first_answer_printed_s": statistics.median([r["output_s"] for r in runs]),
            "first_answer_cpu_s": statistics.median([r["cpu_s"] for r in runs]),
            "first_answer_peak_rss": int(statistics.median([r["peak_rss"] for r in runs])),
            "first_answer_tree_peak_rss": int(statistics.median([r["tree_peak_rss"] for r in runs])),
            "first_answer_hits": runs[-1]["hits"]}


# Metrics divided by each system's own chunk count.
PER_CHUNK = ("first_answer_s", "first_answer_cpu_s", "first_answer_peak_rss", "first_answer_tree_peak_rss", "transformer_s",
             "transformer_peak_rss", "transformer_tree_peak_rss", "open_s", "serving_rss", "index_bytes")


def per_chunk(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each ``PER_CHUNK`` metric over the system's chunks, per size; and, between consecutive sizes, the marginal
    cost: the metric's growth over the chunks' growth (the fixed cost of a process drops out)."""
    out: dict[str, Any] = {"per_chunk": {}, "marginal": {}}
    sizes = sorted(results, key=int)
    for size in sizes:
        out["per_chunk"][size] = {
            system: {m: (v[m] / v["chunks"] if v.get(m) is not None and v.get("chunks") else None) for m in PER_CHUNK}
            for system, v in ((s, results[size][s]) for s in ("codesearch", "semble"))}
    for low, high in itertools.pairwise(sizes):
        marginal = {}
        for system in ("codesearch", "semble"):
            a, b = results[low][system], results[high][system]
            grown = b["chunks"] - a["chunks"]
            marginal[system] = {m: ((b[m] - a[m]) / grown if a.get(m) is not None and b.get(m) is not None and grown
                                    else None) for m in PER_CHUNK}
        out["marginal"][f"{low}-{high}"] = marginal
    return out


# -- reporting ---------------------------------------------------------------------------------


def _fmt(value: Any, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "MiB":
        return f"{value / MiB:,.0f}"
    if unit == "int":
        return f"{value:,}"
    if unit == "x":
        return f"{value:.2f}"
    return f"{value:.3f}" if unit == "s" else f"{value:.2f}"


# (label, key, unit); a row's ratio is codesearch over semble.
SIZE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("chunks indexed", "chunks", "int"),
    ("first answer, s (CLI, process start included)", "first_answer_s", "s"),
    ("  the answer on stdout, s (semble saves its index after)", "first_answer_printed_s", "s"),
    ("  its CPU s (user + system, workers included)", "first_answer_cpu_s", "s"),
    ("  its peak RSS, MiB (largest process)", "first_answer_peak_rss", "MiB"),
    ("  its peak RSS, MiB (process tree, sampled)", "first_answer_tree_peak_rss", "MiB"),
    ("transformer tier, s", "transformer_s", "s"),
    ("  its CPU s", "transformer_cpu_s", "s"),
    ("  its peak RSS, MiB (largest process)", "transformer_peak_rss", "MiB"),
    ("  its peak RSS, MiB (process tree, sampled)", "transformer_tree_peak_rss", "MiB"),
    ("open a stored index, s (models excluded)", "open_s", "s"),
    ("load the models, s", "model_load_s", "s"),
    ("semble's cache check before it opens, s", "validate_s", "s"),
    ("warm query p50, ms (codesearch: stat pass)", "query_p50_ms", "ms"),
    ("warm query p95, ms (codesearch: stat pass)", "query_p95_ms", "ms"),
    ("warm query p50, ms, refresh=False", "query_norefresh_p50_ms", "ms"),
    ("warm query p95, ms, refresh=False", "query_norefresh_p95_ms", "ms"),
    ("warm query p50, ms, watch=True", "query_watch_p50_ms", "ms"),
    ("warm query p95, ms, watch=True", "query_watch_p95_ms", "ms"),
    ("freshness check, ms (stat pass / revalidation)", "freshness_ms", "ms"),
    ("bare os.stat over the same files, ms", "stat_floor_ms", "ms"),
    ("  the check over that floor", "freshness_over_floor", "x"),
    ("serving RSS, MiB (after the warm queries)", "serving_rss", "MiB"),
    ("serving RSS with watch=True, MiB", "watch_serving_rss", "MiB"),
    ("index on disk, MiB", "index_bytes", "MiB"),
)

# (label, key, scale, format) of the per-chunk table.
CHUNK_COLUMNS: tuple[tuple[str, str, float, str], ...] = (
    ("first answer µs", "first_answer_s", 1e6, "{:,.1f}"),
    ("its peak B", "first_answer_peak_rss", 1, "{:,.0f}"),
    ("tree peak B", "first_answer_tree_peak_rss", 1, "{:,.0f}"),
    ("transformer ms", "transformer_s", 1e3, "{:,.2f}"),
    ("its peak B", "transformer_peak_rss", 1, "{:,.0f}"),
    ("open µs", "open_s", 1e6, "{:,.2f}"),
    ("serving RSS B", "serving_rss", 1, "{:,.0f}"),
    ("index B", "index_bytes", 1, "{:,.0f}"),
)


def size_table(result: dict[str, Any]) -> str:
    rows = []
    for label, key, unit in SIZE_ROWS:
        ours, theirs = result["codesearch"].get(key), result["semble"].get(key)
        ratio = f"{ours / theirs:.2f}" if isinstance(ours, (int, float)) and isinstance(theirs, (int, float)) and theirs \
            else ""
        rows.append([label, _fmt(ours, unit), _fmt(theirs, unit), ratio])
    return table(["metric", "codesearch", "semble", "ratio"], rows)


def chunk_table(costs: dict[str, Any], results: dict[str, Any]) -> str:
    def cells(values: dict[str, Any]) -> list[str]:
        return ["—" if values[key] is None else form.format(values[key] * scale) for _, key, scale, form in CHUNK_COLUMNS]

    rows = [[size, system, f"{results[size][system]['chunks']:,}", *cells(values)]
            for size, systems in costs["per_chunk"].items() for system, values in systems.items()]
    rows += [[f"{span} marginal", system, "", *cells(values)]
             for span, systems in costs["marginal"].items() for system, values in systems.items()]
    return table(["size", "system", "chunks", *(label for label, _, _, _ in CHUNK_COLUMNS)], rows)


def composition_table(composition: dict[str, Any]) -> str:
    rows = []
    for size, facts in composition["sizes"].items():
        top = ", ".join(f"{name} {n:,}" for name, n in list(facts["languages"].items())[:4])
        rows.append([size, f"{facts['chunks']:,}", len(facts["folders"]), facts["replicas"],
                     f"{facts['unique_text_share']:.3f}", top])
    return table(["size", "chunks", "repositories", "of them replicas", "unique texts", "largest languages"], rows)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results, key=int)
    # One x per size for both systems: the tree's chunks as codesearch counts them (semble cuts other chunks).
    chunks = [results[s]["codesearch"]["chunks"] for s in sizes]
    fig, (memory, seconds) = plt.subplots(1, 2, figsize=(11, 4.2))
    for system, colour in (("codesearch", "tab:blue"), ("semble", "tab:orange")):
        memory.plot(chunks, [results[s][system]["first_answer_tree_peak_rss"] / MiB for s in sizes], "o-", color=colour,
                    label=f"{system}: first answer")
        seconds.plot(chunks, [results[s][system]["first_answer_s"] for s in sizes], "o-", color=colour, label=system)
    points = [(c, results[s]["codesearch"]["transformer_tree_peak_rss"] / MiB) for c, s in zip(chunks, sizes)
              if results[s]["codesearch"]["transformer_tree_peak_rss"]]
    if points:
        memory.plot(*zip(*points), "s--", color="tab:blue", label="codesearch: transformer tier")
    memory.set(xlabel="chunks in the tree", ylabel="peak RSS of the process tree, MiB", title="peak memory")
    seconds.set(xlabel="chunks in the tree", ylabel="seconds (process start included)", title="first answer")
    for axes in (memory, seconds):
        axes.set_xscale("log")
        axes.set_ylim(bottom=0)
        axes.grid(alpha=0.3)
        axes.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- command line ------------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def run(args: argparse.Namespace, semble: Any | None = None) -> dict[str, Any]:
    """``run``: every size in ``args.sizes`` from ``args.data/size-N``; ``semble`` replaces the real semble side."""
    data: Path = args.data
    composition_path = data / SIZES_FILE
    composition = json.loads(composition_path.read_text()) if composition_path.is_file() else None
    scratch_root = args.scratch or data / "scratch"
    scratch_root.mkdir(parents=True, exist_ok=True)
    cs = CodesearchSide(None if args.model.lower() == "none" else args.model, args.models or warm_cache_models())
    if semble is None:
        if not args.semble_python:
            raise SystemExit("error: --semble-python is required (semble's virtual environment)")
        model = args.semble_model or data / "semble-static-minilm"
        if not (model / "config.json").is_file():
            from benchmarks.peer_benchmark import distill_semble_model

            distill_semble_model(args.semble_python, model)
        semble = SembleSide(args.semble_python, model)
    cs.warm_up(scratch_root)
    results: dict[str, Any] = {}
    for size in args.sizes:
        root = data / f"size-{size}"
        if not root.is_dir():
            raise SystemExit(f"error: no tree at {root}; run `monorepo.py prepare --dest {data}` first")
        print(f"size {size} ...", file=sys.stderr)
        scratch = Path(tempfile.mkdtemp(prefix=f"size-{size}-", dir=scratch_root))
        try:
            results[str(size)] = run_size(root, cs, semble, scratch, rounds=args.rounds, runs=args.latency_runs,
                                          transformer=args.transformer, max_transformer_chunks=args.max_transformer_chunks)
        finally:
            if not args.keep:
                shutil.rmtree(scratch, ignore_errors=True)
        if composition and str(size) in composition["sizes"]:
            results[str(size)]["composition"] = composition["sizes"][str(size)]
    costs = per_chunk(results)
    if composition:
        print("\nthe tree at each size (whole repositories; replicas are copy-N/ folders of real ones)\n")
        print(composition_table({"sizes": {s: composition["sizes"][s] for s in results if s in composition["sizes"]}}))
    for size, result in results.items():
        print(f"\nsize {size}: {result['codesearch']['chunks']:,} chunks (codesearch), "
              f"{result['semble']['chunks']:,} (semble)\n")
        print(size_table(result))
        for note in result["notes"]:
            print(f"note: {note}")
    print("\nper chunk, each system over its own chunks; marginal: growth over the chunks' growth\n")
    print(chunk_table(costs, results))
    out = {"sizes": results, **costs, "queries": list(QUERIES), "rounds": args.rounds, "latency_runs": args.latency_runs,
           "machine": {"cpus": os.cpu_count(), "platform": sys.platform},
           "repositories": composition["repositories"] if composition else None}
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2))
    if args.plot:
        plot(results, args.plot)
    return out


def main(argv: Sequence[str] | None = None, *, semble: Any | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="export the repositories, count their chunks, compose the sizes")
    prep.add_argument("--dest", type=Path, required=True)
    prep.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    prep.add_argument("--sizes", type=_sizes, default=list(DEFAULT_SIZES))
    bench = commands.add_parser("run", help="measure both systems at each size")
    bench.add_argument("--data", type=Path, required=True)
    bench.add_argument("--sizes", type=_sizes, default=list(DEFAULT_SIZES))
    bench.add_argument("--semble-python")
    bench.add_argument("--semble-model", type=Path, help="semble's static model (default: DATA/semble-static-minilm)")
    bench.add_argument("--model", default="minilm", help="codesearch's model; none: keyword-only (the smoke test)")
    bench.add_argument("--models", type=Path, help="codesearch's models folder (default: <warm cache>/models)")
    bench.add_argument("--transformer", action=argparse.BooleanOptionalAction, default=True,
                       help="build codesearch's transformer tier and measure it (default: yes)")
    bench.add_argument("--max-transformer-chunks", type=int, default=100_000,
                       help="skip the transformer tier above this many chunks (about 300 s per 90k on 2 cores)")
    bench.add_argument("--rounds", type=int, default=3, help="first answers per system, alternating (median)")
    bench.add_argument("--latency-runs", type=int, default=3, help="timed runs of each warm query")
    bench.add_argument("--scratch", type=Path, help="where the indexes and caches go (default: DATA/scratch)")
    bench.add_argument("--keep", action="store_true", help="keep the indexes and caches")
    bench.add_argument("--json", dest="json_out", type=Path)
    bench.add_argument("--plot", type=Path)
    commands.add_parser("_serve", help="(internal) the codesearch serving process: a JSON job on stdin")
    args = parser.parse_args(argv)

    if args.command == "_serve":
        job = json.load(sys.stdin)
        print(json.dumps(serve_codesearch(job)), flush=True)
        if job["watch"]:
            os._exit(0)  # a watcher's threads need not keep the process alive
        return 0
    if args.command == "prepare":
        out = prepare(args.dest, args.mirrors, args.sizes)
        rows = [[name, f"{facts['chunks']:,}", f"{facts['files']:,}", f"{facts['bytes'] / 1e6:.1f}",
                 facts["revision"][:12], facts["missing_blobs"], ", ".join(list(facts["languages"])[:3])]
                for name, facts in out["repositories"].items()]
        print(table(["repository", "chunks", "files", "MB", "revision", "missing blobs", "languages"], rows))
        print(f"\ntotal {sum(f['chunks'] for f in out['repositories'].values()):,} chunks\n")
        print(composition_table(out))
        return 0
    run(args, semble)
    return 0


if __name__ == "__main__":
    sys.exit(main())
