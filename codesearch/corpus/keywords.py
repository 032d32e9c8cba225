"""Keywords in a corpus: one repository's exact BM25, and the full-text index's candidates across repositories.

A search scoped to one repository ranks its keywords with that repository's
own statistics: :func:`repo_bm25` fits :class:`~codesearch.keyword.BM25` on
the repository's chunks, in the order a single index holds them
(:func:`view_order`), from the terms the chunks table keeps (``keyword_text``: codesearch's identifier-split
terms, each as often as it occurs), so its scores are those of a single
index of the repository, bit for bit. No term is tokenized again, and the
terms are split and counted by Arrow's kernels, not one chunk at a time (a
repository's first scoped query would pay this fit). The writer fits every
repository a build or refresh changed once, after its commits, and stores
the fit in the keywords table (:func:`fit_keywords`, read back by
:func:`stored_bm25`), so a repository's first scoped query reads it instead.

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
from collections.abc import Mapping
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from codesearch.corpus.schema import CHUNKS, KEYWORD_SCHEMA, KEYWORDS, sql_in, wide_strings
from codesearch.exceptions import IndexCorruptError
from codesearch.keyword import BM25, Vocabulary, code_tokens, fit_counts

if TYPE_CHECKING:
    import lance

logger = logging.getLogger(__name__)

FRAGMENT_BYTES = 16 << 20
"""Keyword rows written as one fragment once their fits reach this many bytes."""
READ_REPOS = 8
"""Repositories whose rows :func:`fit_keywords` reads in one scan."""


def repo_bm25(keyword_texts: pa.Array | pa.ChunkedArray) -> BM25:
    """BM25 fitted on chunks given by their ``keyword_text`` (terms joined by spaces), in chunk order: a single
    index's fit of them.

    The single index numbers a term when a chunk first holds it, chunk after
    chunk; Arrow's dictionary encoding numbers values in the order they first
    occur, so the numbering, and with it every array of the fit, is the same.

    A repository's terms past 2 GiB overflow 32-bit offsets once combined: its
    callers read them as large strings (:func:`~codesearch.corpus.schema.wide_strings`,
    before they take rows in order, which would overflow first).
    """
    import pyarrow.compute as pc

    # Terms are runs of word characters joined by single spaces; an empty chunk splits into one empty string.
    tokens = pc.split_pattern(keyword_texts, " ")
    if isinstance(tokens, pa.ChunkedArray):
        tokens = tokens.combine_chunks()
    flat, documents = pc.list_flatten(tokens), pc.list_parent_indices(tokens)
    words_only = pc.not_equal(flat, "")
    flat, documents = flat.filter(words_only), np.asarray(documents.filter(words_only).to_numpy(), dtype=np.int64)
    encoded = pc.dictionary_encode(flat)
    words = encoded.dictionary
    numbers = np.asarray(encoded.indices.to_numpy(), dtype=np.int64)
    n_terms = max(len(words), 1)
    # Each (chunk, term) pair once, with its count; chunk-major, as the builder adds them.
    pairs, counts = np.unique(documents * n_terms + numbers, return_counts=True)
    chunk_of = pairs // n_terms
    terms = (pairs - chunk_of * n_terms).astype(np.int32)
    lengths = np.bincount(chunk_of, minlength=len(keyword_texts)).astype(np.int32)
    return fit_counts(_vocabulary(words), terms, counts.astype(np.int32), lengths)


def _vocabulary(words: pa.Array) -> Vocabulary:
    """The terms of a dictionary encoding (numbered by their place) as a stored :class:`Vocabulary`: its UTF-8 blob
    and offsets are Arrow's buffers and its byte order Arrow's sort, so no object is made per term (building a dict,
    then its stored form, took 0.8 s of a refresh's 72 fits)."""
    import pyarrow.compute as pc

    if not len(words):
        return Vocabulary({})
    words = words.cast(pa.large_string())  # int64 offsets, as Strings keeps them
    offsets = np.frombuffer(words.buffers()[1], dtype=np.int64)[words.offset:words.offset + len(words) + 1]
    blob = np.frombuffer(words.buffers()[2], dtype=np.uint8)[int(offsets[0]):int(offsets[-1])]
    order = np.asarray(pc.sort_indices(words).to_numpy(), dtype=np.int32)  # byte order, as Strings.find needs
    return Vocabulary.from_arrays(blob, offsets - offsets[0], order)


VIEW_ORDER = [("path", "ascending"), ("ordinal", "ascending")]
"""The order a single index holds its chunks: by path (Python's string order, which is UTF-8's byte order, as
Arrow sorts strings), then place in the file."""


def view_order(rows: pa.Table) -> pa.Array:
    """The positions of ``rows`` in :data:`VIEW_ORDER`."""
    import pyarrow.compute as pc

    return pc.sort_indices(rows, VIEW_ORDER)


def keyword_row(repo: str, ids: np.ndarray, bm25: BM25) -> dict[str, Any]:
    """The keywords table's row of a repository: the BM25 fitted on its chunks, with their ids in order."""
    return {"repo": repo, "bm25": _pack({"chunk_ids": np.asarray(ids, dtype=np.int64), **bm25.to_arrays(copy=False)})}


def stored_bm25(blob: bytes) -> tuple[np.ndarray, BM25]:
    """A keywords table blob read back: the chunk ids in order, and the fitted BM25 (scores equal to a fresh fit;
    its arrays are read-only views of ``blob``)."""
    arrays = _unpack(blob)
    ids = arrays.pop("chunk_ids")
    return ids, BM25.from_arrays(arrays)


def stored_rows(ds: lance.LanceDataset) -> dict[str, int]:
    """Repository -> the address of its row in the keywords table ``ds`` (one read of the names)."""
    table = ds.to_table(columns=["repo"], with_row_address=True)
    return dict(zip(table["repo"].to_pylist(), table["_rowaddr"].to_pylist()))


def read_stored(ds: lance.LanceDataset, address: int) -> tuple[np.ndarray, BM25]:
    """The stored fit at row ``address`` of the keywords table ``ds`` (:func:`stored_rows`)."""
    [(_, blob)] = ds.read_blobs("bm25", addresses=[address])
    assert blob is not None
    return stored_bm25(blob)


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


_ALIGN = 8


def _pack(arrays: Mapping[str, np.ndarray]) -> bytes:
    """Arrays as one buffer: an 8-byte header length, a JSON header (name, dtype, shape, offset of each), then each
    array's bytes at an 8-byte aligned offset. :func:`_unpack` reads them back without a copy (``np.savez``'s zip
    and header parsing took 2-4 ms a repository, most of a stored fit's read)."""
    import json

    header, parts, offset = [], [], 0
    for name, array in arrays.items():
        raw = np.asarray(array, order="C")  # (ascontiguousarray makes a 0-d array 1-d)
        header.append([name, raw.dtype.newbyteorder("<").str, list(raw.shape), offset])
        data = raw.astype(raw.dtype.newbyteorder("<"), copy=False).tobytes()
        parts.append(data + b"\0" * (-len(data) % _ALIGN))
        offset += len(parts[-1])
    head = json.dumps(header).encode("utf-8")
    head += b" " * (-(8 + len(head)) % _ALIGN)
    return len(head).to_bytes(8, "little") + head + b"".join(parts)


def _unpack(blob: bytes) -> dict[str, np.ndarray]:
    import json

    size = int.from_bytes(blob[:8], "little")
    base = 8 + size
    out = {}
    for name, dtype, shape, offset in json.loads(blob[8:base]):
        kind = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        out[name] = np.frombuffer(blob, dtype=kind, count=count, offset=base + offset).reshape(shape)
    return out


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
                bm25 = repo_bm25(repo["keyword_text"])
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
           "query_terms", "read_stored", "repo_bm25", "stored_bm25", "stored_rows", "view_order"]
