"""One repository of a corpus in memory, as a single index of it would be: what a search scoped to it reads.

A :class:`RepoView` holds the repository's rows read from the chunks table
once (cached by the caller per table version: :class:`ViewCache`), in the
order a single index holds them (files by path, chunks by their place in the
file), with its own BM25 statistics (the stored fit, or one made from its
terms), its vectors and :class:`~codesearch.ranking.ChunkFacts`. Every
retriever scores every chunk of the repository, as in a single index
(:func:`codesearch.index.loaded.rank_exactly`), so the ranking sees exactly
what a single index of that repository gives it.
"""

from __future__ import annotations

from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from codesearch.chunking.symbols import SymbolScan
from codesearch.corpus.keywords import view_order
from codesearch.corpus.schema import sql_in, sql_string, wide_strings
from codesearch.index.loaded import rank_exactly
from codesearch.keyword import BM25
from codesearch.keyword.arrow import fit_term_column
from codesearch.ranking.config import Ranking
from codesearch.ranking.facts import ChunkFacts
from codesearch.scope import Scope
from codesearch.types import FULL, STATIC, Mode, Tier

if TYPE_CHECKING:
    import lance
    import pyarrow as pa

COLUMN_OF: dict[str, str] = {FULL: "vector", STATIC: "static_vector"}
"""The chunks table's column of each embedding tier's vectors."""


class StaleKeywords(Exception):
    """A repository's stored BM25 fit is not that of the rows read (read its terms and fit them)."""


class RepoView:
    """One repository of a corpus, in memory as a single index of it would be.

    Args:
        repo: its name.
        rows: its rows of the chunks table (any order; sorted here by path and place in file).
        static_dim, full_dim: the vector sizes (for a repository with no row of a tier's vectors).
        keywords: its stored BM25 fit (:func:`~codesearch.corpus.keywords.read_stored`): its chunk ids in order and
            the fit; used when they are the ids of ``rows``, else the fit is made from ``rows``' ``keyword_text``.
        chunks: the chunks table at the version ``rows`` come from, to read later what they lack: the transformer's
            vectors (``vector``, read when a query of that tier first comes; ``has_full``: whether the repository
            has them) and the texts (:meth:`text_of`).

    Raises:
        StaleKeywords: ``keywords`` is not the fit of ``rows`` and ``rows`` has no ``keyword_text`` to fit.
    """

    def __init__(self, repo: str, rows: pa.Table, static_dim: int, full_dim: int,
                 keywords: tuple[np.ndarray, BM25] | None = None, chunks: lance.LanceDataset | None = None,
                 has_full: bool = False) -> None:
        self.repo = repo
        self._chunks = chunks
        self._full_dim = full_dim
        rows = wide_strings(rows, ["keyword_text"])
        order = view_order(rows)
        vectors = {tier: rows[column] for tier, column in COLUMN_OF.items() if column in rows.column_names}
        rows = rows.drop_columns([COLUMN_OF[tier] for tier in vectors]).take(order)
        order = order.to_numpy()  # the vectors are put in order as matrices (Arrow's take of them costs 1-2 ms)
        self.ids = np.asarray(rows["chunk_id"].to_numpy(), dtype=np.int64)
        # Where each row is in the table, to read hits' texts by row id (4-10 ms by chunk id at 1M rows, 1-2 by row id).
        self.row_ids = rows["_rowid"].to_numpy() if "_rowid" in rows.column_names else None
        if keywords is not None and np.array_equal(keywords[0], self.ids):
            self.bm25 = keywords[1]
        elif "keyword_text" in rows.column_names:
            self.bm25 = fit_term_column(rows["keyword_text"])
        else:
            raise StaleKeywords(f"the stored keywords of {repo!r} are not those of its chunks")
        self.texts: pa.Array | None = None  # read on a second query (:meth:`text_of`)
        self._queries = 0
        self.start = rows["start_line"].to_numpy()
        self.end = rows["end_line"].to_numpy()
        self.kinds = rows["kind"].to_pylist()
        self.symbols = rows["symbols"].to_pylist()
        paths = rows["path"].to_pylist()
        files: list[str] = []
        file_of = np.empty(len(paths), dtype=np.int64)
        for i, path in enumerate(paths):
            if not files or files[-1] != path:
                files.append(path)
            file_of[i] = len(files) - 1
        self.paths = files
        self.file_of = file_of
        # Definitions are looked for name by name: a view is often opened for one query.
        self.facts = ChunkFacts.from_columns(files, file_of, SymbolScan(self.symbols))
        self.read = np.asarray(rows["read"].to_numpy(zero_copy_only=False), dtype=bool)
        self.vectors: dict[Tier, np.ndarray] = {STATIC: _matrix(vectors[STATIC], static_dim)[order]}
        self._has_full = has_full
        if FULL in vectors:
            self._has_full = vectors[FULL].null_count < len(rows)
            if self._has_full:
                self.vectors[FULL] = _matrix(vectors[FULL], full_dim)[order]
        self._file_kind = [self.kinds[int(np.searchsorted(file_of, n))] for n in range(len(files))]

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def nbytes(self) -> int:
        texts = self.texts.nbytes if self.texts is not None else 0
        return sum(v.nbytes for v in self.vectors.values()) + self.bm25.postings_.data.nbytes * 2 + texts

    def _full_vectors(self) -> bool:
        """Whether the transformer read any chunk of the repository; its vectors read on the first call (the
        largest column, 4-18 ms at 1M chunks, so left out of a view until that tier is asked for)."""
        if self._has_full and FULL not in self.vectors:
            column = self._column("vector")
            if column.null_count == len(column):  # every row cut again by a static refresh
                self._has_full = False
            else:
                self.vectors[FULL] = _matrix(column, self._full_dim)
        return self._has_full

    def _column(self, name: str) -> pa.Array:
        """Column ``name`` of the repository's rows, in the view's order."""
        import pyarrow as pa
        import pyarrow.compute as pc

        assert self._chunks is not None
        table = wide_strings(self._chunks.to_table(columns=["chunk_id", name], filter=f"repo = {sql_string(self.repo)}"),
                             [name])
        return table[name].take(pc.index_in(pa.array(self.ids), value_set=table["chunk_id"])).combine_chunks()

    def text_of(self, rows: list[int]) -> list[str]:
        """The texts of chunks ``rows``: the first query reads its hits' alone; a second reads the repository's
        texts once (a view opened for one query does not pay them, a view queried again answers from memory: 4 ms
        a query less, measured at 10k chunks)."""
        self._queries += 1
        if self.texts is None and self._queries > 1:
            self.texts = self._column("text")
        if self.texts is None:
            assert self._chunks is not None
            if not rows:
                return []
            if self.row_ids is not None:  # by row id: 1-2 ms at 1M rows, against 5 for a `_rowid IN` filter
                table = self._chunks._take_rows([int(self.row_ids[i]) for i in rows], columns=["text"])
                return [text or "" for text in table["text"].to_pylist()]
            ids = [int(self.ids[i]) for i in rows]
            table = self._chunks.to_table(columns=["chunk_id", "text"], filter=sql_in("chunk_id", ids))
            found = dict(zip(table["chunk_id"].to_pylist(), table["text"].to_pylist()))
            return [found.get(i) or "" for i in ids]
        return [self.texts[i].as_py() or "" for i in rows]

    def scope_mask(self, where: Scope) -> np.ndarray | None:
        """The chunks ``where`` keeps (decided per file), or ``None`` for all."""
        if where.is_unrestricted:
            return None
        return where.mask(self.paths, self._file_kind)[self.file_of]

    def tier_for(self, mask: np.ndarray | None) -> Tier:
        """The transformer's tier when it read a chunk in scope, else the static tier (as a single index answers)."""
        if not self._full_vectors():
            return STATIC
        read = self.read if mask is None else self.read & mask
        return FULL if read.any() else STATIC

    def rank(self, query: str, mode: Mode, tier: Tier | None, query_vector: np.ndarray | None, ranking: Ranking, k: int,
             mask: np.ndarray | None) -> list[tuple[int, float]]:
        """The ``k`` best rows for ``query`` within ``mask``: every chunk scored, then the ranking pipeline."""
        if tier == FULL:
            self._full_vectors()
        return rank_exactly(query, mode, tier, query_vector, self.bm25, self.vectors,
                            None if self.read.all() else self.read, self.facts, ranking, k, mask)


