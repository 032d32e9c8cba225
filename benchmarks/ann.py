"""Approximate dense candidates: HNSW libraries against the exact product, and the chosen VectorSearch end to end.

Usage:
    python -m benchmarks.ann prepare --data DIR      # embed the real vectors and DEV queries (once, minutes)
    python -m benchmarks.ann run --data DIR [--sizes 10000,90000,270000] [--sets full,static] [--json OUT]
    python -m benchmarks.ann run --synthetic [...]   # seeded clustered vectors, no model (the smoke test)

Data (``prepare``, with codesearch itself):

- ``full``: the transformer's 384-d rows of ``/work/data/monorepo/size-30000`` (int8
  ONNX MiniLM; test files are not read: their rows are zeros and ``covered`` is False);
- ``static``: the static tier's 256-d rows of ``size-90000`` (every file read);
- queries: the DEV query sets of semble's benchmark (``peer_data.DEV_REPOSITORIES``),
  embedded by each tier's model.

A size larger than the real rows is made by tiling them, each copy after the
first with Gaussian noise of norm about 0.3 per row (cosine about 0.96 to its
original) and re-normalised; the table says which sizes are real.

Per set, size, library and setting: recall@100 and @300 of the rescored
candidates against the exact top (ties at the cut count as found), p50/p95 ms
on one thread, build seconds (all cores), index MB on disk, open ms and RSS of
a fresh process that opens the file and runs every query; filtered search
(a contiguous scope of 1%, 10%, 50% of the rows, as a folder scope is in chunk
order, and the unread rows left out); a refresh of 1% of the rows; and
VectorSearch's dense candidates (with the whole-index range) against the
exact product + ``top_k`` that ``LoadedIndex.rank`` computes today.

JSON keys: ``sets`` (rows of every setting), ``chosen`` (per set and size), ``filtered``, ``refresh``,
``end_to_end``, ``environment``.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._harness import percentile, rss_mb, script_command, script_env
from codesearch.index.loaded import one_blas_thread
from codesearch.index.vectors import EXACT_BELOW, TIER_PARAMS, GraphParams, VectorSearch
from codesearch.topk import top_k

DEPTHS = (100, 300)
EFS = (200, 800, 1600)
GRID_M, GRID_EF_ADD = 16, 128  # the libraries side by side, at one graph setting (VectorSearch: GraphParams)
OVERFETCH = 2.0
SCOPES = (0.01, 0.1, 0.5)
NOISE = 0.3
MONOREPO = Path("/work/data/monorepo")
SEMBLE = Path("/work/data/semble/benchmarks")

# -- data ------------------------------------------------------------------------


def prepare(data: Path) -> None:
    """Embed the real vectors and the DEV queries into ``data`` (``full.npy``, ``static.npy``, ``q_*.npy``)."""
    from benchmarks.peer_data import DEV_REPOSITORIES
    from codesearch import CodeSearch

    data.mkdir(parents=True, exist_ok=True)
    for name, root, tier, array in (("static", MONOREPO / "size-90000", "static", "static_vectors"),
                                    ("full", MONOREPO / "size-30000", "full", "vectors")):
        if (data / f"{name}.npy").exists():
            continue
        started = time.perf_counter()
        cs = CodeSearch(root, index_dir=data / f"index-{name}", refresh=False)
        cs.index(tier=tier)  # type: ignore[arg-type]
        rows = np.asarray(cs.store.load().arrays[array], dtype=np.float32)
        np.save(data / f"{name}.npy", rows)
        print(f"{name}: {rows.shape} in {time.perf_counter() - started:.0f} s", flush=True)
    cs = CodeSearch(MONOREPO / "size-10000", index_dir=data / "index-queries", refresh=False)
    queries = [task["query"] for name in DEV_REPOSITORIES
               for task in json.loads((SEMBLE / "annotations" / f"{name}.json").read_text("utf-8"))]
    np.save(data / "q_full.npy", np.stack([cs.embedder.embed_query(q) for q in queries]).astype(np.float32))
    np.save(data / "q_static.npy", np.stack([cs.static_embedder.embed_query(q) for q in queries]).astype(np.float32))
    (data / "queries.json").write_text(json.dumps(queries), "utf-8")


def normalised(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.ascontiguousarray(np.where(norms > 0, rows / np.maximum(norms, 1e-12), 0.0), dtype=np.float32)


def grown(real: np.ndarray, size: int, seed: int) -> np.ndarray:
    """``real`` cut or tiled to ``size`` rows; copies after the first get noise and are re-normalised (zero rows stay zero)."""
    if size <= len(real):
        return np.ascontiguousarray(real[:size])
    rng = np.random.default_rng(seed)
    parts, have = [real], len(real)
    while have < size:
        part = real[: size - have]
        noise = rng.normal(0.0, NOISE / math.sqrt(real.shape[1]), part.shape).astype(np.float32)
        parts.append(normalised(np.where(np.linalg.norm(part, axis=1, keepdims=True) > 0, part + noise, 0.0)))
        have += len(part)
    return np.ascontiguousarray(np.concatenate(parts))


def synthetic(n: int, dim: int, seed: int, queries: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Seeded clustered unit vectors (a mixture of Gaussians around random centres) and queries near them."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(max(n // 200, 8), dim))
    rows = centres[rng.integers(0, len(centres), n)] + rng.normal(0, 0.6, (n, dim))
    qs = centres[rng.integers(0, len(centres), queries)] + rng.normal(0, 0.8, (queries, dim))
    return normalised(rows.astype(np.float32)), normalised(qs.astype(np.float32))


class Truth:
    """Exact answers for a set of queries: per query the best ``max(DEPTHS)`` rows, the score at each cut, and the
    score at the cut of 100 within each scope (a contiguous block of rows, as a folder is in chunk order)."""

    def __init__(self, rows: np.ndarray, queries: np.ndarray, covered: np.ndarray | None, seed: int = 7) -> None:
        n, deepest = len(rows), max(DEPTHS)
        rng = np.random.default_rng(seed)
        self.scopes = {share: (rng.integers(0, n - max(1, int(n * share)) + 1, len(queries)), max(1, int(n * share)))
                       for share in SCOPES}
        self.cut = {d: np.full(len(queries), np.inf) for d in DEPTHS}
        self.scoped_cut = {share: np.full(len(queries), np.inf) for share in SCOPES}
        self.scoped_n = {share: np.zeros(len(queries), dtype=np.int64) for share in SCOPES}
        for first in range(0, len(queries), 32):
            block = rows @ queries[first:first + 32].T
            for j in range(block.shape[1]):
                i, scores = first + j, block[:, j]
                top = top_k(scores, deepest, covered)
                for d in DEPTHS:
                    if len(top):
                        self.cut[d][i] = scores[top[: d][-1]]
                for share, (starts, width) in self.scopes.items():
                    within = np.zeros(n, dtype=bool)
                    within[starts[i]:starts[i] + width] = True
                    scoped = top_k(scores, 100, within if covered is None else within & covered)
                    self.scoped_n[share][i] = len(scoped)
                    if len(scoped):
                        self.scoped_cut[share][i] = scores[scoped[-1]]

    def masks(self, share: float, n: int) -> list[np.ndarray]:
        starts, width = self.scopes[share]
        out = []
        for start in starts:
            mask = np.zeros(n, dtype=bool)
            mask[start:start + width] = True
            out.append(mask)
        return out


def recall(rows: np.ndarray, q: np.ndarray, found: np.ndarray, cut: float, depth: int, available: int | None = None) -> float:
    """Share of the ``depth`` places (fewer when the scope has fewer rows) filled with a row scoring at least the
    exact cut (a tie at the cut counts)."""
    places = depth if available is None else min(depth, int(available))
    if not np.isfinite(cut) or places == 0:
        return 1.0
    found = np.asarray(found, dtype=np.int64)[:depth]
    return min(places, int(np.count_nonzero(rows[found] @ q >= cut - 1e-6))) / places


# -- libraries -----------------------------------------------------------------------


class Library:
    """One ANN library's build, save, open and search, over the covered rows (labels are row numbers)."""

    name = ""

    def __init__(self, setting: str) -> None:
        self.setting = setting

    def build(self, rows: np.ndarray, labels: np.ndarray) -> None:
        raise NotImplementedError

    def save(self, path: Path) -> None:
        raise NotImplementedError

    def open(self, path: Path, dim: int) -> None:
        raise NotImplementedError

    def search(self, q: np.ndarray, count: int, ef: int) -> np.ndarray:
        raise NotImplementedError

    def filtered(self, q: np.ndarray, count: int, ef: int, allowed: np.ndarray) -> np.ndarray | None:
        """Search within ``allowed`` rows natively, or None when the library cannot."""
        return None


