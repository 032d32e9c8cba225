"""Okapi BM25 over term-major postings, tuned for code.

:class:`BM25` follows scikit-learn's estimator contract (parameters only in
``__init__``, learned state ending in ``_``, ``fit`` returns ``self``, an
unfitted call raises :class:`~codesearch.exceptions.NotFittedError`) without
importing scikit-learn: ``import sklearn.feature_extraction.text`` takes
0.74-0.93 s of a process's start here (numpy alone 0.06-0.09 s), and every
``codesearch search`` is a new process. ``fit`` counts the terms of
:func:`~codesearch.keyword.tokens.code_tokens` and folds idf, term frequency
and length normalisation into one weight per (term, document), stored term by
term (posting lists in CSR layout over terms), so :meth:`BM25.score` sums the
postings of the query's few terms with one ``numpy.bincount``.

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
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple, NoReturn

import numpy as np

from codesearch.exceptions import IndexCorruptError, NotFittedError
from codesearch.keyword.tokens import code_tokens

ARRAYS_FORMAT_VERSION = 2
"""Version of the layout written by :meth:`BM25.to_arrays` (2: postings stored term by term)."""

_ARRAY_KEYS = (
    "format_version", "k1", "b", "epsilon", "avgdl",
    "data", "indices", "indptr", "shape", "idf", "doc_len", "vocabulary",
)  # fmt: skip


class Postings(NamedTuple):
    """BM25 weights term by term: term ``t``'s documents are ``docs[indptr[t]:indptr[t + 1]]`` (ascending)."""

    data: np.ndarray
    docs: np.ndarray
    indptr: np.ndarray


