"""BM25 fitted from terms Arrow holds: a column of chunks' space-joined terms, split and counted by Arrow's kernels.

The corpus keeps each chunk's terms as text (``keyword_text``); fitting them
here, with no term tokenized again and no Python object per chunk or term,
gives the fit the single index's :class:`~codesearch.keyword.BM25Builder`
makes from the same chunks. Needs ``pyarrow`` (the ``corpus`` extra).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from codesearch.keyword.bm25 import BM25, Vocabulary, fit_counts

if TYPE_CHECKING:
    import pyarrow as pa


def fit_term_column(keyword_texts: pa.Array | pa.ChunkedArray) -> BM25:
    """BM25 fitted on chunks given by their terms joined by spaces (each as often as it occurs), in chunk order:
    what :class:`~codesearch.keyword.BM25Builder` fits from the same chunks' counts, bit for bit.

    The builder numbers a term when a chunk first holds it, chunk after chunk;
    Arrow's dictionary encoding numbers values in the order they first occur,
    so the numbering, and with it every array of the fit, is the same (a test
    holds the two to it: ``tests/keyword/test_arrow.py``). Both hand their counts to
    :func:`~codesearch.keyword.bm25.fit_counts`.

    A repository's terms past 2 GiB overflow 32-bit offsets once combined: its
    callers read them as large strings (``pyarrow.large_string``, before they take rows in
    order, which would overflow first).
    """
    import pyarrow as pa
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
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(words):
        return Vocabulary({})
    words = words.cast(pa.large_string())  # int64 offsets, as Strings keeps them
    offsets = np.frombuffer(words.buffers()[1], dtype=np.int64)[words.offset:words.offset + len(words) + 1]
    blob = np.frombuffer(words.buffers()[2], dtype=np.uint8)[int(offsets[0]):int(offsets[-1])]
    order = np.asarray(pc.sort_indices(words).to_numpy(), dtype=np.int32)  # byte order, as Strings.find needs
    return Vocabulary.from_arrays(blob, offsets - offsets[0], order)


__all__ = ["fit_term_column"]
