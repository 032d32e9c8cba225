"""Every corpus command reads only checked data (codesearch/corpus/integrity.py): the sha256 of each file a version
reads is recorded as it is committed (a refresh hashes only the files it wrote), and checked before an answer; a
damaged file of any kind is one line and exit code 2, an error answer from a server, never an altered answer."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")
pytest.importorskip("lance")

from click.testing import CliRunner
from conftest import UTILS
from test_corpus import corpus, make_repos, models, run_cli

from codesearch.corpus import Corpus, integrity
from codesearch.corpus import store as corpus_store
from codesearch.corpus.schema import DATASETS, MANIFEST_FILE
from codesearch.exceptions import CorpusCorruptError
from codesearch.faces.cli import main

QUERIES = ["session redirect method", "super_len", "middleware logs request", "HTTP route"]


@pytest.fixture
def refreshed(ray_cluster, tmp_path: Path) -> tuple[Corpus, dict[str, Path]]:  # type: ignore[no-untyped-def]
    """A small corpus built, then refreshed with a changed file: data, deletion, index and manifest files."""
    repos = make_repos(tmp_path / "repos")
    c = corpus(tmp_path / "store")
    c.build([str(p) for p in repos.values()])
    (repos["pyreq"] / "src" / "requests" / "utils.py").write_text(UTILS + "\n\ndef quokka_total(o):\n    return 7\n")
    c.refresh()
    return c, repos


def sums(c: Corpus) -> integrity.Checksums:
    found = integrity.read_checksums(c.store, c.store.manifest(fresh=True))
    assert found is not None
    return found


def kind_of(path: str) -> str:
    return path.split("/")[1]  # chunks.lance/_deletions/... -> _deletions


def flip(path: Path, offset: int | None = None, mask: int = 0xFF) -> int:
    """Flip the bits ``mask`` of one byte of ``path`` (its middle by default); the offset."""
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if offset is None else offset
    data[at] ^= mask
    path.write_bytes(bytes(data))
    return at


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_a_build_records_the_sha256_of_every_file_its_versions_read(
        refreshed: tuple[Corpus, dict[str, Path]]) -> None:
    c, _ = refreshed
    manifest = c.store.manifest(fresh=True)
    recorded = sums(c)
    assert recorded.versions == manifest.versions and set(manifest.versions) == set(DATASETS)
    # The files of each version as Lance lists them (transaction files aside), each with its bytes' sha256.
    listed = {f"{name}/{row['path']}"
              for name, version in manifest.versions.items()
              for row in c.store.open(name, version).tracked_files(min_version=version).read_all().to_pylist()
              if row["version"] == version and row["type"] != "transaction file"}
    assert set(recorded.files) == listed
    root = Path(c.store.uri)
    for path, found in recorded.files.items():
        data = (root / path).read_bytes()
        assert found == (len(data), hashlib.sha256(data).hexdigest()), path
    assert {kind_of(p) for p in recorded.files} == {"_versions", "data", "_deletions", "_indices"}
    # corpus.json names the sidecar by its sha256, and records its own.
    sidecar = root / integrity.sidecar_name(manifest.checksums or "")
    assert hashlib.sha256(sidecar.read_bytes()).hexdigest() == manifest.checksums
    assert c.status()["verified"] is True
    assert c.verify() == {"store": c.store.uri, "verified": True, "files": len(listed), "bytes": recorded.bytes}


def test_a_refresh_hashes_only_the_files_its_commits_wrote_and_a_reader_checks_only_those(
        refreshed: tuple[Corpus, dict[str, Path]], monkeypatch: pytest.MonkeyPatch) -> None:
    c, repos = refreshed
    reader = corpus(Path(c.store.uri))
    assert reader.search("quokka_total", k=1, mode="bm25")[0].path == "src/requests/utils.py"
    before = sums(c)
    hashed: list[str] = []
    real = corpus_store.CorpusStore.file_sum

    def counted(self: corpus_store.CorpusStore, path: str) -> tuple[int, str]:
        hashed.append(path)
        return real(self, path)

    monkeypatch.setattr(corpus_store.CorpusStore, "file_sum", counted)
    assert reader.search("super_len", k=3) and reader.status() and not hashed  # checked once per version
    nothing = c.refresh()
    assert (nothing.checksummed_files, nothing.checksummed_bytes, hashed) == (0, 0, [])
    assert sums(c).files == before.files
    (repos["gochi"] / "tree.go").write_text("package chi\n\n// Walk visits every wombat route.\nfunc Walk() {}\n")
    previous = c.store.manifest(fresh=True).checksums or ""
    report = c.refresh()
    after = sums(c)
    # Kept: this manifest's sidecar and the previous one's (a reader that opened it checks against it); the build's
    # is gone.
    assert {p.name for p in Path(c.store.uri).glob("checksums-*")} == {
        integrity.sidecar_name(previous), integrity.sidecar_name(c.store.manifest(fresh=True).checksums or "")}
    new = set(after.files) - set(before.files)
    assert sorted(hashed) == sorted(new) and report.checksummed_files == len(new)
    assert report.checksummed_bytes == sum(after.files[p].size for p in new)
    assert 0 < len(new) < len(after.files)
    assert all(after.files[p] == before.files[p] for p in set(after.files) & set(before.files))
    # A reader that checked the previous version hashes only the new one's new files.
    hashed.clear()
    assert reader.search("wombat route", k=1, repos="gochi")[0].path == "tree.go"
    assert sorted(hashed) == sorted(new)


def test_a_flipped_byte_in_any_kind_of_file_is_one_line_and_exit_code_2(
        refreshed: tuple[Corpus, dict[str, Path]]) -> None:
    """Data, deletion, index and Lance manifest files, the sidecar and corpus.json: search, status and verify each
    answer one line naming the file, exit code 2; the corpus restored answers exactly as before."""
    c, _ = refreshed
    store = c.store.uri
    search = ["corpus", "search", "super_len session", store, "--model", "hashing", "--mode", "bm25", "--json"]
    answers = {name: cli(*args) for name, args in (("search", search), ("status", ["corpus", "status", store, "--json"]))}
    assert all(result.exit_code == 0 for result in answers.values())
    expected = {name: result.stdout for name, result in answers.items()}
    assert json.loads(expected["search"])["hits"] and json.loads(expected["status"])["verified"] is True
    root = Path(store)
    recorded = sums(c)
    damaged = {}
    for kind in ("data", "_deletions", "_indices", "_versions"):
        damaged[kind] = sorted((p for p in recorded.files if kind_of(p) == kind), key=lambda p: -recorded.files[p].size)[0]
    damaged["sidecar"] = integrity.sidecar_name(c.store.manifest().checksums or "")
    damaged[MANIFEST_FILE] = MANIFEST_FILE
    for kind, path in damaged.items():
        # corpus.json: a repository's count of files one less or more (valid JSON, a plausible count).
        at = flip(root / path, (root / path).read_text().index('"files": ') + 9, 0x01) if kind == MANIFEST_FILE else \
            flip(root / path)
        try:
            for args in (search, ["corpus", "status", store], ["corpus", "verify", store]):
                result = cli(*args)
                assert result.exit_code == 2, (kind, args, result.output, result.exception)
                assert result.stdout == "" and result.stderr.count("\n") == 1, (kind, result.stderr)
                assert f"{store}/{path} is damaged" in result.stderr, (kind, result.stderr)
        finally:
            flip(root / path, at, 0x01 if kind == MANIFEST_FILE else 0xFF)
    for name, args in (("search", search), ("status", ["corpus", "status", store, "--json"])):
        result = cli(*args)
        assert (result.exit_code, result.stdout) == (0, expected[name])
    # The installed command itself: one line on stderr, exit code 2.
    data = damaged["data"]
    at = flip(root / data)
    proc = run_cli("corpus", "search", "super_len", store, "--model", "hashing", "--mode", "bm25")
    flip(root / data, at)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"Error: corpus file {store}/{data} is damaged (its sha256 differs")


def test_a_damaged_corpus_never_answers_with_altered_content(refreshed: tuple[Corpus, dict[str, Path]]) -> None:
    """The Lance data file flipped at several places: every search either answers as the undamaged corpus did or
    raises the one error (here, always the error)."""
    c, _ = refreshed
    expected = {q: [(h.repo, h.location, h.text) for h in c.search(q, k=5, mode="bm25")] for q in QUERIES}
    recorded = sums(c)
    path = Path(c.store.uri) / max((p for p in recorded.files if kind_of(p) == "data"),
                                   key=lambda p: recorded.files[p].size)
    size = path.stat().st_size
    for offset in (0, size // 7, size // 3, size // 2, size - 40, size - 1):
        flip(path, offset)
        try:
            fresh = corpus(Path(c.store.uri))
            for q in QUERIES:
                with pytest.raises(CorpusCorruptError, match="is damaged"):
                    fresh.search(q, k=5, mode="bm25")
        finally:
            flip(path, offset)
    fresh = corpus(Path(c.store.uri))
    assert {q: [(h.repo, h.location, h.text) for h in fresh.search(q, k=5, mode="bm25")] for q in QUERIES} == expected


def test_a_server_checks_in_the_background_and_answers_a_damaged_corpus_with_an_error(
        refreshed: tuple[Corpus, dict[str, Path]]) -> None:
    """The MCP tools and the HTTP API: the first answer waits for the check started at open; on damage a one-line
    error answer (the server keeps serving), never hits."""
    pytest.importorskip("jinja2")
    from mcp.server.mcpserver.exceptions import ToolError
    from starlette.testclient import TestClient

    from codesearch.faces.mcp_corpus import CorpusWorkspace, tool_corpus_search, tool_corpus_status
    from codesearch.faces.mcp_server import answerer
    from codesearch.server import Served, create_app

    c, _ = refreshed
    recorded = sums(c)
    path = Path(c.store.uri) / next(p for p in sorted(recorded.files) if kind_of(p) == "_indices")
    at = flip(path)
    try:
        ws = CorpusWorkspace(corpus(Path(c.store.uri)))  # opens: the check runs in a thread
        answer = answerer(ws)
        for call, args in ((tool_corpus_search, ("super_len",)), (tool_corpus_status, ())):
            with pytest.raises(ToolError, match=f"{path.parent.name}/{path.name} is damaged") as raised:
                answer(call, *args)
            assert "\n" not in str(raised.value)
        served = Served(corpus=c.store.uri, **models())
        with TestClient(create_app(served), base_url="http://127.0.0.1") as client:
            for endpoint, params in (("/api/search", {"q": "super_len", "mode": "bm25"}), ("/api/status", {})):
                response = client.get(endpoint, params=params)
                assert response.status_code == 500 and "is damaged" in response.json()["error"], response.text
            page = client.get("/", params={"q": "super_len"})
            assert page.status_code == 500 and "is damaged" in page.text and "utils.py" not in page.text
    finally:
        flip(path, at)
    ws = CorpusWorkspace(corpus(Path(c.store.uri)))
    assert tool_corpus_search(ws, "super_len", repo="pyreq", k=2)["hits"]
    assert tool_corpus_status(ws)["verified"] is True


def test_a_corpus_without_recorded_checksums_opens_unchecked_once_said_and_its_next_refresh_records_them(
        refreshed: tuple[Corpus, dict[str, Path]], caplog: pytest.LogCaptureFixture) -> None:
    c, _ = refreshed
    expected = {q: [(h.repo, h.location, h.text) for h in c.search(q, k=5)] for q in QUERIES}
    root = Path(c.store.uri)
    total = len(sums(c).files)
    # corpus.json as a codesearch before the sums wrote it: no sidecar named, no sha256 of its own.
    data = json.loads((root / MANIFEST_FILE).read_text())
    del data["checksums"], data["sha256"]
    (root / MANIFEST_FILE).write_text(json.dumps(data, indent=1, sort_keys=True))
    for sidecar in root.glob("checksums-*.json"):
        sidecar.unlink()
    integrity._warned.discard(c.store.uri)
    old = corpus(root)
    with caplog.at_level(logging.WARNING, logger="codesearch.corpus.integrity"):
        assert {q: [(h.repo, h.location, h.text) for h in old.search(q, k=5)] for q in QUERIES} == expected
        assert old.status()["verified"] is False
        assert corpus(root).search("super_len", k=1)
    said = [r.getMessage() for r in caplog.records if r.name == "codesearch.corpus.integrity"]
    assert len(said) == 1 and "records no checksums" in said[0] and "next build or refresh" in said[0]
    result = cli("corpus", "verify", str(root))
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "records no checksums" in result.stderr
    # The next refresh (nothing changed on disk) records every file's sum, hashing each once.
    report = old.refresh()
    assert report.inserted == 0 and report.checksummed_files == total == len(sums(c).files)
    assert corpus(root).status()["verified"] is True
    result = cli("corpus", "verify", str(root), "--json")
    assert result.exit_code == 0 and json.loads(result.stdout)["files"] == total


def test_a_damaged_sidecar_stops_a_refresh_before_it_writes(refreshed: tuple[Corpus, dict[str, Path]]) -> None:
    """A refresh carries the recorded sums over: with its sidecar damaged it refuses, and the store is unchanged."""
    c, repos = refreshed
    root = Path(c.store.uri)
    sidecar = root / integrity.sidecar_name(c.store.manifest().checksums or "")
    flip(sidecar)
    (repos["gochi"] / "tree.go").write_text("package chi\n\nfunc Walk() {}\n")
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    with pytest.raises(CorpusCorruptError, match=f"{sidecar.name} is damaged"):
        c.refresh()
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()) == before


def test_corpus_verify_help_and_unknown_store() -> None:
    assert cli("corpus", "verify", "--help").exit_code == 0
    proc = run_cli("corpus", "verify", "/nonexistent/store")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "not a codesearch corpus" in proc.stderr


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """An S3-compatible store (moto's server in this process): its storage options for Lance; Arrow's S3 file
    system, which the corpus's own files go through, finds it by the environment."""
    server_module = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_REGION", "us-east-1"), ("AWS_DEFAULT_REGION", "us-east-1"),
                        ("AWS_ENDPOINT_URL", endpoint), ("AWS_ALLOW_HTTP", "true")):
        monkeypatch.setenv(name, value)
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="corpora")
    yield {"aws_endpoint": endpoint, "allow_http": "true", "aws_access_key_id": "testing",
           "aws_secret_access_key": "testing", "aws_region": "us-east-1"}
    server.stop()