class BM25:
    """Okapi BM25 ranking of a fixed set of documents.

    Args:
        k1: term-frequency saturation; 0 makes BM25 a binary idf model.
        b: length normalisation, from 0 (none) to 1 (full).
        epsilon: idf floor for terms in more than half the documents, as a
            fraction of the mean idf (``rank_bm25``'s ``epsilon``).

    Attributes:
        vocabulary_: term -> term number.
        idf_: idf of each term, after the epsilon floor, float64.
        doc_len_: number of terms in each document, int64.
        avgdl_: mean document length.
        postings_: each term's BM25 contribution to each document holding it
            (:class:`Postings`, float64 weights).
        shape_: ``(n_documents, n_terms)``.

    Example:
        >>> bm25 = BM25().fit(["def raise_for_status(self):", "class HTTPAdapter:", "import os"])
        >>> int(bm25.score("http adapter").argmax())
        1
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25) -> None:
        self.k1 = k1
        self.b = b
        self.epsilon = epsilon

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor's parameters (scikit-learn's ``get_params``)."""
        return {"k1": self.k1, "b": self.b, "epsilon": self.epsilon}

    def set_params(self, **params: Any) -> BM25:
        """Set constructor parameters (scikit-learn's ``set_params``); returns self.

        Raises:
            ValueError: a name that is not a parameter.
        """
        unknown = set(params) - set(self.get_params())
        if unknown:
            raise ValueError(f"BM25 has no parameter {sorted(unknown)[0]!r}; its parameters are k1, b, epsilon")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        changed = {k: v for k, v in self.get_params().items() if v != {"k1": 1.5, "b": 0.75, "epsilon": 0.25}[k]}
        return f"BM25({', '.join(f'{k}={v!r}' for k, v in changed.items())})"

    def fit(self, raw_documents: Iterable[str], y: None = None) -> BM25:
        """Count the documents' terms and precompute their BM25 weights.

        Args:
            raw_documents: one string per document (for code search,
                :func:`codesearch.chunking.keyword_text` of each chunk).
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
        vocabulary: dict[str, int] = {}
        rows: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        n_docs = 0
        for document in raw_documents:
            terms = Counter(code_tokens(document))
            ids = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in terms), dtype=np.int64,
                              count=len(terms))
            rows.append(ids)
            counts.append(np.fromiter(terms.values(), dtype=np.int64, count=len(terms)))
            n_docs += 1
        if not vocabulary:
            raise ValueError(f"BM25.fit: the {n_docs} documents hold no word to index; pass non-empty texts")
        self._set_state(vocabulary, *_bm25_weights(rows, counts, len(vocabulary), self.k1, self.b, self.epsilon))
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
        n_docs = self.shape_[0]
        data, docs, indptr = self.postings_
        picked_docs, picked_weights = [], []
        vocabulary = self.vocabulary_
        for term, count in Counter(code_tokens(query)).items():
            t = vocabulary.get(term)
            if t is not None:
                start, end = indptr[t], indptr[t + 1]
                picked_docs.append(docs[start:end])
                picked_weights.append(data[start:end] * count)
        if not picked_docs:
            return np.zeros(n_docs, dtype=np.float64)
        scores: np.ndarray = np.bincount(np.concatenate(picked_docs), weights=np.concatenate(picked_weights),
                                         minlength=n_docs)
        return scores

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Export the fitted state as plain arrays, for ``np.savez`` without pickle.

        Returns:
            ``data``, ``indices`` (document numbers), ``indptr`` (per term),
            ``shape`` (the postings), ``idf``, ``doc_len``, ``vocabulary``
            (unicode, in term order) and 0-d arrays ``k1``, ``b``,
            ``epsilon``, ``avgdl``, ``format_version``. None is an object array.

        Raises:
            NotFittedError: the estimator is not fitted.
        """
        self._check_fitted()
        terms = sorted(self.vocabulary_, key=self.vocabulary_.__getitem__)
        return {
            "format_version": np.array(ARRAYS_FORMAT_VERSION, dtype=np.int64),
            "k1": np.array(self.k1, dtype=np.float64),
            "b": np.array(self.b, dtype=np.float64),
            "epsilon": np.array(self.epsilon, dtype=np.float64),
            "avgdl": np.array(self.avgdl_, dtype=np.float64),
            "data": self.postings_.data.copy(),
            "indices": self.postings_.docs.copy(),
            "indptr": self.postings_.indptr.copy(),
            "shape": np.array(self.shape_, dtype=np.int64),
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
        indptr, docs = a["indptr"], a["indices"]
        nnz = a["data"].size
        if (
            indptr.size != n_terms + 1
            or docs.size != nnz
            or a["idf"].size != n_terms
            or a["doc_len"].size != n_docs
            or a["vocabulary"].size != n_terms
            or indptr[0] != 0
            or indptr[-1] != nnz
            or np.any(np.diff(indptr) < 0)
            or (nnz and (docs.min() < 0 or docs.max() >= n_docs))
        ):
            _corrupt("the array sizes do not fit together")
        terms = a["vocabulary"].tolist()
        vocabulary = {term: t for t, term in enumerate(terms)}
        if len(vocabulary) != n_terms:
            _corrupt("the vocabulary repeats a term")
        est = cls(k1=float(a["k1"]), b=float(a["b"]), epsilon=float(a["epsilon"]))
        est._set_state(vocabulary, a["idf"], a["doc_len"], float(a["avgdl"]), Postings(a["data"], docs, indptr))
        return est

    def _set_state(
        self,
        vocabulary: dict[str, int],
        idf: np.ndarray,
        doc_len: np.ndarray,
        avgdl: float,
        postings: Postings,
    ) -> None:
        self.vocabulary_ = vocabulary
        self.idf_ = idf
        self.doc_len_ = doc_len
        self.avgdl_ = avgdl
        self.postings_ = postings
        self.shape_ = (int(doc_len.size), len(vocabulary))

    def _validate_params(self) -> None:
        if not (isinstance(self.k1, (int, float)) and math.isfinite(self.k1) and self.k1 >= 0):
            raise ValueError(f"BM25 k1 must be a finite number >= 0 (1.2-2.0 is usual), got {self.k1!r}")
        if not (isinstance(self.b, (int, float)) and 0 <= self.b <= 1):
            raise ValueError(f"BM25 b must be between 0 and 1 (0.75 is usual), got {self.b!r}")
        eps = self.epsilon
        if not (isinstance(eps, (int, float)) and math.isfinite(eps) and eps >= 0):
            raise ValueError(f"BM25 epsilon must be a finite number >= 0 (0.25 is usual), got {eps!r}")

    def __sklearn_is_fitted__(self) -> bool:
        """scikit-learn's fitted check (``check_is_fitted``), also used here."""
        return hasattr(self, "postings_")

    def _check_fitted(self) -> None:
        if not self.__sklearn_is_fitted__():
            raise NotFittedError(
                "This BM25 instance is not fitted yet; call fit(documents) first, "
                "or load a fitted one with BM25.from_arrays(arrays)"
            )


_ROUNDING = 1e-9
"""A mean idf at or below this is taken as zero (see :func:`_bm25_weights`)."""


def _bm25_weights(
    rows: list[np.ndarray], counts: list[np.ndarray], n_terms: int, k1: float, b: float, epsilon: float
) -> tuple[np.ndarray, np.ndarray, float, Postings]:
    """Fold idf, saturation and length normalisation into each (term, document) count.

    Returns:
        ``(idf, doc_len, avgdl, postings)``; the arithmetic follows
        ``rank_bm25.BM25Okapi`` term by term.
    """
    n_docs = len(rows)
    doc_len = np.fromiter((int(c.sum()) for c in counts), dtype=np.int64, count=n_docs)
    avgdl = float(doc_len.sum()) / n_docs
    terms = np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)
    tf = np.concatenate(counts).astype(np.float64) if counts else np.empty(0)
    docs = np.repeat(np.arange(n_docs, dtype=np.int64), [r.size for r in rows])
    df = np.bincount(terms, minlength=n_terms).astype(np.float64)
    idf = np.log(n_docs - df + 0.5) - np.log(df + 0.5)
    mean_idf = idf.mean()
    # rank_bm25 floors negative idf at epsilon * mean(idf). In a corpus of a few
    # documents the mean itself can be negative or zero, and then a document
    # that matches would score below one that matches nothing; there the floor
    # is epsilon * ln 2 instead (never reached on real repositories). A mean that is
    # zero but for rounding (as many terms in 2 of 5 documents as in 3 of 5) counts
    # as zero, whatever the sign its last bit came out with.
    idf[idf < 0] = epsilon * (mean_idf if mean_idf > _ROUNDING else math.log(2))
    norm = k1 * (1 - b + b * doc_len[docs] / avgdl)
    data = idf[terms] * (tf * (k1 + 1) / (tf + norm))
    order = np.lexsort((docs, terms))  # term by term, documents ascending
    indptr = np.concatenate(([0], np.cumsum(np.bincount(terms, minlength=n_terms)))).astype(np.int64)
    return idf, doc_len, avgdl, Postings(data[order], docs[order], indptr)


def _corrupt(detail: str) -> NoReturn:
    raise IndexCorruptError(f"BM25 arrays are damaged ({detail}); rebuild the index")


__all__ = ["ARRAYS_FORMAT_VERSION", "BM25", "Postings"]
