"""Tiers (static first, transformer after), freshness before every search, related code, several roots.

The logic is tested with deterministic hashing embedders standing in for both
tiers (tests/conftest.py); the real static model is tested in test_static.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import SESSIONS, TESTS, UTILS, HashingEmbedder

from codesearch import CodeSearch
from codesearch.exceptions import IndexLockedError, ModelMismatchError, ModelNotAvailableError
from codesearch.files import changed_files, scan
from codesearch.index.columns import stored_records
from codesearch.multi import MultiSearch


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "sessions.py").write_text(SESSIONS)
    (root / "pkg" / "utils.py").write_text(UTILS)
    return root


def _two_tier(repo: Path, index_dir: Path, **kwargs) -> tuple[CodeSearch, HashingEmbedder, HashingEmbedder]:  # type: ignore[no-untyped-def]
    dense, static = HashingEmbedder(name="dense"), HashingEmbedder(name="dense", dim=64, salt="static")
    return CodeSearch(repo, model=dense, static=static, index_dir=index_dir, **kwargs), dense, static


def _touch_later(path: Path, text: str) -> None:
    """Write ``text`` and move the modification time forward, so a stat pass sees the change at once."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))


# --- tiers -------------------------------------------------------------------------------------------


def test_first_search_answers_from_the_static_tier_then_index_adds_the_transformer(repo: Path, tmp_path: Path) -> None:
    cs, dense, static = _two_tier(repo, tmp_path / "index")
    hits = cs.search("super_len body", k=1)
    assert hits[0].path == "pkg/utils.py"
    assert cs.last_search is not None and (cs.last_search.tier, cs.last_search.built) == ("static", True)
    assert dense.calls == [] and static.calls  # the transformer has embedded nothing yet
    assert cs.info()["tier"] == "static"

    report = cs.index()
    assert (report.tier, report.embedded, report.static_embedded) == ("full", report.chunks, 0)
    hits = cs.search("super_len body", k=1)
    assert cs.last_search.tier == "full" and hits[0].path == "pkg/utils.py"
    stored = cs.store.load()
    assert set(stored.arrays) >= {"vectors", "static_vectors"}
    assert stored.manifest["model"]["name"] == stored.manifest["static"]["name"] == "dense"


def test_fast_start_off_builds_the_full_index_first(repo: Path, tmp_path: Path) -> None:
    cs, dense, _ = _two_tier(repo, tmp_path / "index", fast_start=False)
    cs.search("super_len", k=1)
    assert cs.last_search is not None and cs.last_search.tier == "full" and dense.calls


def test_an_edit_re_embeds_only_its_chunks_in_each_tier(repo: Path, tmp_path: Path) -> None:
    cs, dense, static = _two_tier(repo, tmp_path / "index")
    cs.index()
    chunks = cs.info()["chunks"]
    dense.calls.clear()
    static.calls.clear()
    _touch_later(repo / "pkg" / "utils.py", UTILS.replace("total_length = None", "total_length = 0"))
    report = cs.index()
    assert report.changed_files == 1 and report.embedded == 1 and report.static_embedded == 1
    assert dense.calls == [1] and static.calls == [1] and report.reused == chunks - 1


def test_a_static_refresh_of_a_full_index_keeps_the_transformer_tier_in_step(repo: Path, tmp_path: Path) -> None:
    cs, dense, _ = _two_tier(repo, tmp_path / "index")
    cs.index()
    dense.calls.clear()
    _touch_later(repo / "pkg" / "utils.py", UTILS + "\n\ndef added():\n    return 1\n")
    report = cs.index(tier="static")
    assert report.tier == "full" and dense.calls  # the new chunk has a transformer vector too


def test_each_tier_refuses_another_model(repo: Path, tmp_path: Path) -> None:
    cs, _, _ = _two_tier(repo, tmp_path / "index")
    cs.search("super_len", k=1)  # static tier only
    other_static = CodeSearch(repo, model=HashingEmbedder(name="dense"), index_dir=tmp_path / "index",
                              static=HashingEmbedder(name="dense", dim=64, salt="other"))
    with pytest.raises(ModelMismatchError, match="another export of 'dense'"):
        other_static.search("super_len", k=1)
    assert other_static.search("super_len", k=1, mode="bm25")[0].path == "pkg/utils.py"  # keywords need neither