class USearch(Library):
    name = "usearch"

    def build(self, rows: np.ndarray, labels: np.ndarray) -> None:
        from usearch.index import Index

        self.index = Index(ndim=rows.shape[1], metric="ip", dtype=self.setting, connectivity=GRID_M,
                           expansion_add=GRID_EF_ADD)
        self.index.add(labels.astype(np.uint64), np.ascontiguousarray(rows[labels]), threads=os.cpu_count() or 1)

    def save(self, path: Path) -> None:
        self.index.save(os.fspath(path))

    def open(self, path: Path, dim: int) -> None:
        from usearch.index import Index

        self.index = Index.restore(os.fspath(path), view=True)

    def search(self, q: np.ndarray, count: int, ef: int) -> np.ndarray:
        self.index.expansion_search = max(ef, count)
        return np.asarray(self.index.search(q, count, threads=1).keys, dtype=np.int64)


class Faiss(Library):
    name = "faiss"

    def build(self, rows: np.ndarray, labels: np.ndarray) -> None:
        import faiss

        faiss.omp_set_num_threads(os.cpu_count() or 1)
        dim = rows.shape[1]
        if self.setting == "HNSWFlat":
            index = faiss.IndexHNSWFlat(dim, GRID_M, faiss.METRIC_INNER_PRODUCT)
        else:
            quantizer = {"HNSWSQ8": faiss.ScalarQuantizer.QT_8bit, "HNSWSQfp16": faiss.ScalarQuantizer.QT_fp16}
            index = faiss.IndexHNSWSQ(dim, quantizer[self.setting], GRID_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = GRID_EF_ADD
        part = np.ascontiguousarray(rows[labels])
        if not index.is_trained:
            index.train(part)
        index.add(part)
        self.labels = labels
        self.index = index
        self.allowed_at: np.ndarray | None = None
        faiss.omp_set_num_threads(1)

    def save(self, path: Path) -> None:
        import faiss

        faiss.write_index(self.index, os.fspath(path))
        np.save(path.with_suffix(".labels.npy"), self.labels)

    def open(self, path: Path, dim: int) -> None:
        import faiss

        faiss.omp_set_num_threads(1)
        try:
            self.index = faiss.read_index(os.fspath(path), faiss.IO_FLAG_MMAP_IFC)
        except RuntimeError:
            self.index = faiss.read_index(os.fspath(path), faiss.IO_FLAG_MMAP)
        self.labels = np.load(path.with_suffix(".labels.npy"))

    def search(self, q: np.ndarray, count: int, ef: int) -> np.ndarray:
        import faiss

        params = faiss.SearchParametersHNSW(efSearch=max(ef, count))
        found = self.index.search(q[None], count, params=params)[1][0]
        return np.asarray(self.labels[found[found >= 0]], dtype=np.int64)

    def filtered(self, q: np.ndarray, count: int, ef: int, allowed: np.ndarray) -> np.ndarray | None:
        import faiss

        positions = allowed[self.labels]  # the graph numbers its own nodes 0..n-1
        bitmap = np.packbits(positions, bitorder="little")
        selector = faiss.IDSelectorBitmap(len(positions), faiss.swig_ptr(bitmap))
        params = faiss.SearchParametersHNSW(efSearch=max(ef, count), sel=selector)
        found = self.index.search(q[None], count, params=params)[1][0]
        return np.asarray(self.labels[found[found >= 0]], dtype=np.int64)


class HnswLib(Library):
    name = "hnswlib"

    def build(self, rows: np.ndarray, labels: np.ndarray) -> None:
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=rows.shape[1])
        self.index.init_index(max_elements=len(labels), M=GRID_M, ef_construction=GRID_EF_ADD)
        self.index.set_num_threads(os.cpu_count() or 1)
        self.index.add_items(np.ascontiguousarray(rows[labels]), labels)
        self.index.set_num_threads(1)

    def save(self, path: Path) -> None:
        self.index.save_index(os.fspath(path))

    def open(self, path: Path, dim: int) -> None:
        import hnswlib

        self.index = hnswlib.Index(space="ip", dim=dim)
        self.index.load_index(os.fspath(path))
        self.index.set_num_threads(1)

    def search(self, q: np.ndarray, count: int, ef: int) -> np.ndarray:
        self.index.set_ef(max(ef, count))
        return np.asarray(self.index.knn_query(q, count)[0][0], dtype=np.int64)

    def filtered(self, q: np.ndarray, count: int, ef: int, allowed: np.ndarray) -> np.ndarray | None:
        self.index.set_ef(max(ef, count))
        count = min(count, int(np.count_nonzero(allowed)))
        try:
            keys, _ = self.index.knn_query(q, count, filter=lambda label: bool(allowed[label]))
        except RuntimeError:  # it found fewer than asked (a narrow scope)
            return np.empty(0, dtype=np.int64)
        return np.asarray(keys[0], dtype=np.int64)


