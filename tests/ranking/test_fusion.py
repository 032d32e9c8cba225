"""Reciprocal rank fusion against hand-computed scores and tie orders."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch.ranking.fusion import reciprocal_rank_fusion, weighted_votes


def ids(fused: list[tuple[object, float]]) -> list[object]:
    return [item for item, _ in fused]


def test_two_lists_hand_computed() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "d"]])
    assert ids(fused) == ["b", "c", "a", "d"]
    expected = {"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 63 + 1 / 62, "d": 1 / 63}
    for item, score in fused:
        assert score == pytest.approx(expected[item], rel=1e-15)


def test_equal_scores_ordered_by_best_rank_then_list() -> None:
    # k=0 makes every score below exactly 1.0: x, y, q by one first place each,
    # p by two second places. p's best rank (2) is worse, so it comes last even
    # though it appears in the first list; x, y, q follow list order.
    fused = reciprocal_rank_fusion([["x", "p"], ["y", "p"], ["q"]], k=0)
    assert fused == [("x", 1.0), ("y", 1.0), ("q", 1.0), ("p", 1.0)]


def test_swapped_lists_tie_on_list_order() -> None:
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "a"]])
    assert fused[0][1] == fused[1][1] == 1 / 61 + 1 / 62
    assert ids(fused) == ["a", "b"]
    assert ids(reciprocal_rank_fusion([["b", "a"], ["a", "b"]])) == ["b", "a"]


def test_depth_cuts_each_list() -> None:
    fused = reciprocal_rank_fusion([[1, 2, 3, 4], [4, 5]], depth=2)
    assert ids(fused) == [1, 4, 2, 5]
    assert dict(fused) == pytest.approx({1: 1 / 61, 4: 1 / 61, 2: 1 / 62, 5: 1 / 62})
    assert ids(reciprocal_rank_fusion([list(range(50))])) == list(range(30))  # default depth 30
    assert len(reciprocal_rank_fusion([list(range(50))], depth=None)) == 50


def test_weights_scale_votes() -> None:
    fused = reciprocal_rank_fusion([["a", "b"], ["b", "a"]], weights=[1.0, 2.0])
    assert ids(fused) == ["b", "a"]
    assert dict(fused) == pytest.approx({"a": 1 / 61 + 2 / 62, "b": 1 / 62 + 2 / 61})


def test_zero_weight_list_takes_no_part() -> None:
    fused = reciprocal_rank_fusion([["a", "b"], ["c", "a"]], weights=[1.0, 0.0])
    assert fused == [("a", 1 / 61), ("b", 1 / 62)]


def test_repeats_inside_a_list_count_once_and_keep_ranks() -> None:
    fused = reciprocal_rank_fusion([["a", "a", "b"]], k=0)
    assert fused == [("a", 1.0), ("b", 1 / 3)]


def test_empty_inputs() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []
    assert reciprocal_rank_fusion([[], [7]], k=0) == [(7, 1.0)]


def test_any_hashable_id_without_ordering() -> None:
    a, b = object(), object()  # not orderable: ties must not compare ids
    assert ids(reciprocal_rank_fusion([[a, b], [b, a]])) == [a, b]
    chunk_ids = [("src/a.py", 1), ("src/b.py", 40)]
    assert ids(reciprocal_rank_fusion([chunk_ids])) == chunk_ids


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"k": -1}, ValueError, "k >= 0"),
        ({"k": float("nan")}, ValueError, "k >= 0"),
        ({"depth": 0}, ValueError, "depth >= 1"),
        ({"weights": [1.0]}, ValueError, "one per ranking"),
        ({"weights": [1.0, -0.5]}, ValueError, ">= 0"),
        ({"weights": [1.0, float("inf")]}, ValueError, "finite"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        reciprocal_rank_fusion([["a"], ["b"]], **kwargs)  # type: ignore[arg-type]


def test_string_ranking_is_rejected() -> None:
    with pytest.raises(TypeError, match="wrap it in a list"):
        reciprocal_rank_fusion(["abc", ["a"]])  # type: ignore[list-item]


_RANKING = st.lists(st.integers(0, 15), max_size=20)


@settings(max_examples=200, deadline=None)
@given(
    rankings=st.lists(_RANKING, max_size=4),
    k=st.sampled_from([0, 1, 60]),
    depth=st.sampled_from([1, 5, 30, None]),
)
def test_matches_brute_force_and_is_order_free(
    rankings: list[list[int]], k: int, depth: int | None
) -> None:
    fused = reciprocal_rank_fusion(rankings, k=k, depth=depth)
    # brute force: best place of each id in each list
    expected: dict[int, float] = {}
    for ranking in rankings:
        head = ranking if depth is None else ranking[:depth]
        for item in set(head):
            expected[item] = expected.get(item, 0.0) + 1 / (k + head.index(item) + 1)
    assert dict(fused) == pytest.approx(expected, rel=1e-12)
    assert len(fused) == len(expected)
    scores = [s for _, s in fused]
    assert scores == sorted(scores, reverse=True)
    # scores are fsum'd, so reversing the lists changes no score bit
    assert dict(reciprocal_rank_fusion(rankings[::-1], k=k, depth=depth)) == dict(fused)


@given(ranking=st.lists(st.integers(), unique=True, max_size=40))
def test_single_list_keeps_its_order(ranking: list[int]) -> None:
    fused = reciprocal_rank_fusion([ranking], k=60, depth=30)
    assert fused == [(item, 1 / (60 + r)) for r, item in enumerate(ranking[:30], start=1)]


def _votes_one_by_one(rankings, weights, k, depth, scores, score_share, ranges):  # type: ignore[no-untyped-def]
    """weighted_votes written as its docstring says, one place and one float at a time (the reference)."""
    import math

    votes: dict[int, list[float]] = {}
    first: dict[int, tuple[int, int]] = {}
    for index, (ranking, weight) in enumerate(zip(rankings, weights)):
        if weight == 0:
            continue
        voting = ranking[:depth]
        own = scores[index] if score_share > 0 else None
        if own is not None and voting:
            low, high = ranges[index] if ranges[index] is not None else (min(own[: len(voting)]), max(own[: len(voting)]))
            span = float(high - low) or 1.0
        seen: set[int] = set()
        for rank, item in enumerate(voting, start=1):
            if item in seen:
                continue
            seen.add(item)
            vote = 1.0 / (k + rank)
            if own is not None:
                vote = (1.0 - score_share) * vote + score_share * (own[rank - 1] - low) / span / (k + 1)
            votes.setdefault(item, []).append(weight * vote)
            first[item] = min(first.get(item, (rank, index)), (rank, index))
    return {item: math.fsum(v) for item, v in votes.items()}, first


@settings(max_examples=300)
@given(st.data())
def test_weighted_votes_are_the_one_by_one_sums_to_the_last_bit(data: st.DataObject) -> None:
    # Three lists, ids repeated within and across them, own scores scaled over given or own ranges, a cut.
    n_lists = data.draw(st.integers(1, 3))
    rankings = [data.draw(st.lists(st.integers(0, 30), max_size=25)) for _ in range(n_lists)]
    weights = [data.draw(st.sampled_from([0.0, 0.3, 0.5, 1.0, 0.7142857])) for _ in range(n_lists)]
    scores = [sorted(data.draw(st.lists(st.floats(-5, 5), min_size=len(r), max_size=len(r))), reverse=True)
              for r in rankings]
    ranges = [data.draw(st.none() | st.just((-6.0, 6.0))) for _ in range(n_lists)]
    k, depth = data.draw(st.sampled_from([0.0, 60.0, 7.5])), data.draw(st.sampled_from([None, 1, 10]))
    share = data.draw(st.sampled_from([0.0, 0.6, 1.0]))
    fused, first = weighted_votes(rankings, weights, k, depth, scores, share, ranges)
    expected, expected_first = _votes_one_by_one(rankings, weights, k, depth, scores, share, ranges)
    assert list(fused.items()) == list(expected.items())  # the same floats, in the same order
    assert first == expected_first