def test_a_model_of_another_name_is_refused_before_it_is_loaded(repo: Path, tmp_path: Path) -> None:
    CodeSearch(repo, model=HashingEmbedder(name="minilm"), index_dir=tmp_path / "index").index()
    # bge-small cannot be downloaded here: refusing by name must come before any attempt to load it.
    other = CodeSearch(repo, model="bge-small", index_dir=tmp_path / "index")
    with pytest.raises(ModelMismatchError, match="built with model 'minilm', not 'bge-small'"):
        other.search("super_len", k=1)
    assert other._tiers._embedder is None and other._tiers._static is None


def test_keyword_only_searcher_has_the_keyword_tier(repo: Path, tmp_path: Path) -> None:
    cs = CodeSearch(repo, model=None, index_dir=tmp_path / "index")
    assert cs.search("super_len", k=1, mode="bm25")[0].path == "pkg/utils.py"
    assert cs.last_search is not None and cs.last_search.tier == "keyword"
    assert cs.info()["tier"] == "keyword"
    with pytest.raises(ModelNotAvailableError):
        cs.index(tier="static")


# --- test files and the transformer ---------------------------------------------------------------------

TEST_FILE = '''\
def test_super_len_of_an_open_file():
    """super_len measures what is left of a file object."""
    assert super_len(open(__file__)) > 0
'''


@pytest.fixture
def repo_with_tests(repo: Path) -> Path:
    (repo / "tests").mkdir()
    (repo / "tests" / "test_utils.py").write_text(TEST_FILE)
    return repo


def test_the_transformer_leaves_test_files_to_keywords_and_the_static_tier(repo_with_tests: Path, tmp_path: Path) -> None:
    cs, dense, static = _two_tier(repo_with_tests, tmp_path / "index")
    report = cs.index()
    snapshot = cs.store.load()
    kinds = [c["kind"] for c in stored_records(snapshot.arrays)]
    assert report.unread == kinds.count("test") == 1 and report.embedded == report.chunks - 1
    assert sum(dense.calls) == report.embedded and sum(static.calls) == report.chunks  # static reads every chunk
    test_row = kinds.index("test")
    assert not snapshot.arrays["vectors"][test_row].any() and snapshot.arrays["static_vectors"][test_row].any()
    assert cs.info()["unread_kinds"] == ["test"]

    query = "super_len of an open file"
    assert all(h.kind != "test" for h in cs.search(query, k=10, mode="dense"))  # a zero row is no candidate
    assert "test" in {h.kind for h in cs.search(query, k=10, mode="bm25")}
    assert "test" in {h.kind for h in cs.search(query, k=10)}  # hybrid: keywords still bring it
    assert cs.last_search is not None and cs.last_search.tier == "full"
    # A scope the transformer did not read is answered by the static tier, by meaning.
    hits = cs.search(query, k=10, mode="dense", kinds={"test"})
    assert [h.path for h in hits] == ["tests/test_utils.py"] and cs.last_search.tier == "static"


def test_embed_tests_reads_them_and_a_later_searcher_keeps_the_choice(repo_with_tests: Path, tmp_path: Path) -> None:
    index_dir = tmp_path / "index"
    first = _two_tier(repo_with_tests, index_dir)[0].index()
    cs, dense, _ = _two_tier(repo_with_tests, index_dir, embed_tests=True)
    upgraded = cs.index()
    assert (upgraded.embedded, upgraded.reused, upgraded.unread) == (first.unread, first.embedded, 0)
    assert dense.calls == [1]
    assert "test" in {h.kind for h in cs.search("super_len of an open file", k=10, mode="dense")}

    kept, dense, _ = _two_tier(repo_with_tests, index_dir)  # embed_tests=None: the index's choice
    (repo_with_tests / "tests" / "test_utils.py").write_text(TEST_FILE + "\n# measured twice\n")
    again = kept.index()
    assert (again.embedded, again.unread) == (1, 0) and kept.info()["unread_kinds"] == []

    dropped = _two_tier(repo_with_tests, index_dir, embed_tests=False)[0].index()
    assert (dropped.embedded, dropped.unread, dropped.reused) == (0, 1, first.embedded)
    assert not _two_tier(repo_with_tests, index_dir)[0].store.load().arrays["vectors"][
        [c["kind"] for c in stored_records(kept.store.load().arrays)].index("test")].any()


