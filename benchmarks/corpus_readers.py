"""Readers during corpus refreshes: four query processes against one refresher on one corpus (issue 42, item 3).

Usage:
    python -m benchmarks.corpus_readers [--seconds 60] [--idle-seconds 30] [--pause-ms 0] [--s3] [--work DIR]
        [--json OUT]

Three small synthetic repositories (Python and Go, :func:`make_repos`) are
built into a corpus with the real offline default (``codesearch corpus build
STORE PATH... --tier static``; with ``--s3`` the store is ``s3://`` on moto's
server, started here on 127.0.0.1 and named to every process by the ``AWS_*``
variables). Then, each in its own process:

- ``api-scoped`` and ``api-org``: ``GET /api/search`` of one ``codesearch serve
  --corpus STORE``, one repository at a time or across all of them;
- ``mcp-scoped`` and ``mcp-org``: the ``search`` tool of ``codesearch mcp
  --corpus STORE`` (each its own stdio server), through the ``mcp`` SDK's client;
- the refresher (after ``--idle-seconds`` of the readers alone, the idle
  latencies): for ``--seconds`` it toggles :data:`TOGGLED` files (two per
  repository, all at once) between two contents, A and B, and runs
  ``Corpus.refresh()``, again and again.

Each reader queries without pause (or ``--pause-ms`` between queries) and
records every answer: when it was asked and answered, the corpus version it
says it came from (the manifest's dataset ``versions``) and its hits. Then:

- ``errors``: answers that were an error (an HTTP status, a tool error, a lost
  session), per reader;
- ``inconsistent``: answers that do not trace to one version: no version, a
  version no manifest named, a hit that is not a row of the chunks table at
  that version (location and text), toggled files' hits of both states or of
  the other state than the version holds, or an answer that differs from the
  other answers to the same query at the same version (any reader);
- latency per reader and overall: p50 and p99 while idle and while the
  refresher runs, and ``p99_ratio`` (during / idle; the goal is at most 3).

Every query of the toggled files hits chunks of all of them, and each chunk of
a toggled file names its state (``alpha`` in A, ``beta`` in B, with other
lines), so a half-applied refresh, an answer mixing two versions, or one
labelled with another version than it read, is seen.

JSON keys: ``readers`` (per reader: ``answers``, ``errors``, ``inconsistent``,
``idle_n``, ``refresh_n``, ``idle_p50_ms``, ``idle_p99_ms``,
``refresh_p50_ms``, ``refresh_p99_ms``, ``p99_ratio``), the same figures
overall, ``versions_seen``, ``refreshes``, ``refresh_errors``,
``refresh_p50_s``, ``refresh_max_s``, ``states_refreshed``, ``error_samples``,
``inconsistent_samples``, ``store``, ``seconds``, ``idle_seconds``,
``pause_ms``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._harness import percentile, script_command, script_env, table, write_json
from benchmarks.serve_load import start_server, stop_server

READERS = ("api-scoped", "api-org", "mcp-scoped", "mcp-org")
STATES = {"A": "alpha", "B": "beta"}
"""Each toggled file's two contents, by the word that marks every chunk of each."""
K = 10