LIBRARIES: dict[str, Callable[[str], Library]] = {"usearch": USearch, "faiss": Faiss, "hnswlib": HnswLib}
SETTINGS = {"usearch": ("i8", "f16", "f32"), "faiss": ("HNSWSQ8", "HNSWFlat"), "hnswlib": ("f32",)}
BIG = {"usearch": ("i8",), "faiss": ("HNSWSQ8",), "hnswlib": ("f32",)}  # above 100k rows: one setting each


def available(name: str) -> bool:
    import onnxruntime  # noqa: F401  (before usearch: see codesearch.index.vectors._usearch)

    try:
        __import__({"usearch": "usearch.index"}.get(name, name))
    except ImportError:
        return False
    return True


# -- measuring ----------------------------------------------------------------------


def rescored(rows: np.ndarray, q: np.ndarray, found: np.ndarray, depth: int) -> np.ndarray:
    found = np.sort(np.asarray(found, dtype=np.int64))
    scores = rows[found] @ q
    return found[np.lexsort((found, -scores))][:depth]


def timed(fn: Callable[[np.ndarray], Any], queries: np.ndarray) -> tuple[list[Any], float, float]:
    out, times = [], []
    with one_blas_thread():
        for q in queries:
            started = time.perf_counter()
            out.append(fn(q))
            times.append((time.perf_counter() - started) * 1000)
    return out, percentile(times, 50), percentile(times, 95)