def test_related_code_of_a_test_chunk_comes_from_the_static_tier(repo_with_tests: Path, tmp_path: Path) -> None:
    cs = _two_tier(repo_with_tests, tmp_path / "index")[0]
    cs.index()
    neighbours = cs.related("tests/test_utils.py", 1, k=3)
    snapshot = cs.store.load()
    static = snapshot.arrays["static_vectors"]
    seed = [c["path"] for c in stored_records(snapshot.arrays)].index("tests/test_utils.py")
    expected = sorted((float(static[i] @ static[seed]) for i in range(len(static)) if i != seed), reverse=True)
    assert [h.score for h in neighbours] == pytest.approx(expected[:3])
    # From a source chunk the transformer's neighbours are only chunks it read.
    assert all(h.kind != "test" for h in cs.related("pkg/utils.py", 1, k=10))

    no_static = CodeSearch(repo_with_tests, model=HashingEmbedder(name="dense"), static=False,
                           index_dir=tmp_path / "no-static")
    no_static.index()
    with pytest.raises(ModelNotAvailableError, match="--embed-tests"):
        no_static.related("tests/test_utils.py", 1)
    assert no_static.search("super_len of an open file", k=10, kinds={"test"})[0].path == "tests/test_utils.py"


# --- freshness ---------------------------------------------------------------------------------------


def test_changed_files_finds_added_modified_and_removed_without_reading(repo: Path) -> None:
    known = scan(repo).stats
    assert not changed_files(repo, known)
    _touch_later(repo / "pkg" / "utils.py", UTILS + "# edited\n")
    (repo / "pkg" / "sessions.py").unlink()
    (repo / "pkg" / "new.py").write_text("x = 1\n")
    (repo / "pkg" / "image.png").write_bytes(b"\x89PNG")  # skipped by its extension: not a change
    (repo / ".gitignore").write_text("ignored.py\n")
    (repo / "pkg" / "ignored.py").write_text("y = 2\n")
    found = changed_files(repo, known)
    assert found.modified == ("pkg/utils.py",)
    assert found.removed == ("pkg/sessions.py",)
    assert found.added == (".gitignore", "pkg/new.py")
    assert len(found) == 4 and found


def _settled(root: Path) -> None:
    """Date every folder and ignore file a minute back, as a repository's are older than its last index."""
    past = time.time() - 60
    for path in [root, *(p for p in root.rglob("*") if p.is_dir() or p.name == ".gitignore")]:
        os.utime(path, (past, past))


def _no_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("a folder was listed")

    monkeypatch.setattr(os, "scandir", refuse)


def _counting_listings(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    listed: list[object] = []
    real = os.scandir

    def counting(path):  # type: ignore[no-untyped-def]
        listed.append(path)
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    return listed


def test_the_stat_pass_lists_no_folder_while_no_folder_or_ignore_file_changed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo / ".gitignore").write_text("ignored.py\n")
    _settled(repo)
    scanned = scan(repo)
    assert set(scanned.walk_stats) == {"/", "pkg/", ".gitignore"}
    assert all(mtime > 0 for _, mtime in scanned.walk_stats.values())
    folder_mtime = (repo / "pkg").stat().st_mtime_ns
    _touch_later(repo / "pkg" / "utils.py", UTILS + "# edited in place\n")
    assert (repo / "pkg").stat().st_mtime_ns == folder_mtime  # an in-place edit leaves its folder as it was
    with monkeypatch.context() as patch:
        _no_listing(patch)
        found = changed_files(repo, scanned.stats, walk_stats=scanned.walk_stats)
    assert (found.added, found.modified, found.removed) == ((), ("pkg/utils.py",), ())


def test_an_added_file_or_an_edited_ignore_file_makes_the_stat_pass_walk_again(repo: Path) -> None:
    (repo / ".gitignore").write_text("ignored.py\n")
    (repo / "pkg" / "ignored.py").write_text("y = 2\n")
    _settled(repo)
    scanned = scan(repo)
    assert "pkg/ignored.py" not in scanned.stats
    (repo / "pkg" / "new.py").write_text("x = 1\n")  # the folder's mtime moves: it is listed again
    assert changed_files(repo, scanned.stats, walk_stats=scanned.walk_stats).added == ("pkg/new.py",)
    (repo / "pkg" / "new.py").unlink()
    _settled(repo)
    scanned = scan(repo)
    _touch_later(repo / ".gitignore", "other.py\n")  # edited in place: no folder's mtime moves
    _settled(repo)
    assert changed_files(repo, scanned.stats, walk_stats=scanned.walk_stats).added == ("pkg/ignored.py",)


