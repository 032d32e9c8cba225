"""One embedding tier's dense candidates for a query: the exact product on small indexes, a graph on large ones.

Below :data:`EXACT_BELOW` rows a :class:`VectorSearch` computes ``vectors @ query``
and cuts it with :func:`~codesearch.topk.top_k`, exactly as the ranking always
did (bit-identical candidates, scores and range). From :data:`EXACT_BELOW` rows
on it walks an HNSW graph (usearch, int8 storage) for a few more candidates
than asked, then rescores them against the float32 rows, so every score it
returns is ``vectors[ids] @ query``, the number the exact path would give
(measured recall at the ranking's depth of 100: ``benchmarks/ann.py``).

What the ranking needs from one list (:class:`~codesearch.ranking.Candidates`):

- the best ``depth`` rows in scope, best first, with their scores: a scope is
  searched exactly over its own rows when it is small, else read off a deeper
  unscoped graph search (post-filter), else exactly when that came up short;
- the ``(lowest, highest)`` score of the best ``depth`` rows of the whole index,
  scope or not, which fusion min-max scales the list's scores by;
- rows the tier did not read (``covered`` False: the transformer leaves test
  files out, their rows are zeros) are never candidates: they are not in the graph.

On disk the graph is three files next to the generation's arrays (:data:`GRAPH_FILE`,
:data:`ROWS_FILE`, :data:`DELTA_FILE`); :meth:`VectorSearch.save` writes them and
:meth:`VectorSearch.open` maps them without reading them. A refresh keeps the
graph file as it is (dead nodes dropped from results, new rows searched
exactly) until the changes pass a share of it (:meth:`VectorSearch.refresh`). usearch is imported
only when a graph is built or opened (this module owns it: nothing else imports it).
"""

from __future__ import annotations

import math
import mmap
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from codesearch.exceptions import IndexCorruptError
from codesearch.topk import top_k
from codesearch.types import FULL, STATIC, Tier

if TYPE_CHECKING:
    from usearch.index import Index

EXACT_BELOW = 20_000
"""Indexes with fewer rows than this are searched exactly. The exact product of 384-d rows took 0.4 ms at
10k rows and 5.6 ms at 90k on one core here, a graph search at recall 0.99 0.8 ms and 2.5 ms
(``benchmarks/ann.py``): they cross near 30k, and from 20k (31 MB of rows) a graph starts to save
memory and soon time, for a build of a few seconds. The benchmark's repositories all have under 3k chunks."""
GRAPH_FILE = "ann.usearch"
"""The HNSW graph with its int8 copy of the vectors (usearch's format)."""
ROWS_FILE = "ann_rows.npy"
"""int64, graph label -> row of the vectors; -1 for a dead node (its row gone or changed since the build)."""
DELTA_FILE = "ann_delta.npy"
"""int64, the read rows without a node (new or changed since the build), searched exactly."""

Storage = Literal["i8", "f16", "f32"]
_BLOCK = 8192  # rows gathered at once by an exact search within a scope (12 MB of 384-d float32)
_RUNS = 64  # a scope of at most this many runs of rows is multiplied in place, run by run


