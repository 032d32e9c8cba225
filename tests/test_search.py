"""The CodeSearch facade: indexing, incremental updates, modes, scope, model guard.

The search logic is tested with a deterministic hashing embedder (tests/conftest.py);
the real ONNX model is exercised in tests/test_search_minilm.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SESSIONS, UTILS, HashingEmbedder

from codesearch import CodeSearch, Hit
from codesearch.chunking import Chunk, document_text, window_heads
from codesearch.exceptions import EmptyRepositoryError, IndexNotFoundError, ModelMismatchError, RootNotFoundError
from codesearch.index import builder as builder_module
from codesearch.index import loaded as loaded_module
from codesearch.index.columns import stored_records

TESTS = '''\
def test_rebuild_method_redirect_get():
    """Redirect after POST becomes GET."""
    assert rebuild_method("POST") == "GET"


def test_strip_auth_redirect():
    assert should_strip_auth("http://a", "http://b")
'''


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "docs").mkdir()
    (root / "src" / "pkg" / "sessions.py").write_text(SESSIONS)
    (root / "src" / "pkg" / "utils.py").write_text(UTILS)
    (root / "tests" / "test_sessions.py").write_text(TESTS)
    (root / "docs" / "redirects.md").write_text("# Redirects\n\nA POST redirected with 303 becomes a GET.\n")
    return root


@pytest.fixture
def small_chunks():  # type: ignore[no-untyped-def]
    from codesearch.chunking import ChunkParams

    return ChunkParams(target_tokens=40, overlap_tokens=8)


def _cs(repo: Path, tmp_path: Path, embedder, **kwargs) -> CodeSearch:  # type: ignore[no-untyped-def]
    return CodeSearch(repo, model=embedder, index_dir=tmp_path / "index", **kwargs)


def test_index_report_and_search_modes(repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder) -> None:
    cs = _cs(repo, tmp_path, hashing_embedder)
    report = cs.index()
    # The transformer leaves the test file to keywords (and the static tier, which this searcher lacks).
    assert (report.files, report.chunks, report.embedded, report.reused, report.removed) == (4, 4, 3, 0, 0)
    assert report.unread == 1
    for mode in ("bm25", "dense", "hybrid"):
        hits = cs.search("get_netrc_auth from netrc", k=2, mode=mode)
        assert hits[0].path == "src/pkg/utils.py", mode
        assert isinstance(hits[0], Hit) and hits[0].kind == "source"
        assert hits[0].text == UTILS.rstrip("\n")
        assert (hits[0].start_line, hits[0].end_line) == (1, 9)
        assert str(hits[0]).startswith("src/pkg/utils.py:1-9  (")


def test_scope_filters_before_top_k(repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder, small_chunks) -> None:  # type: ignore[no-untyped-def]
    cs = _cs(repo, tmp_path, hashing_embedder, chunk_params=small_chunks)
    cs.index()
    everything = cs.search("redirect GET method", k=50, mode="bm25")
    assert {h.kind for h in everything} == {"source", "test", "doc"}
    source_only = [h for h in everything if h.kind == "source"]
    for mode in ("bm25", "dense", "hybrid"):
        hits = cs.search("redirect GET method", k=3, mode=mode, kinds={"source"})
        assert len(hits) == 3 and all(h.kind == "source" for h in hits), mode
    # The same source chunks as the unfiltered list's first three (scores are relative to the candidates in scope).
    scoped = cs.search("redirect GET method", k=3, mode="bm25", kinds={"source"})
    assert [h.location for h in scoped] == [h.location for h in source_only[:3]]
    assert all(h.path.startswith("src/") for h in cs.search("redirect", k=10, mode="hybrid", scope="src/"))
    no_tests = cs.search("redirect", k=10, mode="hybrid", exclude=["tests/**"], exclude_kinds={"doc"})
    assert no_tests and all(h.kind == "source" for h in no_tests)


def test_incremental_update_reuses_unchanged_chunks(
    repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder, small_chunks  # type: ignore[no-untyped-def]
) -> None:
    cs = _cs(repo, tmp_path, hashing_embedder, chunk_params=small_chunks)
    first = cs.index()
    assert first.embedded == first.chunks - first.unread - first.shared > 5 and first.unread > 0  # the test file's chunks

    again = cs.index()
    assert (again.embedded, again.reused, again.removed, again.unread) == (0, first.embedded, 0, first.unread)

    sessions = repo / "src" / "pkg" / "sessions.py"
    # Same length, so the boundaries stay; in the first window of `rebuild_method` (the later ones share its vector).
    sessions.write_text(SESSIONS.replace("we may want to", "we may wish to"))
    (repo / "docs" / "redirects.md").unlink()
    edited = cs.index()
    assert edited.embedded == 1 and edited.shared == first.shared > 0
    assert edited.removed == edited.embedded + 1  # the edited chunks' old versions and the doc
    assert edited.reused == edited.chunks - edited.unread - edited.shared - edited.embedded
    assert hashing_embedder.calls[-1] == edited.embedded

    rebuilt = CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "rebuilt", chunk_params=small_chunks)
    rebuilt.index()
    a, b = cs.store.load(), rebuilt.store.load()
    assert [(c["path"], c["start_line"], c["end_line"], c["text"]) for c in stored_records(a.arrays)] == [
        (c["path"], c["start_line"], c["end_line"], c["text"]) for c in stored_records(b.arrays)
    ]
    np.testing.assert_allclose(a.arrays["vectors"], b.arrays["vectors"], atol=1e-6)
    for mode in ("bm25", "dense", "hybrid"):
        query = "redirect method wish"
        assert cs.search(query, k=10, mode=mode) == rebuilt.search(query, k=10, mode=mode)


def test_an_unchanged_file_takes_the_kind_this_codesearch_gives_it_at_the_next_refresh(
    tmp_path: Path, hashing_embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "sdist"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def serve():\n    return 'served'\n")
    (root / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: app\n\nServes requests for humans.\n")
    cs = _cs(root, tmp_path, hashing_embedder)
    # An index made under an older rule, which classed PKG-INFO as source.
    monkeypatch.setattr(builder_module, "kind_of", lambda path: "source")
    first = cs.index()
    kinds = {c["path"]: c["kind"] for c in stored_records(cs.store.load().arrays)}
    assert kinds == {"src/app.py": "source", "PKG-INFO": "source"}
    monkeypatch.undo()
    (root / "src" / "app.py").write_text("def serve():\n    return 'served again'\n")
    again = cs.index()
    kinds = {c["path"]: c["kind"] for c in stored_records(cs.store.load().arrays)}
    assert kinds == {"src/app.py": "source", "PKG-INFO": "doc"}
    assert again.embedded == 1 and again.reused == first.embedded - 1  # PKG-INFO was kept, not cut or embedded again
    assert [h.path for h in cs.search("humans", k=5, kinds="doc")] == ["PKG-INFO"]


def test_a_long_definitions_later_windows_share_the_vector_of_its_first(
    repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder, small_chunks  # type: ignore[no-untyped-def]
) -> None:
    cs = _cs(repo, tmp_path, hashing_embedder, chunk_params=small_chunks)
    first = cs.index()
    before = cs.store.load()
    heads = window_heads([Chunk(c["path"], c["start_line"], c["end_line"], c["text"], tuple(c["symbols"]))
                          for c in stored_records(before.arrays)])
    read = [i for i, c in enumerate(stored_records(before.arrays)) if c["kind"] != "test"]
    shared = {row: head for row, head in heads.items() if row in read}
    assert first.shared == len(shared) > 0 and first.embedded == len(read) - len(shared)
    assert hashing_embedder.calls == [first.embedded]  # the later windows never reached the model
    vectors = before.arrays["vectors"]
    for row, head in shared.items():
        assert vectors[head].any()
        np.testing.assert_array_equal(vectors[row], vectors[head])

    # An edit inside a later window embeds nothing: the definition's vector is its first window's.
    sessions = repo / "src" / "pkg" / "sessions.py"
    sessions.write_text(SESSIONS.replace('method = "GET"', 'method = "PUT"'))  # same length: boundaries stay
    later = cs.index()
    assert (later.embedded, later.shared, later.removed) == (0, first.shared, 1)
    # An edit in the first window re-embeds it, and its later windows follow the new vector.
    sessions.write_text(SESSIONS.replace("we may want to", "we may wish to"))
    head_edit = cs.index()
    assert head_edit.embedded == 1
    after = cs.store.load()
    rebuild = [i for i, c in enumerate(stored_records(after.arrays)) if c["path"].endswith("sessions.py") and i in shared]
    assert rebuild
    for row in rebuild:
        np.testing.assert_array_equal(after.arrays["vectors"][row], after.arrays["vectors"][shared[row]])
        assert not np.array_equal(after.arrays["vectors"][row], vectors[row])


def test_a_chunk_that_once_shared_a_vector_is_embedded_when_it_stands_alone(
    repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder, small_chunks  # type: ignore[no-untyped-def]
) -> None:
    cs = _cs(repo, tmp_path, hashing_embedder, chunk_params=small_chunks)
    cs.index()
    before = cs.store.load()
    heads = window_heads([Chunk(c["path"], c["start_line"], c["end_line"], c["text"], tuple(c["symbols"]))
                          for c in stored_records(before.arrays)])
    row = next(r for r in heads if stored_records(before.arrays)[r]["path"].endswith("sessions.py"))
    window = stored_records(before.arrays)[row]["text"]
    # The same path and text, now a definition's first (and only) window: it needs its own vector.
    (repo / "src" / "pkg" / "sessions.py").write_text(window + "\n")
    cs.index()
    after = cs.store.load()
    again = next(i for i, c in enumerate(stored_records(after.arrays)) if c["text"] == window)
    assert again not in window_heads([Chunk(c["path"], c["start_line"], c["end_line"], c["text"],
                                            tuple(c["symbols"])) for c in stored_records(after.arrays)])
    expected = hashing_embedder.embed_documents([document_text(stored_records(after.arrays)[again]["path"], window)])[0]
    np.testing.assert_allclose(after.arrays["vectors"][again], expected, atol=1e-6)


def test_a_new_definitions_cutter_cuts_every_file_again_and_keeps_their_vectors(
    repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    cs = _cs(repo, tmp_path, hashing_embedder)
    first = cs.index()
    assert cs.index().changed_files == 0  # same cutter: nothing is cut again
    monkeypatch.setattr(builder_module, "DEFINITIONS_VERSION", builder_module.DEFINITIONS_VERSION + 1)
    upgraded = cs.index()
    assert upgraded.changed_files == first.files  # every file cut again ...
    assert (upgraded.embedded, upgraded.reused) == (0, first.embedded)  # ... and the same texts keep their vectors
    assert cs.store.load().manifest["chunker"]["version"] == builder_module.DEFINITIONS_VERSION


def test_index_persists_and_reloads(repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder) -> None:
    _cs(repo, tmp_path, hashing_embedder).index()
    fresh = _cs(repo, tmp_path, HashingEmbedder())
    hits = fresh.search("super_len body", k=1, mode="hybrid")
    assert hits[0].path == "src/pkg/utils.py"
    info = fresh.info()
    assert info["model"] == "hashing" and info["chunks"] == 4 and info["files"] == 4
    assert info["index_dir"] == str(tmp_path / "index")


def test_search_builds_index_on_first_use(repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder) -> None:
    cs = _cs(repo, tmp_path, hashing_embedder)
    assert not cs.store.exists()
    assert cs.search("status_code", k=1, mode="bm25")[0].path == "src/pkg/sessions.py"
    assert cs.store.exists()


def test_model_mismatch_is_refused(repo: Path, tmp_path: Path) -> None:
    _cs(repo, tmp_path, HashingEmbedder(name="model-a")).index()
    other = _cs(repo, tmp_path, HashingEmbedder(name="model-b"))  # same dimension, other model
    for mode in ("dense", "hybrid"):
        with pytest.raises(ModelMismatchError, match="model-a.*model-b.*re-index"):
            other.search("redirect", mode=mode)
    # Keyword search needs no model, so it still answers.
    assert other.search("super_len", k=1, mode="bm25")[0].path == "src/pkg/utils.py"


def test_same_model_name_but_another_export_is_refused_with_its_own_message(repo: Path, tmp_path: Path) -> None:
    _cs(repo, tmp_path, HashingEmbedder(name="minilm", salt="fp32")).index()
    other = _cs(repo, tmp_path, HashingEmbedder(name="minilm", salt="int8"))  # same name, other weights
    with pytest.raises(ModelMismatchError, match="another export of 'minilm'.*re-index") as refused:
        other.search("redirect", mode="hybrid")
    assert "search with --model" not in str(refused.value)


def test_keyword_search_never_loads_the_model(repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder) -> None:
    _cs(repo, tmp_path, hashing_embedder).index()
    cs = CodeSearch(repo, model="no-such-model-anywhere", index_dir=tmp_path / "index")
    assert cs.search("super_len", k=1, mode="bm25")[0].path == "src/pkg/utils.py"
    assert cs._tiers._embedder is None


def test_reindex_with_another_model_re_embeds_everything(repo: Path, tmp_path: Path) -> None:
    _cs(repo, tmp_path, HashingEmbedder(name="a")).index()
    report = _cs(repo, tmp_path, HashingEmbedder(name="b")).index()
    assert report.embedded == report.chunks - report.unread and report.reused == 0


def test_bad_input(repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder) -> None:
    cs = _cs(repo, tmp_path, hashing_embedder)
    with pytest.raises(ValueError, match="unknown mode"):
        cs.search("x", mode="fuzzy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be"):
        cs.search("x", k=0)
    with pytest.raises(ValueError, match="kind"):
        cs.search("x", kinds={"sauce"})
    with pytest.raises(IndexNotFoundError):
        cs.info()
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.py").write_text("\n\n")
    with pytest.raises(EmptyRepositoryError, match="nothing to index"):
        CodeSearch(empty, model=hashing_embedder, index_dir=tmp_path / "e").index()
    with pytest.raises(RootNotFoundError):
        CodeSearch(tmp_path / "missing", model=hashing_embedder, index_dir=tmp_path / "m").index()


def test_requests_edit_one_function_embeds_only_its_chunks(requests_corpus: Path, tmp_path: Path) -> None:
    repo = tmp_path / "requests"
    shutil.copytree(requests_corpus, repo, symlinks=True)
    cs = CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "index", chunking="lines", embed_tests=True)
    first = cs.index()
    assert (first.files, first.chunks, first.embedded, first.unread) == (117, 318, 318, 0)
    sessions = repo / "src" / "requests" / "sessions.py"
    text = sessions.read_text()
    old = 'codes.moved and method == "POST"'
    assert text.count(old) == 1
    sessions.write_text(text.replace(old, 'codes.moved and method != "HEAD"'))  # a one-line fix in rebuild_method
    report = cs.index()
    assert 1 <= report.embedded <= 2, report
    assert report.reused == 318 - report.embedded and report.removed == report.embedded


def test_keyword_only_index(repo: Path, tmp_path: Path) -> None:
    cs = CodeSearch(repo, model=None, index_dir=tmp_path / "index")
    report = cs.index()
    assert (report.embedded, report.chunks) == (0, 4)
    assert cs.search("super_len", k=1, mode="bm25")[0].path == "src/pkg/utils.py"
    assert cs.info()["model"] is None
    with pytest.raises(ModelMismatchError, match="keyword-only"):
        CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "index").search("super_len", mode="hybrid")
    from codesearch.exceptions import ModelNotAvailableError

    with pytest.raises(ModelNotAvailableError, match="keyword-only"):
        cs.search("super_len", mode="dense")


def test_requests_edit_that_shifts_lines_stays_local_with_definition_chunks(requests_corpus: Path, tmp_path: Path) -> None:
    repo = tmp_path / "requests"
    shutil.copytree(requests_corpus, repo, symlinks=True)
    cs = CodeSearch(repo, model=HashingEmbedder(), index_dir=tmp_path / "index")
    first = cs.index()
    sessions = repo / "src" / "requests" / "sessions.py"
    text = sessions.read_text()
    old = '        if response.status_code == codes.moved and method == "POST":\n'
    assert text.count(old) == 1
    # A longer line and an extra line: every later line window would shift.
    sessions.write_text(text.replace(old, "        # 301 after POST: browsers switch to GET\n" + old.replace("==", "in (")
                                     .replace(' "POST":', ' ("POST",)):')))
    report = cs.index()
    assert 1 <= report.embedded <= 2, report
    assert report.chunks == first.chunks
    assert report.reused == first.chunks - first.unread - first.shared - report.embedded


def test_a_query_runs_numpys_blas_on_one_thread_and_gives_the_threads_back(
    repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads() -> set[int]:
        return {pool["num_threads"] for pool in threadpoolctl.threadpool_info() if pool["user_api"] == "blas"}

    before = blas_threads()
    if not before:
        pytest.skip("numpy here has no BLAS that threadpoolctl knows")
    # The process keeps one controller of the BLAS libraries loaded when the first query ran; this test's earlier
    # neighbours may have loaded another since (scipy's, torch's): it starts from the libraries loaded now.
    loaded_module._blas_controller.cache_clear()
    cs = _cs(repo, tmp_path, hashing_embedder)
    cs.index()
    during: list[set[int]] = []
    real_rank = loaded_module.rank_scores

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        during.append(blas_threads())
        return real_rank(*args, **kwargs)

    monkeypatch.setattr(loaded_module, "rank_scores", spy)
    with threadpoolctl.threadpool_limits(2, "blas"):  # as on any machine with cores to spare
        assert cs.search("get_netrc_auth from netrc", k=2)[0].path == "src/pkg/utils.py"
        assert during == [{1}] and blas_threads() == {2}
    assert blas_threads() == before


def test_the_query_is_embedded_while_the_stat_pass_runs(repo: Path, tmp_path: Path,
                                                         hashing_embedder: HashingEmbedder) -> None:
    import threading

    cs = _cs(repo, tmp_path, hashing_embedder)
    cs.index()
    embedding, stat_pass_done = threading.Event(), threading.Event()
    seen: list[str] = []
    embed_query = hashing_embedder.embed_query

    def slow_embed(text: str):  # type: ignore[no-untyped-def]
        seen.append(threading.current_thread().name)
        embedding.set()
        assert stat_pass_done.wait(10), "the stat pass waited for the query's embedding"
        return embed_query(text)

    real_refresh = cs._session.refresh

    def refresh(loaded):  # type: ignore[no-untyped-def]
        assert embedding.wait(10), "the query was not being embedded during the stat pass"
        try:
            return real_refresh(loaded)
        finally:
            stat_pass_done.set()

    hashing_embedder.embed_query = slow_embed  # type: ignore[method-assign]
    cs._session.refresh = refresh  # type: ignore[method-assign]
    (repo / "src" / "pkg" / "utils.py").write_text(UTILS.replace("netrc", "netrc file") + "\n")
    hits = cs.search("get_netrc_auth from netrc", k=2)
    assert hits[0].path == "src/pkg/utils.py" and "netrc file" in hits[0].text  # refreshed, then ranked
    assert cs.last_search is not None and cs.last_search.refreshed == 1
    assert seen and seen[0].startswith("codesearch-query")


# -- empty answers say why ------------------------------------------------------------------------------


def test_an_empty_answer_says_why(repo: Path, tmp_path: Path, hashing_embedder: HashingEmbedder) -> None:
    (repo / "assets").mkdir()
    (repo / "assets" / "logo.png").write_bytes(b"\x89PNG\0\0")
    (repo / "assets" / "big.rs").write_text("fn main() {}\n" + "// x\n" * 300_000)
    (repo / ".gitignore").write_text("vendor/\n")
    (repo / "vendor").mkdir()
    (repo / "vendor" / "lib.rs").write_text("fn vendored() {}\n")
    cs = _cs(repo, tmp_path, hashing_embedder)
    cs.index()

    def note(query: str, **kwargs) -> str:  # type: ignore[no-untyped-def]
        assert cs.search(query, **kwargs) == []
        assert cs.last_search is not None and cs.last_search.note is not None
        return cs.last_search.note

    assert note("redirect", mode="bm25", scope="nowhere/") == "no indexed file under 'nowhere' (no file there on disk either)"
    assert note("redirect", scope="assets") == ("no indexed file under 'assets': all 2 files there were skipped "
                                                "(1 binary, 1 too large)")
    assert note("redirect", include="*.rs") == ("no indexed file matching '*.rs': all 2 files there were skipped "
                                                "(1 ignored by .gitignore or .codesearchignore, 1 too large)")
    assert note("redirect", scope="src", kinds="test") == ("no test file is indexed under 'src': the 2 indexed files "
                                                           "there are 2 source")
    assert note("redirect", scope="tests", exclude_kinds="test") == (
        "every indexed file under 'tests' is of a kind left out (test): the 1 indexed files there are 1 test")
    assert note("zebra quagga", mode="bm25") == "no word of the query (zebra, quagga) occurs in the indexed files"
    assert note("???") == ("the query holds no word to look up (letters, digits or _) and its embedding is empty "
                           "(the model knows none of its tokens); describe what the code does")
    assert note("???", mode="dense").startswith("the query's embedding is empty")
    assert note("redirect", mode="bm25", scope="src/pkg/utils.py") == (
        "no chunk in scope holds a word of the query (redirect); they occur only outside the scope")
    assert cs.search("redirect", k=1) and cs.last_search is not None and cs.last_search.note is None


# -- any file name, any file: no file breaks a repository --------------------------------------------------


@pytest.fixture(scope="module")
def static_embedder():  # type: ignore[no-untyped-def]
    """The real static tier (distilled from MiniLM into the cache once): the tokenizer a bad name used to reach."""
    from codesearch.embedding import StaticEmbedder

    return StaticEmbedder("minilm", export_progress=False)


def _later(path: Path, text: str) -> None:
    """Write ``text`` with a modification time a second past the last one, so a stat pass sees the change at once."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def _name(raw: bytes) -> str:
    return os.fsdecode(raw)


