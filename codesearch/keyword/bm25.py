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
numeric arrays that ``np.load(..., allow_pickle=False, mmap_mode="r")`` reads
back, and :meth:`BM25.from_arrays` restores an estimator whose scores are
bit-for-bit those of the original without building anything per term: the
vocabulary stays a sorted UTF-8 blob that a query looks its terms up in
(:class:`Vocabulary`). :class:`BM25Builder` fits one document at a time into
flat arrays (the index builder streams chunks through it), and takes the term
counts of an earlier fit's documents, so a refresh tokenizes only what changed.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple, NoReturn

import numpy as np

from codesearch.exceptions import IndexCorruptError, NotFittedError
from codesearch.keyword.tokens import code_tokens
from codesearch.strings import Strings, ascending

ARRAYS_FORMAT_VERSION = 3
"""Version of the layout written by :meth:`BM25.to_arrays` (2: postings term by term; 3: int32 documents, term
counts kept, the vocabulary as a sorted UTF-8 blob)."""

_ARRAY_KEYS = (
    "format_version", "k1", "b", "epsilon", "avgdl",
    "data", "indices", "tf", "indptr", "shape", "idf", "doc_len", "terms", "term_offsets", "term_order",
)  # fmt: skip


class Postings(NamedTuple):
    """BM25 weights term by term: term ``t``'s documents are ``docs[indptr[t]:indptr[t + 1]]`` (ascending).

    ``tf`` holds the raw count of the term in each of those documents.
    """

    data: np.ndarray
    docs: np.ndarray
    indptr: np.ndarray
    tf: np.ndarray


class Vocabulary(Mapping[str, int]):
    """Term -> term number, read-only: a dict in the process that fitted it, a sorted UTF-8 blob once stored.

    Loaded from arrays, nothing is built per term: :meth:`get` finds a term by
    binary search over the blob's byte order (``term_order``).
    """

    def __init__(self, terms: dict[str, int] | None = None, *, stored: Strings | None = None,
                 order: np.ndarray | None = None) -> None:
        self._dict = terms
        self._stored, self._order = stored, order
        self._terms: list[str] | None = None

    @classmethod
    def from_arrays(cls, blob: np.ndarray, offsets: np.ndarray, order: np.ndarray) -> Vocabulary:
        return cls(stored=Strings(blob, offsets), order=order)

    def term(self, t: int) -> str:
        """The term numbered ``t``."""
        if self._stored is not None:
            return self._stored[t]
        if self._terms is None:
            assert self._dict is not None
            self._terms = sorted(self._dict, key=self._dict.__getitem__)
        return self._terms[t]

    def get(self, term: str, default: Any = None) -> Any:  # type: ignore[override]
        if self._dict is not None:
            return self._dict.get(term, default)
        assert self._stored is not None
        found = self._stored.find(term, self._order)
        return default if found is None else found

    def __getitem__(self, term: str) -> int:
        found = self.get(term)
        if found is None:
            raise KeyError(term)
        return int(found)

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __len__(self) -> int:
        if self._dict is not None:
            return len(self._dict)
        assert self._stored is not None
        return len(self._stored)

    def __iter__(self) -> Iterator[str]:
        if self._stored is not None:
            return iter(self._stored.tolist())
        return (self.term(t) for t in range(len(self)))

    def to_arrays(self) -> dict[str, np.ndarray]:
        """``terms`` (the UTF-8 blob, in term-number order), ``term_offsets`` and ``term_order`` (numbers by bytes)."""
        if self._stored is not None:
            assert self._order is not None
            return {"terms": np.array(self._stored.blob), "term_offsets": np.array(self._stored.offsets),
                    "term_order": np.array(self._order)}
        stored = Strings.of(self.term(t) for t in range(len(self)))
        encoded = [bytes(stored.blob[stored.offsets[t]:stored.offsets[t + 1]]) for t in range(len(stored))]
        order = np.array(sorted(range(len(encoded)), key=encoded.__getitem__), dtype=np.int32)
        return {"terms": np.array(stored.blob), "term_offsets": stored.offsets, "term_order": order}


