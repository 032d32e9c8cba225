"""The corpus on a Ray cluster of a head and two worker nodes, writing to an S3 server, under faults.

Every server is started here, on loopback: moto's standalone S3 server (its
own process), a Ray cluster held by ``ray_nodes.py`` (a head offering no CPU,
two worker nodes of one CPU each), and, for the outage, a TCP proxy in front
of the S3 server that the test stops and starts. Drivers run as their own
processes (the test session's own local Ray stays out of their way), with the
stand-in models of conftest unless a test says otherwise; the reference is a
corpus built on one local node into a folder.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")
pytest.importorskip("lance")
pytest.importorskip("boto3")
pytest.importorskip("psutil")

import boto3
import psutil
from conftest import ROOT, TESTS
from test_corpus import QUERIES, UTILS, age, make_repos, models

from codesearch.corpus import Corpus
from codesearch.corpus.lease import LEASE_ENV, LEASE_FILE, Lease, check_conditional_writes
from codesearch.corpus.schema import CHUNKS
from codesearch.corpus.store import KILL_ENV, STOP_ENV
from codesearch.exceptions import CorpusStoreError, IndexLockedError

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.slow
if os.environ.get("CODESEARCH_PUREPYTHON"):
    # CI runs the suite twice, the second time with the pure-Python chunker forced; these seven minutes of cluster
    # and store faults do not touch the chunker (both twins cut alike, tests/chunking), so they run once.
    pytest.skip("the cluster's faults run in the pass with the compiled chunker", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


class S3:
    """moto's S3 server in its own process; ``env`` and ``options`` reach it (the ``AWS_*`` variables and Lance's
    storage options), at ``endpoint`` or another (a proxy's)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)
        self.endpoint = f"http://127.0.0.1:{self.port}"
        boto3.client("s3", **self.client_options()).create_bucket(Bucket="corpora")

    def client_options(self, endpoint: str | None = None) -> dict[str, str]:
        return {"endpoint_url": endpoint or self.endpoint, "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing", "region_name": "us-east-1"}

    def env(self, endpoint: str | None = None) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint or self.endpoint,
                "AWS_ALLOW_HTTP": "true"}

    def options(self, endpoint: str | None = None, **more: str) -> dict[str, str]:
        return {"aws_endpoint": endpoint or self.endpoint, "allow_http": "true", "aws_access_key_id": "testing",
                "aws_secret_access_key": "testing", "aws_region": "us-east-1", **more}

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


class Nodes:
    """The Ray cluster of ``ray_nodes.py``: its address, its worker nodes, and commands to it."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "w") as handle:
            self.process = subprocess.Popen([sys.executable, str(HERE / "ray_nodes.py")], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=handle, text=True, env=env)
        first = self._answer(180)
        self.address: str = first["address"]
        self.workers: list[str] = first["workers"]

    def _answer(self, timeout: float = 120) -> Any:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError("the Ray cluster did not answer")
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the Ray cluster's process ended: {self.log.read_text()[-3000:]}")
        return json.loads(line)

    def command(self, text: str) -> Any:
        assert self.process.stdin is not None
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    """The S3 server, which this process's and its drivers' Arrow file systems find by the ``AWS_*`` variables."""
    server = S3()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in server.env().items():
            patch.setenv(name, value)
        yield server
    server.close()


@pytest.fixture(scope="module")
def nodes(s3: S3, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Nodes]:
    env = {**os.environ, **s3.env(), "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(TESTS), str(HERE), os.environ.get("PYTHONPATH", "")])}
    cluster = Nodes(env, tmp_path_factory.mktemp("ray-nodes") / "ray_nodes.log")
    yield cluster
    cluster.close()


DRIVER = """
import json, sys
sys.path[:0] = [{root!r}, {tests!r}, {here!r}]
{ray_init}
from codesearch.corpus import Corpus, driver
if {on_ray!r}:  # however small the refresh, on the cluster rather than in this process
    driver.IN_PROCESS_BYTES = dict.fromkeys(driver.IN_PROCESS_BYTES, -1)