class ViewCache:
    """Repository views by (name, table version), least recently used first, within ``budget`` bytes.

    A view grows as its texts and the transformer's vectors are read, so the
    caller says :meth:`resized` after each search; the cache keeps each view's
    last measured size, so that a search does not sum every view's (720 views
    cost 5 ms a query that way).
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._views: OrderedDict[tuple[str, int], RepoView] = OrderedDict()
        self._sizes: dict[tuple[str, int], int] = {}
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._views)

    def get(self, key: tuple[str, int]) -> RepoView | None:
        found = self._views.get(key)
        if found is not None:
            self._views.move_to_end(key)
        return found

    def put(self, key: tuple[str, int], view: RepoView) -> None:
        self._views[key] = view
        self._views.move_to_end(key)
        self.resized(key)

    def resized(self, key: tuple[str, int]) -> None:
        """Measure the view at ``key`` again, then drop the least recently used views past the budget (never the
        most recent)."""
        view = self._views.get(key)
        if view is not None:
            size = view.nbytes
            self.nbytes += size - self._sizes.get(key, 0)
            self._sizes[key] = size
        while self.nbytes > self.budget and len(self._views) > 1:
            old, _ = self._views.popitem(last=False)
            self.nbytes -= self._sizes.pop(old)

    def clear(self) -> None:
        self._views.clear()
        self._sizes.clear()
        self.nbytes = 0


def _matrix(column: Any, dim: int) -> np.ndarray:
    """A fixed-size-list column as an ``(n, dim)`` float32 matrix, zeros for null rows."""
    import pyarrow as pa

    column = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if column.null_count == 0:  # the common case: the values as they are (a copy only if they are not float32)
        return np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float32).reshape(len(column), dim)
    out = np.zeros((len(column), dim), dtype=np.float32)
    if len(column) == 0:
        return out
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if valid.any():
        values = column.filter(pa.array(valid)).flatten().to_numpy(zero_copy_only=False)
        out[valid] = np.asarray(values, dtype=np.float32).reshape(-1, dim)
    return out


@lru_cache(maxsize=1)
def read_pool() -> ThreadPoolExecutor:
    """The threads a search's independent reads run on (started once per process)."""
    return ThreadPoolExecutor(4, thread_name_prefix="codesearch-corpus")


__all__ = ["COLUMN_OF", "RepoView", "StaleKeywords", "ViewCache", "read_pool"]
