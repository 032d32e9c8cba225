"""BM25 against a naive formula and against rank_bm25; analyzer, persistence, top_k."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from sklearn.base import clone

from codesearch.chunking import chunk_text
from codesearch.exceptions import CodeSearchError, IndexCorruptError, NotFittedError
from codesearch.files import scan
from codesearch.keyword import BM25, BM25Builder, Vocabulary, code_tokens, split_identifier, top_k

QUERIES = [
    "don't send the password to another site after a redirect",
    "why does a POST turn into a GET after a redirect",
    "stop following redirects that go round in a loop",
    "move the upload back to the start so it can be sent again",
    "how big is the body we are about to send",
    "skip the proxy for machines on the local network",
    "make sure a file is never left half-written if the process dies",
    "tell UTF-16 from UTF-32 from the first bytes of the JSON",
    "read saved logins from a file in the home folder",
    "answer a 401 from the server with a hashed password",
    "raise_for_status",
    "UnrewindableBodyError",
]

SMALL = [
    "def should_strip_auth(self, old_url, new_url):\n    return True",
    "class HTTPAdapter(BaseAdapter):\n    def send(self, request): pass",
    "raise UnrewindableBodyError('Unable to rewind request body')",
    "def raise_for_status(self):\n    raise HTTPError(http_error_msg, response=self)",
    "the the the the redirect redirect",
    "",
    "def rewind_body(prepared_request):\n    body_seek = getattr(prepared_request.body, 'seek', None)",
]


def naive_bm25(
    docs: list[list[str]], query: list[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25
) -> np.ndarray:
    """Okapi BM25 straight from the formula, one document and one query term at a time."""
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    df = Counter(term for d in docs for term in set(d))
    idf = {term: math.log((n - f + 0.5) / (f + 0.5)) for term, f in df.items()}
    mean = sum(idf.values()) / len(idf)
    floor = epsilon * (mean if mean > 1e-9 else math.log(2))  # codesearch's guard for tiny corpora
    idf = {term: (v if v >= 0 else floor) for term, v in idf.items()}
    scores = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for q in query:
            f = tf[q]
            if f:  # an absent term adds 0 (this also avoids 0/0 when k1 = 0)
                s += idf[q] * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / avgdl))
        scores.append(s)
    return np.array(scores)


def reference_top(scores: np.ndarray, k: int) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k]


# --- analyzer ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("should_strip_auth", ("should", "strip", "auth", "should_strip_auth")),
        ("raise_for_status", ("raise", "for", "status", "raise_for_status")),
        ("HTTPAdapter", ("http", "adapter", "httpadapter")),
        ("UnrewindableBodyError", ("unrewindable", "body", "error", "unrewindablebodyerror")),
        ("getHTTPResponseCode", ("get", "http", "response", "code", "gethttpresponsecode")),
        ("__init__", ("init",)),
        ("_private", ("private",)),
        ("utf8", ("utf", "8", "utf8")),
        ("URL", ("url",)),
        ("x", ("x",)),
        ("401", ("401",)),
        ("naïveBayes", ("naïve", "bayes", "naïvebayes")),
    ],
)
def test_split_identifier(word: str, expected: tuple[str, ...]) -> None:
    assert split_identifier(word) == expected


def test_code_tokens_splits_on_punctuation_and_keeps_order() -> None:
    assert code_tokens("r.raise_for_status() # UTF-16") == [
        "r", "raise", "for", "status", "raise_for_status", "utf", "16",
    ]  # fmt: skip
    assert code_tokens("") == []
    assert code_tokens("  ... ;; ") == []


def test_overlong_tokens_are_dropped_but_parts_kept() -> None:
    blob = "a" * 100
    assert code_tokens(blob) == []
    assert code_tokens(f"{blob}_tail") == ["tail"]


def test_identifier_matches_its_parts_and_itself() -> None:
    bm25 = BM25().fit(SMALL)
    assert top_k(bm25.score("strip"), 1).tolist() == [0]
    assert top_k(bm25.score("raise_for_status"), 1).tolist() == [3]
    assert top_k(bm25.score("adapter"), 1).tolist() == [1]


# --- scores against a naive formula -----------------------------------------


@pytest.mark.parametrize(
    ("k1", "b", "epsilon"), [(1.5, 0.75, 0.25), (1.2, 0.0, 0.25), (0.0, 1.0, 0.5), (2.0, 0.3, 0.0)]
)
@pytest.mark.parametrize(
    "query",
    ["raise the body", "redirect redirect the", "HTTPAdapter send request", "nothing_matches_here", "", "the"],
)
def test_scores_equal_naive_bm25(k1: float, b: float, epsilon: float, query: str) -> None:
    bm25 = BM25(k1=k1, b=b, epsilon=epsilon).fit(SMALL)
    expected = naive_bm25([code_tokens(d) for d in SMALL], code_tokens(query), k1, b, epsilon)
    got = bm25.score(query)
    assert got.dtype == np.float64 and got.shape == (len(SMALL),)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)


def test_common_term_gets_the_epsilon_floor() -> None:
    docs = ["the cat", "the dog", "the fish", "a bird"]
    bm25 = BM25().fit(docs)
    idf = {t: bm25.idf_[c] for t, c in bm25.vocabulary_.items()}
    raw = {"the": math.log(1.5 / 3.5), "cat": math.log(3.5 / 1.5), "a": math.log(3.5 / 1.5)}
    mean = (raw["the"] + 5 * raw["cat"]) / 6
    assert idf["the"] == pytest.approx(0.25 * mean, abs=1e-12)
    assert idf["cat"] == pytest.approx(raw["cat"], abs=1e-12)


_WORDS = st.sampled_from(["foo", "bar", "fooBar", "baz_qux", "HTTPAdapter", "x1", "the", "a", "redirect"])


def test_a_mean_idf_that_is_zero_but_for_rounding_floors_at_ln_2() -> None:
    """Three terms in 3 of 5 documents, three in 2 of 5: the mean idf is 0, its last bit either sign."""
    docs = ["", "", "fooBar", "fooBar baz_qux", "fooBar baz_qux"]
    bm25 = BM25().fit(docs)
    assert bm25.idf_[bm25.vocabulary_["foo"]] == pytest.approx(0.25 * math.log(2))
    scores = bm25.score("foo")
    np.testing.assert_allclose(scores, naive_bm25([code_tokens(d) for d in docs], ["foo"]), rtol=0, atol=1e-9)
    assert scores[2] > scores[3] > 0.1 and scores[0] == 0


@settings(max_examples=60, deadline=None)
@given(
    docs=st.lists(st.lists(_WORDS, max_size=12).map(" ".join), min_size=1, max_size=10),
    query=st.lists(_WORDS, max_size=5).map(" ".join),
)
@example(docs=["", "", "fooBar", "fooBar baz_qux", "fooBar baz_qux"], query="foo")
def test_scores_equal_naive_bm25_property(docs: list[str], query: str) -> None:
    tokenized = [code_tokens(d) for d in docs]
    assume(any(tokenized))
    np.testing.assert_allclose(
        BM25().fit(docs).score(query), naive_bm25(tokenized, code_tokens(query)), rtol=0, atol=1e-9
    )


# --- agreement with rank_bm25 on a real repository ---------------------------


@pytest.fixture(scope="module")
def requests_index(requests_corpus: Path) -> tuple[BM25, object]:
    """Our BM25 and rank_bm25's BM25Okapi over the same scan + chunk of requests (318 chunks)."""
    rank_bm25 = pytest.importorskip("rank_bm25")
    docs = [
        f"{c.path}\n{c.text}" for f in scan(requests_corpus).files for c in chunk_text(f.path, f.text)
    ]
    return BM25().fit(docs), rank_bm25.BM25Okapi([code_tokens(d) for d in docs])