def serve_probe(library: str, setting: str, path: Path, dim: int, queries: Path) -> dict[str, float]:
    """Open ms and RSS (MB) of a fresh process that opens ``path`` and runs every query."""
    command = [*script_command("ann"), "probe", library, setting, os.fspath(path), str(dim), os.fspath(queries)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300, env=script_env())
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
    except (IndexError, json.JSONDecodeError):
        return {"error": done.stderr[-300:]}  # type: ignore[dict-item]


def probe(library: str, setting: str, path: str, dim: str, queries: str) -> None:
    qs = np.load(queries)
    lib = LIBRARIES[library](setting)
    available(library)  # imported before the baseline
    before = rss_mb()
    started = time.perf_counter()
    lib.open(Path(path), int(dim))
    open_ms = (time.perf_counter() - started) * 1000
    opened = rss_mb()
    for q in qs:
        lib.search(q, 200, 200)
    print(json.dumps({"open_ms": round(open_ms, 2), "rss_open_mb": round(opened - before, 1),
                      "rss_queries_mb": round(rss_mb() - before, 1)}))


def run_set(name: str, rows: np.ndarray, covered: np.ndarray | None, queries: np.ndarray, size_label: str,
            libraries: Sequence[str], folder: Path, big: bool, truth: Truth, report: dict[str, Any]) -> None:
    labels = np.arange(len(rows)) if covered is None else np.flatnonzero(covered)
    qfile = folder / f"q-{name}.npy"
    np.save(qfile, queries)
    for library in libraries:
        for setting in (BIG if big else SETTINGS)[library]:
            lib = LIBRARIES[library](setting)
            started = time.perf_counter()
            lib.build(rows, labels)
            build_s = time.perf_counter() - started
            path = folder / f"{name}-{size_label}-{library}-{setting}.index"
            lib.save(path)
            mb = sum(p.stat().st_size for p in folder.glob(path.name + "*")) / 1e6
            mb += path.with_suffix(".labels.npy").stat().st_size / 1e6 if path.with_suffix(".labels.npy").exists() else 0
            del lib
            gc.collect()
            served = serve_probe(library, setting, path, rows.shape[1], qfile)
            lib = LIBRARIES[library](setting)
            lib.open(path, rows.shape[1])
            for ef in EFS:
                row: dict[str, Any] = {"set": name, "size": size_label, "library": library, "setting": setting,
                                       "ef": ef, "overfetch": OVERFETCH, "build_s": round(build_s, 2),
                                       "index_mb": round(mb, 1), **served}
                for depth in DEPTHS:
                    count = math.ceil(depth * OVERFETCH)
                    found, p50, p95 = timed(
                        lambda q, c=count, d=depth, s=lib, e=ef: rescored(rows, q, s.search(q, c, e), d), queries)
                    cut = truth.cut[depth]
                    row[f"recall@{depth}"] = round(float(np.mean(
                        [recall(rows, q, f, c, depth) for q, f, c in zip(queries, found, cut)])), 4)
                    row[f"p50_ms@{depth}"], row[f"p95_ms@{depth}"] = round(p50, 3), round(p95, 3)
                report["sets"].append(row)
                print(f"{name:<7}{size_label:>6} {library:<8}{setting:<9} ef={ef:<4} "
                      f"R@100 {row['recall@100']:.4f} R@300 {row['recall@300']:.4f} "
                      f"p50 {row['p50_ms@100']:6.2f} p95 {row['p95_ms@100']:6.2f} ms  build {build_s:6.1f} s  "
                      f"{mb:6.1f} MB  open {served.get('open_ms', float('nan')):7.1f} ms  "
                      f"rss {served.get('rss_open_mb', float('nan')):6.1f}/{served.get('rss_queries_mb', float('nan')):6.1f} MB",
                      flush=True)
            if library == "usearch" and setting == "i8":
                flat_scan(name, size_label, lib, rows, queries, truth, build_s, mb, served, report)
            if library in ("faiss", "hnswlib") and setting in ("HNSWFlat", "f32") and not big:
                filtered_native(name, size_label, library, setting, lib, rows, covered, queries, truth, report)
            del lib
            gc.collect()