from test_corpus import models
c = Corpus({store!r}, storage_options={options!r}, **models())
report = getattr(c, {call!r})({paths!r}, ray_address={address!r})
print(json.dumps({{"ray": report.ray, "inserted": report.inserted, "deleted": report.deleted}}))
"""


def driver(call: str, store: str, paths: list[str] | None, address: str | None, options: dict[str, str],
           env: dict[str, str] | None = None, worker_env: dict[str, str] | None = None,
           on_ray: bool = False) -> subprocess.Popen[str]:
    """A build or refresh (``call``) in a process of its own, joined to the cluster at ``address`` (the actors get
    ``worker_env``)."""
    ray_init = "" if address is None else (
        f"import os\nos.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] = '0'  # a loopback cluster (see cluster.ray_session)\n"
        f"import ray\nray.init(address={address!r}, logging_level='ERROR', log_to_driver=False, "
        f"runtime_env={{'env_vars': {worker_env or {}!r}}})")
    script = DRIVER.format(root=str(ROOT), tests=str(TESTS), here=str(HERE), ray_init=ray_init, store=store,
                           options=options, call=call, paths=paths, address=address, on_ray=on_ray)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(env or {}), "PYTHONPATH": os.pathsep.join(
                                [str(ROOT), str(TESTS), str(HERE), os.environ.get("PYTHONPATH", "")])})


def finished(proc: subprocess.Popen[str], timeout: float = 300) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def answers(c: Corpus, repos: list[str]) -> dict[str, Any]:
    """Every query's top 10, org-wide and scoped to each repository: repository, location, text and score.

    Org-wide vectors are scored exactly: past 4,096 rows the vector index's approximation depends on how the rows
    were laid out in fragments (two actors' against one process's), not on which rows the corpus holds."""
    found = {}
    for query in QUERIES:
        for scope in [None, *repos]:
            found[f"{scope or '*'}|{query}"] = [(h.repo, h.location, h.text, round(h.score, 6))
                                                for h in c.search(query, k=10, repos=scope, exact=True)]
    return found


def rows(c: Corpus) -> list[tuple[Any, ...]]:
    ds = c.store.open(CHUNKS, c.store.manifest().versions[CHUNKS])
    assert ds is not None
    table = ds.to_table(columns=["chunk_id", "repo", "path", "start_line", "end_line", "text"])
    return sorted(zip(*(table[name].to_pylist() for name in table.column_names)))


def edit(repos: dict[str, Path], variant: str) -> None:
    (repos["pyreq"] / "src" / "requests" / "utils.py").write_text(UTILS.replace("super_len", f"{variant}_len"))
    (repos["gochi"] / "mux.go").write_text(f"package chi\n\n// Walk visits every {variant} route.\nfunc Walk() {{}}\n")
    (repos["pyreq"] / "README.md").unlink(missing_ok=True)


WORDS = ["session", "request", "response", "timeout", "retry", "cookie", "header", "redirect", "proxy", "stream",
         "chunk", "encode", "decode", "auth", "token", "cache", "pool", "socket", "buffer", "parse", "route", "handler",
         "middleware", "logger", "schema", "query", "cursor", "commit", "rollback", "index", "vector", "shard",
         "replica", "lease", "manifest", "fragment", "version", "snapshot", "digest"]


def big_repos(base: Path, count: int, files: int = 40) -> dict[str, Path]:
    """``count`` repositories of about 1.2 MB of Python each: each one a work item of its own (the build hands
    repositories over 1 MiB to the actors alone), so that a fault lands on work. Their functions are drawn from a
    seeded vocabulary, so that no two score alike (ties would rank by row order, which differs between runs)."""
    import random

    made = {}
    for r in range(count):
        root = base / f"big{r}"
        (root / "pkg").mkdir(parents=True)
        rng = random.Random(r)
        for f in range(files):
            body = []
            for i in range(120):
                words = rng.sample(WORDS, 6)
                body.append(f"def {words[0]}_{words[1]}_{r}_{f}_{i}({words[2]}, {words[3]}, timeout=None):\n"
                            f"    \"\"\"{' '.join(rng.choices(WORDS, k=12)).capitalize()}, retrying on timeout.\"\"\"\n"
                            f"    {words[4]} = {words[2]}.{words[5]}({words[3]}, timeout=timeout or {i})\n"
                            f"    return {words[4]}.json() if {words[4]}.ok else None\n\n\n")
            (root / "pkg" / f"module_{f}.py").write_text("".join(body))
        age(root)
        made[f"big{r}"] = root
    return made


# -- the cluster and the bucket answer as one node and a folder ---------------------------------------------------


def test_a_cluster_in_a_bucket_builds_and_refreshes_the_corpus_one_local_node_builds(
        ray_cluster, nodes: Nodes, s3: S3, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Built by two worker nodes' actors into s3://, the corpus answers every query, org-wide and scoped, as a build
    on one local node into a folder does, and so after a refresh; the actors ran on both workers (Ray's state API)."""
    repos = {**make_repos(tmp_path / "repos"), **big_repos(tmp_path / "repos", 2, files=24)}
    paths = [str(p) for p in repos.values()]
    uri = "s3://corpora/cluster-equal"
    code, out, err = finished(driver("build", uri, paths, nodes.address, s3.options()))
    assert code == 0, err[-3000:]
    assert json.loads(out.splitlines()[-1])["ray"]
    actors = [a for a in nodes.command("actors") if "RepoWorker" in a["class_name"]]
    assert {a["node_id"] for a in actors} == set(nodes.workers), actors
    local = Corpus(tmp_path / "local", **models())  # type: ignore[arg-type]
    local.build(paths)
    remote = Corpus(uri, storage_options=s3.options(), **models())  # type: ignore[arg-type]
    assert rows(remote) == rows(local)
    assert answers(remote, sorted(repos)) == answers(local, sorted(repos))
    # A refresh on the cluster (not in the driver, as a small one would be) against a refresh of the folder.
    edit(repos, "wombat")
    for r in ("big0", "big1"):
        for path in sorted((repos[r] / "pkg").iterdir())[:12]:
            path.write_text(path.read_text().replace("retrying", "retrying wombats"))
    code, out, err = finished(driver("refresh", uri, None, nodes.address, s3.options(), on_ray=True))
    assert code == 0, err[-3000:]
    assert json.loads(out.splitlines()[-1])["ray"]
    local.refresh()
    remote = Corpus(uri, storage_options=s3.options(), **models())  # type: ignore[arg-type]
    assert rows(remote) == rows(local)
    assert answers(remote, sorted(repos)) == answers(local, sorted(repos))
    assert remote.status()["repos"] == local.status()["repos"]
    assert remote.verify()["verified"]
    from codesearch.faces.mcp_corpus import CorpusWorkspace, tool_corpus_search, tool_corpus_status

    served, reference = CorpusWorkspace(remote), CorpusWorkspace(local)
    for query, repo in (("wombat route", None), ("wombat_len", "pyreq"), ("session retrying timeout", "big1")):
        assert tool_corpus_search(served, query, repo=repo, k=5) == tool_corpus_search(reference, query, repo=repo, k=5)
    assert tool_corpus_status(served)["repos"] == len(repos)