@pytest.mark.slow
def test_a_name_that_is_not_utf8_is_indexed_read_back_refreshed_renamed_and_deleted(
        tmp_path: Path, static_embedder) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / _name(b"r\xfdoot")
    (root / _name(b"d\xfe")).mkdir(parents=True)
    bad = root / _name(b"bad\xffname.py")
    bad.write_text("def fetch_redirect():\n    return 1\n")
    (root / _name(b"d\xfe") / "ok.py").write_text("def other_thing():\n    return 2\n")
    for n in range(3):  # a word in half of the files scores nothing in BM25: more files
        (root / f"filler_{n}.py").write_text(f"VALUE_{n} = {n}\n")
    cs = CodeSearch(root, model=HashingEmbedder("minilm"), static=static_embedder, index_dir=tmp_path / "index")

    hits = cs.search("fetch redirect", k=5)  # the static tier tokenizes the path: a TypeError before
    assert cs.last_search is not None and cs.last_search.tier == "static"
    assert hits[0].path == _name(b"bad\xffname.py") and os.fsencode(hits[0].path) == b"bad\xffname.py"
    assert (root / hits[0].path).read_text() == "def fetch_redirect():\n    return 1\n"  # the name opens the file
    assert {os.fsencode(h.path) for h in cs.search("return", k=5, mode="bm25")} == {b"bad\xffname.py", b"d\xfe/ok.py"}
    assert {os.fsencode(h.path) for h in cs.search("return", k=5, mode="bm25", scope=_name(b"d\xfe"))} == {b"d\xfe/ok.py"}
    cs.index()  # the transformer's tier too, committed
    again = CodeSearch(root, model=HashingEmbedder("minilm"), static=static_embedder, index_dir=tmp_path / "index")
    assert [h.location for h in again.search("fetch redirect", k=5)] == [h.location for h in cs.search("fetch redirect", k=5)]
    assert again.verify() > 0 and again.status()["files"] == 5

    _later(bad, "def fetch_redirect():\n    return 'changed'\n")
    assert [h.path for h in cs.search("changed", mode="bm25")] == [_name(b"bad\xffname.py")]
    renamed = root / _name(b"re\xfenamed.py")
    os.rename(bad, renamed)
    assert [h.path for h in cs.search("fetch redirect", mode="bm25")] == [_name(b"re\xfenamed.py")]
    renamed.unlink()
    assert cs.search("fetch redirect", mode="bm25") == []
    for mode in ("hybrid", "dense", "bm25"):  # a query holding a byte that is not UTF-8, as a shell hands it over
        found = cs.search(_name(b"other thing \xff"), mode=mode)  # type: ignore[arg-type]
        assert [os.fsencode(h.path) for h in found[:1]] == [b"d\xfe/ok.py"]