@pytest.mark.parametrize("query", QUERIES)
def test_top10_agrees_with_rank_bm25_on_requests(requests_index: tuple[BM25, object], query: str) -> None:
    bm25, reference = requests_index
    expected = reference.get_scores(code_tokens(query))  # type: ignore[attr-defined]
    got = bm25.score(query)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)
    assert expected.max() > 0, "every query should hit something in requests"
    assert top_k(got, 10).tolist() == reference_top(expected, 10)


def test_requests_round_trip_through_npz(requests_index: tuple[BM25, object], tmp_path: Path) -> None:
    bm25, _ = requests_index
    np.savez(tmp_path / "bm25.npz", **bm25.to_arrays())
    with np.load(tmp_path / "bm25.npz", allow_pickle=False) as arrays:
        loaded = BM25.from_arrays(arrays)
    for query in QUERIES:
        assert np.array_equal(loaded.score(query), bm25.score(query))


# --- estimator contract --------------------------------------------------------


def test_fit_returns_self_and_keeps_params() -> None:
    bm25 = BM25(k1=1.2, b=0.5)
    assert bm25.fit(SMALL) is bm25
    assert bm25.get_params() == {"k1": 1.2, "b": 0.5, "epsilon": 0.25}
    assert bm25.shape_ == (len(SMALL), len(bm25.vocabulary_))
    assert bm25.doc_len_.tolist() == [len(code_tokens(d)) for d in SMALL]
    unfitted = clone(bm25)
    assert unfitted.get_params() == bm25.get_params()
    assert not hasattr(unfitted, "postings_")
    assert repr(BM25(k1=1.2)) == "BM25(k1=1.2)"
    with pytest.raises(ValueError, match="no parameter 'k'"):
        BM25().set_params(k=1)