def flat_scan(name: str, size_label: str, lib: Library, rows: np.ndarray, queries: np.ndarray, truth: Truth,
              build_s: float, mb: float, served: dict[str, float], report: dict[str, Any]) -> None:
    """usearch's exhaustive scan of its int8 copy (``exact=True``), rescored: linear, the graph's baseline."""
    row: dict[str, Any] = {"set": name, "size": size_label, "library": "usearch", "setting": "i8 flat scan", "ef": 0,
                           "overfetch": OVERFETCH, "build_s": 0.0, "index_mb": round(mb, 1), **served}
    index = lib.index  # type: ignore[attr-defined]
    for depth in DEPTHS:
        count = math.ceil(depth * OVERFETCH)
        found, p50, p95 = timed(lambda q, c=count, d=depth: rescored(
            rows, q, np.asarray(index.search(q, c, exact=True, threads=1).keys, dtype=np.int64), d), queries)
        row[f"recall@{depth}"] = round(float(np.mean(
            [recall(rows, q, f, c, depth) for q, f, c in zip(queries, found, truth.cut[depth])])), 4)
        row[f"p50_ms@{depth}"], row[f"p95_ms@{depth}"] = round(p50, 3), round(p95, 3)
    report["sets"].append(row)
    print(f"{name:<7}{size_label:>6} usearch i8 flat scan      R@100 {row['recall@100']:.4f} "
          f"R@300 {row['recall@300']:.4f} p50 {row['p50_ms@100']:6.2f} p95 {row['p95_ms@100']:6.2f} ms", flush=True)