@dataclass(frozen=True, slots=True)
class GraphParams:
    """How the graph is built and searched (the defaults are measured in ``benchmarks/ann.py``).

    Natural-language queries sit far from the code chunks they match (the best
    score is about 0.5, the 100th about 0.33), so the 100th place lies in a
    crowd and the graph needs a long candidate list to reach recall 0.99 there:
    ``ef`` 1600 at 90k rows (61k read); at 270k (182k read) ef 4546 gave
    0.989-0.993 over four builds (multi-threaded inserts vary) and 6400 gave
    0.992-0.995, measured on real MiniLM rows and DEV queries: hence an ``ef``
    that grows with the graph, 3.5% of its nodes past 46k. The static tier's rows are
    easier (ef 800 at 90k, 1000 at 270k: :data:`TIER_PARAMS`).

    Attributes:
        connectivity: HNSW ``M``, edges per node on the upper levels (twice that on the base level).
        expansion_add: ``efConstruction``, the candidate list while inserting.
        expansion_search: the least ``ef``, the candidate list while searching.
        expansion_share: ``ef`` is at least this share of the graph's nodes.
        overfetch: graph candidates fetched per candidate returned, so that rescoring against
            the float32 rows can repair the int8 order near the cut.
        storage: the vectors' type inside the graph (the float32 rows stay on disk for rescoring).
        exact_scope_rows: a scope with at most this many rows the tier read is searched exactly over
            its rows; a larger one is read off the unscoped search (as deep as its ``ef``), and
            searched exactly when that holds fewer than asked.
        rebuild_share: a refresh builds a new graph when its dead nodes or its delta rows (searched
            exactly) would pass this share of the graph's nodes.
    """

    connectivity: int = 32
    expansion_add: int = 256
    expansion_search: int = 1600
    expansion_share: float = 0.035
    overfetch: float = 2.0
    storage: Storage = "i8"
    exact_scope_rows: int = EXACT_BELOW
    rebuild_share: float = 0.1

    def __post_init__(self) -> None:
        if self.connectivity < 2 or self.expansion_add < 1 or self.expansion_search < 1:
            raise ValueError("GraphParams needs connectivity >= 2 and expansions >= 1")
        if self.overfetch < 1.0:
            raise ValueError(f"GraphParams.overfetch must be >= 1.0, got {self.overfetch}")
        if self.storage not in ("i8", "f16", "f32"):
            raise ValueError(f"GraphParams.storage must be 'i8', 'f16' or 'f32', got {self.storage!r}")
        if self.exact_scope_rows < 0 or self.rebuild_share < 0.0 or not 0.0 <= self.expansion_share <= 1.0:
            raise ValueError("GraphParams needs exact_scope_rows >= 0, rebuild_share >= 0, 0 <= expansion_share <= 1")


TIER_PARAMS: Mapping[Tier, GraphParams] = MappingProxyType({
    FULL: GraphParams(),
    STATIC: GraphParams(expansion_search=800, expansion_share=0.004),
})
"""Each embedding tier's graph settings: the transformer's 384-d rows need the longer candidate list."""


class DenseCandidates(NamedTuple):
    """One dense list's candidates for one query.

    Attributes:
        ids: int64 rows in scope, best first (equal scores by row), at most ``depth``.
        scores: float32, aligned with ``ids``: ``vectors[ids] @ query``.
        whole_range: ``(lowest, highest)`` score of the best ``depth`` rows of the whole
            index (scope ignored, unread rows left out); ``None`` when the tier read no row.
    """

    ids: np.ndarray
    scores: np.ndarray
    whole_range: tuple[float, float] | None


