"""The corpus on real engines: a local Ray (one per test session) and Lance tables in temporary folders.

Models are the hashing stand-ins of conftest (pickled to the actors) except in
one test with the real MiniLM; a single index of each repository with the same
stand-ins is the reference a repository-scoped search must equal.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

pytest.importorskip("ray")
pytest.importorskip("lance")

from conftest import ROOT, SESSIONS, TESTS, UTILS, HashingEmbedder

from codesearch import CodeSearch
from codesearch.corpus import Corpus, integrity
from codesearch.corpus import driver as corpus_driver
from codesearch.corpus import indexes as corpus_indexes
from codesearch.corpus import store as corpus_store
from codesearch.corpus.schema import CHUNKS, FILES, KEYWORDS, chunk_schema
from codesearch.corpus.store import KILL_ENV
from codesearch.exceptions import (
    ClusterUnavailableError,
    CorpusNotFoundError,
    ModelMismatchError,
    RepositoryNotInCorpusError,
)

ADAPTERS = '''\
class HTTPAdapter:
    """The built-in HTTP Adapter for urllib3."""

    def send(self, request, stream=False, timeout=None):
        """Sends PreparedRequest object. Returns Response object."""
        conn = self.get_connection(request.url)
        return conn.urlopen(request)

    def close(self):
        """Disposes of any internal state."""
        self.poolmanager.clear()
'''

ROUTER = '''\
package chi

// Mux is a simple HTTP route multiplexer that parses a request path.
type Mux struct {
    handler Handler
}

// ServeHTTP is the single method of the http.Handler interface.
func (mx *Mux) ServeHTTP(w ResponseWriter, r *Request) {
    mx.handler.ServeHTTP(w, r)
}

// Use appends a middleware handler to the Mux middleware stack.
func (mx *Mux) Use(middlewares ...func(Handler) Handler) {
    mx.middlewares = append(mx.middlewares, middlewares...)
}
'''

MIDDLEWARE = '''\
package middleware

// Logger is a middleware that logs the start and end of each request.
func Logger(next Handler) Handler {
    return next
}

// Recoverer is a middleware that recovers from panics and logs the panic.
func Recoverer(next Handler) Handler {
    return next
}
'''


def models() -> dict[str, HashingEmbedder]:
    """The stand-ins: one name (as the real static model is named after its transformer), two vector sizes."""
    return {"model": HashingEmbedder("hashing", 64), "static": HashingEmbedder("hashing", 32, salt="static")}


def corpus(store: Path) -> Corpus:
    return Corpus(store, **models())  # type: ignore[arg-type]


def make_repos(base: Path) -> dict[str, Path]:
    """Two small repositories: a Python one in the manner of requests, a Go one in the manner of chi."""
    py = base / "pyreq"
    (py / "src" / "requests").mkdir(parents=True)
    (py / "src" / "requests" / "sessions.py").write_text(SESSIONS)
    (py / "src" / "requests" / "utils.py").write_text(UTILS)
    (py / "src" / "requests" / "adapters.py").write_text(ADAPTERS)
    (py / "tests").mkdir()
    (py / "tests" / "test_utils.py").write_text("from requests.utils import super_len\n\n\ndef test_super_len():\n"
                                                "    assert super_len('abc') is None\n")
    (py / "README.md").write_text("# requests\n\nHTTP for humans: sessions, adapters and auth.\n")
    go = base / "gochi"
    (go / "middleware").mkdir(parents=True)
    (go / "mux.go").write_text(ROUTER)
    (go / "middleware" / "logger.go").write_text(MIDDLEWARE)
    (go / "README.md").write_text("# chi\n\nA lightweight router for Go HTTP services.\n")
    (go / "testdata").mkdir()
    (go / "testdata" / "golden.txt").write_bytes(b"\x00\x01 binary by its content\n")
    for folder in (py, go):
        age(folder)
    return {"pyreq": py, "gochi": go}


def age(folder: Path, seconds: float = 3600.0) -> None:
    """Date every file an hour back: files as old as a repository's, whose mtimes a corpus records (an mtime
    within two seconds of the build is not trusted, and its file is hashed at every refresh until it is older)."""
    when = time.time() - seconds
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


@pytest.fixture
def repos(tmp_path: Path) -> dict[str, Path]:
    return make_repos(tmp_path / "repos")


@pytest.fixture
def built(ray_cluster, repos: dict[str, Path], tmp_path: Path) -> tuple[Corpus, dict[str, Path]]:  # type: ignore[no-untyped-def]
    store = tmp_path / "store"
    c = corpus(store)
    c.build([str(p) for p in repos.values()])
    return c, repos


def write_by_hand(c: Corpus, manifest: Any) -> None:
    """Write a manifest edited by hand (versions a test names), with the sums of the files its versions read, as a
    writer records them: a manifest whose versions differ from its sums' is a damaged corpus."""
    sums, _, _ = integrity.record(c.store, manifest.versions, None)
    manifest.checksums = integrity.write_checksums(c.store, sums)
    c.store.write_manifest(manifest)


def table_ids(c: Corpus) -> list[int]:
    ds = c.store.open(CHUNKS, c.store.manifest().versions[CHUNKS])
    assert ds is not None
    return ds.to_table(columns=["chunk_id"])["chunk_id"].to_pylist()


QUERIES = ["session redirect method", "super_len", "middleware logs request", "should_strip_auth", "HTTP route",
           "Mux", "send request adapter", "how is the length of a body computed", "netrc auth url"]


def test_build_then_search_both_repositories_and_each(built: tuple[Corpus, dict[str, Path]]) -> None:
    c, repos = built
    status = c.status()
    assert status["repos"] == 2 and set(status["repositories"]) == {"pyreq", "gochi"}
    assert status["chunks"] == len(table_ids(c)) > 0
    report = c.last_report
    assert report is not None and report.inserted == status["chunks"]
    # The actors' working window: inside the stream, which also holds their start.
    assert report.ray and 0 < report.work_s <= report.stream_s <= report.pipeline_s
    both = c.search("middleware logs request and session redirect", k=10)
    assert {h.repo for h in both} == {"pyreq", "gochi"}
    for name in repos:
        hits = c.search("middleware logs request and session redirect", k=10, repos=[name])
        assert hits and {h.repo for h in hits} == {name}
    top = c.search("super_len", k=3)[0]
    assert (top.repo, top.path) == ("pyreq", "src/requests/utils.py") and "super_len" in top.symbols
    assert "def super_len" in top.text and str(top) == f"{top.location}  ({top.score:.4f}, source)"
    assert c.search("Recoverer", k=1, repos="gochi", mode="bm25")[0].path == "middleware/logger.go"
    source = c.search("super len", k=10, kinds="source")
    assert source and all(h.kind == "source" for h in source)
    scoped = c.search("request", k=10, scope="src/requests", repos=None)
    assert scoped and all(h.path.startswith("src/requests/") for h in scoped)