@pytest.mark.parametrize("call", [lambda m: m.score("x"), lambda m: m.to_arrays()])
def test_unfitted_use_says_to_call_fit(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(NotFittedError, match=r"call fit\(documents\) first"):
        call(BM25())
    with pytest.raises(ValueError):  # NotFittedError also is a ValueError, like scikit-learn's
        call(BM25())


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"k1": -1.0}, "k1"),
        ({"k1": float("inf")}, "k1"),
        ({"b": 1.5}, "b"),
        ({"epsilon": -0.1}, "epsilon"),
    ],
)
def test_bad_params_fail_at_fit(params: dict[str, float], match: str) -> None:
    bm25 = BM25(**params)  # scikit-learn convention: __init__ only stores
    with pytest.raises(ValueError, match=match):
        bm25.fit(SMALL)


def test_documents_without_words_are_rejected() -> None:
    with pytest.raises(ValueError, match="no word to index"):
        BM25().fit(["", "  ;; ", "..."])
    with pytest.raises(ValueError, match="no word to index"):
        BM25().fit([])
    with pytest.raises(TypeError, match="not one string"):
        BM25().fit("a single string")


def test_refit_replaces_state() -> None:
    bm25 = BM25().fit(SMALL)
    bm25.fit(["alpha beta", "beta gamma", "delta"])
    assert bm25.score("alpha").shape == (3,)
    assert "redirect" not in bm25.vocabulary_


# --- persistence -------------------------------------------------------------------


def test_arrays_are_plain_and_round_trip_exactly(tmp_path: Path) -> None:
    bm25 = BM25(k1=1.3, b=0.6, epsilon=0.1).fit(SMALL)
    arrays = bm25.to_arrays()
    assert all(isinstance(a, np.ndarray) and a.dtype != object for a in arrays.values())
    assert arrays["terms"].dtype == np.uint8 and arrays["indices"].dtype == np.int32
    np.savez(tmp_path / "bm25.npz", **arrays)
    with np.load(tmp_path / "bm25.npz", allow_pickle=False) as stored:
        loaded = BM25.from_arrays(stored)
    assert loaded.get_params() == bm25.get_params()
    assert loaded.vocabulary_ == bm25.vocabulary_
    assert loaded.avgdl_ == bm25.avgdl_
    for query in ["raise the body", "redirect", "HTTPAdapter", "", "zzz"]:
        assert np.array_equal(loaded.score(query), bm25.score(query))


@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=60, unique=True),
       st.lists(st.text(max_size=12), max_size=20))
def test_a_stored_vocabulary_finds_every_term_by_binary_search(terms: list[str], others: list[str]) -> None:
    built = Vocabulary({t: n for n, t in enumerate(terms)})
    stored = Vocabulary.from_arrays(*(built.to_arrays()[k] for k in ("terms", "term_offsets", "term_order")))
    assert len(stored) == len(terms) and list(stored) == terms
    assert all(stored[t] == n and stored.term(n) == t for n, t in enumerate(terms))
    assert all(stored.get(o) is None for o in others if o not in built)


def test_a_stored_vocabulary_pickles_and_copies_after_lookups() -> None:
    # Lookups keep memory views of the stored arrays (not picklable); a pickled or copied vocabulary leaves them.
    import copy
    import pickle

    built = Vocabulary({t: n for n, t in enumerate(["body", "raise", "redirect", "ünïcode"])})
    stored = Vocabulary.from_arrays(*(built.to_arrays()[k] for k in ("terms", "term_offsets", "term_order")))
    assert stored["redirect"] == 2 and stored.term(3) == "ünïcode"
    for again in (pickle.loads(pickle.dumps(stored)), copy.deepcopy(stored), copy.copy(stored)):
        assert again["redirect"] == 2 and again.get("nope") is None and list(again) == list(built)