class BM25:
    """Okapi BM25 ranking of a fixed set of documents.

    Args:
        k1: term-frequency saturation; 0 makes BM25 a binary idf model.
        b: length normalisation, from 0 (none) to 1 (full).
        epsilon: idf floor for terms in more than half the documents, as a
            fraction of the mean idf (``rank_bm25``'s ``epsilon``).

    Attributes:
        vocabulary_: term -> term number (:class:`Vocabulary`).
        idf_: idf of each term, after the epsilon floor, float64.
        doc_len_: number of terms in each document.
        avgdl_: mean document length.
        postings_: each term's BM25 contribution to each document holding it
            (:class:`Postings`, float64 weights, int32 documents, raw counts).
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
        builder = BM25Builder()
        for document in raw_documents:
            builder.add_text(document)
        builder.fit(self)
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
        data, docs, indptr, _ = self.postings_
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
        scores: np.ndarray = np.bincount(_in_range(np.concatenate(picked_docs), n_docs),
                                         weights=np.concatenate(picked_weights), minlength=n_docs)
        return scores

    def documents(self, t: int) -> np.ndarray:
        """The documents that hold term number ``t``, ascending.

        Raises:
            IndexCorruptError: a stored posting names no document.
        """
        self._check_fitted()
        _, docs, indptr, _ = self.postings_
        return _in_range(docs[indptr[t]:indptr[t + 1]], self.shape_[0])

    def to_arrays(self, *, copy: bool = True) -> dict[str, np.ndarray]:
        """Export the fitted state as plain arrays, for ``np.save`` without pickle (copies unless ``copy=False``).

        Returns:
            ``data``, ``indices`` (document numbers, int32), ``tf``, ``indptr``
            (per term), ``shape`` (the postings), ``idf``, ``doc_len``, the
            vocabulary (``terms``, ``term_offsets``, ``term_order``: see
            :meth:`Vocabulary.to_arrays`) and 0-d arrays ``k1``, ``b``,
            ``epsilon``, ``avgdl``, ``format_version``. None is an object array.

        Raises:
            NotFittedError: the estimator is not fitted.
        """
        self._check_fitted()
        return {
            "format_version": np.array(ARRAYS_FORMAT_VERSION, dtype=np.int64),
            "k1": np.array(self.k1, dtype=np.float64),
            "b": np.array(self.b, dtype=np.float64),
            "epsilon": np.array(self.epsilon, dtype=np.float64),
            "avgdl": np.array(self.avgdl_, dtype=np.float64),
            "data": np.array(self.postings_.data, copy=copy),
            "indices": np.array(self.postings_.docs, copy=copy),
            "tf": np.array(self.postings_.tf, copy=copy),
            "indptr": np.array(self.postings_.indptr, copy=copy),
            "shape": np.array(self.shape_, dtype=np.int64),
            "idf": np.array(self.idf_, copy=copy),
            "doc_len": np.array(self.doc_len_, copy=copy),
            **self.vocabulary_.to_arrays(),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> BM25:
        """Rebuild a fitted estimator from :meth:`to_arrays` output (or memory-mapped ``np.load`` of it).

        Only array shapes are checked (the store checks contents by sha256);
        nothing is copied, so memory-mapped arrays stay on disk until read.

        Returns:
            A fitted :class:`BM25` whose scores equal the original's exactly.

        Raises:
            IndexCorruptError: an array is missing, of the wrong kind or shape,
                or from an unknown format version.
        """
        missing = [key for key in _ARRAY_KEYS if key not in arrays]
        if missing:
            _corrupt(f"missing {', '.join(missing)} (an index from an older codesearch)")
        a = {key: arrays[key] for key in _ARRAY_KEYS}
        version = np.asarray(a["format_version"])
        if version.shape != () or version.dtype.kind not in "iu" or int(version) != ARRAYS_FORMAT_VERSION:
            _corrupt(f"format version {a['format_version']!r}, this codesearch reads {ARRAYS_FORMAT_VERSION}")
        for key in ("k1", "b", "epsilon", "avgdl"):
            if a[key].shape != () or a[key].dtype.kind != "f":
                _corrupt(f"{key} should be a float scalar, got {a[key].dtype} {a[key].shape}")
        for key, kind in (("data", "f"), ("idf", "f"), ("indices", "i"), ("tf", "i"), ("indptr", "i"), ("shape", "i"),
                          ("doc_len", "i"), ("terms", "u"), ("term_offsets", "i"), ("term_order", "i")):  # fmt: skip
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
            or a["tf"].size != nnz
            or a["idf"].size != n_terms
            or a["doc_len"].size != n_docs
            or a["term_offsets"].size != n_terms + 1
            or a["term_order"].size != n_terms
            or (n_terms and (int(indptr[0]) != 0 or int(indptr[-1]) != nnz))
            or int(a["term_offsets"][0]) != 0 or int(a["term_offsets"][-1]) != a["terms"].size
        ):
            _corrupt("the array sizes do not fit together")
        # Offsets that run backwards, or a term number out of range, would be read as other postings or terms; a
        # document number out of range is refused where a query reads its postings (all of them are too many to
        # read at open). The store checks every byte by sha256.
        if not ascending(indptr) or not ascending(a["term_offsets"]):
            _corrupt("offsets out of order")
        order = a["term_order"]
        if n_terms and (int(order.min()) < 0 or int(order.max()) >= n_terms):
            _corrupt("a term number out of range")
        est = cls(k1=float(a["k1"]), b=float(a["b"]), epsilon=float(a["epsilon"]))
        vocabulary = Vocabulary.from_arrays(a["terms"], a["term_offsets"], a["term_order"])
        est._set_state(vocabulary, a["idf"], a["doc_len"], float(a["avgdl"]), Postings(a["data"], docs, indptr, a["tf"]))
        return est

    def doc_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each document's terms and counts, document by document: ``(doc_offsets, terms, counts)``.

        Document ``d``'s terms are ``terms[doc_offsets[d]:doc_offsets[d + 1]]``
        (ascending term numbers) with their raw counts: what
        :meth:`BM25Builder.add_document` takes to keep a document without
        tokenizing it again.
        """
        self._check_fitted()
        _, docs, indptr, tf = self.postings_
        terms = np.repeat(np.arange(len(indptr) - 1, dtype=np.int32), np.diff(indptr))
        order = np.argsort(docs, kind="stable")
        offsets = np.zeros(self.shape_[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(docs, minlength=self.shape_[0]), out=offsets[1:])
        return offsets, terms[order], np.asarray(tf)[order]

    def _set_state(
        self,
        vocabulary: Vocabulary,
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


class _Numbering(dict[str, int]):
    """Term → its number, a new term numbered on first sight (the lookup stays in C for the terms already seen)."""

    def __missing__(self, term: str) -> int:
        number = self[term] = len(self)
        return number


class BM25Builder:
    """Fit BM25 one document at a time into flat arrays (no object per term and document).

    Documents are numbered in the order they are added. A document comes as
    text (:meth:`add_text`), as its term counts (:meth:`add_counts`, e.g. from
    a worker process that tokenized it), or as the term numbers and counts of
    another fit's document (:meth:`add_document`, so an unchanged chunk is not
    tokenized again).
    """

    def __init__(self) -> None:
        self.vocabulary: dict[str, int] = _Numbering()
        self._terms = array("i")
        self._counts = array("i")
        self._lengths = array("i")  # distinct terms per document

    def __len__(self) -> int:
        return len(self._lengths)

    def add_text(self, text: str) -> None:
        """Add a document by its text (tokenized by :func:`~codesearch.keyword.tokens.code_tokens`)."""
        counts = Counter(code_tokens(text))
        self.add_counts(counts.keys(), counts.values())

    def add_counts(self, terms: Iterable[str], counts: Iterable[int]) -> None:
        """Add a document by its distinct terms and their counts."""
        before = len(self._terms)
        self._terms.extend(map(self.vocabulary.__getitem__, terms))  # a new term numbered by _Numbering
        self._counts.extend(counts)
        self._lengths.append(len(self._terms) - before)

    def add_document(self, terms: np.ndarray, counts: np.ndarray, vocabulary: Vocabulary, remap: np.ndarray) -> None:
        """Add a document of another fit by its term numbers there, ``vocabulary`` its terms.

        ``remap`` (one entry per term of that fit, -1 where not seen yet) caches
        the numbers its terms have here; it is updated in place.
        """
        mine = remap[terms]
        for position in np.flatnonzero(mine < 0):
            t = int(terms[position])
            if remap[t] < 0:
                remap[t] = self.vocabulary.setdefault(vocabulary.term(t), len(self.vocabulary))
        self._terms.extend(remap[terms].tolist())
        self._counts.extend(np.asarray(counts).tolist())
        self._lengths.append(len(terms))

    def fit(self, estimator: BM25 | None = None) -> BM25:
        """The fitted estimator (``estimator``'s parameters, else the defaults).

        Raises:
            ValueError: no document holds a term.
        """
        terms = np.frombuffer(self._terms, dtype=np.int32) if self._terms else np.empty(0, dtype=np.int32)
        counts = np.frombuffer(self._counts, dtype=np.int32) if self._counts else np.empty(0, dtype=np.int32)
        lengths = np.frombuffer(self._lengths, dtype=np.int32)
        return fit_counts(dict(self.vocabulary), terms, counts, lengths, estimator)


def fit_counts(vocabulary: dict[str, int] | Vocabulary, terms: np.ndarray, counts: np.ndarray, lengths: np.ndarray,
               estimator: BM25 | None = None) -> BM25:
    """A fitted estimator (``estimator``'s parameters, else the defaults) from every document's term counts.

    Args:
        vocabulary: term -> number, numbered ``0..n-1`` (a dict, or a :class:`Vocabulary` already made).
        terms: each document's distinct term numbers (int32), document after document.
        counts: their counts (int32).
        lengths: how many distinct terms each document has (int32), one entry per document.

    Raises:
        ValueError: no document holds a term.
    """
    est = estimator if estimator is not None else BM25()
    est._validate_params()
    if not vocabulary:
        raise ValueError(f"BM25.fit: the {len(lengths)} documents hold no word to index; pass non-empty texts")
    words = vocabulary if isinstance(vocabulary, Vocabulary) else Vocabulary(vocabulary)
    est._set_state(words, *_bm25_weights(terms, counts, lengths, len(vocabulary), est.k1, est.b,
                                                          est.epsilon))
    return est


_ROUNDING = 1e-9
"""A mean idf at or below this is taken as zero (see :func:`_bm25_weights`)."""


def _bm25_weights(
    terms: np.ndarray, counts: np.ndarray, lengths: np.ndarray, n_terms: int, k1: float, b: float, epsilon: float
) -> tuple[np.ndarray, np.ndarray, float, Postings]:
    """Fold idf, saturation and length normalisation into each (term, document) count.

    Args:
        terms: every document's distinct term numbers, document after document.
        counts: their counts.
        lengths: how many distinct terms each document has.

    Returns:
        ``(idf, doc_len, avgdl, postings)``; the arithmetic follows
        ``rank_bm25.BM25Okapi`` term by term.
    """
    n_docs = len(lengths)
    docs = np.repeat(np.arange(n_docs, dtype=np.int32), lengths)
    doc_len = np.bincount(docs, weights=counts, minlength=n_docs).astype(np.int64)
    avgdl = float(doc_len.sum()) / n_docs
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
    # Term by term, documents ascending: the documents come in order, so a stable sort by term keeps them so.
    order = np.argsort(terms, kind="stable")
    docs, terms, tf_int = docs[order], terms[order], counts[order]
    del order
    # data = idf[terms] * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len[docs] / avgdl))), one buffer at a
    # time (the same operations in the same order, so the same bits, in a third of the memory).
    data = doc_len[docs].astype(np.float64)
    data *= b
    data /= avgdl
    data += 1 - b
    data *= k1
    tf = tf_int.astype(np.float64)
    data += tf
    tf *= k1 + 1
    np.divide(tf, data, out=tf)
    np.take(idf, terms, out=data)
    data *= tf
    del tf
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(terms, minlength=n_terms), out=indptr[1:])
    return idf, doc_len, avgdl, Postings(data, docs, indptr, tf_int.astype(np.int32, copy=False))


def _in_range(docs: np.ndarray, n_docs: int) -> np.ndarray:
    """``docs`` when every one is a document number below ``n_docs``."""
    if len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= n_docs):
        _corrupt("a posting names no document")
    return docs


def _corrupt(detail: str) -> NoReturn:
    raise IndexCorruptError(f"BM25 arrays are damaged ({detail}); rebuild the index")


__all__ = ["ARRAYS_FORMAT_VERSION", "BM25", "BM25Builder", "Postings", "Vocabulary", "fit_counts"]
