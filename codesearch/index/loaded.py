"""An index in memory, as a query reads it: records, vectors, keywords and the facts the ranking reads.

:class:`LoadedIndex` has one constructor (from what the store holds or what a
build just made) and answers a query through the ranking pipeline (:meth:`LoadedIndex.rank`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import numpy as np

from codesearch.chunking.symbols import SymbolTable
from codesearch.exceptions import IndexCorruptError, ModelNotAvailableError
from codesearch.files.kinds import KINDS
from codesearch.index.columns import KIND_CODES, ChunkColumns
from codesearch.index.integrity import Verification
from codesearch.index.manifest import ARRAYS, BM25_PREFIX, IndexManifest
from codesearch.index.snapshot import IndexSnapshot
from codesearch.index.vectors import TIER_PARAMS, VectorSearch
from codesearch.keyword import BM25
from codesearch.ranking import ChunkFacts, Ranking, candidates_from_scores, rank, rank_scores
from codesearch.scope import Scope
from codesearch.types import FULL, STATIC, Hit, Mode, Tier

LIST_OF: dict[Tier, str] = {FULL: "dense", STATIC: "static"}
"""The ranking's name for each embedding tier's list."""


@lru_cache(maxsize=1)
def _blas_controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread() -> Any:
    """A context in which numpy's BLAS runs on one thread.

    A query's products are small, and OpenBLAS's threads keep spinning after
    one: on a loaded machine they took the cores from onnxruntime's query
    embedding (gson p50 15-32 ms against 6-7 ms on one BLAS thread, same run).
    """
    return _blas_controller().limit(limits=1, user_api="blas")


class LoadedIndex:
    """An index in memory (its arrays memory-mapped when opened from the store), ready to answer queries.

    Args:
        manifest: the typed manifest.
        columns: the chunk records as columns.
        vectors: each embedding tier's vectors, one row per chunk.
        bm25: the fitted keyword index.
        symbols: the symbol table.
        token: the store's ``CURRENT`` when this was committed or loaded.
        verification: the background check of a memory-mapped generation's sha256.

    Attributes:
        facts: what the ranking stages read.
        read: per chunk, whether the transformer read it; ``None`` when it read
            every chunk (or there is no transformer tier).
        unstored: the files this index holds as they were re-read into memory, which the stored generation it
            was built on (``token``) holds otherwise or not at all; empty for an index as committed.
    """

    def __init__(self, manifest: IndexManifest, columns: ChunkColumns, vectors: dict[Tier, np.ndarray], bm25: BM25,
                 symbols: SymbolTable, token: bytes | None = None, verification: Verification | None = None) -> None:
        self.manifest = manifest
        self.columns = columns
        self.vectors = vectors
        self.bm25 = bm25
        self.symbols = symbols
        self.token = token
        self.verification = verification
        self.searches: dict[Tier, VectorSearch] = {}
        self.facts = ChunkFacts.from_columns(columns.paths.tolist(), np.asarray(columns.file_of), symbols,
                                             _file_kinds(columns))
        unread = {KIND_CODES[k] for k in manifest.unread_kinds or ()}
        read = ~np.isin(columns.kind, list(unread)) if unread else None
        self.read = None if FULL not in vectors or read is None or read.all() else read
        self.unstored: frozenset[str] = frozenset()

    @classmethod
    def from_snapshot(cls, snapshot: IndexSnapshot, token: bytes | None) -> LoadedIndex:
        """The index a store generation holds (arrays memory-mapped or read; nothing copied).

        Raises:
            IndexCorruptError: the arrays do not fit together, or come from an older codesearch.
        """
        arrays = snapshot.arrays
        manifest = IndexManifest.from_json(snapshot.manifest)
        bm25 = BM25.from_arrays({name[len(BM25_PREFIX):]: a for name, a in arrays.items() if name.startswith(BM25_PREFIX)})
        columns = ChunkColumns.from_arrays(arrays)
        try:
            symbols = SymbolTable.from_arrays(arrays, len(columns))
        except KeyError:
            raise IndexCorruptError("the index has no symbol table (an index from an older codesearch); "
                                    "re-run `codesearch index`") from None
        if bm25.shape_[0] != len(columns) or (manifest.n_chunks and manifest.n_chunks != len(columns)):
            raise IndexCorruptError("the stored keywords, chunks and manifest count different chunks; "
                                    "re-run `codesearch index`")
        vectors = {}
        for tier, name in ARRAYS.items():
            array = arrays.get(name)
            if array is None:
                continue
            facts = manifest.of(tier)
            if array.ndim != 2 or len(array) != len(columns) or (facts is not None and facts.dim
                                                                 and array.shape[1] != facts.dim):
                raise IndexCorruptError(f"the stored {name} do not match the stored chunks; re-run `codesearch index`")
            vectors[tier] = array
        loaded = cls(manifest, columns, vectors, bm25, symbols, token, snapshot.verification)
        for tier, array in vectors.items():
            # The graph is read by native code: its files' sha256 are checked before it is first viewed.
            check = None if snapshot.verification is None else functools.partial(
                _check_graph, snapshot.verification, tier)
            loaded.searches[tier] = VectorSearch.from_arrays(arrays, graph_prefix(tier), array,
                                                             loaded.read if tier == FULL else None,
                                                             params=TIER_PARAMS[tier], before_view=check)
        return loaded

    def __len__(self) -> int:
        return len(self.columns)

    def check(self, tiers: Iterable[Tier] = (), *, wait: bool = False) -> None:
        """Raise when a file of the index was found damaged (see :class:`~codesearch.index.store.Verification`).

        Args:
            tiers: the embedding tiers an answer reads.
            wait: first have the sha256 of every file an answer from ``tiers`` reads checked (every file but the
                vectors and graphs of the other tiers), hashing here those the background check has not reached.
                Without it, an answer may come before the verdict, never after a failed one.

        Raises:
            IndexCorruptError: the message names the damaged file.
        """
        if self.verification is None:
            return
        if wait:
            self.verification.require(self.files_read(tiers))
        self.verification.check()

    def files_read(self, tiers: Iterable[Tier] = ()) -> set[str]:
        """The files of the generation an answer from ``tiers`` reads: all but other tiers' vectors and graphs."""
        assert self.verification is not None
        wanted = set(tiers)
        others = [(f"{ARRAYS[t]}.npy", f"{graph_prefix(t)}_") for t in ARRAYS if t not in wanted]
        return {name for name in self.verification.files
                if not any(name == vectors or name.startswith(graph) for vectors, graph in others)}

    def hit(self, i: int, score: float) -> Hit:
        """Chunk ``i`` as a search hit (its text read now)."""
        c = self.columns
        return Hit.of(c.path(i), c.start[i], c.end[i], score, c.kind_name(i), c.text(i), c.symbols_of(i))

    def locations(self) -> list[tuple[str, int, int]]:
        """Every chunk's ``(path, start_line, end_line)``, in chunk order."""
        paths = self.columns.paths.tolist()
        c = self.columns
        return [(paths[f], s, e) for f, s, e in zip(c.file_of.tolist(), c.start.tolist(), c.end.tolist())]

    def known_stats(self) -> dict[str, tuple[int, int]]:
        """Every file the index read (indexed or skipped for its content) -> ``(size, mtime_ns)``: what the stat
        pass compares."""
        c = self.columns
        return dict(zip(c.paths.tolist(), zip(c.file_size.tolist(), c.file_mtime.tolist())))

    def scope_mask(self, where: Scope) -> np.ndarray | None:
        """The chunks ``where`` keeps (decided once per file), or ``None`` when it keeps every chunk."""
        if where.is_unrestricted:
            return None
        c = self.columns
        per_file = where.mask(c.paths.tolist(), _file_kinds(c))
        return per_file[c.file_of]

    def chunks_of(self, path: str) -> list[int]:
        """The chunks of the file ``path``, in file order (empty when it is not indexed)."""
        number = self.columns.paths.find(path)
        return list(self.columns.rows_of_file(number)) if number is not None else []

    def related(self, path: str, line: int, k: int) -> list[tuple[int, float]]:
        """The ``k`` chunks most similar to the chunk of ``path`` at ``line`` (that chunk left out), best first.

        Similarity is the cosine of the transformer's vectors where it read the
        chunk, else of the static tier's.

        Raises:
            ValueError: no chunk of ``path`` covers ``line``.
            ModelNotAvailableError: the chunk has no vector (a keyword-only index,
                or a test file the transformer did not read and no static tier).
        """
        c = self.columns
        covering = [i for i in self.chunks_of(path) if int(c.start[i]) <= line <= int(c.end[i])]
        if not covering:
            raise ValueError(f"no indexed chunk of {path} covers line {line}")
        seed = covering[0]
        transformer_read = FULL in self.vectors and (self.read is None or bool(self.read[seed]))
        vectors = self.vectors.get(FULL if transformer_read else STATIC)
        if vectors is None:
            if FULL in self.vectors:
                raise ModelNotAvailableError(
                    f"the transformer did not read {path} (a {c.kind_name(seed)} file) and the index has no "
                    "static tier; re-index with `codesearch index --embed-tests`")
            raise ModelNotAvailableError("this index is keyword-only; related code needs vectors")
        with one_blas_thread():
            scores = vectors @ vectors[seed]
        if transformer_read and self.read is not None:
            scores[~self.read] = -np.inf
        scores[seed] = -np.inf
        order = np.argsort(-scores, kind="stable")[:k]
        return [(int(i), float(scores[i])) for i in order if np.isfinite(scores[i])]

    def rank(self, query: str, mode: Mode, tier: Tier | None, query_vector: np.ndarray | None, ranking: Ranking,
             k: int, mask: np.ndarray | None, static_vector: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The ``k`` best chunks for ``query`` within ``mask``, through the ranking pipeline.

        Each retriever scores every chunk (BM25 postings, one matrix product
        for the embedding tier) and :func:`~codesearch.ranking.rank_scores`
        cuts the lists in scope and ranks them.

        Args:
            query: the query text (BM25 reads it unless ``mode`` is ``dense``).
            mode: ``bm25``, ``dense`` or ``hybrid``.
            tier: the embedding tier that answers (``full`` or ``static``), or
                ``None`` for keywords alone.
            query_vector: the query embedded by that tier's model.
            static_vector: with the full tier, the query embedded by the
                static model, for the static list as a third list
                (``ranking.static_share``).
            ranking: the knobs.
            k: how many hits are asked for.
            mask: chunks in scope, or ``None`` for all.

        Returns:
            ``(chunk, score)`` best first.
        """
        search = self.searches.get(tier) if tier is not None else None
        if tier is not None and search is not None and not search.exact and query_vector is not None \
                and static_vector is None:
            return self._rank_through_graph(search, query, mode, tier, query_vector, ranking, k, mask)
        self.check()
        return rank_exactly(query, mode, tier, query_vector, self.bm25, self.vectors, self.read, self.facts, ranking, k,
                            mask, static_vector)

    def _rank_through_graph(self, search: VectorSearch, query: str, mode: Mode, tier: Tier, query_vector: np.ndarray,
                            ranking: Ranking, k: int, mask: np.ndarray | None) -> list[tuple[int, float]]:
        """:meth:`rank` with the embedding list's candidates from its graph (an index of many chunks): keywords as
        ever, the graph's best rows rescored exactly, and the whole index's range of them."""
        self.check()
        with one_blas_thread():
            keywords = {"bm25": self.bm25.score(query)} if mode != "dense" else {}
            found = candidates_from_scores(keywords, self.facts, ranking, k, mask)
            dense = search.top(query_vector, max(k, ranking.depth), mask)
            name = LIST_OF[tier]
            found.ranked[name] = dense.ids.tolist()
            found.scores[name] = np.asarray(dense.scores, dtype=np.float64)
            if ranking.score_share and dense.whole_range is not None:
                found.ranges[name] = dense.whole_range
            return rank(query, found, self.facts.scoped(mask), ranking, k, self.vectors[tier])


def rank_exactly(query: str, mode: Mode, tier: Tier | None, query_vector: np.ndarray | None, bm25: BM25,
                 vectors: Mapping[Tier, np.ndarray], read: np.ndarray | None, facts: ChunkFacts, ranking: Ranking,
                 k: int, mask: np.ndarray | None, static_vector: np.ndarray | None = None) -> list[tuple[int, float]]:
    """Every chunk scored by each list the call asks for (BM25 unless ``mode`` is dense; ``tier``'s vectors by the
    query's, ``read`` the rows the transformer read or ``None`` for all; with ``static_vector`` the static vectors as a
    third list), then the ranking pipeline: a single index's exact path and a corpus repository's view alike."""
    lists: dict[str, np.ndarray] = {}
    covered: dict[str, np.ndarray] = {}
    scored = None
    with one_blas_thread():
        if mode != "dense":
            lists["bm25"] = bm25.score(query)
        if tier is not None and query_vector is not None:
            scored = vectors[tier]
            lists[LIST_OF[tier]] = scored @ query_vector
            if tier == FULL and read is not None:
                covered[LIST_OF[tier]] = read
            if tier == FULL and static_vector is not None:
                lists[LIST_OF[STATIC]] = vectors[STATIC] @ static_vector
        return rank_scores(query, lists, facts, ranking, k, mask, scored, covered)


def _check_graph(verification: Verification, tier: Tier) -> None:
    """Before a tier's stored graph is first viewed: its files' sha256 checked (waiting for them if need be)."""
    prefix = f"{graph_prefix(tier)}_"
    verification.require({name for name in verification.files if name.startswith(prefix)})


def _file_kinds(columns: ChunkColumns) -> list[str]:
    """Each file's kind, its chunks' (a file without chunks: the first kind; nothing reads it)."""
    file_kind = np.zeros(columns.n_files, dtype=np.uint8)
    file_kind[columns.file_of] = columns.kind
    return [KINDS[k] for k in file_kind.tolist()]


def graph_prefix(tier: Tier) -> str:
    """The names under which the store keeps a tier's vector graph (``ann_vectors_graph``, ...)."""
    return f"ann_{ARRAYS[tier]}"


__all__ = ["LIST_OF", "LoadedIndex", "graph_prefix", "one_blas_thread"]