_PY_TOGGLED = '''\
"""Ledger reconciliation for {repo}, {word} revision {n}."""


def reconcile_ledger_{word}_{n}(entries):
    """Reconcile the ledger entries and return the {word} balance total."""
    total = 0
    for entry in entries:
        total += entry.amount  # {word} amount
{extra}    return total


def close_ledger_period_{word}_{n}(ledger, period):
    """Close the ledger period once its entries reconcile ({word})."""
    ledger.closed.append(period)
    return reconcile_ledger_{word}_{n}(ledger.entries)
'''
_GO_TOGGLED = '''\
package {repo}

// ReconcileLedger{Word}{n} reconciles the ledger entries and returns the {word} balance total.
func ReconcileLedger{Word}{n}(entries []Entry) int {{
    total := 0
    for _, entry := range entries {{
        total += entry.Amount // {word} amount
    }}
{extra}    return total
}}

// CloseLedgerPeriod{Word}{n} closes the ledger period once its entries reconcile ({word}).
func CloseLedgerPeriod{Word}{n}(ledger *Ledger, period int) int {{
    ledger.Closed = append(ledger.Closed, period)
    return ReconcileLedger{Word}{n}(ledger.Entries)
}}
'''
_FILLER_PY = {
    "http/session.py": '''\
class Session:
    """Keeps cookies and connection pools across requests."""

    def request(self, method, url, headers=None):
        """Send a request and follow redirects; a POST answered 303 becomes a GET."""
        response = self.adapter.send(method, url, headers or {{}})
        while response.is_redirect:
            method = "GET" if response.status == 303 else method
            response = self.adapter.send(method, response.location, headers or {{}})
        return response
''',
    "config/loader.py": '''\
import json


def load_config(path):
    """Parse the configuration file at path and fill in the defaults."""
    with open(path) as handle:
        data = json.load(handle)
    data.setdefault("timeout", 30)
    return data
''',
    "README.md": "# {repo}\n\nSessions, configuration and a ledger of payments.\n",
}
_FILLER_GO = {
    "router.go": '''\
package {repo}

// Router matches a request path to its handler.
type Router struct {{
    routes map[string]Handler
}}

// Handle registers the handler for a path pattern.
func (r *Router) Handle(pattern string, h Handler) {{
    r.routes[pattern] = h
}}

// ServeHTTP routes the request to the handler registered for its path.
func (r *Router) ServeHTTP(w ResponseWriter, req *Request) {{
    r.routes[req.Path].ServeHTTP(w, req)
}}
''',
    "middleware/logger.go": '''\
package middleware

// Logger logs the start and the end of every request.
func Logger(next Handler) Handler {{
    return next
}}
''',
    "README.md": "# {repo}\n\nA router for HTTP services, with a ledger of requests.\n",
}
REPOS = {"billing": "py", "payments": "py", "gateway": "go"}
"""The repositories: each has two toggled files (:data:`TOGGLED`) and a few others."""
TOGGLED = {repo: [f"ledger/reconcile_{n}.{'go' if lang == 'go' else 'py'}" for n in (1, 2)]
           for repo, lang in REPOS.items()}

ORG_QUERIES: list[dict[str, Any]] = [
    {"query": "reconcile the ledger entries balance total"},
    {"query": "close the ledger period"},
    {"query": "route the request to its handler"},
    {"query": "parse the configuration file defaults", "mode": "bm25"},
]
SCOPED_QUERIES: list[dict[str, Any]] = [
    {"query": q, "repo": repo} for repo in REPOS
    for q in ("reconcile the ledger entries balance total", "close the ledger period")
] + [{"query": "follow redirects of a request", "repo": "billing"},
     {"query": "logs every request", "repo": "gateway", "mode": "bm25"}]


# -- the repositories ------------------------------------------------------------------------------


def toggled_text(repo: str, path: str, state: str) -> str:
    """The content of toggled file ``path`` of ``repo`` in ``state`` (``A`` or ``B``): B has a line more, so its
    chunks' lines differ too."""
    word = STATES[state]
    n = path.rsplit("_", 1)[1].split(".", maxsplit=1)[0]
    if path.endswith(".go"):
        extra = "    total = total * 1 // beta check\n" if state == "B" else ""
        return _GO_TOGGLED.format(repo=repo, word=word, Word=word.title(), n=n, extra=extra)
    extra = "    total = round(total, 2)  # beta check\n" if state == "B" else ""
    return _PY_TOGGLED.format(repo=repo, word=word, n=n, extra=extra)


def write_state(repos: dict[str, Path], state: str) -> None:
    """Write every toggled file of ``repos`` in ``state``."""
    for repo, root in repos.items():
        for path in TOGGLED[repo]:
            (root / path).write_text(toggled_text(repo, path, state))


