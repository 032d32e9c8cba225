"""Where a corpus search's candidates and ranking facts come from: one repository's view, or the corpus's indexes.

Both feed the same ranking (:mod:`codesearch.ranking`: its candidate stage and
:class:`~codesearch.ranking.ChunkFacts`); neither ranks anything itself.

- :class:`RepoView`, for a search scoped to one repository: that
  repository's rows read from the chunks table once (cached by the caller per
  table version), in the order a single index holds them (files by path,
  chunks by their place in the file), with its own BM25 statistics, its
  vectors and :class:`~codesearch.ranking.ChunkFacts`. Every retriever scores
  every chunk of the repository, as in a single index, so the ranking sees
  exactly what a single index of that repository gives it.
- :class:`CorpusSource`, across repositories (all, or several named): each
  list's candidates from Lance (the vector index with ``minimum_nprobes`` and
  a refine step, the full-text index) with the scope as a prefilter,
  definitions from the label-list index over the chunks' definition names, and
  the path words, stems and priors of the files of the repositories searched
  (a :class:`~codesearch.ranking.FileFacts` kept per files-table version). The
  rows a query reads are numbered in (repository, path, place in file) order,
  so equal scores are ordered as a single index orders them, and the
  candidate stage (:func:`~codesearch.ranking.candidates_from_pairs`) cuts them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from codesearch.chunking.symbols import SymbolScan
from codesearch.corpus.keywords import full_text, view_order
from codesearch.corpus.schema import sql_in, sql_string, wide_strings
from codesearch.corpus.store import index_kind
from codesearch.files.kinds import KINDS
from codesearch.index.loaded import LIST_OF, one_blas_thread, rank_exactly
from codesearch.keyword import BM25
from codesearch.keyword.arrow import fit_term_column
from codesearch.ranking import ChunkFacts, FileFacts, Ranking, candidates_from_pairs, rank
from codesearch.ranking.candidates import keyword_multipliers
from codesearch.ranking.query import analyze_query
from codesearch.scope import Scope
from codesearch.types import FULL, STATIC, Mode, Tier

if TYPE_CHECKING:
    import lance
    import pyarrow as pa

COLUMN_OF: dict[str, str] = {FULL: "vector", STATIC: "static_vector"}
KEY_COLUMNS = ["chunk_id", "repo", "path", "ordinal"]
"""What orders a list's equal scores: each candidate's id, repository, path and place in file (:class:`RowKeys`; the
rest is read once, for the hits)."""
ROW_COLUMNS = ["start_line", "end_line", "kind", "symbols", "text"]
MINIMUM_NPROBES = 40
"""IVF partitions searched at least (never ``nprobes`` alone, which also caps them and loses rows under a prefilter)."""
MAXIMUM_NPROBES = 80
"""IVF partitions searched at most on a first try; a search that finds fewer rows than it asked for (a selective
prefilter) is run again without the cap. Uncapped, Lance probed far more partitions than needed on the 1M-row
corpus of repeated chunks (154 ms a search; capped at 40 of 228: 34 ms). Static vectors' recall@100 there with
IVF_SQ: 0.94 at 20-40 partitions, 0.96 at 30-60 (ANN p50 51 and 53 ms), 0.96 at 40-80 (77 ms); 1.000 at 10k and
100k. With IVF_FLAT on 50 DEV queries: 0.94 at 30-60 (12 ms), 0.96 at 50-100 (17 ms), 0.98 at 80-160 (21 ms), and
1.00 at 30-60 on 50 other queries. With twice the partitions (:func:`~codesearch.corpus.store.ivf_partitions`,
2,000 at 1M rows), 40-80: 0.98 in 8.2 ms, against 0.96 in 6.0 ms at 30-60 (the sample of 50 DEV queries)."""
REFINE_FACTOR = 2
"""A quantised vector index's distances (IVF_SQ, as corpora made before IVF_FLAT have until their next optimize)
re-ranked exactly over this many times ``k`` rows."""
OVERFETCH = 2
"""Lists fetched this many times deeper where scope globs or keyword priors are applied after the fetch."""


def nearest_options(ds: lance.LanceDataset, column: str, exact: bool = False) -> dict[str, Any]:
    """Lance's ``nearest`` options for a search of ``column`` (without ``q`` and ``k``): the index probed at least
    :data:`MINIMUM_NPROBES` partitions and at most :data:`MAXIMUM_NPROBES`, refined where it quantises; or, with
    ``exact``, every row scored."""
    options: dict[str, Any] = {"column": column, "metric": "dot", "use_index": not exact}
    if not exact:
        options.update(minimum_nprobes=MINIMUM_NPROBES, maximum_nprobes=MAXIMUM_NPROBES)
        if index_kind(ds, column) not in (None, "IVF_FLAT"):  # quantised distances (IVF_SQ): refined exactly
            options["refine_factor"] = REFINE_FACTOR
    return options


def scope_sql(where: Scope) -> list[str]:
    """The parts of a scope a Lance prefilter can apply: the path prefix and the kinds (globs are matched after)."""
    parts = []
    if where.prefix is not None:
        prefix = where.prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        parts.append(f"(path = {sql_string(where.prefix)} OR path LIKE {sql_string(prefix + '/%')} ESCAPE '\\')")
    kinds = [k for k in KINDS if where.allows_kind(k)]
    if len(kinds) < len(KINDS):
        parts.append(sql_in("kind", kinds))
    return parts


def _and(parts: Iterable[str | None]) -> str | None:
    kept = [f"({p})" for p in parts if p]
    return " AND ".join(kept) if kept else None


# -- one repository ------------------------------------------------------------------------


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


# -- across repositories -------------------------------------------------------------------


class FileSet:
    """The files of some repositories, numbered, with their :class:`~codesearch.ranking.FileFacts` (path words, stems
    and priors)."""

    def __init__(self, repos: Sequence[str], paths: Sequence[str]) -> None:
        self.number = {(repo, path): i for i, (repo, path) in enumerate(zip(repos, paths))}
        self.facts = FileFacts(paths)


@dataclass
class Found:
    """One query's rows across repositories: ``rows[i]`` is chunk ``i`` of the ranking (a dict of its columns)."""

    rows: list[dict[str, Any]]
    ranked: list[tuple[int, float]]