def _swap_after_listing(monkeypatch: pytest.MonkeyPatch, swap) -> None:  # type: ignore[no-untyped-def]
    real = builder_module.list_files

    def listed_then_swapped(*args, **kwargs):  # type: ignore[no-untyped-def]
        listing = real(*args, **kwargs)
        swap()
        return listing

    monkeypatch.setattr(builder_module, "list_files", listed_then_swapped)


def test_a_file_swapped_for_a_link_out_of_the_tree_while_indexing_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("def kept():\n    return 1\n")
    (root / "b.py").write_text("def swapped():\n    return 2\n")
    for n in range(3):  # a word in half of the files scores nothing in BM25: more files
        (root / f"filler_{n}.py").write_text(f"VALUE_{n} = {n}\n")
    (tmp_path / "secret.py").write_text("SECRET_TOKEN = 'outside the tree'\n")

    def swap() -> None:
        (root / "b.py").unlink()
        os.symlink(tmp_path / "secret.py", root / "b.py")

    _swap_after_listing(monkeypatch, swap)
    cs = CodeSearch(root, model=None, index_dir=tmp_path / "index")
    assert cs.index().files == 4
    assert cs.search("SECRET_TOKEN outside", mode="bm25") == []
    assert [h.path for h in cs.search("kept", mode="bm25")] == ["a.py"]