def test_the_cli_builds_on_the_cluster_into_the_bucket_and_answers_from_it(
        nodes: Nodes, s3: S3, tmp_path: Path) -> None:
    """`codesearch corpus build s3://... --ray-address` with the offline default model, then status and search
    from the bucket, as a user runs them."""
    repos = make_repos(tmp_path / "repos")
    uri = "s3://corpora/cli"
    env = {**os.environ, **s3.env(), "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "codesearch.faces.cli", *args], capture_output=True, text=True,
                              timeout=300, env=env)

    built = cli("corpus", "build", uri, *map(str, repos.values()), "--ray-address", nodes.address)
    assert built.returncode == 0, built.stderr[-2000:]
    status = cli("corpus", "status", uri, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["repositories"].keys() == {"pyreq", "gochi"}
    found = cli("corpus", "search", "super_len", uri, "--repo", "pyreq", "--json")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["hits"][0]["location"].startswith("src/requests/utils.py:")


@pytest.fixture(scope="module")
def base(s3: S3, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """A corpus of make_repos's two repositories in the bucket (``s3://corpora/base``), built once by a driver of
    its own on a local Ray; each fault test works on a copy (:func:`copy_of`)."""
    folder = tmp_path_factory.mktemp("base-repos")
    repos = make_repos(folder)
    code, _, err = finished(driver("build", "s3://corpora/base", [str(p) for p in repos.values()], None,
                                   s3.options()))
    assert code == 0, err[-3000:]
    return "s3://corpora/base", folder


def copy_of(s3: S3, base: tuple[str, Path], name: str) -> tuple[str, dict[str, Path]]:
    """A copy of the base corpus at ``s3://corpora/NAME``, and its repositories as they were when it was built
    (written again: a test before may have edited them)."""
    uri, folder = base
    shutil.rmtree(folder)
    repos = make_repos(folder)
    client = boto3.client("s3", **s3.client_options())
    prefix = uri.removeprefix("s3://corpora/")
    for page in client.get_paginator("list_objects_v2").paginate(Bucket="corpora", Prefix=f"{prefix}/"):
        for item in page.get("Contents", []):
            client.copy_object(Bucket="corpora", Key=f"{name}/{item['Key'].removeprefix(prefix + '/')}",
                               CopySource={"Bucket": "corpora", "Key": item["Key"]})
    return f"s3://corpora/{name}", repos


# -- the object store's part --------------------------------------------------------------------------------------


def test_a_store_without_conditional_writes_is_refused_in_one_line(s3: S3) -> None:
    """Lance's commits and the writer's lease need a store that refuses to create an object twice; one that
    accepts the second create is an error before anything is written."""

    class Careless:
        """An S3 client whose store ignores If-None-Match (what some S3-compatible stores do)."""

        def __init__(self) -> None:
            self.s3 = boto3.client("s3", **s3.client_options())

        def put_object(self, **kwargs: Any) -> Any:
            kwargs.pop("IfNoneMatch", None)
            return self.s3.put_object(**kwargs)

        def delete_object(self, **kwargs: Any) -> Any:
            return self.s3.delete_object(**kwargs)

    with pytest.raises(CorpusStoreError, match="does not refuse a second create") as refused:
        check_conditional_writes("s3://corpora/careless", s3.options(), Careless())
    assert "\n" not in str(refused.value)
    check_conditional_writes("s3://corpora/careful", s3.options())  # moto refuses it: no error


def test_the_lease_is_one_writers_and_a_dead_writers_is_taken_over_after_its_term(s3: S3) -> None:
    first = Lease("s3://corpora/leased", s3.options(), term_s=2.0)
    first.acquire(timeout=0)
    second = Lease("s3://corpora/leased", s3.options(), term_s=2.0)
    with pytest.raises(IndexLockedError, match=f"pid {os.getpid()}"):
        second.acquire(timeout=1.0)
    time.sleep(3.0)  # renewed meanwhile (every third of its term): still held
    with pytest.raises(IndexLockedError):
        second.acquire(timeout=0)
    first.check()
    first._stop.set()  # the holder stops renewing (as one that died)
    if first._thread is not None:
        first._thread.join()
    second.acquire(timeout=10.0)  # taken over once the term passed
    with pytest.raises(IndexLockedError, match="did not renew it"):
        first.check()
    assert not first.renew()  # its renewal is refused: the lease is the other's
    with pytest.raises(IndexLockedError, match="another writer took it over"):
        first.check()
    first.release()  # deletes nothing of the other's
    with pytest.raises(IndexLockedError):
        Lease("s3://corpora/leased", s3.options(), term_s=2.0).acquire(timeout=0)
    second.release()
    client = boto3.client("s3", **s3.client_options())
    assert "Contents" not in client.list_objects_v2(Bucket="corpora", Prefix=f"leased/{LEASE_FILE}")


def test_a_manifest_read_torn_by_a_writers_replacement_is_read_again(
        s3: S3, base: tuple[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket's object read across its replacement can come back cut short or mixed: the manifest, which checks
    its own sha256, is read again; four torn reads in a row are a damaged corpus."""
    from codesearch.corpus.store import CorpusStore
    from codesearch.exceptions import CorpusCorruptError, CorpusNotFoundError

    uri, _ = copy_of(s3, base, "torn")
    store = CorpusStore(uri, s3.options())
    whole = store.read_bytes("corpus.json")
    assert whole is not None
    torn = [whole[: len(whole) // 2], whole.replace(b'"updated"', b'"updatex"')]
    reads = iter([*torn, whole])
    monkeypatch.setattr(store, "read_bytes", lambda name: next(reads))
    assert store.manifest(fresh=True).versions == CorpusStore(uri, s3.options()).manifest().versions
    monkeypatch.setattr(store, "read_bytes", lambda name: torn[1])
    with pytest.raises(CorpusCorruptError, match="is damaged"):
        store.manifest(fresh=True)
    monkeypatch.setattr(store, "read_bytes", lambda name: torn[0])
    with pytest.raises(CorpusNotFoundError, match="not a codesearch corpus this version reads"):
        store.manifest(fresh=True)


@pytest.mark.parametrize("point", ["chunks-append", "chunks-delete", "files-merge", "keywords-delete",
                                   "keywords-append", "checksums", "manifest"])
def test_kill_9_at_each_commit_point_in_a_bucket_leaves_the_old_or_the_new_corpus(
        s3: S3, base: tuple[str, Path], point: str) -> None:
    """The driver SIGKILLed right after each commit to S3: readers see one whole version; the next refresh, once
    the dead writer's lease ended, finishes the work."""
    uri, repos = copy_of(s3, base, f"killed-{point}")
    lease = {LEASE_ENV: "1"}
    c = Corpus(uri, storage_options=s3.options(), **models())  # type: ignore[arg-type]
    old_rows, old_hits = rows(c), [h.location for h in c.search("super_len", k=3, repos="pyreq")]
    (repos["pyreq"] / "src" / "requests" / "utils.py").write_text(UTILS.replace("super_len", "echidna_len"))
    code, _, err = finished(driver("refresh", uri, None, None, s3.options(), env={**lease, KILL_ENV: point}))
    assert code == -9, err[-3000:]
    reader = Corpus(uri, storage_options=s3.options(), **models())  # type: ignore[arg-type]
    ids = [r[0] for r in rows(reader)]
    assert len(ids) == len(set(ids))
    echidna = [h for h in reader.search("echidna_len", k=3, repos="pyreq", mode="bm25") if "echidna" in h.text]
    if point == "manifest":
        assert echidna and rows(reader) != old_rows
    else:
        assert not echidna and rows(reader) == old_rows
        assert [h.location for h in reader.search("super_len", k=3, repos="pyreq")] == old_hits
    assert reader.verify()["verified"]
    time.sleep(2.5)  # the dead writer's lease (a one-second term) has ended
    reader.refresh()
    assert [h for h in reader.search("echidna_len", k=3, repos="pyreq", mode="bm25") if "echidna" in h.text]
    assert reader.verify()["verified"]


class Proxy:
    """A TCP proxy on loopback in front of the S3 server: ``stop`` closes its port and every connection (the
    store gone), ``start`` opens the same port again (the store back, its data kept)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._server: socket.socket | None = None
        self._open: list[socket.socket] = []
        self.start()

    def start(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for s in self._open:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
        self._open = []


def stopped(pid: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if psutil.Process(pid).status() == psutil.STATUS_STOPPED:
            return
        time.sleep(0.05)
    raise TimeoutError(f"process {pid} did not stop")


@pytest.mark.parametrize("point", ["chunks-append", "files-merge", "checksums"])
def test_the_store_gone_mid_refresh_is_one_line_then_the_next_refresh_completes(
        s3: S3, base: tuple[str, Path], point: str) -> None:
    """The S3 server stops answering right after a commit of a refresh (the refresh stopped there, the store
    taken away, the refresh let go): the refresh fails in one line, the corpus is the old one, whole, and once
    the store is back the next refresh completes."""
    uri, repos = copy_of(s3, base, f"outage-{point}")
    proxy = Proxy(s3.port)
    endpoint = f"http://127.0.0.1:{proxy.port}"
    # Lance's and boto3's retries cut short, so that the outage is an error in seconds, not minutes.
    options = s3.options(endpoint, client_max_retries="1", client_retry_timeout="3", connect_timeout="2s",
                         timeout="5s")
    env = {**s3.env(endpoint), LEASE_ENV: "2", "AWS_MAX_ATTEMPTS": "1"}
    before = rows(Corpus(uri, storage_options=s3.options(), **models()))  # type: ignore[arg-type]
    (repos["pyreq"] / "src" / "requests" / "utils.py").write_text(UTILS.replace("super_len", "quokka_len"))
    proc = driver("refresh", uri, None, None, options, env={**env, STOP_ENV: point})
    try:
        stopped(proc.pid)
        proxy.stop()
        os.kill(proc.pid, signal.SIGCONT)
        code, _, err = finished(proc, timeout=240)
    finally:
        proxy.stop()
        if proc.poll() is None:
            proc.kill()
    assert code == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert "CorpusStoreError" in last and "did not answer" in last, err[-3000:]
    proxy.start()
    reader = Corpus(uri, storage_options=options, **models())  # type: ignore[arg-type]
    assert rows(reader) == before and reader.verify()["verified"]
    assert not [h for h in reader.search("quokka_len", k=3, repos="pyreq", mode="bm25") if "quokka" in h.text]
    time.sleep(3.0)  # the stopped writer's lease (two seconds) has ended
    reader.refresh()
    assert [h for h in reader.search("quokka_len", k=3, repos="pyreq", mode="bm25") if "quokka" in h.text]
    assert reader.verify()["verified"]
    proxy.stop()


@pytest.mark.parametrize("where", ["bucket", "folder"])
def test_two_drivers_at_once_lose_no_update(ray_cluster, s3: S3, base: tuple[str, Path], tmp_path: Path,  # type: ignore[no-untyped-def]
                                            where: str) -> None:
    """Two refreshes of one corpus at once, in a bucket (the lease) and in a folder (the lock file): one waits for
    the other (or fails in one line, to be run again); either way no update is lost."""
    if where == "bucket":
        uri, repos = copy_of(s3, base, "two-drivers")
        options = s3.options()
    else:
        repos = make_repos(tmp_path / "repos")
        uri = str(tmp_path / "store")
        Corpus(uri, **models()).build([str(p) for p in repos.values()])  # type: ignore[arg-type]
        options = {}
    (repos["pyreq"] / "src" / "requests" / "utils.py").write_text(UTILS.replace("super_len", "platypus_len"))
    first = driver("refresh", uri, [str(repos["pyreq"])], None, options)
    (repos["gochi"] / "mux.go").write_text("package chi\n\n// Numbat counts routes.\nfunc Numbat() {}\n")
    second = driver("refresh", uri, [str(repos["gochi"])], None, options)
    outcomes = [finished(first), finished(second)]
    for code, _, err in outcomes:
        assert code == 0 or ("IndexLockedError" in err and "is writing the corpus" in err), err[-3000:]
    for (code, _, _), repo in zip(outcomes, ("pyreq", "gochi")):
        if code != 0:  # refused while the other wrote: run again, as its message says
            Corpus(uri, storage_options=options, **models()).refresh([str(repos[repo])])  # type: ignore[arg-type]
    c = Corpus(uri, storage_options=options, **models())  # type: ignore[arg-type]
    assert [h for h in c.search("platypus_len", k=3, repos="pyreq", mode="bm25") if "platypus" in h.text]
    assert [h for h in c.search("Numbat", k=3, repos="gochi", mode="bm25") if "Numbat" in h.text]
    assert c.verify()["verified"]


# -- a node lost while its actor works ------------------------------------------------------------------------------


def descendants_stopped(root: int) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(root).children(recursive=True):
        try:
            if child.status() == psutil.STATUS_STOPPED:
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def node_of(process: psutil.Process, nodes: Nodes, raylets: dict[int, int]) -> int | None:
    """The worker node (index) whose raylet ``process`` descends from."""
    for parent in process.parents():
        if parent.pid in raylets:
            return raylets[parent.pid]
    return None


def test_a_worker_node_killed_while_its_actor_holds_a_repository(
        ray_cluster, nodes: Nodes, s3: S3, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Four repositories, one work item each; the refresh is stopped as an actor begins one, and that actor's node
    is killed: the refresh finishes on the surviving node with the corpus an undisturbed run makes, or fails in one
    line with the previous version current. (Ray Data retries the lost actor's work item on the survivor; the
    fragments the killed actor may have written are never committed, and the next finished run removes them.)"""
    repos = big_repos(tmp_path / "repos", 4, files=30)
    paths = [str(p) for p in repos.values()]
    uri = "s3://corpora/node-lost"
    code, _, err = finished(driver("build", uri, paths, nodes.address, s3.options()))
    assert code == 0, err[-3000:]
    before = rows(Corpus(uri, storage_options=s3.options(), **models()))  # type: ignore[arg-type]
    local = Corpus(tmp_path / "local", **models())  # type: ignore[arg-type]
    local.build(paths)
    for root in repos.values():
        for path in sorted((root / "pkg").iterdir())[:20]:
            path.write_text(path.read_text().replace("retrying", "retrying bilbies"))
    local.refresh()  # the undisturbed run
    raylets = {}
    for index in range(len(nodes.workers)):
        raylets.update({pid: index for pid in nodes.command(f"raylet {index}")["pids"]})
    proc = driver("refresh", uri, None, nodes.address, s3.options(), worker_env={STOP_ENV: "repository"}, on_ray=True)
    killed = None
    try:
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            for process in descendants_stopped(nodes.process.pid):
                node = node_of(process, nodes, raylets)
                if killed is None and node is not None:
                    killed = node
                    nodes.command(f"remove {node}")
                    continue
                with suppress(psutil.NoSuchProcess):
                    process.resume()
            time.sleep(0.05)
        code, _, err = finished(proc, timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        for process in descendants_stopped(nodes.process.pid):
            process.resume()
    assert killed is not None
    remote = Corpus(uri, storage_options=s3.options(), **models())  # type: ignore[arg-type]
    if code == 0:
        assert rows(remote) == rows(local)
        assert answers(remote, sorted(repos)) == answers(local, sorted(repos))
    else:
        assert err.strip().count("\n") == 0 or "Error" in err.strip().splitlines()[-1], err[-3000:]
        assert rows(remote) == before
    assert remote.verify()["verified"]
    nodes.command("add")
