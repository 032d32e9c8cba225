"""Keywords in a corpus: one repository's exact BM25, and the full-text index's candidates across repositories.

A search scoped to one repository ranks its keywords with that repository's
own statistics: :func:`codesearch.keyword.arrow.fit_term_column` fits
:class:`~codesearch.keyword.BM25` on the repository's chunks, in the order a
single index holds them (:func:`view_order`), from the terms the chunks table
keeps (``keyword_text``: codesearch's identifier-split terms, each as often as
it occurs), so its scores are those of a single index of the repository, bit
for bit. The writer fits every repository a build or refresh changed once,
after its commits, and stores the fit in the keywords table
(:func:`fit_keywords`, as :mod:`codesearch.keyword.blob` lays a fit out; read
back by :func:`read_stored`), so a repository's first scoped query reads it
instead of fitting it.

Across repositories the keyword list comes from Lance's full-text index over
the same terms (whitespace tokens, no lowercasing, stemming or stop words),
queried through ``MatchQuery`` so a query's quotes are text, not syntax. Its
statistics are the whole corpus's (or, with a filter, still the corpus's), and
its BM25 has Lance's constants (k1 = 1.2, b = 0.75, idf ``ln(1 + ...)``), not
the library's (k1 = 1.5, rank_bm25's idf); ``benchmarks/corpus_scale.py``
measures what that costs against an exact BM25 over the same chunks.
"""

from __future__ import annotations

import logging
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from codesearch.corpus.schema import CHUNKS, KEYWORD_SCHEMA, KEYWORDS, sql_in, wide_strings
from codesearch.exceptions import IndexCorruptError
from codesearch.keyword import BM25, code_tokens
from codesearch.keyword.arrow import fit_term_column
from codesearch.keyword.blob import bm25_blob, bm25_of_blob

if TYPE_CHECKING:
    import lance

logger = logging.getLogger(__name__)

FRAGMENT_BYTES = 16 << 20
"""Keyword rows written as one fragment once their fits reach this many bytes."""
READ_REPOS = 8
"""Repositories whose rows :func:`fit_keywords` reads in one scan."""


VIEW_ORDER = [("path", "ascending"), ("ordinal", "ascending")]
"""The order a single index holds its chunks: by path (Python's string order, which is UTF-8's byte order, as
Arrow sorts strings), then place in the file."""


def view_order(rows: pa.Table) -> pa.Array:
    """The positions of ``rows`` in :data:`VIEW_ORDER`."""
    import pyarrow.compute as pc

    return pc.sort_indices(rows, VIEW_ORDER)


def keyword_row(repo: str, ids: np.ndarray, bm25: BM25) -> dict[str, Any]:
    """The keywords table's row of a repository: the BM25 fitted on its chunks, with their ids in order."""
    return {"repo": repo, "bm25": bm25_blob(bm25, ids)}


def stored_rows(ds: lance.LanceDataset) -> dict[str, int]:
    """Repository -> the address of its row in the keywords table ``ds`` (one read of the names)."""
    table = ds.to_table(columns=["repo"], with_row_address=True)
    return dict(zip(table["repo"].to_pylist(), table["_rowaddr"].to_pylist()))


def read_stored(ds: lance.LanceDataset, address: int) -> tuple[np.ndarray, BM25]:
    """The stored fit at row ``address`` of the keywords table ``ds`` (:func:`stored_rows`)."""
    [(_, blob)] = ds.read_blobs("bm25", addresses=[address])
    assert blob is not None
    return bm25_of_blob(blob)


class StoredFits:
    """The keywords table at one version, for views: each repository's stored fit by name (the names read once).

    A fit that cannot be read (a damaged blob, a later array format) is
    ``None``, logged: the view fits from the rows' terms instead.
    """

    def __init__(self, ds: lance.LanceDataset) -> None:
        self.ds = ds
        self._rows: dict[str, int] | None = None

    def get(self, repo: str) -> tuple[np.ndarray, BM25] | None:
        if self._rows is None:
            self._rows = stored_rows(self.ds)
        address = self._rows.get(repo)
        if address is None:
            return None
        try:
            return read_stored(self.ds, address)
        except (IndexCorruptError, ValueError, KeyError, OSError) as exc:
            logger.warning("codesearch: the stored keywords of %r cannot be read (%s); fitting them", repo, exc)
            return None