def make_repos(base: Path) -> dict[str, Path]:
    """The repositories of :data:`REPOS` under ``base``, their toggled files in state A, every file an hour old
    (a corpus does not trust an mtime within two seconds of a build)."""
    repos: dict[str, Path] = {}
    for repo, lang in REPOS.items():
        root = base / repo
        for path, text in (_FILLER_GO if lang == "go" else _FILLER_PY).items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text.format(repo=repo))
        (root / "ledger").mkdir(parents=True, exist_ok=True)
        repos[repo] = root
    write_state(repos, "A")
    when = time.time() - 3600
    for root in repos.values():
        for path in root.rglob("*"):
            os.utime(path, (when, when))
    return repos


def state_of(text: str) -> str | None:
    """The state a chunk's text is of (``A``, ``B``), or ``None`` for text of neither."""
    found = {state for state, word in STATES.items() if word in text.lower()}
    return found.pop() if len(found) == 1 else None


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# -- the store ------------------------------------------------------------------------------------


def start_moto() -> tuple[Any, dict[str, str]]:
    """moto's S3 server on 127.0.0.1 (a thread of this process) with bucket ``corpora``, and the ``AWS_*``
    variables that name it to every process started after (also set in this one)."""
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # a line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ALLOW_HTTP": "true"}
    os.environ.update(env)
    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"]).create_bucket(Bucket="corpora")
    return server, env