@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_file_swapped_for_a_fifo_while_indexing_is_skipped_without_blocking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "a.py").write_text("def kept():\n    return 1\n")
    (root / "b.py").write_text("def swapped():\n    return 2\n")

    def swap() -> None:
        (root / "b.py").unlink()
        os.mkfifo(root / "b.py")

    _swap_after_listing(monkeypatch, swap)
    cs = CodeSearch(root, model=None, index_dir=tmp_path / "index")
    assert cs.index().files == 1  # blocked for ever before, holding the write lock
    assert [h.path for h in cs.search("kept swapped", mode="bm25")] == ["a.py"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_an_empty_answer_names_special_files(repo: Path, tmp_path: Path) -> None:
    (repo / "pipes").mkdir()
    os.mkfifo(repo / "pipes" / "feed.py")
    cs = CodeSearch(repo, model=None, index_dir=tmp_path / "index")
    assert cs.search("redirect", mode="bm25", scope="pipes") == []
    assert cs.last_search is not None
    assert cs.last_search.note == "no indexed file under 'pipes': the files there were skipped (1 special file)"


def test_a_tree_whose_chunks_hold_no_word_is_an_empty_repository(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "+").write_text("-- ;; ++\n")  # found by tests/test_fuzz_trees.py: a ValueError from BM25 before
    cs = CodeSearch(root, model=None, index_dir=tmp_path / "index")
    with pytest.raises(EmptyRepositoryError, match="hold no word"):
        cs.index()