def test_a_repository_scoped_search_ranks_as_a_single_index(built: tuple[Corpus, dict[str, Path]], tmp_path: Path) -> None:
    """The reference: each repository indexed alone by CodeSearch (static tier, same models), same hits and scores."""
    c, repos = built
    for name, root in repos.items():
        single = CodeSearch(root, index_dir=tmp_path / f"single-{name}", **models())  # type: ignore[arg-type]
        single.index(tier="static")
        for query in QUERIES:
            for mode in ("hybrid", "bm25", "dense"):
                expected = [(h.path, h.start_line, h.end_line, h.score) for h in single.search(query, k=10, mode=mode)]
                got = [(h.path, h.start_line, h.end_line, h.score) for h in c.search(query, k=10, repos=[name], mode=mode)]
                assert got == expected, (name, query, mode)
            expected = [h.location for h in single.search(query, k=5, kinds="source", exclude="*adapters*")]
            assert [h.location for h in c.search(query, k=5, repos=name, kinds="source", exclude="*adapters*")] \
                == expected


def test_refresh_embeds_only_changed_chunks_and_drops_deleted_files(built: tuple[Corpus, dict[str, Path]]) -> None:
    c, repos = built
    before = c.status()
    unchanged = c.refresh(["gochi"])  # a repository of the corpus, by name: refreshed from its folder
    assert (unchanged.repos, unchanged.inserted) == (1, 0)
    unchanged = c.refresh()
    assert (unchanged.inserted, unchanged.deleted, unchanged.embedded_static, unchanged.changed_files) == (0, 0, 0, 0)
    py = repos["pyreq"]
    (py / "src" / "requests" / "utils.py").write_text(UTILS + '\n\ndef quokka_total(o):\n    """Count quokkas."""\n'
                                                      '    return 7\n')
    (py / "src" / "requests" / "adapters.py").unlink()
    (repos["gochi"] / "tree.go").write_text("package chi\n\n// Walk visits every wombat route of the tree.\n"
                                            "func Walk(r Routes) error {\n    return nil\n}\n")
    report = c.refresh()
    assert report.changed_files == 2  # utils.py and tree.go; adapters.py is only deleted
    # Only the chunks of the two changed files were embedded (the small functions of utils.py share a chunk).
    changed_chunks = sum(1 for h in c.search("quokka wombat super netrc walk", k=50, mode="bm25")
                         if h.path in ("src/requests/utils.py", "tree.go"))
    assert report.inserted == report.embedded_static == changed_chunks == 2
    ids = table_ids(c)
    assert len(ids) == len(set(ids))
    assert c.status()["chunks"] == len(ids) == before["chunks"] + report.inserted - report.deleted
    assert report.deleted == 2  # utils.py's old chunk and adapters.py's
    assert c.search("quokka_total", k=1)[0].path == "src/requests/utils.py"
    assert c.search("wombat route", k=1, repos="gochi")[0].path == "tree.go"
    assert not [h for h in c.search("HTTPAdapter send close", k=20) if h.path.endswith("adapters.py")]
    assert c.status()["repositories"]["pyreq"]["files"] == before["repositories"]["pyreq"]["files"] - 1


def test_refresh_with_the_transformer_tier_keeps_both_tiers(ray_cluster, repos: dict[str, Path],  # type: ignore[no-untyped-def]
                                                            tmp_path: Path) -> None:
    c = corpus(tmp_path / "store")
    report = c.build([str(p) for p in repos.values()], tier="full")
    # Test files are left to keywords and the static tier, as in a single index.
    assert report.embedded_full < report.embedded_static == report.inserted
    assert c.status()["tier"] == "full"
    (repos["gochi"] / "mux.go").write_text(ROUTER + "\n// Route names a platypus path.\nfunc Route() {}\n")
    again = c.refresh()
    assert again.tier == "full" and again.embedded_full == again.embedded_static == 1
    single = CodeSearch(repos["gochi"], index_dir=tmp_path / "single", **models())  # type: ignore[arg-type]
    single.index()
    lazy = corpus(tmp_path / "store")  # its view opened by a static query: the transformer's vectors read later
    lazy.search(QUERIES[0], k=10, repos="gochi", tier="static")
    for query in QUERIES:
        expected = [(h.location, h.score) for h in single.search(query, k=10)]
        assert [(h.location, h.score) for h in c.search(query, k=10, repos="gochi")] == expected, query
        assert [(h.location, h.score) for h in lazy.search(query, k=10, repos="gochi")] == expected, query


def test_a_static_corpus_upgrades_to_the_transformer_tier(ray_cluster, repos: dict[str, Path],  # type: ignore[no-untyped-def]
                                                         tmp_path: Path) -> None:
    """The transformer tier added later (refresh with tier='full') ranks as a corpus built with it at once."""
    c = corpus(tmp_path / "store")
    c.build([str(p) for p in repos.values()])
    assert c.status()["tier"] == "static"
    report = c.refresh(tier="full")
    assert report.inserted == report.deleted == report.embedded_static == 0 and report.updated > 0
    assert report.embedded_full == report.updated  # every chunk the transformer reads, none of the test files
    assert c.status()["tier"] == "full" and len(table_ids(c)) == len(set(table_ids(c)))
    at_once = corpus(tmp_path / "at-once")
    at_once.build([str(p) for p in repos.values()], tier="full")
    for query in QUERIES:
        for repo in repos:
            assert [(h.location, h.score) for h in c.search(query, k=10, repos=repo)] == \
                [(h.location, h.score) for h in at_once.search(query, k=10, repos=repo)], (query, repo)


def test_a_refresh_with_nothing_changed_reads_nothing_writes_nothing_and_starts_no_ray(
        built: tuple[Corpus, dict[str, Path]]) -> None:
    c, _ = built
    build = c.last_report
    assert build is not None and build.ray and build.optimized  # a build runs on Ray and indexes, as before
    versions = c.store.manifest().versions
    report = c.refresh()
    assert (report.ray, report.unchanged_repos, report.hashed_files, report.changed_files) == (False, 2, 0, 0)
    assert (report.inserted, report.deleted, report.file_rows, report.optimized) == (0, 0, 0, False)
    assert c.store.manifest().versions == versions
    # The binary file is recorded (so it is not read again) but counted with neither files nor chunks.
    assert c.status()["repositories"]["gochi"]["files"] == 3