def storage_options() -> dict[str, str]:
    """Lance's options for the S3 server the ``AWS_*`` variables name (empty without one)."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return {}
    return {"aws_endpoint": endpoint, "allow_http": "true", "aws_access_key_id": os.environ["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": os.environ["AWS_SECRET_ACCESS_KEY"], "aws_region": os.environ["AWS_REGION"]}


def build(store: str, repos: dict[str, Path], env: dict[str, str]) -> None:
    """``codesearch corpus build STORE PATH... --tier static`` (the default model).

    Raises:
        RuntimeError: the command failed (with what it printed).
    """
    done = subprocess.run([sys.executable, "-m", "codesearch.faces.cli", "corpus", "build", store,
                           *(f"{name}={root}" for name, root in repos.items()), "--tier", "static", "-q"],
                          env=env, capture_output=True, text=True, timeout=900)
    if done.returncode:
        raise RuntimeError(f"corpus build failed: {done.stderr[-2000:]}")


# -- the readers (each its own process) --------------------------------------------------------------


def _record(began: float, error: str | None, answer: dict[str, Any] | None) -> dict[str, Any]:
    ended = time.monotonic()
    out: dict[str, Any] = {"t0": began, "t1": ended, "ms": (ended - began) * 1000, "error": error}
    if answer is not None:
        out["versions"] = answer.get("versions")
        out["hits"] = [[h["repo"], h["path"], h["start_line"], h["end_line"], text_key(h["text"]), state_of(h["text"])]
                       for h in answer["hits"]]
    return out


def _api_reader(queries: list[dict[str, Any]], base: str, out: Path, ready: Path, stop: Path, pause: float) -> None:
    from benchmarks.serve_load import Client

    def ask(n: int) -> dict[str, Any]:
        # A connection per query, as the 2026-12-05 runs measured: then a kept-alive connection stalled every
        # answer after the first by ~40 ms (serve's socket lacked TCP_NODELAY; fixed since).
        client = Client(base)
        began = time.monotonic()
        try:
            status, body = client.get("/api/search", q=queries[n]["query"], k=K,
                                      **{key: value for key, value in queries[n].items() if key != "query"})
        except (OSError, http.client.HTTPException) as exc:
            return {"q": n, **_record(began, f"{type(exc).__name__}: {exc}", None)}
        finally:
            client.close()
        if status != 200:
            return {"q": n, **_record(began, f"{status}: {body[:300]!r}", None)}
        return {"q": n, **_record(began, None, json.loads(body))}

    _loop(ask, len(queries), out, ready, stop, pause)


def _mcp_reader(queries: list[dict[str, Any]], store: str, out: Path, ready: Path, stop: Path, pause: float) -> None:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "codesearch.faces.cli", "mcp", "--corpus", store], env=dict(os.environ))

    async def session() -> None:
        with open(out.with_suffix(".server.log"), "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                records: list[dict[str, Any]] = []
                asked = 0
                while not stop.exists():
                    n = asked % len(queries)
                    began = time.monotonic()
                    try:
                        answer = await client.call_tool("search", {**queries[n], "k": K, "max_lines": 10_000})
                    except Exception as exc:  # a lost session: an error of this reader, recorded
                        records.append({"q": n, **_record(began, f"{type(exc).__name__}: {exc}", None)})
                        break
                    text = answer.content[0].text if answer.content else ""
                    records.append({"q": n, **(_record(began, f"tool error: {text[:300]}", None) if answer.is_error
                                               else _record(began, None, json.loads(text)))})
                    asked += 1
                    if asked == len(queries):
                        ready.touch()  # warmed up: every query answered once
                    if pause:
                        await anyio.sleep(pause)
                _write(out, records)

    anyio.run(session)


def _loop(ask: Any, count: int, out: Path, ready: Path, stop: Path, pause: float) -> None:
    records = []
    asked = 0
    while not stop.exists():
        records.append(ask(asked % count))
        asked += 1
        if asked == count:
            ready.touch()
        if pause:
            time.sleep(pause)
    _write(out, records)


def _write(out: Path, records: Iterable[dict[str, Any]]) -> None:
    with open(out, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")


def _refresher(store: str, repos: dict[str, Path], seconds: float, out: Path, go: Path) -> None:
    """Once ``go`` exists, toggle the files and refresh, again and again for ``seconds``; each refresh recorded in
    ``out``."""
    from codesearch.corpus import Corpus

    corpus = Corpus(store, storage_options=storage_options() or None)
    corpus.tiers.static_embedder  # noqa: B018 - loaded before the clock starts, as a long-running refresher has it
    out.with_suffix(".ready").touch()
    while not go.exists():
        time.sleep(0.01)
    state = "A"
    records = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        state = "B" if state == "A" else "A"
        began = time.monotonic()
        write_state(repos, state)
        edited = time.monotonic()
        error = None
        report: dict[str, Any] = {}
        try:
            found = corpus.refresh()
            report = {key: getattr(found, key) for key in ("changed_files", "inserted", "deleted")}
        except Exception as exc:  # recorded: a refresh that fails is a figure of the run
            error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        ended = time.monotonic()
        versions = corpus.store.manifest(fresh=True).versions
        records.append({"state": state, "t0": began, "edited": edited, "t1": ended, "error": error,
                        "versions": versions, **report})
    _write(out, records)


# -- the run ------------------------------------------------------------------------------------------


def run(store: str, repos: dict[str, Path], work: Path, *, seconds: float = 60.0, idle_seconds: float = 30.0,
        pause_ms: float = 0.0, env: dict[str, str] | None = None, start_timeout: float = 180.0) -> dict[str, Any]:
    """The four readers and the refresher on the corpus at ``store`` (built from ``repos``, its toggled files in
    state A); every answer and refresh recorded under ``work``; the figures of the module's JSON.

    Raises:
        RuntimeError: the server or a reader did not start within ``start_timeout`` seconds.
    """
    env = script_env({**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})
    work.mkdir(parents=True, exist_ok=True)
    stop, marks = work / "stop", {}
    stop.unlink(missing_ok=True)
    from codesearch.corpus.store import CorpusStore

    initial = CorpusStore(store, storage_options() or None).manifest(fresh=True).versions
    processes: dict[str, subprocess.Popen[Any]] = {}

    def start(name: str, base: str) -> None:
        (work / f"{name}.ready").unlink(missing_ok=True)
        processes[name] = subprocess.Popen([*script_command("corpus_readers"), "--role", name, "--store", store,
                                          "--base", base, "--work", str(work), "--pause-ms", str(pause_ms)],
                                         env=env, stderr=open(work / f"{name}.log", "w"))  # noqa: SIM115

    for name in READERS[2:]:  # the MCP readers start their servers while the HTTP server starts
        start(name, "")
    go = work / "go"
    go.unlink(missing_ok=True)
    (work / "refresher.ready").unlink(missing_ok=True)
    refresher = subprocess.Popen([*script_command("corpus_readers"), "--role", "refresher", "--store", store,
                                  "--work", str(work), "--seconds", str(seconds),
                                  "--repos", json.dumps({k: str(v) for k, v in repos.items()})],
                                 env=env, stderr=open(work / "refresher.log", "w"))  # noqa: SIM115
    processes["refresher"] = refresher
    try:
        server, base = start_server(["--corpus", store], start_timeout, env=env, log=work / "serve.log")
    except RuntimeError:
        for process in processes.values():
            stop_server(process, 20.0)
        raise
    try:
        for name in READERS[:2]:
            start(name, base)
        deadline = time.monotonic() + start_timeout
        while not all((work / f"{name}.ready").exists() for name in processes):
            gone = [name for name, p in processes.items() if p.poll() is not None]
            if gone or time.monotonic() > deadline:
                log = work / f"{(gone or READERS)[0]}.log"
                raise RuntimeError(f"readers {gone or 'not ready'}: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        marks["idle0"] = time.monotonic()
        time.sleep(idle_seconds)
        marks["idle1"] = time.monotonic()
        go.touch()
        code = refresher.wait(timeout=seconds + 600)
        marks["refresh1"] = time.monotonic()
        if code:
            raise RuntimeError(f"the refresher failed: {(work / 'refresher.log').read_text()[-2000:]}")
        stop.touch()
        codes = {name: p.wait(timeout=120) for name, p in processes.items()}
    finally:
        stop.touch()
        for process in processes.values():
            if process.poll() is None:
                stop_server(process, 20.0)
        stop_server(server, 20.0)
    refreshes = load_records(work / "refresher.jsonl")
    marks["refresh0"] = refreshes[0]["t0"] if refreshes else marks["idle1"]
    answers = {name: load_records(work / f"{name}.jsonl") for name in READERS}
    named = [initial, *(r["versions"] for r in refreshes if r["error"] is None)]
    checked = check_answers(answers, store, named)
    return summarise(answers, checked, refreshes, marks, codes, store=store, seconds=seconds,
                     idle_seconds=idle_seconds, pause_ms=pause_ms)


def load_records(path: Path) -> list[dict[str, Any]]:
    """The records of one reader or of the refresher (none when it wrote none)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def queries_of(reader: str) -> list[dict[str, Any]]:
    return SCOPED_QUERIES if reader.endswith("scoped") else ORG_QUERIES


