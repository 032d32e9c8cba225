"""A corpus search across repositories (all, or several named): candidates from Lance's indexes, ranked as one.

:class:`CorpusSource` reads each list's candidates from Lance (the vector
index, probed as :func:`~codesearch.corpus.indexes.nearest_options` says; the
full-text index) with the scope as a prefilter, definitions from the
label-list index over the chunks' definition names, and the path words,
stems and priors of the files of the repositories searched (a
:class:`~codesearch.ranking.FileFacts` kept per files-table version, in
:class:`FileSet`). The rows a query reads are numbered in (repository, path,
place in file) order, so equal scores are ordered as a single index orders
them; the ranking's own candidate stage
(:func:`~codesearch.ranking.candidates_from_pairs`) cuts them and its
pipeline ranks them. Nothing here ranks: it says where rows come from.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from codesearch.chunking.symbols import SymbolScan
from codesearch.corpus.indexes import nearest_options
from codesearch.corpus.keywords import full_text
from codesearch.corpus.schema import sql_in, sql_string
from codesearch.corpus.views import COLUMN_OF, read_pool
from codesearch.files.kinds import KINDS
from codesearch.index.loaded import LIST_OF, one_blas_thread
from codesearch.ranking.candidates import candidates_from_pairs, keyword_multipliers
from codesearch.ranking.config import Ranking
from codesearch.ranking.facts import ChunkFacts, FileFacts
from codesearch.ranking.pipeline import rank
from codesearch.ranking.query import analyze_query
from codesearch.scope import Scope
from codesearch.types import Mode, Tier

if TYPE_CHECKING:
    import lance
    import pyarrow as pa

KEY_COLUMNS = ["chunk_id", "repo", "path", "ordinal"]
"""What orders a list's equal scores: each candidate's id, repository, path and place in file (:class:`RowKeys`; the
rest is read once, for the hits)."""
ROW_COLUMNS = ["start_line", "end_line", "kind", "symbols", "text"]
OVERFETCH = 2
"""Lists fetched this many times deeper where scope globs or keyword priors are applied after the fetch."""


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


__all__ = ["KEY_COLUMNS", "OVERFETCH", "ROW_COLUMNS", "CorpusSource", "FileSet", "Found", "RowKeys", "scope_sql"]