def test_a_corpus_in_a_bucket_records_and_checks_its_sums_alike(
        refreshed: tuple[Corpus, dict[str, Path]], bucket: dict[str, str]) -> None:
    """The same store copied to an S3-compatible bucket: it answers as the folder does, verified; a flipped byte of
    one of its files is the one error naming it; a refresh there hashes only the files it wrote and removes the
    sidecars no manifest names."""
    from pyarrow import fs

    c, repos = refreshed
    uri = "s3://corpora/org"
    s3, _ = fs.FileSystem.from_uri(uri)
    fs.copy_files(c.store.uri, "corpora/org", destination_filesystem=s3)
    remote = Corpus(uri, storage_options=bucket, **models())  # type: ignore[arg-type]
    assert remote.store.remote
    expected = {q: [(h.repo, h.location, h.text) for h in c.search(q, k=5)] for q in QUERIES}
    assert {q: [(h.repo, h.location, h.text) for h in remote.search(q, k=5)] for q in QUERIES} == expected
    recorded = sums(c)
    assert remote.verify() == {"store": uri, "verified": True, "files": len(recorded.files), "bytes": recorded.bytes}
    data = max((p for p in recorded.files if kind_of(p) == "data"), key=lambda p: recorded.files[p].size)
    original = Path(c.store.uri, data).read_bytes()
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 0xFF
    with s3.open_output_stream(f"corpora/org/{data}") as stream:
        stream.write(bytes(damaged))
    with pytest.raises(CorpusCorruptError, match=f"corpus file {uri}/{data} is damaged"):
        Corpus(uri, storage_options=bucket, **models()).search("super_len", k=3)  # type: ignore[arg-type]
    with s3.open_output_stream(f"corpora/org/{data}") as stream:
        stream.write(original)
    before = integrity.read_checksums(remote.store, remote.store.manifest())
    assert before is not None
    (repos["gochi"] / "tree.go").write_text("package chi\n\n// Walk visits every wombat route.\nfunc Walk() {}\n")
    report = remote.refresh()
    after = integrity.read_checksums(remote.store, remote.store.manifest())
    assert after is not None and report.inserted
    assert report.checksummed_files == len(set(after.files) - set(before.files)) > 0
    fresh = Corpus(uri, storage_options=bucket, **models())  # type: ignore[arg-type]
    assert fresh.search("wombat route", k=1, repos="gochi")[0].path == "tree.go"
    assert fresh.status()["verified"] is True
    sidecars = set(remote.store.names("checksums-"))
    assert sidecars == {integrity.sidecar_name(s) for s in (remote.store.manifest().checksums, c.store.manifest().checksums)
                        if s}