def version_key(versions: dict[str, int]) -> str:
    return ",".join(f"{name.split('.')[0]}={v}" for name, v in sorted(versions.items()))


# -- the checks ------------------------------------------------------------------------------------


def rows_at(store: str, versions: dict[str, int]) -> tuple[dict[tuple[str, str, int, int], str], set[str | None]]:
    """The chunks table at the version ``versions`` names: each row's location and text key, and the states
    of the toggled files' rows (one, unless that version is itself half-applied)."""
    import lance

    chunks = lance.dataset(f"{store.rstrip('/')}/chunks.lance", version=versions["chunks.lance"],
                           storage_options=storage_options() or None)
    rows = chunks.to_table(columns=["repo", "path", "start_line", "end_line", "text"]).to_pylist()
    toggled = {(repo, path) for repo, paths in TOGGLED.items() for path in paths}
    located = {(r["repo"], r["path"], r["start_line"], r["end_line"]): text_key(r["text"]) for r in rows}
    return located, {state_of(r["text"]) for r in rows if (r["repo"], r["path"]) in toggled}


def check_answers(answers: dict[str, list[dict[str, Any]]], store: str,
                  named: Sequence[dict[str, int]]) -> dict[str, list[tuple[int, str]]]:
    """Each reader's inconsistent answers, as (index, why): with no version, of a version no manifest named,
    with a hit that is not a row of that version (location and text), with toggled files' hits of two states or
    of the other state than the version holds, or unlike the other answers to the same query at the same version.
    """
    named_keys = {version_key(v) for v in named}
    seen: dict[str, dict[str, int]] = {}
    for records in answers.values():
        for record in records:
            if record.get("versions"):
                seen.setdefault(version_key(record["versions"]), record["versions"])
    tables = {key: rows_at(store, versions) for key, versions in seen.items()}
    toggled = {(repo, path) for repo, paths in TOGGLED.items() for path in paths}
    bad: dict[str, list[tuple[int, str]]] = {name: [] for name in answers}
    groups: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for name, records in answers.items():
        queries = queries_of(name)
        for i, record in enumerate(records):
            if record["error"] is not None:
                continue
            if not record.get("versions"):
                bad[name].append((i, "no version"))
                continue
            key = version_key(record["versions"])
            located, states = tables[key]
            why = None
            hit_states = {state for repo, path, *_, state in record["hits"] if (repo, path) in toggled}
            if key not in named_keys:
                why = f"version {key} is one no manifest named"
            elif len(states) != 1 or None in states:
                why = f"version {key} holds toggled files of states {sorted(map(str, states))}"
            elif hit_states - states:
                why = f"hits of state {sorted(map(str, hit_states))} at version {key}, which holds {next(iter(states))}"
            else:
                for repo, path, start, end, text, _ in record["hits"]:
                    if located.get((repo, path, start, end)) != text:
                        why = f"{repo}/{path}:{start}-{end} is not a row of version {key}"
                        break
            if why:
                bad[name].append((i, why))
            else:
                groups[(json.dumps(queries[record["q"]], sort_keys=True), key)][json.dumps(record["hits"])] += 1
    # Answers to the same query at the same version, from any reader, are the same answer.
    majority = {group: counts.most_common(1)[0][0] for group, counts in groups.items()}
    for name, records in answers.items():
        queries = queries_of(name)
        flagged = {i for i, _ in bad[name]}
        for i, record in enumerate(records):
            if record["error"] is None and record.get("versions") and i not in flagged:
                group = (json.dumps(queries[record["q"]], sort_keys=True), version_key(record["versions"]))
                if json.dumps(record["hits"]) != majority[group]:
                    bad[name].append((i, f"unlike the other answers to {group[0]} at {group[1]}"))
    return bad