def test_a_refit_from_stored_term_counts_scores_as_a_fit_from_text() -> None:
    first = BM25().fit(SMALL)
    offsets, terms, counts = first.doc_terms()
    builder = BM25Builder()
    remap = np.full(len(first.vocabulary_), -1, dtype=np.int64)
    for d in (2, 0):  # two documents kept without their text, in another order, and one new
        builder.add_document(terms[offsets[d]:offsets[d + 1]], counts[offsets[d]:offsets[d + 1]], first.vocabulary_, remap)
    builder.add_text("a brand new body to redirect")
    kept = builder.fit()
    fresh = BM25().fit([SMALL[2], SMALL[0], "a brand new body to redirect"])
    for query in ["raise the body", "redirect", "HTTPAdapter", "brand new"]:
        np.testing.assert_allclose(kept.score(query), fresh.score(query), rtol=1e-12)
    assert dict(kept.vocabulary_.items()).keys() == dict(fresh.vocabulary_.items()).keys()


def test_to_arrays_does_not_share_memory() -> None:
    bm25 = BM25().fit(SMALL)
    before = bm25.score("redirect body")
    arrays = bm25.to_arrays()
    arrays["data"][:] = 0
    arrays["idf"][:] = 0
    assert np.array_equal(bm25.score("redirect body"), before)


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (lambda a: a.pop("idf"), "missing idf"),
        (lambda a: a.update(format_version=np.array(99)), "format version"),
        (lambda a: a.update(format_version=np.array("1")), "format version"),
        (lambda a: a.update(term_offsets=a["term_offsets"][:-1]), "do not fit"),
        (lambda a: a.update(tf=a["tf"][:-1]), "do not fit"),
        (lambda a: a.update(terms=a["terms"].astype(object)), "kind 'u'"),
        (lambda a: a.update(k1=np.array([1.5])), "k1"),
    ],
)
def test_damaged_arrays_raise_index_corrupt(damage, match: str) -> None:  # type: ignore[no-untyped-def]
    arrays = BM25().fit(SMALL).to_arrays()
    damage(arrays)
    with pytest.raises(IndexCorruptError, match=match) as info:
        BM25.from_arrays(arrays)
    assert isinstance(info.value, CodeSearchError)
    assert "rebuild the index" in str(info.value)


# --- top_k ---------------------------------------------------------------------------


def test_top_k_orders_ties_by_position() -> None:
    scores = np.array([1.0, 3.0, 2.0, 3.0, 0.0, 2.0])
    assert top_k(scores, 3).tolist() == [1, 3, 2]
    assert top_k(scores, 4).tolist() == [1, 3, 2, 5]
    assert top_k(scores, 100).tolist() == [1, 3, 2, 5, 0, 4]
    assert top_k(scores, 0).tolist() == []


def test_top_k_mask_and_above() -> None:
    scores = np.array([1.0, 3.0, 2.0, 3.0, 0.0, 2.0])
    mask = np.array([True, False, True, False, True, True])
    assert top_k(scores, 2, mask=mask).tolist() == [2, 5]
    assert top_k(scores, 10, mask=mask, above=0.0).tolist() == [2, 5, 0]
    assert top_k(scores, 10, above=2.0).tolist() == [1, 3]
    assert top_k(scores, 3, mask=np.zeros(6, dtype=bool)).tolist() == []


def test_top_k_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="k >= 0"):
        top_k(np.zeros(3), -1)
    with pytest.raises(ValueError, match="NaN"):
        top_k(np.array([1.0, np.nan]), 1)
    with pytest.raises(ValueError, match="mask"):
        top_k(np.zeros(3), 1, mask=np.ones(2, dtype=bool))
    with pytest.raises(ValueError, match="mask"):
        top_k(np.zeros(3), 1, mask=np.ones(3))


@settings(max_examples=200, deadline=None)
@given(
    scores=st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, -1.0]), max_size=30),
    k=st.integers(0, 35),
    data=st.data(),
)
def test_top_k_matches_sorting(scores: list[float], k: int, data: st.DataObject) -> None:
    keep = data.draw(st.lists(st.booleans(), min_size=len(scores), max_size=len(scores)))
    arr, mask = np.array(scores, dtype=np.float64), np.array(keep, dtype=bool)
    expected = [i for i in reference_top(arr, len(scores)) if keep[i]][:k]
    assert top_k(arr, k, mask=mask).tolist() == expected


def test_single_document_still_matches_its_words() -> None:
    # With one document every term has negative Okapi idf and rank_bm25's floor
    # (epsilon * mean idf) is negative too; codesearch floors at epsilon * ln 2.
    bm25 = BM25().fit(["def main():\n    return 1"])
    assert bm25.score("main")[0] > 0
    assert bm25.score("unrelated")[0] == 0