class _StoredGraph:
    """A stored graph, viewed in place on first use: a keyword search, and the open before it, never import usearch
    (with onnxruntime, ~0.1 s) nor read the graph. Checked against its vectors when viewed."""

    def __init__(self, array: np.ndarray, prefix: str, ndim: int, nodes: int, expansion_search: int,
                 before_view: Callable[[], None] | None = None) -> None:
        self.__dict__.update(_array=array, _prefix=prefix, _ndim=ndim, _nodes=nodes,
                             _expansion_search=expansion_search, _index=None, _before_view=before_view)

    def _view(self) -> Any:
        index = self.__dict__["_index"]
        if index is None:
            if self._before_view is not None:
                self._before_view()  # usearch reads the bytes as they are: damaged ones must never reach it
            prefix = self._prefix
            try:
                index = _usearch().Index.restore(memoryview(self._array), view=True,
                                                 expansion_search=self._expansion_search, enable_key_lookups=False)
            except (RuntimeError, ValueError) as exc:
                raise IndexCorruptError(f"the stored vector graph {prefix} cannot be read ({exc}); "
                                        "re-run `codesearch index`") from exc
            if index is None or index.ndim != self._ndim or len(index) != self._nodes:
                raise IndexCorruptError(f"the stored vector graph {prefix} does not fit the stored vectors; "
                                        "re-run `codesearch index`")
            self.__dict__["_index"] = index
        return index

    def __len__(self) -> int:
        return int(self._nodes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._view(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._view(), name, value)


def _usearch() -> Any:
    # onnxruntime first: `import usearch` loads numkong's extension into the global symbol namespace, and an
    # onnxruntime imported after it crashes the process (segfault in its pybind module; usearch 2.26.6,
    # numkong 7.8.6, onnxruntime 1.32.0). Imported first, both work.
    import onnxruntime  # noqa: F401
    try:
        from usearch import index
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError("indexes of 20k chunks or more need usearch: `pip install usearch`") from exc
    return index


def _ranked(ids: np.ndarray, scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """``ids`` and ``scores`` ordered by score descending, then by id, cut at ``depth``."""
    order = np.lexsort((ids, -scores))[:depth]
    return ids[order], scores[order]


def _range(scores: np.ndarray) -> tuple[float, float] | None:
    return (float(scores[-1]), float(scores[0])) if len(scores) else None


def _mapping(array: np.ndarray) -> mmap.mmap | None:
    """The memory map under ``array`` (``np.load(..., mmap_mode="r")``), or None when it is in memory."""
    base: Any = array
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    return base if isinstance(base, mmap.mmap) else None


class VectorSearch:
    """Dense candidates of one embedding tier: exact below :data:`EXACT_BELOW` rows, a rescored graph above.

    Build one with :meth:`build` (or :meth:`refresh` from the previous
    generation's), write it with :meth:`save`, map it again with :meth:`open`,
    and ask it with :meth:`top`.

    Args:
        vectors: the tier's float32 rows, L2-normalised (a memory map is fine:
            the graph path reads only the rows it rescores).
        covered: per row, whether the tier read it; ``None`` when it read every row.
        graph: the usearch index over the covered rows, or ``None`` for the exact path.
        rows: graph label -> row (``-1`` for removed labels); required with ``graph``.
        params: the graph's knobs.
    """

    def __init__(self, vectors: np.ndarray, covered: np.ndarray | None = None, graph: Index | None = None,
                 rows: np.ndarray | None = None, delta: np.ndarray | None = None,
                 params: GraphParams = GraphParams()) -> None:
        if vectors.ndim != 2:
            raise ValueError(f"VectorSearch takes a 2-d array of rows, got shape {vectors.shape}")
        if covered is not None and (covered.shape != (len(vectors),) or covered.dtype != np.bool_):
            raise ValueError(f"covered must be a boolean array of shape ({len(vectors)},), "
                             f"got {covered.dtype} {covered.shape}")
        if (graph is None) != (rows is None):
            raise ValueError("a graph needs its rows (label -> row) and rows need a graph")
        self.vectors = vectors
        self.covered = covered
        self.params = params
        self._graph = graph
        self._rows = rows
        self._delta = np.empty(0, dtype=np.int64) if delta is None else np.asarray(delta, dtype=np.int64)
        self._read = len(vectors) if covered is None else int(np.count_nonzero(covered))
        self._source: Path | None = None  # the file a mapped graph was opened from
        self._graph_array: np.ndarray | None = None  # the stored graph bytes a graph was opened from
        self._rows_map = _mapping(vectors) if graph is not None else None
        if self._rows_map is not None and hasattr(mmap, "MADV_RANDOM"):
            # Rescoring reads ~200 scattered rows: no read-ahead around them on a cold page cache.
            self._rows_map.madvise(mmap.MADV_RANDOM)

    # -- building ------------------------------------------------------------------

    @classmethod
    def build(cls, vectors: np.ndarray, covered: np.ndarray | None = None, *, params: GraphParams = GraphParams(),
              exact_below: int = EXACT_BELOW, threads: int = 0) -> VectorSearch:
        """A search over ``vectors``: exact below ``exact_below`` rows, else with a new graph of the covered rows.

        Args:
            threads: build threads (0: all cores).
        """
        search = cls(vectors, covered, params=params)
        if len(vectors) < exact_below:
            return search
        # Node i is the i-th read row.
        rows = np.arange(len(vectors), dtype=np.int64) if covered is None else np.flatnonzero(covered)
        graph = cls._new_graph(vectors.shape[1], params)
        if len(rows):
            graph.add(np.arange(len(rows), dtype=np.uint64), cls._rows_of(vectors, rows), threads=threads)
        return cls(vectors, covered, graph, rows, params=params)

    def refresh(self, vectors: np.ndarray, covered: np.ndarray | None, reuse: np.ndarray, *,
                exact_below: int = EXACT_BELOW, threads: int = 0) -> VectorSearch:
        """The search of the next generation: this graph as it is, plus the rows it lacks searched exactly.

        The graph is never patched: usearch's remove and add cost recall@100
        (0.9969 -> 0.9924 after three refreshes of 1% at 90k, even re-adding
        the same vectors; 0.990 -> 0.982 after two at 270k). A row whose vector
        is unchanged keeps its node (relabelled to its new row); a node whose row
        is gone or changed is dead (found, then dropped); rows without a node
        (new or changed) are the delta, multiplied exactly at each query. The
        graph is built anew when this one is exact, when the next one crosses
        ``exact_below``, or when dead nodes or delta rows pass ``params.rebuild_share``
        of the nodes, so a refresh costs array work, not a graph.

        Args:
            vectors, covered: the next generation's rows and which the tier read.
            reuse: int64, per next row, the row of this generation that holds the
                same vector (same chunk key, :func:`reuse_by_key`), or -1.
        """
        reuse = np.asarray(reuse, dtype=np.int64)
        if reuse.shape != (len(vectors),):
            raise ValueError(f"reuse must give one previous row per row, got shape {reuse.shape}")
        if self._graph is None or self._rows is None or len(vectors) < exact_below:
            return VectorSearch.build(vectors, covered, params=self.params, exact_below=exact_below, threads=threads)
        label_of = np.full(len(self.vectors), -1, dtype=np.int64)
        live = np.flatnonzero(self._rows >= 0)
        label_of[self._rows[live]] = live
        wanted = np.ones(len(vectors), dtype=bool) if covered is None else covered
        ok = wanted & (reuse >= 0) & (reuse < len(self.vectors))
        labels = np.where(ok, label_of[np.where(ok, reuse, 0)], -1)
        # A previous row reused twice (a duplicated chunk text) keeps its node for its first reuser only.
        holds = np.zeros(len(vectors), dtype=bool)
        _, first_at = np.unique(labels[labels >= 0], return_index=True)
        holds[np.flatnonzero(labels >= 0)[first_at]] = True
        rows = np.full(len(self._rows), -1, dtype=np.int64)
        rows[labels[holds]] = np.flatnonzero(holds)
        delta = np.flatnonzero(wanted & ~holds)
        dead = len(rows) - int(np.count_nonzero(holds))
        if max(dead, len(delta)) > self.params.rebuild_share * len(rows):
            return VectorSearch.build(vectors, covered, params=self.params, exact_below=exact_below, threads=threads)
        search = VectorSearch(vectors, covered, self._graph, rows, delta, self.params)
        search._source = self._source
        search._graph_array = self._graph_array
        return search

    @staticmethod
    def _new_graph(ndim: int, params: GraphParams) -> Index:
        return _usearch().Index(ndim=ndim, metric="ip", dtype=params.storage, connectivity=params.connectivity,
                                expansion_add=params.expansion_add, expansion_search=params.expansion_search)

    @staticmethod
    def _rows_of(vectors: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(vectors[rows], dtype=np.float32)

    # -- files -----------------------------------------------------------------------

    def save(self, folder: str | os.PathLike[str]) -> list[Path]:
        """Write the graph into ``folder`` (:data:`GRAPH_FILE`, :data:`ROWS_FILE`, :data:`DELTA_FILE`); returns them.

        A refreshed search's graph is the previous generation's file, unchanged:
        it is hard-linked where the file system allows, else copied. An exact
        search writes nothing (its rows are the tier's array, stored already).
        """
        if self._graph is None or self._rows is None:
            return []
        folder = Path(folder)
        graph_path, rows_path, delta_path = folder / GRAPH_FILE, folder / ROWS_FILE, folder / DELTA_FILE
        if self._source is not None and self._source.resolve() != graph_path.resolve():
            graph_path.unlink(missing_ok=True)
            try:
                os.link(self._source, graph_path)
            except OSError:
                shutil.copyfile(self._source, graph_path)
        elif self._source is None:
            self._graph.save(os.fspath(graph_path))
        np.save(rows_path, self._rows, allow_pickle=False)
        np.save(delta_path, self._delta, allow_pickle=False)
        return [graph_path, rows_path, delta_path]

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The graph as arrays for the index store (``<prefix>_graph``: usearch's bytes; ``_rows``, ``_delta``);
        none for an exact search. A refreshed graph is the stored one, unchanged."""
        if self._graph is None or self._rows is None:
            return {}
        graph = self._graph_array
        if graph is None:
            saved = self._graph.save()
            assert saved is not None  # saving to no path gives the bytes
            graph = np.frombuffer(saved, np.uint8)
        return {f"{prefix}_graph": graph, f"{prefix}_rows": np.asarray(self._rows, dtype=np.int64),
                f"{prefix}_delta": np.asarray(self._delta, dtype=np.int64)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str, vectors: np.ndarray,
                    covered: np.ndarray | None = None, *, params: GraphParams = GraphParams(),
                    before_view: Callable[[], None] | None = None) -> VectorSearch:
        """The search over ``vectors`` with the graph the store holds under ``prefix`` (viewed in place, memory-mapped
        when the arrays are, after ``before_view`` returns: the check of the graph's bytes); exact when there is none.

        Raises:
            IndexCorruptError: the graph does not fit ``vectors``.
        """
        graph_array = arrays.get(f"{prefix}_graph")
        if graph_array is None:
            return cls(vectors, covered, params=params)
        rows, delta = arrays.get(f"{prefix}_rows"), arrays.get(f"{prefix}_delta")
        for name, array in ((f"{prefix}_rows", rows), (f"{prefix}_delta", delta)):
            if (array is None or array.dtype != np.int64 or array.ndim != 1
                    or (len(array) and int(array.max()) >= len(vectors))):
                raise IndexCorruptError(f"the stored {name} do not fit the stored vectors; re-run `codesearch index`")
        assert rows is not None
        graph = _StoredGraph(graph_array, prefix, vectors.shape[1], len(rows), params.expansion_search, before_view)
        search = cls(vectors, covered, graph, rows, delta, params)  # type: ignore[arg-type]
        search._graph_array = graph_array
        return search

    @classmethod
    def open(cls, folder: str | os.PathLike[str] | None, vectors: np.ndarray, covered: np.ndarray | None = None,
             *, params: GraphParams = GraphParams(), exact_below: int = EXACT_BELOW) -> VectorSearch:
        """The search over ``vectors`` with the graph in ``folder`` memory-mapped (nothing read up front).

        Below ``exact_below`` rows the search is exact and ``folder`` is not read.

        Raises:
            IndexCorruptError: the graph is missing, damaged, or does not fit ``vectors``.
        """
        if len(vectors) < exact_below or folder is None:
            if len(vectors) >= exact_below:
                raise IndexCorruptError(f"an index of {len(vectors)} rows needs its graph ({GRAPH_FILE}); "
                                        "re-run `codesearch index`")
            return cls(vectors, covered, params=params)
        folder = Path(folder)
        graph_path, rows_path, delta_path = folder / GRAPH_FILE, folder / ROWS_FILE, folder / DELTA_FILE
        index = _usearch()
        try:
            meta = index.Index.metadata(os.fspath(graph_path))
            rows = np.load(rows_path, mmap_mode="r", allow_pickle=False)
            delta = np.load(delta_path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise IndexCorruptError(f"cannot read the vector graph in {folder}: {exc}; re-run `codesearch index`") from exc
        if not meta:
            raise IndexCorruptError(f"the vector graph {graph_path} is missing or damaged; re-run `codesearch index`")
        if meta.get("dimensions") != vectors.shape[1]:
            raise IndexCorruptError(f"the vector graph in {folder} holds {meta.get('dimensions')}-d vectors and the "
                                    f"index {vectors.shape[1]}-d rows; re-run `codesearch index`")
        for path, array in ((rows_path, rows), (delta_path, delta)):
            if array.dtype != np.int64 or array.ndim != 1 or (len(array) and int(array.max()) >= len(vectors)):
                raise IndexCorruptError(f"{path} does not fit the stored vectors; re-run `codesearch index`")
        # Searching reads labels off the nodes; usearch's label -> node table is not needed (it makes open 3x slower).
        graph = index.Index.restore(os.fspath(graph_path), view=True, expansion_search=params.expansion_search,
                                    enable_key_lookups=False)
        search = cls(vectors, covered, graph, rows, delta, params)
        search._source = graph_path
        return search

    # -- searching -------------------------------------------------------------------

    @property
    def exact(self) -> bool:
        """Whether this search computes the exact product (no graph)."""
        return self._graph is None

    def __len__(self) -> int:
        return len(self.vectors)

    def top(self, query: np.ndarray, depth: int, mask: np.ndarray | None = None) -> DenseCandidates:
        """The best ``depth`` rows for ``query`` among the rows in ``mask`` and read by the tier.

        Args:
            query: the query vector (float32, L2-normalised, the tier's model).
            depth: how many candidates (the ranking's ``max(k, depth)``).
            mask: boolean per row, the scope; ``None`` for the whole index.

        Returns:
            :class:`DenseCandidates`; on the exact path its ids, scores and range
            are those of ``top_k(vectors @ query, depth, mask & covered)``.

        Raises:
            ValueError: ``depth`` is negative or ``mask`` does not fit the rows.
        """
        if depth < 0:
            raise ValueError(f"top needs depth >= 0, got {depth}")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != (len(self.vectors),) or mask.dtype != np.bool_:
                raise ValueError(f"mask must be a boolean array of shape ({len(self.vectors)},), "
                                 f"got {mask.dtype} {mask.shape}")
        query = np.asarray(query, dtype=np.float32)
        if self._graph is None:
            return self._exact(query, depth, mask)
        return self._approximate(query, depth, mask)

    def _exact(self, query: np.ndarray, depth: int, mask: np.ndarray | None) -> DenseCandidates:
        # The ranking's own cut (ranking.candidates: candidates, score_ranges), kept step for step so results are bit-identical.
        scores = self.vectors @ query
        within = self.covered if mask is None else (mask if self.covered is None else mask & self.covered)
        ids = top_k(scores, depth, mask=within)
        whole = ids if mask is None else top_k(scores, depth, mask=self.covered)
        return DenseCandidates(ids, scores[ids], _range(scores[whole]))

    @property
    def expansion(self) -> int:
        """The ``ef`` a graph search runs with (0 on the exact path)."""
        if self._graph is None:
            return 0
        return max(self.params.expansion_search, math.ceil(self.params.expansion_share * len(self._graph)))

    def _search(self, query: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The graph's ``count`` nearest live rows and the delta rows, rescored against the float32 rows, ordered."""
        assert self._graph is not None and self._rows is not None
        count = min(count, len(self._graph))
        labels = np.empty(0, dtype=np.int64)
        if count > 0:
            # usearch's setter is there; its stub declares the property read-only.
            self._graph.expansion_search = max(self.expansion, count)  # type: ignore[misc]
            labels = np.asarray(self._graph.search(query, count, threads=1).keys, dtype=np.int64)
        ids = self._rows[labels]
        # Dead nodes are dropped; the rows without a node are all candidates.
        ids = np.sort(np.concatenate([ids[ids >= 0], self._delta]))  # sorted rows read the memory map in order
        return _ranked(ids, self.vectors[ids] @ query, len(ids))

    def _exact_within(self, query: np.ndarray, mask: np.ndarray, allowed: np.ndarray,
                      depth: int) -> tuple[np.ndarray, np.ndarray]:
        """The exact best ``depth`` of the ``allowed`` rows (``mask`` and read).

        A folder scope is a few runs of rows (chunks are in path order): those
        are multiplied in place; any other scope is gathered a block at a time
        (a bounded copy).
        """
        edges = np.flatnonzero(np.diff(mask.view(np.int8), prepend=0, append=0))
        if len(edges) <= 2 * _RUNS:
            ids = np.concatenate([np.arange(a, b) for a, b in zip(edges[::2], edges[1::2])] or [np.empty(0, np.int64)])
            scores = np.concatenate([self.vectors[a:b] @ query for a, b in zip(edges[::2], edges[1::2])]
                                    or [np.empty(0, np.float32)])
            keep = allowed[ids]
            return _ranked(ids[keep], scores[keep], depth)
        ids = np.flatnonzero(allowed)
        scores = np.empty(len(ids), dtype=np.float32)
        for start in range(0, len(ids), _BLOCK):
            block = ids[start:start + _BLOCK]
            scores[start:start + _BLOCK] = self.vectors[block] @ query
        return _ranked(ids, scores, depth)

    def _release(self) -> None:
        """Drop the float32 rows the last search rescored from this process's pages (the page cache keeps them).

        Each rescored row faults in the pages around it too (the kernel maps up
        to 64 KB per fault), so within a few dozen queries the whole mapped file
        counted in the RSS: 476 MB at 270k rows after 700 queries, 176 MB with
        a release before each search, at the same p50 (measured).
        """
        if self._rows_map is not None and hasattr(mmap, "MADV_DONTNEED"):
            self._rows_map.madvise(mmap.MADV_DONTNEED)

    def _approximate(self, query: np.ndarray, depth: int, mask: np.ndarray | None) -> DenseCandidates:
        self._release()
        fetch = math.ceil(depth * self.params.overfetch)
        if mask is None:
            ids, scores = self._search(query, fetch)
            ids, scores = ids[:depth], scores[:depth]
            return DenseCandidates(ids, scores, _range(scores))
        allowed = mask if self.covered is None else mask & self.covered
        in_scope = int(np.count_nonzero(allowed))
        small = in_scope <= self.params.exact_scope_rows
        if not small:
            # Read the scope off one deeper unscoped search (it gives the whole index's range too): as deep as
            # the scope's share asks, up to the ef the search pays for anyway.
            fetch = max(fetch, min(self.expansion, math.ceil(fetch * self._read / in_scope)))
        ids, scores = self._search(query, fetch)
        whole_range = _range(scores[:depth])
        if not small:
            keep = allowed[ids]
            if np.count_nonzero(keep) >= min(depth, in_scope):
                return DenseCandidates(ids[keep][:depth], scores[keep][:depth], whole_range)
        ids, scores = self._exact_within(query, mask, allowed, depth)
        return DenseCandidates(ids, scores, whole_range)


def reuse_by_key(previous_keys: list[str], keys: list[str]) -> np.ndarray:
    """Per chunk key of the next generation, the row of the previous one with the same key, or -1.

    The builder reuses a stored vector for an unchanged chunk text (same key),
    so the graph node of that row can be kept (:meth:`VectorSearch.refresh`).
    """
    first: dict[str, int] = {}
    for i, key in enumerate(previous_keys):
        first.setdefault(key, i)
    return np.array([first.get(key, -1) for key in keys], dtype=np.int64)


__all__ = ["DELTA_FILE", "EXACT_BELOW", "GRAPH_FILE", "ROWS_FILE", "TIER_PARAMS", "DenseCandidates", "GraphParams",
           "VectorSearch", "reuse_by_key"]
