"""What every benchmark script shares, on the standard library alone: timers, percentiles, memory, folder sizes,
tables, JSON and the DEV repositories' command-line options.

One definition each, so that two scripts' figures mean the same thing: a
percentile is linearly interpolated between the two nearest ranks (numpy's
default), memory is read from ``/proc/self/status`` (``VmRSS``, and ``VmHWM``
for the peak; the resource module's peak where there is no ``/proc``), a
folder's size is the sum of its files' sizes. ``semble_runner.py``, which
runs in semble's own environment, imports this module by its file's folder;
the rest as ``benchmarks._harness``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
MiB = 1024 * 1024
ROOT = Path(__file__).resolve().parent.parent
"""The repository's root: where ``python -m benchmarks.NAME`` runs a script from."""
TREES = Path(tempfile.gettempdir()) / "codesearch-peer-trees"
"""Where the DEV repositories' pinned trees are exported unless ``--trees`` says."""


def dev_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Add ``--semble-benchmarks``, ``--mirrors`` and ``--trees``: where the DEV repositories' annotations, git mirrors
    and exported trees are (``peer_data.load_repos`` and ``export_trees`` read them)."""
    parser.add_argument("--semble-benchmarks", type=Path, required=required,
                        help="semble's benchmarks/ folder (the DEV repositories and their annotations)")
    parser.add_argument("--mirrors", type=Path, required=required, help="folder of git mirrors (owner+name/repo)")
    parser.add_argument("--trees", type=Path, default=TREES, help="where the pinned trees are exported (default: %(default)s)")


def script_command(name: str) -> list[str]:
    """The command that runs the benchmark script ``name`` in a new process (as a module of this package)."""
    return [sys.executable, "-m", f"benchmarks.{name}"]


def script_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the repository's root first on ``PYTHONPATH``, so a
    :func:`script_command` finds the package wherever the process starts."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), base.get("PYTHONPATH", "")) if p)
    return base

# -- time ----------------------------------------------------------------------------------------


def timed(call: Callable[[], T]) -> tuple[T, float]:
    """``call()``'s result and how long it took, in milliseconds."""
    started = time.perf_counter()
    out = call()
    return out, (time.perf_counter() - started) * 1000


def timings_ms(call: Callable[[], Any], repeat: int) -> list[float]:
    """How long each of ``repeat`` calls of ``call`` took, in milliseconds."""
    return [timed(call)[1] for _ in range(repeat)]


def median_ms(call: Callable[[], Any], repeat: int) -> float:
    """The median of ``repeat`` timings of ``call``, in milliseconds."""
    return statistics.median(timings_ms(call, repeat))


# -- percentiles ------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated between the nearest ranks (numpy's
    default); NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def percentiles(values: Sequence[float], qs: Iterable[float] = (50, 95), digits: int | None = 2) -> dict[str, Any]:
    """``{"p50": ..., "p95": ..., "n": ...}`` of ``values`` (each ``q`` of ``qs``), rounded to ``digits``; zeros for
    no values."""
    out: dict[str, Any] = {}
    for q in qs:
        value = percentile(values, q) if values else 0.0
        out[f"p{q:g}"] = round(value, digits) if digits is not None else value
    out["n"] = len(values)
    return out


# -- memory ------------------------------------------------------------------------------------------


def proc_status() -> dict[str, int]:
    """This process's resident and peak resident memory in bytes (``rss``, ``peak_rss``: ``VmRSS`` and ``VmHWM``
    of ``/proc/self/status``; without ``/proc``, the resource module's peak for both)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(value.split()[0]) * 1024
    except OSError:
        pass
    if len(out) < 2:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        out = {"VmRSS": out.get("VmRSS", peak), "VmHWM": peak}
    return {"rss": out["VmRSS"], "peak_rss": out["VmHWM"]}


def rss_mb() -> float:
    """This process's resident memory now, in MiB."""
    return proc_status()["rss"] / MiB


def peak_mb() -> float:
    """This process's peak resident memory since it started (or :func:`reset_peak`), in MiB, to 0.1."""
    return round(proc_status()["peak_rss"] / MiB, 1)


def reset_peak() -> None:
    """Start this process's peak resident memory again from now (Linux: ``5`` into ``/proc/self/clear_refs``)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


class PeakMemory:
    """The peak resident memory of this process above what it held on entry, over a ``with`` block (MiB: :attr:`mb`)."""

    def __enter__(self) -> PeakMemory:
        reset_peak()
        self.baseline = proc_status()["rss"]
        self.peak = self.baseline
        return self

    def __exit__(self, *exc: object) -> None:
        self.peak = max(self.baseline, proc_status()["peak_rss"])

    @property
    def mb(self) -> float:
        return (self.peak - self.baseline) / MiB


# -- disk -------------------------------------------------------------------------------------------


def folder_bytes(folder: str | os.PathLike[str]) -> int:
    """Bytes of every file under ``folder`` (their sizes, not their blocks)."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(folder) for f in files)


def folder_mb(folder: str | os.PathLike[str]) -> float:
    """:func:`folder_bytes` in MB (10^6 bytes), to 0.1."""
    return round(folder_bytes(folder) / 1e6, 1)


# -- reporting -------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> str:
    """A plain-text table: the first column left-aligned, the others right-aligned; ``title`` on a line above."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))

    lines = [line(headers), line(["-" * w for w in widths]), *map(line, cells)]
    return "\n".join(([title] if title else []) + lines)


def write_json(path: str | os.PathLike[str], data: Any) -> None:
    """``data`` as indented JSON at ``path`` (its folder made)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=1), encoding="utf-8")


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON at ``path``."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


__all__ = ["ROOT", "MiB", "PeakMemory", "folder_bytes", "folder_mb", "median_ms", "peak_mb", "percentile",
           "percentiles", "proc_status", "read_json", "reset_peak", "rss_mb", "script_command", "script_env", "table",
           "timed", "timings_ms", "write_json"]