class RowKeys:
    """What orders equal scores (:data:`KEY_COLUMNS`) for every row of the chunks table at one version, by row id.

    Read once per version (one scan of four columns: 1 s at 1M rows, 25 MB
    kept), so that a search's lists read row ids and scores alone: reading
    those columns for their rows inside each index's search cost 5-8 ms a
    list at 1M rows, most of the work of an org-wide query besides the two
    searches themselves.
    """

    def __init__(self, ds: lance.LanceDataset) -> None:
        import pyarrow.compute as pc

        self.version = ds.version
        table = ds.to_table(columns=KEY_COLUMNS, with_row_id=True)
        row_ids = np.asarray(table["_rowid"].to_numpy(), dtype=np.uint64)
        order = np.argsort(row_ids, kind="stable") if np.any(row_ids[1:] < row_ids[:-1]) else None
        files = pc.dictionary_encode(pc.binary_join_element_wise(table["repo"], table["path"], "\0")).combine_chunks()
        self.row_ids = row_ids if order is None else row_ids[order]
        columns = {"chunk_id": table["chunk_id"].to_numpy(), "ordinal": table["ordinal"].to_numpy(),
                   "file": files.indices.to_numpy()}
        self.chunk_ids, self.ordinals, self.file_of = (v if order is None else v[order] for v in columns.values())
        self.files = [tuple(key.split("\0", 1)) for key in files.dictionary.to_pylist()]

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.row_ids, self.chunk_ids, self.ordinals, self.file_of)) + 64 * len(self.files)

    def rows(self, row_ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The rows ``row_ids`` (those of this version) as dicts of :data:`KEY_COLUMNS` and ``_rowid``."""
        wanted = np.asarray(row_ids, dtype=np.uint64)
        at = np.minimum(np.searchsorted(self.row_ids, wanted), len(self.row_ids) - 1)
        out = {}
        for row_id, i in zip(wanted.tolist(), at.tolist()):
            if self.row_ids[i] == row_id:
                repo, path = self.files[self.file_of[i]]
                out[row_id] = {"chunk_id": int(self.chunk_ids[i]), "repo": repo, "path": path,
                               "ordinal": int(self.ordinals[i]), "_rowid": row_id}
        return out


class CorpusSource:
    """Candidates and facts of a search across repositories, from the chunks table's indexes.

    Args:
        chunks: the chunks table at the corpus's version.
        files: ``(repos, paths)`` of every file with chunks of the repositories searched.
        repos: the repositories searched (``None``: all).
        exact: score vectors by exact search instead of the vector index (the benchmark's reference).
        keys: the table's :class:`RowKeys` at ``chunks``' version (read here when not given or of another).
    """

    def __init__(self, chunks: lance.LanceDataset, files: FileSet, repos: Sequence[str] | None,
                 exact: bool = False, keys: RowKeys | None = None) -> None:
        self.ds = chunks
        self.files = files
        self.repos = list(repos) if repos is not None else None
        self.exact = exact
        self.keys = keys if keys is not None and keys.version == chunks.version else RowKeys(chunks)

    def _where(self, where: Scope | None) -> str | None:
        return _and([sql_in("repo", self.repos) if self.repos is not None else None,
                     *(scope_sql(where) if where is not None else [])])

    def _keyword(self, query: str, where: Scope | None, depth: int, ranking: Ranking) -> list[tuple[int, float]]:
        """The full-text index's best rows for ``query``: (row id, score), ``depth`` of them or twice that where
        globs or keyword priors are applied after the read (by the candidate stage)."""
        globs = where is not None and bool(where.include or where.exclude)
        fetch = depth * (OVERFETCH if globs or keyword_multipliers(ranking) else 1)
        table = full_text(self.ds, query, self._where(where), fetch, ["_rowid"])
        return list(zip(table["_rowid"].to_pylist(), table["_score"].to_pylist()))

    def _vector(self, tier: Tier, query_vector: np.ndarray, where: Scope | None, depth: int
                ) -> list[tuple[int, float]]:
        """The vector index's nearest rows to ``query_vector``: (row id, dot product), twice ``depth`` where globs are
        applied after the read."""
        column = COLUMN_OF[tier]
        globs = where is not None and bool(where.include or where.exclude)
        fetch = depth * (OVERFETCH if globs else 1)
        nearest: dict[str, Any] = {**nearest_options(self.ds, column, self.exact), "q": query_vector, "k": fetch}
        # Rows the transformer did not read have no vector: their distance is null, and Lance leaves them out
        # (a `read = true` prefilter cost a scan of 1M rows per query).
        filter_ = self._where(where)

        def read(nearest: dict[str, Any]) -> pa.Table:
            return self.ds.to_table(nearest=nearest, columns=["_distance"], filter=filter_,
                                    prefilter=filter_ is not None, with_row_id=True, disable_scoring_autoprojection=True)

        table = read(nearest)
        if table.num_rows < fetch and not self.exact:
            table = read({key: value for key, value in nearest.items() if key != "maximum_nprobes"})
        # The "dot" metric's distance is 1 - dot, exact in IVF_FLAT's partitions (and after a quantised index's
        # refine step): the scores a single index computes, without reading the vectors.
        distances = np.asarray(table["_distance"].to_numpy(zero_copy_only=False), dtype=np.float32)
        return list(zip(table["_rowid"].to_pylist(), (np.float32(1.0) - distances).tolist()))

    def _definitions(self, names: list[str], where: Scope) -> list[dict[str, Any]]:
        """The rows in scope that define any of ``names`` (lowercased)."""
        if not names:
            return []
        table = self.ds.to_table(columns=[*KEY_COLUMNS, "symbols"], with_row_id=True, filter=_and([
            self._where(where), f"array_has_any(def_names, [{', '.join(sql_string(n) for n in names)}])"]))
        return [row for row in table.to_pylist() if where.allows_path(row["path"])]

    def rank(self, query: str, mode: Mode, tier: Tier | None, query_vector: np.ndarray | None, ranking: Ranking, k: int,
             where: Scope) -> Found:
        """The ``k`` best chunks across the repositories for ``query``: candidates, then the ranking pipeline."""
        depth = max(k, ranking.depth)
        vector_column = COLUMN_OF[tier] if tier is not None else None
        restricted = not where.is_unrestricted
        # The lists' reads are independent and Lance releases the GIL: they run side by side.
        jobs: dict[tuple[str, str], Any] = {}
        pool = read_pool()
        names = sorted({name.lower() for forms in analyze_query(query).symbols for name in forms})
        if mode != "dense":
            jobs["lists", "bm25"] = pool.submit(self._keyword, query, where, depth, ranking)
            if restricted and ranking.score_share:
                jobs["whole", "bm25"] = pool.submit(self._keyword, query, None, depth, ranking)
        if mode != "bm25" and tier is not None and query_vector is not None:
            name = LIST_OF[tier]
            jobs["lists", name] = pool.submit(self._vector, tier, query_vector, where, depth)
            if restricted and ranking.score_share:
                jobs["whole", name] = pool.submit(self._vector, tier, query_vector, None, depth)
        if ranking.definitions:
            jobs["definitions", ""] = pool.submit(self._definitions, names, where)
        done = {key: job.result() for key, job in jobs.items()}
        definitions: list[dict[str, Any]] = done.pop(("definitions", ""), [])
        keys = self.keys.rows([row_id for found in done.values() for row_id, _ in found])
        # Every row read, numbered in (repository, path, place in file) order: the candidate stage cuts the lists.
        rows: dict[int, dict[str, Any]] = {}
        for found in done.values():
            for row_id, _ in found:
                row = keys[row_id]
                rows.setdefault(row["chunk_id"], row)
        for row in definitions:
            rows.setdefault(row["chunk_id"], row)
        ordered = sorted(rows.values(), key=lambda r: (r["repo"], r["path"], r["ordinal"]))
        number = {row["chunk_id"]: i for i, row in enumerate(ordered)}
        pairs = {key: [(number[keys[row_id]["chunk_id"]], score) for row_id, score in found]
                 for key, found in done.items()}
        file_of = {i: self.files.number[(row["repo"], row["path"])] for i, row in enumerate(ordered)}
        # Looked up name by name in the defining rows' symbols (a row may define many other names, and splitting
        # each of its symbols cost 11 ms a query at 1M rows, where a name has a hundred definitions).
        defined: list[Sequence[str] | None] = [None] * len(ordered)
        for row in definitions:
            defined[number[row["chunk_id"]]] = row["symbols"]
        facts = ChunkFacts(self.files.facts, file_of, SymbolScan(defined))
        globs = bool(where.include or where.exclude)
        found_ = candidates_from_pairs(
            {name: found for (kind, name), found in pairs.items() if kind == "lists"}, facts, ranking, k,
            keep=(lambda chunk: where.allows_path(ordered[chunk]["path"])) if globs else None,
            whole={name: found for (kind, name), found in pairs.items() if kind == "whole"})
        vectors = None
        if vector_column is not None and query_vector is not None:
            vectors = _LazyVectors(self.ds, ordered, vector_column, len(query_vector))
        with one_blas_thread():
            best = rank(query, found_, facts, ranking, k, vectors)
        self._complete([ordered[i] for i, _ in best], ROW_COLUMNS)  # only the hits' texts are read
        return Found(ordered, best)


    def _complete(self, rows: list[dict[str, Any]], columns: list[str]) -> None:
        """Add ``columns`` to every row, in place: one read by row id of the version the lists came from."""
        wanted = [c for c in columns if any(c not in row for row in rows)]
        if not rows or not wanted:
            return
        table = self.ds._take_rows([row["_rowid"] for row in rows], columns=wanted)
        for row, extra in zip(rows, table.to_pylist()):
            for key, value in extra.items():
                row.setdefault(key, value)


class _LazyVectors(Mapping[int, np.ndarray]):
    """Candidates' vectors for diversity, each read when diversity first asks (22 a query at 10k, one read each; a
    file's candidates read together at once measured no faster at 1M: 40.4 / 31.8 ms p50 against 33.5 / 32.6)."""

    def __init__(self, ds: lance.LanceDataset, rows: list[dict[str, Any]], column: str, dim: int) -> None:
        self._ds, self._rows, self._column, self._dim = ds, rows, column, dim

    def __getitem__(self, chunk: int) -> np.ndarray:
        row = self._rows[chunk]
        if self._column not in row:
            row[self._column] = self._ds._take_rows([row["_rowid"]], columns=[self._column])[self._column][0].as_py()
        value = row[self._column]
        return np.zeros(self._dim, dtype=np.float32) if value is None else np.asarray(value, dtype=np.float32)

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self._rows)))


@lru_cache(maxsize=1)
def read_pool() -> ThreadPoolExecutor:
    """The threads a search's independent reads run on (started once per process)."""
    return ThreadPoolExecutor(4, thread_name_prefix="codesearch-corpus")


__all__ = ["COLUMN_OF", "LIST_OF", "CorpusSource", "FileSet", "Found", "RepoView", "RowKeys", "StaleKeywords",
           "ViewCache", "nearest_options", "read_pool", "scope_sql"]