def filtered_native(name: str, size_label: str, library: str, setting: str, lib: Library, rows: np.ndarray,
                    covered: np.ndarray | None, queries: np.ndarray, truth: Truth, report: dict[str, Any]) -> None:
    limit = 40 if library == "hnswlib" else len(queries)  # a Python callback per visited node: slow
    for share in SCOPES:
        masks = truth.masks(share, len(rows))[:limit]
        cut = truth.scoped_cut[share]
        allowed = iter(masks if covered is None else [m & covered for m in masks])

        def one(q: np.ndarray, allowed: Iterator[np.ndarray] = allowed) -> np.ndarray:
            found = lib.filtered(q, 200, 200, next(allowed))
            return rescored(rows, q, found if found is not None else np.empty(0, np.int64), 100)

        found, p50, p95 = timed(one, queries[:limit])
        score = float(np.mean([recall(rows, q, f, c, 100, a)
                               for q, f, c, a in zip(queries, found, cut, truth.scoped_n[share])]))
        row = {"set": name, "size": size_label, "method": f"{library} {setting} native filter ef=200", "scope": share,
               "recall@100": round(score, 4), "p50_ms": round(p50, 3), "p95_ms": round(p95, 3)}
        report["filtered"].append(row)
        print(f"  filter {row['method']:<34} scope {share:>5.0%}  R@100 {score:.4f}  p50 {p50:6.2f}  p95 {p95:6.2f} ms",
              flush=True)


def run_chosen(name: str, rows: np.ndarray, covered: np.ndarray | None, queries: np.ndarray, size_label: str,
               folder: Path, truth: Truth, report: dict[str, Any], refreshes: int) -> None:
    """VectorSearch (the chosen configuration) end to end, scoped, and refreshed, against the exact product."""
    params = dict(TIER_PARAMS).get(name, GraphParams())
    exact = VectorSearch.build(rows, covered, exact_below=len(rows) + 1)
    started = time.perf_counter()
    built = VectorSearch.build(rows, covered, params=params, exact_below=0)
    build_s = time.perf_counter() - started
    where = folder / f"chosen-{name}-{size_label}"
    where.mkdir(exist_ok=True)
    files = built.save(where)
    np.save(where / "vectors.npy", rows)
    mapped = np.load(where / "vectors.npy", mmap_mode="r")
    started = time.perf_counter()
    search = VectorSearch.open(where, mapped, covered, params=params, exact_below=0)
    open_ms = (time.perf_counter() - started) * 1000
    cut = truth.cut[100]
    print(f"  chosen {params} ef={search.expansion}: build {build_s:.1f} s, open {open_ms:.2f} ms", flush=True)
    for label, engine in (("exact product + top_k (today)", exact), ("VectorSearch graph", search)):
        found, p50, p95 = timed(lambda q, e=engine: e.top(q, 100), queries)
        score = float(np.mean([recall(rows, q, f.ids, c, 100) for q, f, c in zip(queries, found, cut)]))
        ranges_ok = float(np.mean([f.whole_range is not None and abs(f.whole_range[0] - c) < 1e-6
                                   for f, c in zip(found, cut)]))
        row = {"set": name, "size": size_label, "method": label, "recall@100": round(score, 4),
               "range_low_exact": round(ranges_ok, 4), "p50_ms": round(p50, 3), "p95_ms": round(p95, 3),
               "build_s": round(build_s, 2) if engine is search else 0.0,
               "files_mb": round(sum(f.stat().st_size for f in files) / 1e6, 1) if engine is search else 0.0,
               "open_ms": round(open_ms, 2) if engine is search else 0.0, "ef": engine.expansion}
        report["end_to_end"].append(row)
        print(f"  e2e    {label:<34} R@100 {score:.4f}  low=exact {ranges_ok:.3f}  p50 {p50:6.2f}  p95 {p95:6.2f} ms",
              flush=True)
    for share in SCOPES:
        masks = truth.masks(share, len(rows))
        scut = truth.scoped_cut[share]
        for label, engine in (("exact product + top_k (today)", exact), ("VectorSearch graph", search)):
            scope = iter(masks)
            found, p50, p95 = timed(lambda q, e=engine, s=scope: e.top(q, 100, next(s)), queries)
            score = float(np.mean([recall(rows, q, f.ids, c, 100, a)
                                   for q, f, c, a in zip(queries, found, scut, truth.scoped_n[share])]))
            row = {"set": name, "size": size_label, "method": label, "scope": share, "recall@100": round(score, 4),
                   "p50_ms": round(p50, 3), "p95_ms": round(p95, 3)}
            report["filtered"].append(row)
            print(f"  filter {label:<34} scope {share:>5.0%}  R@100 {score:.4f}  p50 {p50:6.2f}  p95 {p95:6.2f} ms",
                  flush=True)
    refresh(name, rows, covered, queries, size_label, search, folder, report, refreshes)


