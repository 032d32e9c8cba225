"""BM25 fitted from a column of joined terms (the corpus's) against the builder the single index uses."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SESSIONS, UTILS

from codesearch.keyword import BM25Builder, code_tokens

pa = pytest.importorskip("pyarrow")

ROUTER = """\
package chi

// Mux is a simple HTTP route multiplexer that parses a request path.
func (mx *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
\tmx.handler.ServeHTTP(w, r)
}
"""


def test_a_column_of_joined_terms_fits_as_the_builder_does_bit_for_bit() -> None:
    """The vectorized fit (Arrow's split, dictionary encoding and counts) numbers terms, counts them and weighs them
    exactly as the builder a single index uses, on chunks of every shape: repeated terms, runs of spaces, empty
    chunks, non-ASCII terms."""
    from codesearch.keyword.arrow import fit_term_column

    texts = [" ".join(code_tokens(t)) for t in (SESSIONS, UTILS, ROUTER)]
    texts += ["", "get get  get post", " leading and trailing ", "größe größe naïve", "post", "", "get"]
    builder = BM25Builder()
    for text in texts:
        counts: dict[str, int] = {}
        for term in text.split():
            counts[term] = counts.get(term, 0) + 1
        builder.add_counts(counts.keys(), counts.values())
    expected = builder.fit()
    # Large strings too: what a repository's terms past 2 GiB are read as (32-bit offsets would overflow).
    for column in (pa.array(texts), pa.chunked_array([texts[:5], texts[5:]]), pa.array(texts, pa.large_string()),
                   pa.chunked_array([texts[:5], texts[5:]], pa.large_string())):
        fitted = fit_term_column(column)
        assert dict(fitted.vocabulary_.items()) == dict(expected.vocabulary_.items())
        for mine, theirs in zip(fitted.postings_, expected.postings_):
            assert mine.dtype == theirs.dtype and np.array_equal(mine, theirs)
        assert np.array_equal(fitted.idf_, expected.idf_) and np.array_equal(fitted.doc_len_, expected.doc_len_)
        stored, built = fitted.to_arrays(), expected.to_arrays()
        assert stored.keys() == built.keys()
        for key, array in built.items():
            assert np.array_equal(stored[key], array), key
        for query in ("get post", "session redirect", "größe", "nothing here"):
            assert np.array_equal(fitted.score(query), expected.score(query))


def test_a_column_without_a_term_cannot_be_fitted() -> None:
    from codesearch.keyword.arrow import fit_term_column

    with pytest.raises(ValueError, match="hold no word"):
        fit_term_column(pa.array(["", " "]))
