"""VectorSearch against its references: the ranking's own exact cut, and brute force for the graph's recall."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime  # noqa: F401  (before usearch: see codesearch.index.vectors._usearch)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesearch.exceptions import IndexCorruptError
from codesearch.index.vectors import DELTA_FILE, GRAPH_FILE, ROWS_FILE, GraphParams, VectorSearch, reuse_by_key
from codesearch.ranking import candidates
from codesearch.topk import top_k

pytest.importorskip("usearch")


def clustered(n: int, dim: int, seed: int, queries: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Seeded unit vectors around random centres (as embeddings of code cluster), and queries near the centres."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n // 200, dim))
    rows = centres[rng.integers(0, len(centres), n)] + rng.normal(0, 0.6, (n, dim))
    qs = centres[rng.integers(0, len(centres), queries)] + rng.normal(0, 0.8, (queries, dim))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    return rows.astype(np.float32), qs.astype(np.float32)


def recall(vectors: np.ndarray, q: np.ndarray, ids: np.ndarray, allowed: np.ndarray | None, depth: int) -> float:
    """Share of the exact best ``depth`` places that ``ids`` fill with a row scoring at least the exact cut."""
    scores = vectors @ q
    exact = top_k(scores, depth, allowed)
    if len(exact) == 0:
        return 1.0
    return min(len(exact), int(np.count_nonzero(scores[ids] >= scores[exact[-1]] - 1e-6))) / len(exact)


@pytest.fixture(scope="module")
def large() -> tuple[np.ndarray, np.ndarray, np.ndarray, VectorSearch]:
    vectors, queries = clustered(21_000, 64, seed=5)
    covered = np.random.default_rng(6).random(len(vectors)) > 0.2
    vectors[~covered] = 0.0  # rows the transformer did not read are zeros
    return vectors, queries, covered, VectorSearch.build(vectors, covered, exact_below=20_000)


# -- the exact path is the ranking's cut --------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 40),
    dim=st.integers(1, 4),
    depth=st.integers(0, 45),
    seed=st.integers(0, 2**32 - 1),
    scoped=st.booleans(),
    partial=st.booleans(),
)
def test_exact_path_is_the_rankings_cut(n: int, dim: int, depth: int, seed: int, scoped: bool, partial: bool) -> None:
    rng = np.random.default_rng(seed)
    # Small integers make many equal scores, so the tie-break by row is exercised.
    vectors = rng.integers(-2, 3, (n, dim)).astype(np.float32)
    query = rng.integers(-2, 3, dim).astype(np.float32)
    mask = rng.random(n) > 0.4 if scoped else None
    covered = rng.random(n) > 0.3 if partial else None
    found = VectorSearch(vectors, covered).top(query, depth, mask)

    scores = vectors @ query
    lists = {"dense": scores}
    cover = None if covered is None else {"dense": covered}
    ranked = candidates.candidates(lists, depth, mask, cover)["dense"]
    whole = candidates.candidates(lists, depth, None, cover)
    assert found.ids.tolist() == ranked
    assert np.array_equal(found.scores, scores[ranked]) and found.scores.dtype == np.float32
    assert found.whole_range == candidates.score_ranges(whole, lists).get("dense")


def test_small_index_is_exact_and_writes_nothing(tmp_path: Path) -> None:
    vectors, queries = clustered(2_000, 16, seed=1)
    search = VectorSearch.build(vectors)
    assert search.exact and search.save(tmp_path) == [] and not list(tmp_path.iterdir())
    opened = VectorSearch.open(None, vectors)
    for q in queries[:5]:
        ids = top_k(vectors @ q, 100)
        assert np.array_equal(opened.top(q, 100).ids, ids) and np.array_equal(search.top(q, 100).ids, ids)


# -- the graph path --------------------------------------------------------------------------------------------


def test_graph_recall_at_the_rankings_depth(large: tuple[np.ndarray, np.ndarray, np.ndarray, VectorSearch]) -> None:
    vectors, queries, covered, search = large
    assert not search.exact
    scores = [recall(vectors, q, search.top(q, 100).ids, covered, 100) for q in queries]
    assert np.mean(scores) >= 0.99, np.mean(scores)


def test_graph_scores_are_the_exact_scores(large: tuple[np.ndarray, np.ndarray, np.ndarray, VectorSearch]) -> None:
    vectors, queries, covered, search = large
    for q in queries[:10]:
        found = search.top(q, 100)
        assert len(found.ids) == 100 and found.scores.dtype == np.float32
        assert np.array_equal(found.scores, vectors[found.ids] @ q)
        np.testing.assert_allclose(found.scores, (vectors @ q)[found.ids], rtol=0, atol=1e-6)
        order = np.lexsort((found.ids, -found.scores))
        assert np.array_equal(order, np.arange(len(order)))  # best first, equal scores by row
        exact = top_k(vectors @ q, 100, covered)
        assert found.whole_range is not None
        assert found.whole_range[1] == pytest.approx(float((vectors @ q)[exact[0]]), abs=1e-6)
        assert found.whole_range[0] == pytest.approx(float(found.scores[-1]))


@pytest.mark.parametrize("share", [0.005, 0.1, 0.5, 0.95])
def test_graph_respects_scope_and_covered(share: float,
                                          large: tuple[np.ndarray, np.ndarray, np.ndarray, VectorSearch]) -> None:
    vectors, queries, covered, search = large
    rng = np.random.default_rng(int(share * 1000))
    width = int(len(vectors) * share)
    scores = []
    for q in queries[:20]:
        start = int(rng.integers(0, len(vectors) - width))
        mask = np.zeros(len(vectors), dtype=bool)
        mask[start:start + width] = True
        found = search.top(q, 100, mask)
        assert mask[found.ids].all() and covered[found.ids].all()
        assert len(found.ids) == min(100, int(np.count_nonzero(mask & covered)))
        np.testing.assert_allclose(found.scores, (vectors @ q)[found.ids], rtol=0, atol=1e-6)
        unscoped = search.top(q, 100)
        assert found.whole_range == unscoped.whole_range  # the scope filters the list without rescaling it
        scores.append(recall(vectors, q, found.ids, mask & covered, 100))
    assert np.mean(scores) >= 0.99


def test_graph_scattered_scope_is_exact(large: tuple[np.ndarray, np.ndarray, np.ndarray, VectorSearch]) -> None:
    vectors, queries, covered, search = large
    rng = np.random.default_rng(21)
    for q in queries[:10]:
        mask = rng.random(len(vectors)) < 0.05  # thousands of runs: gathered, not sliced
        found = search.top(q, 100, mask)
        allowed = mask & covered
        assert allowed[found.ids].all() and recall(vectors, q, found.ids, allowed, 100) == 1.0
        np.testing.assert_allclose(found.scores, (vectors @ q)[found.ids], rtol=0, atol=1e-6)


def test_save_and_open_round_trip_memory_mapped(tmp_path: Path,
                                                large: tuple[np.ndarray, np.ndarray, np.ndarray, VectorSearch]) -> None:
    vectors, queries, covered, search = large
    files = search.save(tmp_path)
    assert sorted(p.name for p in files) == sorted([GRAPH_FILE, ROWS_FILE, DELTA_FILE])
    np.save(tmp_path / "vectors.npy", vectors)
    mapped = np.load(tmp_path / "vectors.npy", mmap_mode="r")
    opened = VectorSearch.open(tmp_path, mapped, covered, exact_below=20_000)
    assert opened._rows_map is not None  # its rescored rows are released from the process after each search
    for q in queries[:10]:
        a, b = search.top(q, 100), opened.top(q, 100)
        assert np.array_equal(a.ids, b.ids) and np.array_equal(a.scores, b.scores) and a.whole_range == b.whole_range
    if os.path.exists("/proc/self/maps"):  # the graph file is mapped, not read into memory
        maps = Path("/proc/self/maps").read_text()
        assert str((tmp_path / GRAPH_FILE).resolve()) in maps
    # A refresh keeps the mapped graph: 50 changed rows are dead nodes and a delta searched exactly, and the next
    # generation's folder links the same graph file.
    reuse = np.arange(len(vectors))
    changed = np.flatnonzero(covered)[:50]
    reuse[changed] = -1
    refreshed = opened.refresh(vectors, covered, reuse, exact_below=20_000)
    assert refreshed._graph is opened._graph and int(np.count_nonzero(refreshed._rows < 0)) == 50  # type: ignore[operator]
    assert np.array_equal(refreshed._delta, changed)
    later = tmp_path / "next"
    later.mkdir()
    refreshed.save(later)
    assert (later / GRAPH_FILE).read_bytes() == (tmp_path / GRAPH_FILE).read_bytes()
    reopened = VectorSearch.open(later, mapped, covered, exact_below=20_000)
    for q in queries[:10]:
        assert np.array_equal(reopened.top(q, 100).ids, refreshed.top(q, 100).ids)
    assert np.mean([recall(vectors, q, reopened.top(q, 100).ids, covered, 100) for q in queries]) >= 0.99


def test_open_says_what_is_wrong(tmp_path: Path) -> None:
    vectors, _ = clustered(3_000, 16, seed=2)
    with pytest.raises(IndexCorruptError, match="codesearch index"):
        VectorSearch.open(tmp_path, vectors, exact_below=1_000)
    VectorSearch.build(vectors, exact_below=1_000).save(tmp_path)
    with pytest.raises(IndexCorruptError, match="16-d"):
        VectorSearch.open(tmp_path, np.zeros((3_000, 8), dtype=np.float32), exact_below=1_000)
    search = VectorSearch.open(tmp_path, vectors, exact_below=1_000)
    with pytest.raises(ValueError, match="boolean array"):
        search.top(vectors[0], 10, np.ones(5, dtype=bool))


def test_refresh_keeps_the_graph_and_searches_the_delta() -> None:
    vectors, queries = clustered(8_000, 32, seed=9)
    covered = np.random.default_rng(8).random(len(vectors)) > 0.2  # unread rows are no nodes, not removed ones
    vectors[~covered] = 0.0
    search = VectorSearch.build(vectors, covered, exact_below=0)
    assert search._rows is not None and np.array_equal(search._rows, np.flatnonzero(covered))
    rng = np.random.default_rng(10)
    # The next generation: 1% of the rows get new vectors, 40 rows are gone, 40 new rows come last,
    # and 20 rows become unread (their rows zeros: they must leave the graph).
    changed = rng.choice(len(vectors), 80, replace=False)
    gone = np.setdiff1d(rng.choice(len(vectors), 60, replace=False), changed)[:40]
    kept = np.setdiff1d(np.arange(len(vectors)), gone)
    fresh, _ = clustered(400, 32, seed=11)
    nxt = np.concatenate([vectors[kept], fresh[:40]])
    reuse = np.concatenate([kept, np.full(40, -1)])
    moved = np.isin(kept, changed)
    nxt[np.flatnonzero(moved)] = fresh[40:40 + int(moved.sum())]
    reuse[np.flatnonzero(moved)] = -1
    nxt_covered = np.concatenate([covered[kept], np.ones(40, dtype=bool)])
    nxt[~nxt_covered] = 0.0
    reuse[~nxt_covered] = -1
    unread = rng.choice(np.flatnonzero((reuse >= 0) & nxt_covered), 20, replace=False)
    nxt_covered[unread] = False
    nxt[unread] = 0.0
    refreshed = search.refresh(nxt, nxt_covered, reuse, exact_below=0)
    # The graph is kept as built: nodes of gone, changed or unread rows are dead, new and changed rows are the delta.
    assert refreshed._graph is search._graph and refreshed._rows is not None
    assert np.array_equal(refreshed._delta, np.flatnonzero(nxt_covered & (reuse < 0)))
    live = refreshed._rows[refreshed._rows >= 0]
    assert nxt_covered[live].all() and np.array_equal(nxt[live], vectors[search._rows[refreshed._rows >= 0]])  # type: ignore[index]
    scores = []
    for q in queries:
        found = refreshed.top(q, 100)
        assert nxt_covered[found.ids].all()
        assert np.array_equal(found.scores, nxt[found.ids] @ q)
        scores.append(recall(nxt, q, found.ids, nxt_covered, 100))
    assert np.mean(scores) >= 0.99
    new = int(np.flatnonzero(reuse < 0)[-1])  # a row that came after the build is found first for its own vector
    assert refreshed.top(nxt[new], 1).ids.tolist() == [new]


def test_refresh_rebuilds_past_the_share_and_reuse_by_key() -> None:
    vectors, _ = clustered(4_000, 16, seed=12)
    search = VectorSearch.build(vectors, exact_below=0, params=GraphParams(rebuild_share=0.01))
    reuse = np.arange(len(vectors))
    reuse[:200] = -1  # 5% changed, above the 1% share: a new graph, labels are rows again
    refreshed = search.refresh(vectors, None, reuse, exact_below=0)
    assert refreshed._graph is not search._graph and len(refreshed._delta) == 0
    assert refreshed._rows is not None and np.array_equal(refreshed._rows, np.arange(len(vectors)))
    assert VectorSearch.build(vectors).refresh(vectors, None, reuse).exact  # small stays exact
    assert reuse_by_key(["a", "b", "a"], ["b", "c", "a", "a"]).tolist() == [1, -1, 0, 0]


def test_onnxruntime_still_imports_after_a_graph() -> None:
    # usearch's extension, imported first, made a later `import onnxruntime` crash the process.
    code = ("import numpy as np\n"
            "from codesearch.index.vectors import VectorSearch\n"
            "rows = np.random.default_rng(0).normal(size=(300, 8)).astype(np.float32)\n"
            "VectorSearch.build(rows, exact_below=0)\n"
            "import onnxruntime\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_an_index_past_the_threshold_answers_through_its_graph_and_keeps_it(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder makes a graph with the transformer tier, the store keeps it, a new process maps it, a refresh
    keeps it; answers match the exact product's on a small tree (the graph finds every row there)."""
    from conftest import SESSIONS, UTILS, HashingEmbedder

    from codesearch import CodeSearch
    from codesearch.index import vectors as vectors_module

    root = tmp_path / "repo"
    for n in range(12):
        (root / f"pkg{n}").mkdir(parents=True)
        (root / f"pkg{n}" / "sessions.py").write_text(SESSIONS.replace("Session", f"Session{n}"))
        (root / f"pkg{n}" / "utils.py").write_text(UTILS + f"\n\ndef helper_{n}(value):\n    return value * {n}\n")
    exact = CodeSearch(root, model=HashingEmbedder(), static=False, index_dir=tmp_path / "exact")
    exact.index()
    monkeypatch.setattr(vectors_module, "EXACT_BELOW", 10)
    graph = CodeSearch(root, model=HashingEmbedder(), static=False, index_dir=tmp_path / "graph")
    graph.index()
    arrays = graph.store.load().arrays
    assert "ann_vectors_graph" in arrays and "ann_vectors_graph" not in exact.store.load().arrays
    reopened = CodeSearch(root, model=HashingEmbedder(), static=False, index_dir=tmp_path / "graph")
    for query in ("strip the auth header on redirect", "helper_7 value", "length of the body"):
        want = [(h.location, round(h.score, 9)) for h in exact.search(query, k=5)]
        assert [(h.location, round(h.score, 9)) for h in reopened.search(query, k=5)] == want
    assert not reopened._session.current()[0].searches["full"].exact
    (root / "pkg3" / "utils.py").write_text(UTILS + "\n\ndef zebra_crossing(value):\n    return value\n")
    assert reopened.search("zebra_crossing value", k=1)[0].path == "pkg3/utils.py"
    stored = reopened.store.load().arrays
    np.testing.assert_array_equal(stored["ann_vectors_graph"], arrays["ann_vectors_graph"])  # kept as it was
    assert len(stored["ann_vectors_delta"]) > 0  # the changed chunk is searched exactly