def test_a_small_refresh_runs_in_process_and_leaves_its_rows_to_the_flat_scan(
        built: tuple[Corpus, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """One edited file: read, cut and embedded in this process (no Ray), its new chunk inserted outside the indexes
    (no compaction or index update, however small the corpus), and found by every kind of search."""
    c, repos = built
    monkeypatch.setattr(corpus_indexes, "UNINDEXED_SHARE", 1.0)  # the test corpus is tiny: any row is a large share
    logger = repos["gochi"] / "middleware" / "logger.go"
    logger.write_text(MIDDLEWARE + "\n// Throttle limits a numbat's requests per second.\nfunc Throttle() {}\n")
    report = c.refresh()
    assert (report.ray, report.actors, report.unchanged_repos) == (False, 0, 1)
    assert (report.hashed_files, report.changed_files, report.file_rows) == (1, 1, 1)
    assert report.inserted == report.embedded_static == report.deleted == 1  # logger.go is one chunk, cut anew
    assert not report.optimized
    assert c.search("numbat Throttle", k=1)[0].path == "middleware/logger.go"  # full-text index and flat scan
    assert c.search("numbat Throttle", k=1, mode="dense", repos=None)[0].path == "middleware/logger.go"
    assert "numbat" in c.search("numbat Throttle", k=1, repos="gochi")[0].text
    ids = table_ids(c)
    assert len(ids) == len(set(ids)) == c.status()["chunks"]


def test_a_work_item_of_many_repositories_reads_their_stored_rows_in_one_query_per_table(
        built: tuple[Corpus, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh's work item holds many repositories with a file or two changed each: their stored file and chunk
    rows are read once for all of them (a query per repository was most of an actor's time at 1M rows), and each
    repository gets exactly its own rows."""
    from codesearch.corpus.build import RepoWorker

    c, repos = built
    reads: list[tuple[str, str]] = []
    original = RepoWorker._read

    def counted(self: RepoWorker, name: str, columns: Any, where: str) -> pa.Table | None:
        reads.append((name, where))
        return original(self, name, columns, where)

    monkeypatch.setattr(RepoWorker, "_read", counted)
    for repo, rel in (("gochi", "middleware/logger.go"), ("pyreq", "src/requests/utils.py")):
        path = repos[repo] / rel
        path.write_text(path.read_text() + "\n# numbat wombat\n")
    report = c.refresh()
    assert (report.ray, report.unchanged_repos, report.changed_files) == (False, 0, 2)
    assert sorted(name for name, _ in reads) == [CHUNKS, FILES]  # one query per table for both repositories
    assert all("gochi" in where and "pyreq" in where for _, where in reads)
    assert report.deleted >= 2 and report.inserted >= 2  # each file's old chunks went, its new ones came
    ids = table_ids(c)
    assert len(ids) == len(set(ids)) == c.status()["chunks"]
    assert "wombat" in c.search("numbat wombat", k=1, repos="pyreq")[0].text


def test_stored_rows_are_read_a_bounded_number_of_repositories_at_a_time(
        built: tuple[Corpus, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for one repository a query, the same refresh reads each repository's rows alone."""
    from codesearch.corpus import build as corpus_build

    c, repos = built
    reads: list[str] = []
    original = corpus_build.RepoWorker._read
    monkeypatch.setattr(corpus_build, "STORED_READ_REPOS", 1)
    monkeypatch.setattr(corpus_build.RepoWorker, "_read",
                        lambda self, name, columns, where: reads.append(where) or original(self, name, columns, where))
    for repo, rel in (("gochi", "middleware/logger.go"), ("pyreq", "src/requests/utils.py")):
        path = repos[repo] / rel
        path.write_text(path.read_text() + "\n# numbat wombat\n")
    report = c.refresh()
    assert report.changed_files == 2 and len(reads) == 4
    assert sorted(("gochi" in w, "pyreq" in w) for w in reads) == [(False, True)] * 2 + [(True, False)] * 2
    assert "wombat" in c.search("numbat wombat", k=1, repos="gochi")[0].text


def test_a_touched_file_is_hashed_once_and_writes_no_chunk(built: tuple[Corpus, dict[str, Path]]) -> None:
    c, repos = built
    utils = repos["pyreq"] / "src" / "requests" / "utils.py"
    when = time.time() - 60
    os.utime(utils, (when, when))  # same bytes, another mtime
    report = c.refresh()
    assert (report.ray, report.unchanged_repos, report.hashed_files, report.changed_files) == (False, 1, 1, 0)
    assert (report.inserted, report.deleted, report.embedded_static, report.file_rows) == (0, 0, 0, 1)
    again = c.refresh()  # its new mtime is recorded: it is not read again
    assert (again.hashed_files, again.unchanged_repos, again.file_rows) == (0, 2, 0)


def test_a_files_table_without_mtimes_is_hashed_once_then_known(built: tuple[Corpus, dict[str, Path]]) -> None:
    """A corpus written before the files table had ``mtime_ns``: every file is hashed once (none cut again), the
    column is added and filled, and the next refresh reads nothing."""
    import lance

    c, repos = built
    uri = c.store.table_uri(FILES)
    old = lance.dataset(uri).to_table().drop_columns(["mtime_ns"])
    manifest = c.store.manifest(fresh=True)
    manifest.versions[FILES] = lance.write_dataset(old, uri, mode="overwrite").version
    write_by_hand(c, manifest)
    files = c.status()["files"] + 1  # and the binary one
    report = c.refresh()
    assert (report.hashed_files, report.changed_files, report.inserted, report.deleted) == (files, 0, 0, 0)
    assert report.file_rows == files and report.unchanged_repos == 0
    assert c.refresh().hashed_files == 0
    (repos["pyreq"] / "README.md").write_text("# requests\n\nHTTP for humans, and for wallabies.\n")
    edited = c.refresh()
    assert (edited.hashed_files, edited.changed_files, edited.inserted) == (1, 1, 1)
    assert c.search("wallabies", k=1, mode="bm25")[0].path == "README.md"


KILLED_REFRESH = """
import sys
sys.path[:0] = [{here!r}, {tests!r}, {root!r}]
from test_corpus import corpus
corpus({store!r}).refresh()
print("finished")
"""


@pytest.mark.parametrize("point", ["chunks-append", "chunks-delete", "files-merge", "keywords-delete", "keywords-append",
                                   "checksums", "manifest"])
def test_kill_9_during_a_refresh_leaves_the_old_or_the_new_corpus(built: tuple[Corpus, dict[str, Path]], point: str) -> None:
    """A refresh SIGKILLed right after a commit (new chunks, removed chunks, files, or the manifest) leaves one whole
    version."""
    c, repos = built
    old_hits = [h.location for h in c.search("super_len", k=3, repos="pyreq")]
    old_ids = sorted(table_ids(c))
    (repos["pyreq"] / "src" / "requests" / "utils.py").write_text(UTILS.replace("super_len", "echidna_len"))
    script = KILLED_REFRESH.format(here=str(Path(__file__).resolve().parent), tests=str(TESTS), root=str(ROOT),
                                   store=str(c.store.uri))
    env = {**os.environ, KILL_ENV: point,
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9, proc.stderr[-2000:]
    reader = corpus(Path(c.store.uri))
    ids = table_ids(reader)
    assert len(ids) == len(set(ids))
    echidna = [h for h in reader.search("echidna_len", k=3, repos="pyreq", mode="bm25") if "echidna" in h.text]
    if point == "manifest":
        assert echidna and sorted(ids) != old_ids  # the new corpus, whole
    else:
        assert not echidna and sorted(ids) == old_ids  # the old corpus, whole
        assert [h.location for h in reader.search("super_len", k=3, repos="pyreq")] == old_hits
    # The next refresh rolls back what the killed one committed after the manifest, and finishes the work.
    reader.refresh()
    ids = table_ids(reader)
    assert len(ids) == len(set(ids))
    assert [h for h in reader.search("echidna_len", k=3, repos="pyreq", mode="bm25") if "echidna" in h.text]
    assert not [h for h in reader.search("super_len", k=10, repos="pyreq", mode="bm25") if "def super_len" in h.text]


def fresh_fit(c: Corpus, repo: str) -> tuple[list[int], Any]:
    """The BM25 a repository's rows give now, fitted from their terms as a view without a stored fit does."""
    from codesearch.corpus.keywords import view_order
    from codesearch.keyword.arrow import fit_term_column

    ds = c.store.open(CHUNKS, c.store.manifest().versions[CHUNKS])
    assert ds is not None
    rows = ds.to_table(columns=["chunk_id", "path", "ordinal", "keyword_text"], filter=f"repo = '{repo}'")
    rows = rows.take(view_order(rows))
    return rows["chunk_id"].to_pylist(), fit_term_column(rows["keyword_text"])


def test_each_repositorys_bm25_is_stored_by_the_writer_and_read_by_its_first_scoped_search(
        built: tuple[Corpus, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """A repository's first scoped query reads its BM25 from the keywords table instead of fitting it (half its
    time on the DEV corpus); the stored fit is the fit of its rows as committed, after a build and after a refresh
    that changed them, and a corpus written without the table (or with a stale row) fits as before."""
    from codesearch.corpus import keywords, views

    c, repos = built
    reader = corpus(Path(c.store.uri))

    def fitted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("fitted at query time")

    def check(name: str) -> None:
        ds = reader.store.open(KEYWORDS, reader.store.manifest().versions[KEYWORDS])
        assert ds is not None
        ids, stored = keywords.read_stored(ds, keywords.stored_rows(ds)[name])
        fresh_ids, fresh = fresh_fit(reader, name)
        assert ids.tolist() == fresh_ids
        assert dict(stored.vocabulary_.items()) == dict(fresh.vocabulary_.items())
        for mine, theirs in zip(stored.postings_, fresh.postings_):
            assert np.array_equal(mine, theirs)
        assert np.array_equal(stored.idf_, fresh.idf_) and stored.avgdl_ == fresh.avgdl_

    expected = {q: [h.location for h in reader.search(q, k=5, repos="pyreq")] for q in QUERIES}
    for name in repos:
        check(name)
    with monkeypatch.context() as patched:
        patched.setattr(views, "fit_term_column", fitted)
        fresh_reader = corpus(Path(c.store.uri))
        assert {q: [h.location for h in fresh_reader.search(q, k=5, repos="pyreq")] for q in QUERIES} == expected
    # A refresh that changes a repository's chunks stores its new fit (and leaves the other's row as it was).
    before = reader.store.open(KEYWORDS, reader.store.manifest().versions[KEYWORDS])
    assert before is not None
    gochi_blob = before.read_blobs("bm25", addresses=[keywords.stored_rows(before)["gochi"]])[0][1]
    (repos["pyreq"] / "src" / "requests" / "utils.py").write_text(UTILS.replace("super_len", "platypus_len"))
    monkeypatch.setattr(corpus_driver, "KEYWORD_FRAGMENTS", 1)  # compacted once it has two
    report = c.refresh()
    assert report.keywords_s > 0
    check("pyreq")
    compacted = c.store.open(KEYWORDS, c.store.manifest().versions[KEYWORDS])
    assert compacted is not None and len(compacted.get_fragments()) == 1 and compacted.count_rows() == 2
    after = reader.store.open(KEYWORDS, reader.store.manifest().versions[KEYWORDS])
    assert after is not None and after.count_rows() == 2
    assert after.read_blobs("bm25", addresses=[keywords.stored_rows(after)["gochi"]])[0][1] == gochi_blob
    with monkeypatch.context() as patched:
        patched.setattr(views, "fit_term_column", fitted)
        assert "platypus_len" in corpus(Path(c.store.uri)).search("platypus_len", k=1, repos="pyreq", mode="bm25")[0].text
    # A stale row (the keywords table of the build, before the refresh), or one that cannot be read: fitted from
    # the rows' terms, the same answers.
    expected = {q: [(h.location, h.text) for h in reader.search(q, k=5, repos="pyreq")] for q in QUERIES}
    assert all(text for hits in expected.values() for _, text in hits)
    manifest = c.store.manifest(fresh=True)
    manifest.versions[KEYWORDS] = before.version
    write_by_hand(c, manifest)
    stale = corpus(Path(c.store.uri))
    for _ in range(2):  # the second query of a view reads its texts whole
        assert {q: [(h.location, h.text) for h in stale.search(q, k=5, repos="pyreq")] for q in QUERIES} == expected
    with monkeypatch.context() as patched:
        patched.setattr(keywords, "read_stored", lambda *a: (_ for _ in ()).throw(ValueError("damaged")))
        damaged = corpus(Path(c.store.uri))
        assert {q: [(h.location, h.text) for h in damaged.search(q, k=5, repos="pyreq")] for q in QUERIES} == expected
    # Without the table (a corpus written before it), the view fits from the rows' terms: the same answers.
    manifest = c.store.manifest(fresh=True)
    del manifest.versions[KEYWORDS]
    write_by_hand(c, manifest)
    old = corpus(Path(c.store.uri))
    expected = {q: [h.location for h in reader.search(q, k=5, repos="pyreq")] for q in QUERIES}
    assert {q: [h.location for h in old.search(q, k=5, repos="pyreq")] for q in QUERIES} == expected


def data_files(c: Corpus) -> set[str]:
    return {p.name for p in (Path(c.store.uri) / CHUNKS / "data").iterdir()}


@pytest.mark.parametrize("fails", ["append", "merge"])
def test_a_first_build_that_fails_leaves_a_folder_the_next_build_takes(
        ray_cluster, repos: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str) -> None:  # type: ignore[no-untyped-def]
    """A first build that fails before its manifest (the actors' fragments written but not committed, or the chunks
    committed and the files not) leaves no corpus, and a folder that the next build takes over and clears."""
    def broken(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("No space left on device")

    monkeypatch.setattr(corpus_store.Writer, fails, broken)
    store = tmp_path / "store"
    with pytest.raises(OSError, match="No space left"):
        corpus(store).build([str(p) for p in repos.values()])
    assert not (store / "corpus.json").exists() and (store / CHUNKS / "data").is_dir()
    left = {p.name for p in (store / CHUNKS / "data").iterdir()}
    assert left  # the actors' rows, which no manifest names
    with pytest.raises(CorpusNotFoundError):
        corpus(store).search("super_len")
    monkeypatch.undo()
    c = corpus(store)
    report = c.build([str(p) for p in repos.values()])
    assert report.chunks == report.inserted > 0
    assert c.search("super_len", k=1, repos="pyreq")[0].path.endswith("utils.py")
    assert not left & data_files(c)
    ids = table_ids(c)
    assert len(ids) == len(set(ids)) == report.chunks


def test_a_finished_run_removes_a_failed_runs_files_and_old_versions(
        built: tuple[Corpus, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    """Files a failed refresh wrote and never committed, and versions older than KEEP_VERSIONS_S, are removed by the
    next run that commits (Lance alone keeps every version, and uncommitted files for a week)."""
    c, repos = built
    before = data_files(c)
    utils = repos["pyreq"] / "src" / "requests" / "utils.py"
    utils.write_text(UTILS.replace("super_len", "quokka_len"))

    def broken(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(corpus_store.Writer, "append", broken)
        with pytest.raises(OSError):
            c.refresh()
    orphans = data_files(c) - before
    assert orphans
    monkeypatch.setattr(corpus_store, "KEEP_VERSIONS_S", 0.0)
    previous = c.store.manifest().versions
    report = c.refresh()
    assert report.inserted and report.cleaned_bytes > 0
    assert not orphans & data_files(c)
    # Left: the versions this manifest names and those the previous one named (a reader may still read them).
    pinned = c.store.manifest().versions
    for name in (CHUNKS, FILES, KEYWORDS):
        ds = c.store.latest(name)
        assert ds is not None and {v["version"] for v in ds.versions()} == {pinned[name], previous[name]}
        assert ds.checkout_version(previous[name]).count_rows() > 0
    assert "quokka_len" in corpus(Path(c.store.uri)).search("quokka_len", k=1, repos="pyreq", mode="bm25")[0].text


def test_another_model_is_refused_and_nothing_is_written(built: tuple[Corpus, dict[str, Path]]) -> None:
    c, repos = built
    manifest_before = (Path(c.store.uri) / "corpus.json").read_text()
    other = Corpus(c.store.uri, model=HashingEmbedder("other-model", 64), static=HashingEmbedder("other-model", 32))
    for call in (lambda: other.search("super_len"), other.refresh,
                 lambda: other.build([str(repos["pyreq"])])):
        with pytest.raises(ModelMismatchError, match="built with model 'hashing'"):
            call()
    same_name = Corpus(c.store.uri, model=HashingEmbedder("hashing", 64), static=HashingEmbedder("hashing", 32, salt="x"))
    with pytest.raises(ModelMismatchError, match="another export"):
        same_name.search("super_len")
    assert same_name.search("super_len", mode="bm25")  # keywords need no model
    assert (Path(c.store.uri) / "corpus.json").read_text() == manifest_before


def test_bad_inputs_are_one_line_errors_and_write_nothing(ray_cluster, built: tuple[Corpus, dict[str, Path]],  # type: ignore[no-untyped-def]
                                                          tmp_path: Path) -> None:
    c, repos = built
    fresh = tmp_path / "fresh"
    started = time.perf_counter()
    with pytest.raises(ClusterUnavailableError, match="cannot reach the Ray cluster at 127.0.0.1:9"):
        corpus(fresh).build([str(repos["pyreq"])], ray_address="127.0.0.1:9")
    assert time.perf_counter() - started < 10 and not fresh.exists()
    not_a_corpus = tmp_path / "elsewhere"
    not_a_corpus.mkdir()
    (not_a_corpus / "notes.txt").write_text("mine")
    with pytest.raises(CorpusNotFoundError, match="is not a codesearch corpus"):
        corpus(not_a_corpus).build([str(repos["pyreq"])])
    for call in (lambda: corpus(not_a_corpus).search("x"), lambda: corpus(not_a_corpus).status(),
                 lambda: corpus(tmp_path / "nothing").refresh()):
        with pytest.raises(CorpusNotFoundError):
            call()
    assert sorted(p.name for p in not_a_corpus.iterdir()) == ["notes.txt"]
    with pytest.raises(RepositoryNotInCorpusError, match="'flask' is not in the corpus"):
        c.search("x", repos=["flask"])
    other = tmp_path / "flask"
    other.mkdir()
    (other / "app.py").write_text("def route(): pass\n")
    with pytest.raises(RepositoryNotInCorpusError, match="'flask' is not in the corpus"):
        c.refresh([str(other)])
    with pytest.raises(ValueError, match="two repositories named"):
        c.build([str(repos["pyreq"]), f"pyreq={other}"])
    with pytest.raises(ValueError, match="k must be at least 1"):
        c.search("x", k=0)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codesearch.faces.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})


def test_cli_errors_are_one_line_with_exit_code_2(built: tuple[Corpus, dict[str, Path]], tmp_path: Path) -> None:
    c, repos = built
    not_a_corpus = tmp_path / "elsewhere"
    not_a_corpus.mkdir()
    (not_a_corpus / "notes.txt").write_text("mine")
    cases = [
        (["corpus", "search", "x", str(not_a_corpus)], "is not a codesearch corpus"),
        (["corpus", "status", str(tmp_path / "nothing")], "is not a codesearch corpus"),
        (["corpus", "search", "x", c.store.uri, "--repo", "flask", "--model", "hashing"], "'flask' is not in the corpus"),
        (["corpus", "search", "x", c.store.uri], "built with model 'hashing', not 'minilm'"),
        (["corpus", "build", str(tmp_path / "new"), str(repos["pyreq"]), "--ray-address", "127.0.0.1:9"],
         "cannot reach the Ray cluster"),
    ]
    for args, message in cases:
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and message in proc.stderr, (args, proc.stderr)
    assert not (tmp_path / "new").exists()
    for command in ("build", "refresh", "search", "status"):
        assert run_cli("corpus", command, "--help").returncode == 0


def test_cli_status_json(built: tuple[Corpus, dict[str, Path]]) -> None:
    c, _ = built
    proc = run_cli("corpus", "status", c.store.uri, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["repositories"].keys() == {"pyreq", "gochi"}


def test_mcp_serves_a_corpus(built: tuple[Corpus, dict[str, Path]]) -> None:
    from codesearch.faces.mcp_corpus import CorpusWorkspace, tool_corpus_search, tool_corpus_status

    c, _ = built
    ws = CorpusWorkspace(c)
    answer = tool_corpus_search(ws, "super_len", repo="pyreq", k=2)
    assert answer["repo"] == "pyreq" and answer["hits"][0]["repo"] == "pyreq"
    assert answer["versions"] == c.status()["versions"]  # the corpus version that answered
    assert answer["hits"][0]["location"].startswith("src/requests/utils.py:")
    assert {h["repo"] for h in tool_corpus_search(ws, "middleware request session", k=10)["hits"]} == {"pyreq", "gochi"}
    assert tool_corpus_status(ws)["repos"] == 2
    assert tool_corpus_status(ws, repo="gochi")["repo"] == "gochi"
    with pytest.raises(RepositoryNotInCorpusError):
        tool_corpus_search(ws, "x", repo="flask")


@pytest.mark.slow
def test_the_real_models_build_and_answer(ray_cluster, repos: dict[str, Path], tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """MiniLM's static tier and its int8 transformer, loaded in the actors, answer as a single index does."""
    pytest.importorskip("onnxruntime")
    c = Corpus(tmp_path / "store", model="minilm")
    report = c.build([str(repos["pyreq"])], tier="full")
    assert report.embedded_full > 0 and c.status()["full"]["dim"] == 384 and c.status()["static"]["dim"] == 256
    single = CodeSearch(repos["pyreq"], index_dir=tmp_path / "single")
    single.index()
    for query in QUERIES[:4]:
        assert [h.location for h in c.search(query, k=5, repos="pyreq")] == [h.location for h in single.search(query, k=5)]
    shutil.rmtree(tmp_path / "store")


def _chunk_rows(start: int, n: int, dim: int = 8) -> pa.Table:
    """``n`` chunk rows (ids from ``start``) with random unit static vectors and no transformer vectors."""
    rng = np.random.default_rng(start)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = list(range(start, start + n))
    return pa.table({
        "chunk_id": ids, "repo": ["r"] * n, "path": [f"f{i % 50}.py" for i in ids], "start_line": [1] * n,
        "end_line": [2] * n, "ordinal": [i // 50 for i in ids], "kind": ["source"] * n, "symbols": [[f"s{i}"] for i in ids],
        "def_names": [[f"s{i}"] for i in ids], "text": [f"def s{i}(): pass" for i in ids],
        "keyword_text": [f"def s{i} pass" for i in ids], "content_key": [str(i) for i in ids],
        "vector_key": [str(i) for i in ids], "read": [True] * n, "model_fp": ["m"] * n,
        "static_vector": list(vectors), "vector": [None] * n,
    }, schema=chunk_schema(dim, dim))


def _partitions(store: corpus_store.CorpusStore, column: str) -> int:
    ds = store.latest(CHUNKS)
    assert ds is not None
    return int(ds.stats.index_stats(f"{column}_idx")["indices"][0]["num_partitions"])


def _append(store: corpus_store.CorpusStore, writer: corpus_store.Writer, rows: pa.Table) -> None:
    """``rows`` written as fragments (as an actor writes them) and committed."""
    writer.append(CHUNKS, corpus_store.write_fragments(store.uri, CHUNKS, rows), rows.schema)


def test_a_vector_index_keeps_its_partitions_and_is_trained_again_once_the_table_outgrows_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Partitions follow 2·√rows (256 rows each at least); Lance's own index optimisation keeps them; a table grown
    4-fold gets an index trained anew (new rows would otherwise only fatten the old partitions)."""
    monkeypatch.setattr(corpus_indexes, "VECTOR_INDEX_MIN_ROWS", 64)
    from lance.dataset import DatasetOptimizer

    folded: list[list[str] | None] = []  # the indexes each optimize folds new rows into (none it just made)
    fold = DatasetOptimizer.optimize_indices

    def spy(self, **kwargs):  # type: ignore[no-untyped-def]
        folded.append(kwargs.get("index_names"))
        return fold(self, **kwargs)

    monkeypatch.setattr(DatasetOptimizer, "optimize_indices", spy)
    store = corpus_store.CorpusStore(tmp_path / "corpus")
    assert corpus_indexes.ivf_partitions(1_000_000) == 2000 and corpus_indexes.ivf_partitions(10) == 8
    assert corpus_indexes.ivf_partitions(10_000) == 39  # under 262k rows: 256 rows a partition
    with store.writer() as writer:
        _append(store, writer, _chunk_rows(0, 900))
        assert writer.optimize(has_full=False)
        first = _partitions(store, "static_vector")
        assert first == corpus_indexes.ivf_partitions(900) and folded == []  # every index just made: nothing folded
        ds = store.latest(CHUNKS)
        assert ds is not None
        ds.optimize.optimize_indices()  # what a later optimize runs on it, to fold new rows in
        assert _partitions(store, "static_vector") >= corpus_indexes.RETRAIN_BELOW * corpus_indexes.ivf_partitions(900)

        _append(store, writer, _chunk_rows(900, 900))  # 2x: the index stays
        assert writer.optimize(has_full=False, always=False)  # new rows past the unindexed share: folded in
        assert _partitions(store, "static_vector") <= first + 2
        assert folded[-1] is not None and "static_vector_idx" in folded[-1] and "keyword_text_idx" in folded[-1]

        _append(store, writer, _chunk_rows(1800, 6300))  # 9x the first table
        assert writer.optimize(has_full=False, always=False)
        retrained = _partitions(store, "static_vector")
        assert folded[-1] is not None and "static_vector_idx" not in folded[-1]  # trained anew, not folded again
        assert retrained >= corpus_indexes.RETRAIN_BELOW * corpus_indexes.ivf_partitions(8100) > first
        ds = store.latest(CHUNKS)
        assert ds is not None and ds.count_rows() == 8100
        # The retrained index answers: a row's own vector finds it.
        row = ds.take([4321], columns=["chunk_id", "static_vector"]).to_pylist()[0]
        found = ds.to_table(nearest={"column": "static_vector", "q": np.asarray(row["static_vector"], dtype=np.float32),
                                     "k": 5, "metric": "dot", "minimum_nprobes": 30}, columns=["chunk_id"])
        assert row["chunk_id"] in found["chunk_id"].to_pylist()


def test_a_vector_index_is_trained_on_fragments_without_deletion_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh's deleted rows leave deletion files, over which Lance's IVF training crawled (minutes at 1M rows):
    an optimize that trains a vector index writes them out first; one that trains none leaves them."""
    monkeypatch.setattr(corpus_indexes, "VECTOR_INDEX_MIN_ROWS", 64)
    from lance.dataset import LanceDataset

    at_training: list[int] = []  # fragments with a deletion file when each vector index was trained
    create = LanceDataset.create_index

    def spy(self, column, index_type, *args, **kwargs):  # type: ignore[no-untyped-def]
        at_training.append(sum(f.metadata.deletion_file is not None for f in self.get_fragments()))
        return create(self, column, index_type, *args, **kwargs)

    monkeypatch.setattr(LanceDataset, "create_index", spy)
    store = corpus_store.CorpusStore(tmp_path / "corpus")
    with store.writer() as writer:
        _append(store, writer, _chunk_rows(0, 900))
        ds = store.latest(CHUNKS)
        assert ds is not None
        ds.delete("chunk_id % 100 = 7")  # 1% of the rows, as a refresh deletes them
        ds = store.latest(CHUNKS)
        assert ds is not None and any(f.metadata.deletion_file is not None for f in ds.get_fragments())
        writer.versions[CHUNKS] = ds.version
        assert writer.optimize(has_full=False)
        assert at_training == [0]
        after = store.latest(CHUNKS)
        assert after is not None and after.count_rows() == 891
        assert not any(f.metadata.deletion_file is not None for f in after.get_fragments())

        # Rows deleted again with the index in place: an optimize that trains nothing keeps the deletion file.
        after.delete("chunk_id % 100 = 8")
        after = store.latest(CHUNKS)
        assert after is not None
        writer.versions[CHUNKS] = after.version
        writer.optimize(has_full=False)
        assert at_training == [0]
        kept = store.latest(CHUNKS)
        assert kept is not None and kept.count_rows() == 882
        assert any(f.metadata.deletion_file is not None for f in kept.get_fragments())


def test_row_keys_give_each_row_its_own_keys_by_row_id(tmp_path: Path) -> None:
    """The keys an org-wide search orders its candidates by, read once per version, are each row's own: over two
    fragments, after deletions, and nothing for a row id the version does not hold."""
    from codesearch.corpus.candidates import KEY_COLUMNS, RowKeys

    store = corpus_store.CorpusStore(tmp_path / "corpus")
    with store.writer() as writer:
        _append(store, writer, _chunk_rows(0, 300))
        _append(store, writer, _chunk_rows(300, 200).set_column(1, "repo", pa.array(["q"] * 200)))
        ds = store.latest(CHUNKS)
        assert ds is not None
        ds.delete("chunk_id % 7 = 3")
        ds = store.latest(CHUNKS)
        assert ds is not None and len(ds.get_fragments()) == 2
        table = ds.to_table(columns=KEY_COLUMNS, with_row_id=True)
        keys = RowKeys(ds)
        assert keys.version == ds.version
        picked = table["_rowid"].to_pylist()[::13][::-1]
        got = keys.rows(picked)
        expected = {row["_rowid"]: row for row in table.to_pylist()}
        assert [got[i] for i in picked] == [expected[i] for i in picked]
        assert {got[i]["repo"] for i in picked} == {"r", "q"}
        assert keys.rows([max(expected) + 1]) == {}


def test_a_vector_index_of_another_kind_is_made_again_as_ivf_flat_and_only_a_quantised_one_is_refined(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus written with IVF_SQ (before IVF_FLAT) is searched with a refine step until its next optimize, which
    makes the index again as IVF_FLAT: exact distances, no refine, a row's own vector first."""
    from codesearch.corpus.indexes import MINIMUM_NPROBES, REFINE_FACTOR, nearest_options

    monkeypatch.setattr(corpus_indexes, "VECTOR_INDEX_MIN_ROWS", 64)
    store = corpus_store.CorpusStore(tmp_path / "corpus")
    with store.writer() as writer:
        _append(store, writer, _chunk_rows(0, 900))
        ds = store.latest(CHUNKS)
        assert ds is not None
        ds.create_index("static_vector", "IVF_SQ", metric="dot", num_partitions=8)
        sq = store.latest(CHUNKS)
        assert sq is not None and nearest_options(sq, "static_vector")["refine_factor"] == REFINE_FACTOR
        assert writer.optimize(has_full=False, always=False)  # the kind differs: made again
        flat = store.latest(CHUNKS)
        assert flat is not None
        kinds = {index["name"]: index["type"] for index in flat.list_indices()}
        assert kinds["static_vector_idx"] == corpus_indexes.VECTOR_INDEX == "IVF_FLAT"
        options = nearest_options(flat, "static_vector")
        assert "refine_factor" not in options and options["minimum_nprobes"] == MINIMUM_NPROBES
        assert not writer.optimize(has_full=False, always=False)  # nothing left to do
        row = flat.take([123], columns=["chunk_id", "static_vector"]).to_pylist()[0]
        vector = np.asarray(row["static_vector"], dtype=np.float32)
        found = flat.to_table(nearest={**options, "q": vector, "k": 3}, columns=["chunk_id", "static_vector"])
        assert found["chunk_id"][0].as_py() == row["chunk_id"]
        assert nearest_options(flat, "static_vector", exact=True) == {"column": "static_vector", "metric": "dot",
                                                                      "use_index": False}


def test_a_compaction_merges_small_fragments_and_leaves_the_full_ones(tmp_path: Path) -> None:
    """Past the fragment count, fragments under half an even share of the rows are merged; larger ones with few
    deletions stay as they are (a plain compaction rewrote the whole table each time)."""
    store = corpus_store.CorpusStore(tmp_path / "corpus")
    with store.writer() as writer:
        for start in range(0, 120, 30):
            _append(store, writer, _chunk_rows(start, 30))  # four full fragments
        for start in range(120, 126, 2):
            _append(store, writer, _chunk_rows(start, 2))  # three small ones (a refresh's)
        ds = store.latest(CHUNKS)
        assert ds is not None
        full = {f.fragment_id for f in ds.get_fragments() if f.metadata.physical_rows == 30}
        writer.compact(CHUNKS, 4)  # 126 rows // 8 = 15: the 2-row fragments merge, the 30-row ones stay
        after = store.latest(CHUNKS)
        assert after is not None and after.count_rows() == 126
        rows = sorted(f.metadata.physical_rows for f in after.get_fragments())
        assert rows == [6, 30, 30, 30, 30] and full <= {f.fragment_id for f in after.get_fragments()}
        writer.compact(CHUNKS, 5)  # within the count: nothing
        assert store.latest(CHUNKS).version == after.version  # type: ignore[union-attr]


def test_cleanup_keeps_the_versions_the_previous_manifest_names_after_a_roll_back(tmp_path: Path) -> None:
    """A roll back restores the manifest's contents as a newer version; a reader of that manifest still reads the
    old number, so cleanup keeps it with this run's and the newest, and removes the rest."""
    store = corpus_store.CorpusStore(tmp_path / "corpus")
    with store.writer() as writer:
        _append(store, writer, _chunk_rows(0, 10))
        named = writer.versions[CHUNKS]
        _append(store, writer, _chunk_rows(10, 10))
        between = writer.versions[CHUNKS]
        _append(store, writer, _chunk_rows(20, 10))
        newest = writer.versions[CHUNKS]
    restored = corpus_store.Writer(store, {CHUNKS: newest}, previous={CHUNKS: named})
    restored.cleanup(keep_s=0)
    ds = store.latest(CHUNKS)
    assert ds is not None
    versions = {int(v["version"]) for v in ds.versions()}
    assert named in versions and newest in versions and between not in versions
    assert ds.checkout_version(named).count_rows() == 10


def test_a_build_on_ray_writes_its_rows_and_makes_its_indexes_outside_the_driver(
        ray_cluster, repos: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The driver's memory must not grow with the corpus: the actors write the rows, and an index build (2.1 GB
    at 1M rows) runs in a Ray task. Ray's worker processes import the store afresh, so a driver that cannot
    optimize still gets a corpus with its indexes."""
    def not_here(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the driver optimized")

    merged: list[str] = []
    merge = corpus_store.Writer.merge

    def spy(self, name, *args, **kwargs):  # type: ignore[no-untyped-def]
        merged.append(name)
        return merge(self, name, *args, **kwargs)

    monkeypatch.setattr(corpus_store.Writer, "optimize", not_here)
    monkeypatch.setattr(corpus_store.Writer, "merge", spy)
    c = corpus(tmp_path / "store")
    report = c.build([str(p) for p in repos.values()])
    assert report.ray and report.optimized and report.optimize_s > 0
    # The actors wrote the chunk rows as fragments; the driver committed them and merged only the file rows.
    assert merged and CHUNKS not in merged and report.inserted == report.chunks > 0
    ds = c.store.open(CHUNKS, c.store.manifest().versions[CHUNKS])
    assert ds is not None
    assert {"repo_idx", "chunk_id_idx", "def_names_idx", "keyword_text_idx"} <= {i["name"] for i in ds.list_indices()}
    assert c.search("super_len", k=3, repos=["pyreq"])[0].path.endswith("utils.py")


def test_a_repository_without_chunks_answers_nothing_scoped_and_org_wide(ray_cluster, repos: dict[str, Path],  # type: ignore[no-untyped-def]
                                                                         tmp_path: Path) -> None:
    """A repository of binary files alone (or emptied by a refresh) has no chunk and no BM25: searched alone it
    answers nothing, never an error; with the others it takes no place."""
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    (blobs / "logo.bin").write_bytes(b"\x00\x01\x02 binary\n" * 10)
    age(blobs)
    c = corpus(tmp_path / "store")
    c.build([str(repos["pyreq"]), str(blobs)])
    assert c.status()["repositories"]["blobs"]["chunks"] == 0
    assert c.search("super_len", k=5, repos="blobs") == []
    assert c.search("super_len", k=5, repos=["blobs"], mode="bm25") == []
    assert {h.repo for h in c.search("super_len", k=5)} == {"pyreq"}


def test_serve_and_the_retrievers_answer_for_a_corpus(built: tuple[Corpus, dict[str, Path]]) -> None:
    """`codesearch serve --corpus`: /api/search and /api/status answer what `corpus search|status --json` print,
    the rest is refused in one line; the LangChain retriever over a Corpus names each hit's repository."""
    pytest.importorskip("jinja2")
    from starlette.testclient import TestClient

    from codesearch.faces.answers import corpus_answer
    from codesearch.server import Served, create_app

    c, _ = built
    served = Served(corpus=str(c.store.uri), **models())
    with TestClient(create_app(served), base_url="http://127.0.0.1") as client:
        answer = client.get("/api/search", params={"q": "super_len", "mode": "bm25", "k": 3}).json()
        assert answer == corpus_answer("super_len", None, c.search("super_len", k=3, mode="bm25"),
                                       versions=c.status()["versions"])
        assert c.last_versions == c.status()["versions"]
        assert answer["hits"][0]["repo"] == "pyreq"
        scoped = client.get("/api/search", params={"q": "router", "mode": "bm25", "repo": "gochi"}).json()
        assert scoped["repos"] == ["gochi"] and {h["repo"] for h in scoped["hits"]} == {"gochi"}
        assert client.get("/api/status").json() == json.loads(json.dumps(c.status()))
        assert client.get("/api/status", params={"repo": "gochi"}).json()["repo"] == "gochi"
        for path, params, status, needle in [("/api/definitions", {"name": "super_len"}, 404, "not available"),
                                             ("/api/search", {"q": "x", "repo": "nope"}, 404, "not in the corpus")]:
            response = client.get(path, params=params)
            assert response.status_code == status and needle in response.json()["error"], response.text
        page = client.get("/", params={"q": "super_len"})
        assert page.status_code == 200 and "pyreq" in page.text and "src/requests/utils.py" in page.text
    pytest.importorskip("langchain_core")
    from codesearch.integrations.langchain import CodeSearchRetriever

    documents = CodeSearchRetriever(searcher=c, repos=["pyreq"], mode="bm25", k=3).invoke("super_len")
    hits = c.search("super_len", k=3, mode="bm25", repos=["pyreq"])
    assert [(d.metadata["location"], d.metadata["repository"]) for d in documents] == [(h.location, "pyreq")
                                                                                       for h in hits]
    assert documents[0].id == f"pyreq:{hits[0].location}"