def refresh(name: str, rows: np.ndarray, covered: np.ndarray | None, queries: np.ndarray, size_label: str,
            search: VectorSearch, folder: Path, report: dict[str, Any], steps: int) -> None:
    """Refreshes that each change 1% of the read rows (new vectors): the graph kept, dead nodes and a delta."""
    rng = np.random.default_rng(11)
    current, current_rows = search, rows
    for step in range(1, steps + 1):
        readable = np.flatnonzero(covered) if covered is not None else np.arange(len(rows))
        changed = rng.choice(readable, max(1, len(readable) // 100), replace=False)
        next_rows = current_rows.copy()
        next_rows[changed] = normalised(next_rows[changed] + rng.normal(0, 0.05, next_rows[changed].shape)
                                        .astype(np.float32))
        reuse = np.arange(len(rows), dtype=np.int64)
        reuse[changed] = -1
        started = time.perf_counter()
        current = current.refresh(next_rows, covered, reuse, exact_below=0)
        seconds = time.perf_counter() - started
        where = folder / f"refresh-{name}-{size_label}-{step}"
        where.mkdir(exist_ok=True)
        started = time.perf_counter()
        current.save(where)
        save_s = time.perf_counter() - started
        current_rows = next_rows
        cut = np.array([current_rows[top_k(current_rows @ q, 100, covered)[-1]] @ q for q in queries])
        found = [current.top(q, 100) for q in queries]
        score = float(np.mean([recall(current_rows, q, f.ids, c, 100) for q, f, c in zip(queries, found, cut)]))
        times = [0.0] * len(queries)
        with one_blas_thread():
            for i, q in enumerate(queries):
                started = time.perf_counter()
                current.top(q, 100)
                times[i] = (time.perf_counter() - started) * 1000
        row = {"set": name, "size": size_label, "step": step, "changed": len(changed), "refresh_s": round(seconds, 3),
               "save_s": round(save_s, 3), "delta": len(current._delta), "recall@100": round(score, 4),
               "p50_ms": round(float(np.percentile(times, 50)), 3)}
        report["refresh"].append(row)
        print(f"  refresh {step}: {len(changed)} rows changed in {seconds:5.3f} s (+ save {save_s:5.3f} s), "
              f"delta {len(current._delta)}, R@100 {score:.4f}, p50 {row['p50_ms']:.2f} ms", flush=True)


def markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables: the libraries side by side, then VectorSearch end to end, scoped, refreshed."""
    lines = ["| set | size | library | setting | ef | R@100 | R@300 | p50 ms | p95 ms | build s | MB | open ms "
             "| RSS open/queries MB |", "|" + "---|" * 13]
    for r in report["sets"]:
        lines.append(f"| {r['set']} | {r['size']} | {r['library']} | {r['setting']} | {r['ef'] or '-'} "
                     f"| {r['recall@100']:.4f} | {r['recall@300']:.4f} | {r['p50_ms@100']:.2f} | {r['p95_ms@100']:.2f} "
                     f"| {r['build_s']:.1f} | {r['index_mb']:.1f} | {r.get('open_ms', float('nan')):.1f} "
                     f"| {r.get('rss_open_mb', float('nan')):.1f} / {r.get('rss_queries_mb', float('nan')):.1f} |")
    lines += ["", "| set | size | dense candidates (depth 100, with the whole-index range) | ef | R@100 | low = exact "
              "| p50 ms | p95 ms | build s | files MB | open ms |", "|" + "---|" * 11]
    for r in report["end_to_end"]:
        lines.append(f"| {r['set']} | {r['size']} | {r['method']} | {r['ef'] or '-'} | {r['recall@100']:.4f} "
                     f"| {r['range_low_exact']:.3f} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | {r['build_s']:.1f} "
                     f"| {r['files_mb']:.1f} | {r['open_ms']:.1f} |")
    lines += ["", "| set | size | scope | method | R@100 | p50 ms | p95 ms |", "|" + "---|" * 7]
    for r in report["filtered"]:
        lines.append(f"| {r['set']} | {r['size']} | {r['scope']:.0%} | {r['method']} | {r['recall@100']:.4f} "
                     f"| {r['p50_ms']:.2f} | {r['p95_ms']:.2f} |")
    lines += ["", "| set | size | refresh | rows changed | refresh s | save s | delta rows | R@100 after | p50 ms |",
              "|" + "---|" * 9]
    for r in report["refresh"]:
        lines.append(f"| {r['set']} | {r['size']} | {r['step']} | {r['changed']} | {r['refresh_s']:.3f} "
                     f"| {r['save_s']:.3f} | {r['delta']} | {r['recall@100']:.4f} | {r['p50_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def load_sets(args: argparse.Namespace) -> dict[str, tuple[np.ndarray, np.ndarray | None, np.ndarray, int]]:
    """Set name -> (real rows, covered of the real rows, queries, how many rows are real)."""
    if args.synthetic:
        rows, qs = synthetic(args.synthetic, 64, seed=3)
        covered = np.random.default_rng(4).random(len(rows)) > 0.2
        rows[~covered] = 0.0
        return {"synthetic": (rows, covered, qs, len(rows))}
    data = Path(args.data)
    sets: dict[str, tuple[np.ndarray, np.ndarray | None, np.ndarray, int]] = {}
    for name in args.sets.split(","):
        rows = normalised(np.load(data / f"{name}.npy"))
        covered = np.linalg.norm(rows, axis=1) > 0.5
        sets[name] = (rows, None if covered.all() else covered, normalised(np.load(data / f"q_{name}.npy")), len(rows))
    return sets


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["probe"]:
        probe(*argv[1:6])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("prepare", "run"))
    parser.add_argument("--data", default="ann-data", help="folder of prepared vectors and queries")
    parser.add_argument("--synthetic", type=int, default=0, help="rows of seeded clustered vectors instead of --data")
    parser.add_argument("--sets", default="full,static", help="which prepared sets")
    parser.add_argument("--sizes", default="10000,90000,270000", help="index sizes (rows)")
    parser.add_argument("--libraries", default="usearch,faiss,hnswlib")
    parser.add_argument("--big-grid-sets", default="full", help="sets whose libraries are compared above 100k rows too")
    parser.add_argument("--no-grid", action="store_true", help="only VectorSearch against the exact product")
    parser.add_argument("--json", dest="json_out", help="write the results as JSON to this file")
    parser.add_argument("--markdown", help="write the tables as Markdown to this file")
    args = parser.parse_args(argv)
    if args.step == "prepare":
        prepare(Path(args.data))
        return 0
    libraries = [name for name in args.libraries.split(",") if name and available(name)]
    report: dict[str, Any] = {"sets": [], "filtered": [], "refresh": [], "end_to_end": [],
                              "environment": {"cpus": os.cpu_count(), "exact_below": EXACT_BELOW,
                                              "params": GraphParams().__repr__(), "noise": NOISE,
                                              "libraries": libraries}}
    with tempfile.TemporaryDirectory(prefix="ann-bench-") as tmp:
        for name, (real, covered, queries, n_real) in load_sets(args).items():
            for size in (int(s) for s in args.sizes.split(",")):
                rows = grown(real, size, seed=size)
                cov = None if covered is None else np.resize(covered, size)
                label = f"{size // 1000}k" if size >= 1000 else str(size)
                print(f"== {name} {label}: {size:,} rows x {rows.shape[1]}, "
                      f"{'real' if size <= n_real else f'{n_real:,} real, the rest noisy copies'}, "
                      f"{0 if cov is None else int((~cov).sum()):,} unread", flush=True)
                truth = Truth(rows, queries, cov)
                if not args.no_grid and (size <= 100_000 or name in args.big_grid_sets.split(",")):
                    run_set(name, rows, cov, queries, label, libraries, Path(tmp), size > 100_000, truth, report)
                run_chosen(name, rows, cov, queries, label, Path(tmp), truth, report, 3 if size <= 100_000 else 1)
                for path in Path(tmp).iterdir():
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
    table = markdown(report)
    print(table)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1), "utf-8")
    if args.markdown:
        Path(args.markdown).write_text(table, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