# -- the figures --------------------------------------------------------------------------------------


def _latencies(records: Sequence[dict[str, Any]], begin: float, end: float) -> list[float]:
    """The latencies of the answers asked and answered within [begin, end]."""
    return [r["ms"] for r in records if r["t0"] >= begin and r["t1"] <= end]


def _figures(idle: list[float], busy: list[float]) -> dict[str, Any]:
    def ms(values: list[float], q: float) -> float | None:
        return round(percentile(values, q), 2) if values else None

    out: dict[str, Any] = {"idle_n": len(idle), "refresh_n": len(busy),
                           "idle_p50_ms": ms(idle, 50), "idle_p99_ms": ms(idle, 99),
                           "refresh_p50_ms": ms(busy, 50), "refresh_p99_ms": ms(busy, 99)}
    out["p99_ratio"] = round(out["refresh_p99_ms"] / out["idle_p99_ms"], 2) \
        if out["idle_p99_ms"] and out["refresh_p99_ms"] is not None else None
    return out


def summarise(answers: dict[str, list[dict[str, Any]]], bad: dict[str, list[tuple[int, str]]],
              refreshes: list[dict[str, Any]], marks: dict[str, float], codes: dict[str, int],
              **facts: Any) -> dict[str, Any]:
    """The module's JSON from the records of a run."""
    readers: dict[str, Any] = {}
    idle_all: list[float] = []
    busy_all: list[float] = []
    error_samples: list[str] = []
    for name, records in answers.items():
        idle = _latencies(records, marks["idle0"], marks["idle1"])
        busy = _latencies(records, marks["refresh0"], marks["refresh1"])
        idle_all += idle
        busy_all += busy
        errors = [r["error"] for r in records if r["error"] is not None]
        if codes.get(name):
            errors.append(f"the reader exited with code {codes[name]}")
        error_samples += [f"{name}: {e}" for e in errors[:3]]
        readers[name] = {"answers": len(records), "errors": len(errors), "inconsistent": len(bad[name]),
                         **_figures(idle, busy)}
    versions = {version_key(r["versions"]) for records in answers.values() for r in records if r.get("versions")}
    done = [r for r in refreshes if r["error"] is None]
    took = sorted(r["t1"] - r["edited"] for r in done)
    states = Counter(r["state"] for r in done)
    return {
        "readers": readers,
        "answers": sum(r["answers"] for r in readers.values()),
        "errors": sum(r["errors"] for r in readers.values()),
        "inconsistent": sum(r["inconsistent"] for r in readers.values()),
        **_figures(idle_all, busy_all),
        "versions_seen": len(versions),
        "refreshes": len(done),
        "refresh_errors": len(refreshes) - len(done),
        "refresh_p50_s": round(percentile(took, 50), 3) if took else None,
        "refresh_max_s": round(took[-1], 3) if took else None,
        "states_refreshed": dict(states),
        "error_samples": error_samples[:10] + [f"refresher: {r['error']}" for r in refreshes if r["error"]][:5],
        "inconsistent_samples": [f"{name}: {why}" for name, found in bad.items() for _, why in found[:3]][:10],
        **facts,
    }


