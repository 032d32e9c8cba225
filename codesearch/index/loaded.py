"""An index in memory, as a query reads it: records, vectors, keywords and the facts the ranking reads.

:class:`LoadedIndex` has one constructor (from what the store holds or what a
build just made) and answers a query through the ranking pipeline (:meth:`LoadedIndex.rank`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from codesearch.exceptions import IndexCorruptError, ModelNotAvailableError
from codesearch.index.manifest import ARRAYS, BM25_PREFIX, IndexManifest
from codesearch.index.store import IndexSnapshot
from codesearch.keyword import BM25
from codesearch.ranking import IndexFacts, Ranking, rank_scores
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


@dataclass(slots=True)
class LoadedIndex:
    """An index in memory, ready to answer queries.

    Attributes:
        manifest: the typed manifest.
        records: one JSON record per chunk (path, lines, kind, key, symbols, text).
        vectors: each embedding tier's vectors, one row per chunk.
        bm25: the fitted keyword index.
        token: the store's ``CURRENT`` when this was committed or loaded.
        paths: each chunk's path.
        kinds: each chunk's kind.
        facts: what the ranking stages read.
        read: per chunk, whether the transformer read it; ``None`` when it read
            every chunk (or there is no transformer tier).
    """

    manifest: IndexManifest
    records: list[dict[str, Any]]
    vectors: dict[Tier, np.ndarray]
    bm25: BM25
    token: bytes | None = None
    paths: list[str] = field(init=False)
    kinds: list[str] = field(init=False)
    facts: IndexFacts = field(init=False)
    read: np.ndarray | None = field(init=False)

    def __post_init__(self) -> None:
        self.paths = [c["path"] for c in self.records]
        self.kinds = [c["kind"] for c in self.records]
        self.facts = IndexFacts(self.records)
        unread = self.manifest.unread_kinds or frozenset()
        read = np.array([kind not in unread for kind in self.kinds], dtype=bool)
        self.read = None if FULL not in self.vectors or read.all() else read

    @classmethod
    def from_snapshot(cls, snapshot: IndexSnapshot, token: bytes | None) -> LoadedIndex:
        """The index a store generation holds.

        Raises:
            IndexCorruptError: the arrays do not fit the chunk records.
        """
        bm25 = BM25.from_arrays({name[len(BM25_PREFIX):]: a for name, a in snapshot.arrays.items()
                                 if name.startswith(BM25_PREFIX)})
        vectors = {}
        for tier, name in ARRAYS.items():
            array = snapshot.arrays.get(name)
            if array is None:
                continue
            if len(array) != len(snapshot.chunks):
                raise IndexCorruptError(f"the stored {name} do not match the stored chunks; re-run `codesearch index`")
            if array.ndim == 2 and array.shape[1] > 0:  # a keyword-only build before tiers existed wrote (n, 0)
                vectors[tier] = array
        return cls(IndexManifest.from_json(snapshot.manifest), snapshot.chunks, vectors, bm25, token)

    def __len__(self) -> int:
        return len(self.records)

    def hit(self, i: int, score: float) -> Hit:
        """Chunk ``i`` as a search hit."""
        c = self.records[i]
        return Hit(c["path"], c["start_line"], c["end_line"], float(score), c["kind"], c["text"],
                   tuple(c.get("symbols", ())))

    def chunk_keys(self) -> list[str]:
        """Every chunk's key (:func:`~codesearch.index.builder.chunk_key`: the sha256 of its model input), in chunk order."""
        return [c["key"] for c in self.records]

    def chunks_of(self, path: str) -> list[int]:
        """The chunks of the file ``path``, in file order (empty when it is not indexed)."""
        return [i for i, p in enumerate(self.paths) if p == path]

    def related(self, path: str, line: int, k: int) -> list[tuple[int, float]]:
        """The ``k`` chunks most similar to the chunk of ``path`` at ``line`` (that chunk left out), best first.

        Similarity is the cosine of the transformer's vectors where it read the
        chunk, else of the static tier's.

        Raises:
            ValueError: no chunk of ``path`` covers ``line``.
            ModelNotAvailableError: the chunk has no vector (a keyword-only index,
                or a test file the transformer did not read and no static tier).
        """
        covering = [i for i in self.chunks_of(path)
                    if self.records[i]["start_line"] <= line <= self.records[i]["end_line"]]
        if not covering:
            raise ValueError(f"no indexed chunk of {path} covers line {line}")
        seed = covering[0]
        transformer_read = FULL in self.vectors and (self.read is None or bool(self.read[seed]))
        vectors = self.vectors.get(FULL if transformer_read else STATIC)
        if vectors is None:
            if FULL in self.vectors:
                raise ModelNotAvailableError(
                    f"the transformer did not read {path} (a {self.kinds[seed]} file) and the index has no "
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
             k: int, mask: np.ndarray | None) -> list[tuple[int, float]]:
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
            ranking: the knobs.
            k: how many hits are asked for.
            mask: chunks in scope, or ``None`` for all.

        Returns:
            ``(chunk, score)`` best first.
        """
        lists: dict[str, np.ndarray] = {}
        covered: dict[str, np.ndarray] = {}
        vectors = None
        with one_blas_thread():
            if mode != "dense":
                lists["bm25"] = self.bm25.score(query)
            if tier is not None and query_vector is not None:
                vectors = self.vectors[tier]
                lists[LIST_OF[tier]] = vectors @ query_vector
                if tier == FULL and self.read is not None:
                    covered[LIST_OF[tier]] = self.read
            return rank_scores(query, lists, self.facts, ranking, k, mask, vectors, covered)


__all__ = ["LIST_OF", "LoadedIndex", "one_blas_thread"]