def test_a_folder_changed_just_before_the_scan_is_walked_until_it_settles(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scanned = scan(repo)  # the fixture's folders were made a moment ago
    assert scanned.walk_stats["pkg/"] == (0, -1)
    listed = _counting_listings(monkeypatch)
    assert not changed_files(repo, scanned.stats, walk_stats=scanned.walk_stats)
    assert listed  # walked, since a file added in the same clock tick would not have moved the mtime


def test_a_search_stats_only_the_known_files_once_the_folders_settled(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cs, _, _ = _two_tier(repo, tmp_path / "index")
    _settled(repo)
    cs.index()
    _touch_later(repo / "pkg" / "utils.py", UTILS + "\ndef in_place_name():\n    pass\n")
    listed = _counting_listings(monkeypatch)
    hits = cs.search("in_place_name", k=1, mode="bm25")
    assert "in_place_name" in hits[0].symbols and cs.last_search is not None and cs.last_search.refreshed == 1
    in_repo = [path for path in listed if isinstance(path, (str, Path)) and Path(path).is_relative_to(repo)]
    assert len(in_repo) == 2  # the root and pkg/, by the refresh's scan alone: the stat pass listed neither


def test_stat_pass_on_ten_thousand_files(tmp_path: Path) -> None:
    root = tmp_path / "big"
    for d in range(100):
        folder = root / f"d{d}"
        folder.mkdir(parents=True)
        for f in range(100):
            (folder / f"f{f}.py").write_text(f"x = {f}\n")
    known = scan(root).stats
    assert len(known) == 10_000 and not changed_files(root, known)
    _touch_later(root / "d7" / "f7.py", "x = 77\n")
    assert changed_files(root, known).modified == ("d7/f7.py",)


def test_search_sees_an_edit_without_reindex(repo: Path, tmp_path: Path) -> None:
    cs, _, _ = _two_tier(repo, tmp_path / "index")
    cs.index()
    assert cs.search("zebra_crossing", k=1, mode="bm25") == []
    _touch_later(repo / "pkg" / "zoo.py", "def zebra_crossing():\n    return 'stripes'\n")
    hits = cs.search("zebra_crossing", k=1, mode="bm25")
    assert hits[0].path == "pkg/zoo.py" and cs.last_search is not None and cs.last_search.refreshed == 1
    assert cs.status()["changed_files"] == 0
    (repo / "pkg" / "zoo.py").unlink()
    assert cs.search("zebra_crossing", k=1, mode="bm25", refresh=False)[0].path == "pkg/zoo.py"  # stale, as asked
    assert cs.status()["changes"]["removed"] == ["pkg/zoo.py"]
    assert cs.search("zebra_crossing", k=1, mode="bm25") == []


def test_refresh_off_and_status_before_the_refresh(repo: Path, tmp_path: Path) -> None:
    cs, _, _ = _two_tier(repo, tmp_path / "index", refresh=False)
    cs.index()
    _touch_later(repo / "pkg" / "utils.py", UTILS + "\ndef fresh_name():\n    pass\n")
    assert cs.status()["changed_files"] == 1
    assert cs.search("fresh_name", k=1, mode="bm25") == []  # not refreshed: the name is not in the index yet
    assert cs.status()["changes"]["modified"] == ["pkg/utils.py"]
    assert "fresh_name" in cs.search("fresh_name", k=1, mode="bm25", refresh=True)[0].symbols


def test_a_search_while_another_writer_holds_the_lock_refreshes_in_memory(repo: Path, tmp_path: Path) -> None:
    cs, _, _ = _two_tier(repo, tmp_path / "index")
    cs.index()
    _touch_later(repo / "pkg" / "utils.py", UTILS + "\ndef later_name():\n    pass\n")
    code = ("import time; from codesearch.index.store import IndexStore\n"
            f"with IndexStore({str(tmp_path / 'index')!r}).write_lock():\n    print('held', flush=True); time.sleep(30)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        hits = cs.search("later_name", k=3, mode="bm25")  # never an error, never stale: the edit read into memory
        assert "later_name" in hits[0].symbols
        assert cs.last_search is not None and (cs.last_search.refreshed, cs.last_search.refreshed_in_memory) == (1, 1)
        with pytest.raises(IndexLockedError):
            cs.lock_timeout = 0
            cs.index()
    finally:
        holder.kill()
        holder.wait()
    assert "later_name" in cs.search("later_name", k=1, mode="bm25")[0].symbols


_REINDEXER = """
import sys, time
sys.path.insert(0, {tests!r})
from conftest import SESSIONS, UTILS, HashingEmbedder
from codesearch import CodeSearch
root, index_dir, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
cs = CodeSearch(root, model=HashingEmbedder(name="dense"), static=HashingEmbedder(name="dense", dim=64, salt="static"),
                index_dir=index_dir)
for i in range(rounds):
    with open(root + "/pkg/churn.py", "w") as f:
        f.write("def churn_%d():\\n    return %d\\n" % (i, i))
    cs.index()
print("done", flush=True)
"""


def test_searches_during_another_process_reindexing_get_old_or_new_never_an_error(repo: Path, tmp_path: Path) -> None:
    cs, _, _ = _two_tier(repo, tmp_path / "index", refresh=False)
    cs.index()
    child = subprocess.Popen(
        [sys.executable, "-c", _REINDEXER.format(tests=str(TESTS)), str(repo),
         str(tmp_path / "index"), "25"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    answers = 0
    deadline = time.monotonic() + 120
    while child.poll() is None and time.monotonic() < deadline:
        hits = cs.search("super_len body", k=3)
        assert hits and hits[0].path == "pkg/utils.py"
        answers += 1
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0 and "done" in out, err
    assert answers > 0
    assert cs.search("churn_24", k=1, mode="bm25")[0].path == "pkg/churn.py"


# --- related ---------------------------------------------------------------------------------------------


def test_related_returns_neighbours_without_the_chunk_itself(repo: Path, tmp_path: Path) -> None:
    cs, _, _ = _two_tier(repo, tmp_path / "index")
    cs.index()
    seed = next(h for h in cs.search("rebuild_method", k=5, mode="bm25") if "Session.rebuild_method" in h.symbols)
    related = cs.related("pkg/sessions.py", seed.start_line + 1, k=10)
    assert related and all(h.location != seed.location for h in related)
    scores = [h.score for h in related]
    assert scores == sorted(scores, reverse=True)
    assert cs.related(str(repo / "pkg" / "sessions.py"), seed.start_line, k=1)[0].location != seed.location
    with pytest.raises(ValueError, match="not indexed"):
        cs.related("pkg/missing.py", 1)
    with pytest.raises(ValueError, match="covers line 999"):
        cs.related("pkg/sessions.py", 999)
    with pytest.raises(ValueError, match="outside"):
        cs.related(str(tmp_path / "elsewhere.py"), 1)


def test_related_on_a_static_only_index_uses_the_static_vectors(repo: Path, tmp_path: Path) -> None:
    cs, dense, _ = _two_tier(repo, tmp_path / "index")
    cs.index(tier="static")
    assert cs.related("pkg/utils.py", 1, k=2) and dense.calls == []


# --- several roots -------------------------------------------------------------------------------------------


def test_multi_search_fuses_and_labels_hits_from_each_root(repo: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODESEARCH_CACHE_DIR", str(tmp_path / "cache"))  # each root's index in its default place
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "length.py").write_text("def body_length(body):\n    \"\"\"Length of a body.\"\"\"\n    return len(body)\n")
    for i in range(3):  # enough documents that BM25's idf of a word in one of them is positive
        (repo / "pkg" / f"filler{i}.py").write_text(f"VALUE_{i} = {i}\n")
        (other / "lib" / f"filler{i}.py").write_text(f"VALUE_{i} = {i}\n")
    multi = MultiSearch([repo, other, repo], model=None)
    assert multi.roots == [repo.absolute(), other.absolute()]
    hits = multi.search("body length", k=6, mode="bm25")
    assert {h.root for h in hits} == {str(repo.absolute()), str(other.absolute())}
    assert all(h.as_dict()["root"] == h.root for h in hits)
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    with pytest.raises(ValueError, match="index_dir"):
        MultiSearch([repo], index_dir=tmp_path / "x")
    with pytest.raises(ValueError, match="at least one root"):
        MultiSearch([])


def test_multi_search_indexes_every_root_and_refuses_k_below_1(repo: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODESEARCH_CACHE_DIR", str(tmp_path / "cache"))
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "length.py").write_text("def body_length(body):\n    return len(body)\n")
    multi = MultiSearch([repo, other], model=None)
    reports = multi.index()
    assert [(r.files, r.tier) for r in reports] == [(2, "keyword"), (1, "keyword")]
    assert [s.store.exists() for s in multi.searchers] == [True, True]
    for k in (0, -1):
        with pytest.raises(ValueError, match="k must be at least 1"):
            multi.search("body length", k=k, mode="bm25")
    again = multi.index()[0]
    assert (again.changed_files, again.reused) == (0, 0)  # a second run cuts nothing (keywords only: no vectors)


def test_vectors_agree_with_a_rebuild_after_refreshes(repo: Path, tmp_path: Path) -> None:
    cs, _, _ = _two_tier(repo, tmp_path / "index")
    cs.index()
    _touch_later(repo / "pkg" / "utils.py", UTILS.replace("netrc", "the netrc file"))
    cs.search("netrc", k=1)  # refresh
    rebuilt, _, _ = _two_tier(repo, tmp_path / "rebuilt")
    rebuilt.index()
    a, b = cs.store.load(), rebuilt.store.load()
    assert [c["text"] for c in stored_records(a.arrays)] == [c["text"] for c in stored_records(b.arrays)]
    for name in ("vectors", "static_vectors"):
        np.testing.assert_allclose(a.arrays[name], b.arrays[name], atol=1e-6)


def test_adding_the_transformer_to_an_unchanged_tree_keeps_the_rest_as_committed(repo: Path, tmp_path: Path) -> None:
    """The usual upgrade (a first answer, then ``index``) cuts nothing again: the committed columns, keywords and
    static vectors are carried into the new generation by link, and the index is the one a rebuild makes."""
    for path in repo.rglob("*.py"):  # older than the racy window, so their stat is trusted as it is
        os.utime(path, ns=(10**18, 10**18))
    cs, _, _ = _two_tier(repo, tmp_path / "index")
    cs.search("netrc", k=1)  # the static tier
    generation = next((tmp_path / "index").glob("gen-*"))
    texts = (generation / "chunk_texts.npy").stat().st_ino
    report = cs.index()
    assert (report.tier, report.changed_files, report.static_embedded, report.removed) == ("full", 0, 0, 0)
    assert report.embedded == report.chunks
    after = next((tmp_path / "index").glob("gen-*"))
    assert after != generation and (after / "chunk_texts.npy").stat().st_ino == texts
    rebuilt, _, _ = _two_tier(repo, tmp_path / "rebuilt", fast_start=False)
    rebuilt.index()
    a, b = cs.store.load(), rebuilt.store.load()
    assert sorted(a.arrays) == sorted(b.arrays)
    for name in a.arrays:
        np.testing.assert_array_equal(a.arrays[name], b.arrays[name], err_msg=name)
    assert [(h.path, h.start_line, h.score) for h in cs.search("netrc auth", k=5)] == \
        [(h.path, h.start_line, h.score) for h in rebuilt.search("netrc auth", k=5)]


def test_without_a_static_model_the_first_answer_comes_from_the_full_index(repo: Path, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import codesearch.embedding.static
    import codesearch.embedding.transformer
    from codesearch.exceptions import ExportError

    def no_static(*args: object, **kwargs: object) -> None:
        raise ExportError("minilm has no cached static model and distilling one needs model2vec")

    monkeypatch.setattr(codesearch.embedding.static, "StaticEmbedder", no_static)
    monkeypatch.setattr(codesearch.embedding.transformer, "Embedder", lambda model, int8=True: HashingEmbedder(name="minilm"))
    cs = CodeSearch(repo, model="minilm", index_dir=tmp_path / "index")
    with pytest.warns(RuntimeWarning, match="no static tier"):
        hits = cs.search("super_len body", k=1)
    assert hits[0].path == "pkg/utils.py"
    assert cs.last_search is not None and cs.last_search.tier == "full"
    assert "static_vectors" not in cs.store.load().arrays