def print_table(result: dict[str, Any]) -> None:
    rows = [[name, r["answers"], r["errors"], r["inconsistent"], r["idle_p50_ms"], r["idle_p99_ms"],
             r["refresh_p50_ms"], r["refresh_p99_ms"], r["p99_ratio"]]
            for name, r in [*result["readers"].items(), ("all", result)]]
    print(table(["reader", "answers", "errors", "inconsistent", "idle p50 ms", "idle p99 ms", "refresh p50 ms",
                 "refresh p99 ms", "p99 ratio"], rows,
                title=f"{result['refreshes']} refreshes in {result['seconds']:g} s (p50 {result['refresh_p50_s']} s, "
                      f"max {result['refresh_max_s']} s, {result['refresh_errors']} failed); "
                      f"{result['versions_seen']} corpus versions answered; store {result['store']}"))
    for sample in result["error_samples"] + result["inconsistent_samples"]:
        print(f"  {sample}")


# -- the command ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the refresher runs")
    parser.add_argument("--idle-seconds", type=float, default=30.0, help="the readers alone first, this long")
    parser.add_argument("--pause-ms", type=float, default=0.0, help="each reader's pause between its queries")
    parser.add_argument("--s3", action="store_true", help="the store in a bucket of moto's server on 127.0.0.1")
    parser.add_argument("--work", type=Path, help="keep the repositories, store and records here")
    parser.add_argument("--json", dest="json_out", type=Path)
    parser.add_argument("--role", choices=[*READERS, "refresher"], help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    parser.add_argument("--repos", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "refresher":
        _refresher(args.store, {k: Path(v) for k, v in json.loads(args.repos).items()}, args.seconds,
                   args.work / "refresher.jsonl", args.work / "go")
        return 0
    if args.role:
        out, ready, stop = args.work / f"{args.role}.jsonl", args.work / f"{args.role}.ready", args.work / "stop"
        if args.role.startswith("api"):
            _api_reader(queries_of(args.role), args.base, out, ready, stop, args.pause_ms / 1000)
        else:
            _mcp_reader(queries_of(args.role), args.store, out, ready, stop, args.pause_ms / 1000)
        return 0
    with tempfile.TemporaryDirectory(prefix="cs-readers-") as scratch:
        work = args.work or Path(scratch)
        moto = None
        env: dict[str, str] = {}
        if args.s3:
            moto, env = start_moto()
            store = "s3://corpora/readers"
        else:
            store = str(work / "store")
        try:
            repos = make_repos(work / "repos")
            began = time.perf_counter()
            build(store, repos, script_env({**os.environ, "HF_HUB_OFFLINE": "1", **env}))
            print(f"built {store} in {time.perf_counter() - began:.1f} s", file=sys.stderr)
            result = run(store, repos, work / "records", seconds=args.seconds, idle_seconds=args.idle_seconds,
                         pause_ms=args.pause_ms, env=env)
        finally:
            if moto is not None:
                moto.stop()
    print_table(result)
    if args.json_out:
        write_json(args.json_out, result)
    return 0 if result["errors"] == result["inconsistent"] == result["refresh_errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
