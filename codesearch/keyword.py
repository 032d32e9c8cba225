"""Okapi BM25 over a scikit-learn ``CountVectorizer`` matrix, tuned for code.

:func:`code_tokens` is the analyzer for documents and queries alike: it cuts
text into words (``\\w+``), splits each word on ``_`` and camelCase, lowercases
the parts and also keeps the whole identifier, so ``should_strip_auth`` gives
``should, strip, auth, should_strip_auth`` and ``HTTPAdapter`` gives
``http, adapter, httpadapter``.

:class:`BM25` follows scikit-learn's estimator contract. ``fit`` counts terms
with ``CountVectorizer`` and folds idf, term frequency and length
normalisation into one sparse matrix ``weights_`` (documents x terms), so
:meth:`BM25.score` is a single sparse matrix-vector product with the query's
term counts.

The idf is the one ``rank_bm25.BM25Okapi`` uses, chosen so scores agree with
that widely used reference to rounding::

    idf(t) = log(N - df(t) + 0.5) - log(df(t) + 0.5)

and a term in more than half of the documents (negative idf) gets
``epsilon * mean(idf)`` instead, the mean taken over the whole vocabulary
before flooring (``epsilon * ln 2`` when that mean is not positive, which only
happens in corpora of a handful of documents). Like ``BM25Okapi``, a query term that appears twice counts
twice, and query terms outside the vocabulary score nothing.

A fitted estimator is saved without pickle: :meth:`BM25.to_arrays` gives plain
numeric and unicode arrays that ``np.load(..., allow_pickle=False)`` reads
back, and :meth:`BM25.from_arrays` restores an estimator whose scores are
bit-for-bit those of the original.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache
from itertools import chain
from typing import NoReturn

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.feature_extraction.text import CountVectorizer

from codesearch.exceptions import IndexCorruptError, NotFittedError

MAX_TOKEN_CHARS = 64
"""Tokens longer than this (hashes, base64 blobs) are dropped; their parts are kept."""

ARRAYS_FORMAT_VERSION = 1
"""Version of the layout written by :meth:`BM25.to_arrays`."""

_WORD = re.compile(r"\w+")
# Run over a "shape" string with one letter per character: U upper, l lower (or
# uncased letter), d digit, _ underscore. Spans found here are cut from the word.
_CAMEL = re.compile(r"U+(?=Ul)|U?l+|U+|d+")
_ARRAY_KEYS = (
    "format_version", "k1", "b", "epsilon", "avgdl",
    "data", "indices", "indptr", "shape", "idf", "doc_len", "vocabulary",
)  # fmt: skip


def _shape_char(c: str) -> str:
    if c == "_":
        return "_"
    if c.isupper():
        return "U"
    if c.isdigit():
        return "d"
    return "l"


@lru_cache(maxsize=1 << 17)
def split_identifier(word: str) -> tuple[str, ...]:
    """Split one word on ``_``, camelCase and letter/digit boundaries.

    Returns:
        The lowercased parts, then the whole word (lowercased, outer
        underscores stripped) when it has more than one part. Tokens longer
        than :data:`MAX_TOKEN_CHARS` are left out. ``"UnrewindableBodyError"``
        gives ``("unrewindable", "body", "error", "unrewindablebodyerror")``;
        ``"__init__"`` gives ``("init",)``.
    """
    shape = "".join(map(_shape_char, word))
    parts = [word[m.start() : m.end()].lower() for m in _CAMEL.finditer(shape)]
    if len(parts) > 1:
        parts.append(word.strip("_").lower())
    return tuple(p for p in parts if len(p) <= MAX_TOKEN_CHARS)


def code_tokens(text: str) -> list[str]:
    """Analyze text into BM25 terms; the same analyzer serves documents and queries.

    Returns:
        The terms of every ``\\w+`` word in order, as :func:`split_identifier`
        gives them.
    """
    return list(chain.from_iterable(map(split_identifier, _WORD.findall(text))))


class BM25(BaseEstimator):  # type: ignore[misc]
    """Okapi BM25 ranking of a fixed set of documents.

    Args:
        k1: term-frequency saturation; 0 makes BM25 a binary idf model.
        b: length normalisation, from 0 (none) to 1 (full).
        epsilon: idf floor for terms in more than half the documents, as a
            fraction of the mean idf (``rank_bm25``'s ``epsilon``).

    Attributes:
        vocabulary_: term -> column of ``weights_``.
        idf_: idf of each column, after the epsilon floor, float64.
        doc_len_: number of terms in each document, int64.
        avgdl_: mean document length.
        weights_: CSR float64 matrix (n_documents, n_terms) of each term's BM25
            contribution to each document's score.

    Example:
        >>> bm25 = BM25().fit(["def raise_for_status(self):", "class HTTPAdapter:", "import os"])
        >>> top_k(bm25.score("http adapter"), 2, above=0.0).tolist()
        [1]
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.k1 = k1
        self.b = b
        self.epsilon = epsilon

    def fit(self, raw_documents: Iterable[str], y: None = None) -> BM25:
        """Count the documents' terms and precompute their BM25 weights.

        Args:
            raw_documents: one string per document (for code search,
                ``f"{path}\\n{text}"`` of each chunk).
            y: ignored; present for scikit-learn compatibility.

        Returns:
            self, fitted.

        Raises:
            ValueError: a parameter is out of range, or the documents hold no
                term at all.
            TypeError: ``raw_documents`` is a single string.
        """
        self._validate_params()
        if isinstance(raw_documents, (str, bytes)):
            raise TypeError("BM25.fit takes an iterable of documents, not one string; wrap it in a list")
        docs = list(raw_documents)
        try:
            counts = CountVectorizer(analyzer=code_tokens, dtype=np.int64)
            matrix = counts.fit_transform(docs)
        except ValueError as exc:
            if "empty vocabulary" not in str(exc):
                raise
            raise ValueError(
                f"BM25.fit: the {len(docs)} documents hold no word to index; pass non-empty texts"
            ) from None
        vocabulary = {term: int(col) for term, col in counts.vocabulary_.items()}
        self._set_state(vocabulary, *_bm25_weights(sp.csr_matrix(matrix), self.k1, self.b, self.epsilon))
        return self

    def score(self, query: str) -> np.ndarray:
        """Score every document against a query.

        Returns:
            float64 array of shape ``(n_documents,)``; documents sharing no
            term with the query score 0.

        Raises:
            NotFittedError: ``fit`` (or ``from_arrays``) has not been called.
        """
        self._check_fitted()
        _n_docs, n_terms = self.weights_.shape
        query_weights = np.zeros(n_terms, dtype=np.float64)
        vocabulary = self.vocabulary_
        for term, count in Counter(code_tokens(query)).items():
            col = vocabulary.get(term)
            if col is not None:
                query_weights[col] = count
        scores: np.ndarray = self.weights_ @ query_weights
        return scores

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Export the fitted state as plain arrays, for ``np.savez`` without pickle.

        Returns:
            ``data``, ``indices``, ``indptr``, ``shape`` (the CSR weights),
            ``idf``, ``doc_len``, ``vocabulary`` (unicode, in column order) and
            0-d arrays ``k1``, ``b``, ``epsilon``, ``avgdl``, ``format_version``.
            None is an object array.

        Raises:
            NotFittedError: the estimator is not fitted.
        """
        self._check_fitted()
        w = self.weights_
        terms = sorted(self.vocabulary_, key=self.vocabulary_.__getitem__)
        return {
            "format_version": np.array(ARRAYS_FORMAT_VERSION, dtype=np.int64),
            "k1": np.array(self.k1, dtype=np.float64),
            "b": np.array(self.b, dtype=np.float64),
            "epsilon": np.array(self.epsilon, dtype=np.float64),
            "avgdl": np.array(self.avgdl_, dtype=np.float64),
            "data": w.data.copy(),
            "indices": w.indices.copy(),
            "indptr": w.indptr.copy(),
            "shape": np.array(w.shape, dtype=np.int64),
            "idf": self.idf_.copy(),
            "doc_len": self.doc_len_.copy(),
            "vocabulary": np.array(terms, dtype=np.str_),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> BM25:
        """Rebuild a fitted estimator from :meth:`to_arrays` output (or an ``np.load`` of it).

        Returns:
            A fitted :class:`BM25` whose scores equal the original's exactly.

        Raises:
            IndexCorruptError: an array is missing, of the wrong kind or shape,
                or from an unknown format version.
        """
        missing = [key for key in _ARRAY_KEYS if key not in arrays]
        if missing:
            _corrupt(f"missing {', '.join(missing)}")
        a = {key: np.asarray(arrays[key]) for key in _ARRAY_KEYS}
        version = a["format_version"]
        if version.shape != () or version.dtype.kind not in "iu" or int(version) != ARRAYS_FORMAT_VERSION:
            _corrupt(f"format version {a['format_version']!r}, this codesearch reads {ARRAYS_FORMAT_VERSION}")
        for key in ("k1", "b", "epsilon", "avgdl"):
            if a[key].shape != () or a[key].dtype.kind != "f":
                _corrupt(f"{key} should be a float scalar, got {a[key].dtype} {a[key].shape}")
        for key, kind in (("data", "f"), ("idf", "f"), ("indices", "i"), ("indptr", "i"), ("shape", "i"),
                          ("doc_len", "i"), ("vocabulary", "U")):  # fmt: skip
            if a[key].ndim != 1 or a[key].dtype.kind != kind:
                _corrupt(f"{key} should be a 1-d array of kind {kind!r}, got {a[key].dtype} {a[key].shape}")
        if a["shape"].size != 2:
            _corrupt(f"shape should hold 2 numbers, got {a['shape'].tolist()}")
        n_docs, n_terms = (int(n) for n in a["shape"])
        indptr, indices = a["indptr"], a["indices"]
        nnz = a["data"].size
        if (
            indptr.size != n_docs + 1
            or indices.size != nnz
            or a["idf"].size != n_terms
            or a["doc_len"].size != n_docs
            or a["vocabulary"].size != n_terms
            or indptr[0] != 0
            or indptr[-1] != nnz
            or np.any(np.diff(indptr) < 0)
            or (nnz and (indices.min() < 0 or indices.max() >= n_terms))
        ):
            _corrupt("the array sizes do not fit together")
        terms = a["vocabulary"].tolist()
        vocabulary = {term: col for col, term in enumerate(terms)}
        if len(vocabulary) != n_terms:
            _corrupt("the vocabulary repeats a term")
        weights = sp.csr_matrix((a["data"], indices, indptr), shape=(n_docs, n_terms))
        est = cls(k1=float(a["k1"]), b=float(a["b"]), epsilon=float(a["epsilon"]))
        est._set_state(vocabulary, a["idf"], a["doc_len"], float(a["avgdl"]), weights)
        return est

    def _set_state(
        self,
        vocabulary: dict[str, int],
        idf: np.ndarray,
        doc_len: np.ndarray,
        avgdl: float,
        weights: sp.csr_matrix,
    ) -> None:
        self.vocabulary_ = vocabulary
        self.idf_ = idf
        self.doc_len_ = doc_len
        self.avgdl_ = avgdl
        self.weights_ = weights

    def _validate_params(self) -> None:
        if not (isinstance(self.k1, (int, float)) and math.isfinite(self.k1) and self.k1 >= 0):
            raise ValueError(f"BM25 k1 must be a finite number >= 0 (1.2-2.0 is usual), got {self.k1!r}")
        if not (isinstance(self.b, (int, float)) and 0 <= self.b <= 1):
            raise ValueError(f"BM25 b must be between 0 and 1 (0.75 is usual), got {self.b!r}")
        eps = self.epsilon
        if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0):
            raise ValueError(f"BM25 epsilon must be a finite number >= 0 (0.25 is usual), got {eps!r}")

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "weights_")

    def _check_fitted(self) -> None:
        if not hasattr(self, "weights_"):
            raise NotFittedError(
                "This BM25 instance is not fitted yet; call fit(documents) first, "
                "or load a fitted one with BM25.from_arrays(arrays)"
            )


def _bm25_weights(
    counts: sp.csr_matrix, k1: float, b: float, epsilon: float
) -> tuple[np.ndarray, np.ndarray, float, sp.csr_matrix]:
    """Fold idf, saturation and length normalisation into the count matrix.

    Returns:
        ``(idf, doc_len, avgdl, weights)``; the arithmetic follows
        ``rank_bm25.BM25Okapi`` term by term.
    """
    counts.sum_duplicates()
    n_docs, n_terms = counts.shape
    doc_len = np.asarray(counts.sum(axis=1), dtype=np.int64).ravel()
    avgdl = float(doc_len.sum()) / n_docs
    df = np.bincount(counts.indices, minlength=n_terms).astype(np.float64)
    idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
    mean_idf = idf.mean()
    # rank_bm25 floors negative idf at epsilon * mean(idf). In a corpus of a few
    # documents the mean itself can be negative or zero, and then a document
    # that matches would score below one that matches nothing; there the floor
    # is epsilon * ln 2 instead (never reached on real repositories).
    idf[idf < 0] = epsilon * (mean_idf if mean_idf > 0 else math.log(2))
    tf = counts.data.astype(np.float64)
    rows = np.repeat(np.arange(n_docs), np.diff(counts.indptr))
    norm = k1 * (1 - b + b * doc_len[rows] / avgdl)
    data = idf[counts.indices] * (tf * (k1 + 1) / (tf + norm))
    weights = sp.csr_matrix((data, counts.indices.copy(), counts.indptr.copy()), shape=counts.shape)
    return idf, doc_len, avgdl, weights


def _corrupt(detail: str) -> NoReturn:
    raise IndexCorruptError(f"BM25 arrays are damaged ({detail}); rebuild the index")


def top_k(
    scores: np.ndarray,
    k: int,
    mask: np.ndarray | None = None,
    above: float | None = None,
) -> np.ndarray:
    """Positions of the ``k`` highest scores, best first.

    Args:
        scores: 1-d array of scores, without NaN.
        k: how many to return at most.
        mask: optional boolean array like ``scores``; only True positions
            compete (apply a :class:`codesearch.scope.Scope` mask here, before
            the cut, so a narrow scope still gets ``k`` results).
        above: optional bound; only scores strictly above it compete (``0.0``
            drops documents that share no term with a BM25 query).

    Returns:
        int64 positions into ``scores``, ordered by score descending; equal
        scores are ordered by position, so the result is deterministic.

    Raises:
        ValueError: ``k`` is negative, ``scores`` holds NaN, or ``mask`` does
            not match ``scores``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim != 1:
        raise ValueError(f"top_k takes a 1-d score array, got shape {scores.shape}")
    if k < 0:
        raise ValueError(f"top_k needs k >= 0, got {k}")
    if mask is None:
        candidates = np.arange(scores.size, dtype=np.int64)
    else:
        mask = np.asarray(mask)
        if mask.shape != scores.shape or mask.dtype != np.bool_:
            raise ValueError(
                f"top_k mask must be a boolean array of shape {scores.shape}, got {mask.dtype} {mask.shape}"
            )
        candidates = np.flatnonzero(mask).astype(np.int64)
    values = scores[candidates]
    if np.isnan(values).any():
        raise ValueError("top_k scores hold NaN; fix the scorer that produced them")
    if above is not None:
        keep = values > above
        candidates, values = candidates[keep], values[keep]
    if k == 0:
        return np.empty(0, dtype=np.int64)
    if k < candidates.size:
        # Everything tied with the k-th best competes for the last places, so the
        # position tie-break below sees all of them.
        kth = np.partition(values, values.size - k)[values.size - k]
        keep = values >= kth
        candidates, values = candidates[keep], values[keep]
    order = np.lexsort((candidates, -values))[:k]
    result: np.ndarray = candidates[order]
    return result


__all__ = ["ARRAYS_FORMAT_VERSION", "BM25", "MAX_TOKEN_CHARS", "code_tokens", "split_identifier", "top_k"]
