"""A fitted BM25 as one blob (the corpus's keywords table): read back as views, scoring as the fit it was."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import SESSIONS, UTILS

from codesearch.exceptions import IndexCorruptError
from codesearch.keyword import BM25
from codesearch.keyword.blob import bm25_blob, bm25_of_blob, pack, unpack


def test_arrays_come_back_as_they_went_aligned_and_without_a_copy() -> None:
    arrays = {"a": np.arange(5, dtype=np.int32), "b": np.array([[1.5, -2.0]], dtype=np.float64),
              "scalar": np.asarray(3.25), "empty": np.zeros(0, dtype=np.int64), "bytes": np.frombuffer(b"xyz", np.uint8)}
    blob = pack(arrays)
    back = unpack(blob)
    assert back.keys() == arrays.keys()
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        assert np.array_equal(back[name], array)
        assert not back[name].flags.writeable  # a view of the blob
        assert back[name].ctypes.data % 8 == 0 or back[name].size == 0


def test_a_fit_and_its_ids_round_trip_and_score_as_before() -> None:
    fit = BM25().fit([SESSIONS, UTILS, "def get(url): return request('get', url)"])
    ids, back = bm25_of_blob(bm25_blob(fit, np.array([7, 3, 11])))
    assert ids.tolist() == [7, 3, 11]
    for query in ("session redirect", "get url", "nothing"):
        assert np.array_equal(back.score(query), fit.score(query))


def test_a_damaged_blob_is_refused() -> None:
    fit = BM25().fit([SESSIONS, UTILS])
    arrays = unpack(bm25_blob(fit, np.array([1, 2])))
    arrays["indptr"] = arrays["indptr"][:-1]  # postings that no longer fit together
    with pytest.raises((IndexCorruptError, ValueError)):
        bm25_of_blob(pack(arrays))