def fit_keywords(uri: str, storage_options: dict[str, str], version: int, repos: list[str]) -> list[str]:
    """Fit each repository of ``repos`` on its rows of the chunks table at ``version`` and write the keyword rows as
    uncommitted fragments of the keywords table (the writer commits them); their metadata as JSON. A repository
    with no term (no chunk left) gets no row. Run where the writer runs it: a Ray task, or the writer's process.

    Repositories are read :data:`READ_REPOS` at a time, one scan each. 72 repositories of the 1M-row replica took
    2.6-2.8 s read 1, 8 or 32 a scan, and raised this process's peak by 167 / 192 / 224 MB (Arrow's and Lance's
    buffers, not the rows): about 30 ms a repository of ~550 chunks, most of it the fit."""
    import lance
    import pyarrow.compute as pc

    from codesearch.corpus.store import write_fragments

    chunks = lance.dataset(f"{uri.rstrip('/')}/{CHUNKS}", version=version, storage_options=storage_options or None)
    out: list[dict[str, Any]] = []
    held = 0
    fragments: list[str] = []
    for start in range(0, len(repos), READ_REPOS):
        rows = wide_strings(chunks.to_table(columns=["repo", "chunk_id", "path", "ordinal", "keyword_text"],
                                            filter=sql_in("repo", repos[start:start + READ_REPOS])), ["keyword_text"])
        rows = rows.take(pc.sort_indices(rows, [("repo", "ascending"), *VIEW_ORDER]))
        names = pc.dictionary_encode(rows["repo"]).combine_chunks()
        numbers = np.asarray(names.indices.to_numpy())
        edges = [0, *(np.flatnonzero(np.diff(numbers)) + 1).tolist(), len(numbers)] if len(numbers) else [0]
        for begin, stop in pairwise(edges):
            repo = rows.slice(begin, stop - begin)  # in view order: by path, then place in file
            try:
                bm25 = fit_term_column(repo["keyword_text"])
            except ValueError:  # no chunk holds a term: scoped searches fit (and fail) as before
                continue
            row = keyword_row(str(names.dictionary[int(numbers[begin])]), np.asarray(repo["chunk_id"].to_numpy()), bm25)
            out.append(row)
            held += len(row["bm25"])
            if held >= FRAGMENT_BYTES:
                fragments += write_fragments(uri, KEYWORDS, pa.Table.from_pylist(out, schema=KEYWORD_SCHEMA),
                                             storage_options)
                out, held = [], 0
    if out:
        fragments += write_fragments(uri, KEYWORDS, pa.Table.from_pylist(out, schema=KEYWORD_SCHEMA), storage_options)
    return fragments


def query_terms(query: str) -> str:
    """The query as the full-text index reads it: its terms, split as the chunks' were, joined by spaces."""
    return " ".join(code_tokens(query))


def full_text(ds: lance.LanceDataset, query: str, where: str | None, limit: int, columns: list[str]) -> pa.Table:
    """The ``limit`` best chunks for ``query`` by the full-text index within ``where``, with ``_score``."""
    from lance.query import FullTextOperator, MatchQuery

    terms = query_terms(query)
    if not terms:
        return pa.table({c: [] for c in [*columns, "_score"]})
    return ds.to_table(full_text_query=MatchQuery(terms, "keyword_text", operator=FullTextOperator.OR),
                       columns=[*columns, "_score"], filter=where, prefilter=where is not None, limit=limit,
                       disable_scoring_autoprojection=True)


__all__ = ["FRAGMENT_BYTES", "READ_REPOS", "VIEW_ORDER", "StoredFits", "fit_keywords", "full_text", "keyword_row",
           "query_terms", "read_stored", "stored_rows", "view_order"]
