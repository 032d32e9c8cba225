"""Keywords: the identifier-splitting analyzer and BM25 over its terms.

The old module ``codesearch.keyword`` is this package; its names stay importable from here.
"""

from __future__ import annotations

from codesearch.keyword.bm25 import ARRAYS_FORMAT_VERSION, BM25, BM25Builder, Postings, Vocabulary, fit_counts
from codesearch.keyword.tokens import MAX_TOKEN_CHARS, code_tokens, split_identifier
from codesearch.topk import top_k

__all__ = ["ARRAYS_FORMAT_VERSION", "BM25", "BM25Builder", "MAX_TOKEN_CHARS", "Postings", "Vocabulary", "code_tokens",
           "fit_counts", "split_identifier", "top_k"]
