"""Keywords: the identifier-splitting analyzer and BM25 over its terms, for either store.

- :mod:`~codesearch.keyword.tokens`: the analyzer (identifiers split, lowercased);
- :mod:`~codesearch.keyword.bm25`: :class:`BM25` (the estimator, its arrays) and :class:`BM25Builder` (a fit built
  chunk by chunk, as the single index builds it);
- :mod:`~codesearch.keyword.arrow`: the same fit from a column of joined terms (the corpus's rows);
- :mod:`~codesearch.keyword.blob`: a fit as one blob, for a store that keeps it in a row.
"""

from __future__ import annotations

from codesearch.keyword.bm25 import ARRAYS_FORMAT_VERSION, BM25, BM25Builder, Postings, Vocabulary, fit_counts
from codesearch.keyword.tokens import MAX_TOKEN_CHARS, code_tokens, split_identifier
from codesearch.topk import top_k

__all__ = ["ARRAYS_FORMAT_VERSION", "BM25", "BM25Builder", "MAX_TOKEN_CHARS", "Postings", "Vocabulary", "code_tokens",
           "fit_counts", "split_identifier", "top_k"]
