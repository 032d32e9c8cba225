"""The command line: output, --json, one-line errors with exit code 2, --help everywhere."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from codesearch.chunking import BACKEND
from codesearch.faces.cli import main


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    return 1\n")
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\0\0")
    return tmp_path


def test_stats_json(repo: Path) -> None:
    result = CliRunner().invoke(main, ["stats", str(repo), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data == {
        "files_seen": 2,
        "files_indexed": 1,
        "bytes": len("def main():\n    return 1\n"),
        "chunks": 1,
        "skipped": {"binary": 1},
        "backend": BACKEND,
        "chunking": "definitions",
        "languages": {"python": {"files": 1, "chunks": 1, "chunks_with_symbols": 1, "fallbacks": {},
                                 "symbol_share": 1.0}},
    }


def test_stats_human(repo: Path) -> None:
    result = CliRunner().invoke(main, ["stats", str(repo)])
    assert result.exit_code == 0
    assert "files indexed  1" in result.output
    assert "skipped binary" in result.output
    assert f"chunker        {BACKEND}" in result.output


@pytest.mark.parametrize("target", ["missing", "file"])
def test_stats_bad_path_is_one_line_exit_2(repo: Path, target: str) -> None:
    path = repo / "nope" if target == "missing" else repo / "src" / "app.py"
    proc = subprocess.run(
        [sys.executable, "-m", "codesearch.faces.cli", "stats", str(path)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ")
    assert "Traceback" not in proc.stderr


def _commands(group) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return [[name] for name in group.commands]


@pytest.mark.parametrize("args", [[]] + _commands(main))
def test_every_command_has_help(args: list[str]) -> None:
    result = CliRunner().invoke(main, [*args, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output


def test_stats_requests_json(requests_corpus: Path) -> None:
    result = CliRunner().invoke(main, ["stats", str(requests_corpus), "--chunking", "lines", "--json"])
    data = json.loads(result.output)
    assert (data["files_seen"], data["files_indexed"], data["bytes"], data["chunks"]) == (129, 117, 625_261, 318)
    assert data["skipped"]["binary"] == 10


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "codesearch.faces.cli", *args], capture_output=True, text=True, timeout=300)


def _one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0]


def _usage_error(proc: subprocess.CompletedProcess[str], needle: str) -> None:
    """click's own usage errors: exit code 2 and one line that says what was wrong, as every error."""
    _one_line_error(proc, needle)


@pytest.fixture
def keyword_index(repo: Path, tmp_path: Path) -> Path:
    from codesearch import CodeSearch

    index_dir = tmp_path / "index"
    CodeSearch(repo, model=None, index_dir=index_dir).index()
    return index_dir


def test_search_bm25_json_on_keyword_index(repo: Path, keyword_index: Path) -> None:
    proc = _run("search", "main", str(repo), "--mode", "bm25", "--index-dir", str(keyword_index), "--json")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert (answer["query"], answer["tier"], answer["refreshed"]) == ("main", "keyword", 0)
    hits = answer["hits"]
    assert hits[0]["path"] == "src/app.py" and hits[0]["kind"] == "source"
    assert set(hits[0]) == {"path", "start_line", "end_line", "score", "kind", "text", "symbols", "location"}
    assert hits[0]["symbols"] == ["main"] and hits[0]["location"] == "src/app.py:1-2"
    human = _run("search", "main", str(repo), "--mode", "bm25", "--index-dir", str(keyword_index))
    assert "src/app.py:1-2" in human.stdout and "def main():" in human.stdout


def test_info_json(repo: Path, keyword_index: Path) -> None:
    proc = _run("info", str(repo), "--index-dir", str(keyword_index), "--json")
    facts = json.loads(proc.stdout)
    assert facts["chunks"] == 1 and facts["files"] == 1 and facts["index_dir"] == str(keyword_index)


def test_errors_are_one_line(repo: Path, keyword_index: Path, tmp_path: Path) -> None:
    _one_line_error(_run("search", "x", str(repo / "missing")), "does not exist")
    _one_line_error(_run("info", str(repo), "--index-dir", str(tmp_path / "none")), "codesearch index")
    _one_line_error(_run("search", "   ", str(repo), "--index-dir", str(keyword_index)), "query is empty")
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line_error(_run("index", str(empty), "--index-dir", str(tmp_path / "e")), "nothing to index")
    _one_line_error(_run("search", "main", str(repo), "--mode", "hybrid", "--index-dir", str(keyword_index)),
                    "keyword-only")


def test_damaged_index_is_one_line_error(repo: Path, keyword_index: Path) -> None:
    target = next(p for p in sorted(keyword_index.rglob("*.json")) if p.is_file())
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x20
    target.write_bytes(bytes(data))
    _one_line_error(_run("search", "main", str(repo), "--mode", "bm25", "--index-dir", str(keyword_index)))


def test_lock_held_is_one_line_error(repo: Path, keyword_index: Path) -> None:
    code = (
        "import time; from codesearch.index.store import IndexStore\n"
        f"with IndexStore({str(keyword_index)!r}).write_lock():\n    print('held', flush=True); time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        from codesearch import CodeSearch
        from codesearch.exceptions import IndexLockedError

        with pytest.raises(IndexLockedError, match=str(holder.pid)):
            CodeSearch(repo, model=None, index_dir=keyword_index, lock_timeout=0).index()
        proc = subprocess.run(
            [sys.executable, "-m", "codesearch.faces.cli", "index", str(repo), "--model", "none",
             "--index-dir", str(keyword_index), "--wait", "0.5"],
            capture_output=True, text=True, timeout=120,
        )
        _one_line_error(proc, "being written", str(holder.pid))
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_model_mismatch_and_info_model_with_the_real_model(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from conftest import HashingEmbedder

    from codesearch import CodeSearch

    assert _run("export", "minilm", "--quiet").returncode == 0  # warm the cache: no progress bar below
    tmp_path = tmp_path_factory.mktemp("indexes")  # outside the repository
    index_dir = tmp_path / "hashing-index"
    CodeSearch(repo, model=HashingEmbedder(dim=384), index_dir=index_dir).index()  # same size as MiniLM
    _one_line_error(_run("search", "main", str(repo), "--index-dir", str(index_dir)),
                    "'hashing'", "'minilm'", "re-index")
    facts = json.loads(_run("info", str(repo), "--index-dir", str(index_dir), "--model", "minilm", "--json").stdout)
    assert facts["model"] == "hashing" and facts["model_matches"] is False

    fresh = tmp_path / "minilm-index"
    (repo / "tests").mkdir()
    (repo / "tests" / "test_app.py").write_text("def test_main_runs():\n    main()\n")
    proc = _run("index", str(repo), "--index-dir", str(fresh), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"files", "chunks", "embedded", "reused", "removed", "seconds", "tier", "static_embedded",
                           "changed_files", "unread", "shared"}
    assert report["chunks"] == report["static_embedded"] == 2 and report["tier"] == "full"
    assert (report["embedded"], report["unread"]) == (1, 1)  # the test file is left to keywords and static vectors
    both = json.loads(_run("index", str(repo), "--index-dir", str(fresh), "--embed-tests", "--json").stdout)
    assert (both["embedded"], both["reused"], both["unread"]) == (1, 1, 0)
    answer = json.loads(_run("search", "main function", str(repo), "--index-dir", str(fresh), "--json",
                             "--no-source-first").stdout)
    assert answer["tier"] == "full" and answer["hits"][0]["path"] == "src/app.py"
    facts = json.loads(_run("info", str(repo), "--index-dir", str(fresh), "--model", "minilm", "--json").stdout)
    assert facts["model"] == "minilm" and facts["model_matches"] is True


def test_search_several_paths_labels_each_hit(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "main_loop.py").write_text("def main_loop():\n    return 2\n")
    for i in range(3):
        (other / "lib" / f"filler{i}.py").write_text(f"VALUE_{i} = {i}\n")
        (repo / "src" / f"filler{i}.py").write_text(f"VALUE_{i} = {i}\n")
    env_cache = tmp_path / "cache"
    proc = subprocess.run(
        [sys.executable, "-m", "codesearch.faces.cli", "search", "main", str(repo), str(other), "--model", "none",
         "--mode", "bm25", "--json"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "CODESEARCH_CACHE_DIR": str(env_cache)},
    )
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    roots = {hit["root"] for hit in answer["hits"]}
    assert roots == {str(repo.absolute()), str(other.absolute())}
    assert set(answer["tier"].values()) == {"keyword"}
    _one_line_error(_run("search", "main", str(repo), str(other), "--index-dir", str(tmp_path / "x")), "--index-dir")


def test_status_reports_changed_files_and_no_refresh_skips_them(repo: Path, keyword_index: Path) -> None:
    (repo / "src" / "added.py").write_text("def added_helper():\n    return 3\n")
    status = json.loads(_run("status", str(repo), "--model", "none", "--index-dir", str(keyword_index), "--json").stdout)
    assert status["changed_files"] == 1 and status["changes"]["added"] == ["src/added.py"]
    assert status["freshness"] == "stat" and "watch=False" in status["freshness_reason"]  # one-shot: no watcher
    stale = json.loads(_run("search", "added_helper", str(repo), "--model", "none", "--mode", "bm25",
                            "--index-dir", str(keyword_index), "--no-refresh", "--json").stdout)
    assert stale["refreshed"] == 0 and all(h["path"] != "src/added.py" for h in stale["hits"])
    fresh = json.loads(_run("search", "added_helper", str(repo), "--model", "none", "--mode", "bm25",
                            "--index-dir", str(keyword_index), "--json").stdout)
    assert fresh["refreshed"] == 1 and fresh["hits"][0]["path"] == "src/added.py"


def test_related_errors_are_one_line(repo: Path, keyword_index: Path) -> None:
    base = ["--model", "none", "--index-dir", str(keyword_index)]
    _one_line_error(_run("related", "src/app.py", str(repo), *base), "PATH:LINE")
    _one_line_error(_run("related", "src/nope.py:1", str(repo), *base), "not indexed")
    _one_line_error(_run("related", "src/app.py:1", str(repo), *base), "keyword-only")


@pytest.mark.slow
def test_related_and_a_first_answer_from_the_static_tier(repo: Path, tmp_path: Path) -> None:
    (repo / "src" / "more.py").write_text("def helper():\n    return main() + 1\n")
    index_dir = tmp_path / "static-index"
    answer = json.loads(_run("search", "main function", str(repo), "--index-dir", str(index_dir), "--json").stdout)
    assert answer["tier"] == "static" and answer["hits"]
    related = json.loads(_run("related", "src/app.py:1", str(repo), "--index-dir", str(index_dir), "--json").stdout)
    assert [h["path"] for h in related["hits"]] == ["src/more.py"]
    human = _run("search", "main function", str(repo), "--index-dir", str(index_dir))
    assert "static tier" in human.stderr and "codesearch index" in human.stderr


# -- navigation, budgets, scope options, read-only, agent set-up --------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    """A small project of every kind, and its keyword index."""
    from conftest import SESSIONS, UTILS

    from codesearch import CodeSearch

    root = tmp_path / "project"
    for folder in ("src/pkg", "tests", "docs"):
        (root / folder).mkdir(parents=True)
    (root / "src" / "pkg" / "sessions.py").write_text(SESSIONS)
    (root / "src" / "pkg" / "utils.py").write_text(UTILS)
    (root / "tests" / "test_sessions.py").write_text(
        "from pkg.sessions import Session\n\n\ndef test_strip_auth():\n"
        "    assert Session().should_strip_auth('http://a', 'http://b')\n")
    (root / "docs" / "auth.md").write_text("# Auth\n\nThe session strips the auth header on redirect.\n")
    (root / "setup.cfg").write_text("[metadata]\nname = session-auth\n")
    index_dir = tmp_path / "project-index"
    CodeSearch(root, model=None, index_dir=index_dir).index()
    return root, index_dir


def _keyword(*args: str) -> list[str]:
    return ["--model", "none", *args]


def _paths(root: Path, index_dir: Path, query: str, *options: str) -> list[str]:
    proc = _run("search", query, str(root), *_keyword("--mode", "bm25", "--index-dir", str(index_dir), "-k", "20",
                                                      "--json", *options))
    assert proc.returncode == 0, proc.stderr
    return [hit["path"] for hit in json.loads(proc.stdout)["hits"]]


def test_search_scope_include_exclude_kind_no_tests_and_no_docs(project: tuple[Path, Path]) -> None:
    root, index_dir = project
    assert set(_paths(root, index_dir, "session auth")) == {"src/pkg/sessions.py", "src/pkg/utils.py",
                                                            "tests/test_sessions.py", "docs/auth.md", "setup.cfg"}
    assert set(_paths(root, index_dir, "session auth", "--scope", "src/")) <= {"src/pkg/sessions.py", "src/pkg/utils.py"}
    assert _paths(root, index_dir, "session auth", "--include", "*.md") == ["docs/auth.md"]
    assert set(_paths(root, index_dir, "session auth", "--include", "*.md", "--include", "*.cfg")) == {"docs/auth.md",
                                                                                                  "setup.cfg"}
    assert "tests/test_sessions.py" not in _paths(root, index_dir, "session auth", "--exclude", "tests/")
    assert _paths(root, index_dir, "session auth", "--kind", "test") == ["tests/test_sessions.py"]
    assert set(_paths(root, index_dir, "session auth", "--kind", "doc", "--kind", "config")) == {"docs/auth.md",
                                                                                             "setup.cfg"}
    no_tests = _paths(root, index_dir, "session auth", "--no-tests")
    assert "tests/test_sessions.py" not in no_tests and "docs/auth.md" in no_tests
    neither = _paths(root, index_dir, "session auth", "--no-tests", "--no-docs")
    assert "docs/auth.md" not in neither and "tests/test_sessions.py" not in neither and neither


def test_an_empty_search_says_why_on_stderr_and_in_the_json(project: tuple[Path, Path]) -> None:
    root, index_dir = project
    base = _keyword("--mode", "bm25", "--index-dir", str(index_dir))
    human = _run("search", "session", str(root), *base, "--scope", "nowhere")
    assert human.returncode == 0 and "no hits" in human.stdout
    assert "(no indexed file under 'nowhere' (no file there on disk either))" in human.stderr
    answer = json.loads(_run("search", "quagga", str(root), *base, "--json").stdout)
    assert answer["hits"] == [] and answer["note"] == "no word of the query (quagga) occurs in the indexed files"
    assert "note" not in json.loads(_run("search", "session", str(root), *base, "--json").stdout)


def test_def_and_refs(project: tuple[Path, Path]) -> None:
    root, index_dir = project
    base = _keyword("--index-dir", str(index_dir))
    found = json.loads(_run("def", "Session.should_strip_auth", str(root), *base, "--json").stdout)
    assert [(h["path"], h["defines"]) for h in found["hits"]] == [("src/pkg/sessions.py", "Session.should_strip_auth")]
    assert found["name"] == "Session.should_strip_auth" and found["capped"] is False
    human = _run("def", "super_len", str(root), *base, "--lines", "1")
    assert human.returncode == 0 and "src/pkg/utils.py:1-" in human.stdout and "defines super_len" in human.stdout
    missing = _run("def", "super_ln", str(root), *base)
    assert missing.returncode == 0 and missing.stdout == ""
    assert "no symbol named 'super_ln'" in missing.stderr and "closest names: super_len" in missing.stderr

    refs = _run("refs", "should_strip_auth", str(root), *base)
    assert refs.returncode == 0, refs.stderr
    assert refs.stdout.splitlines() == [
        "src/pkg/sessions.py:11: def should_strip_auth(self, old_url, new_url):  (defines Session.should_strip_auth)",
        "tests/test_sessions.py:5: assert Session().should_strip_auth('http://a', 'http://b')",
    ]
    assert "textual" in refs.stderr
    data = json.loads(_run("refs", "Session", str(root), *base, "-k", "1", "--json", "--compact").stdout)
    assert data["textual"] is True and data["capped"] is True and set(data["hits"][0]) >= {"location", "line", "lines"}
    _one_line_error(_run("refs", "+=", str(root), *base), "identifier")
    _usage_error(_run("def", "x", str(root), *base, "--max-tokens", "0"), "'--max-tokens': 0 is not in the range x>=1")


def test_max_tokens_keeps_the_printed_json_within_the_budget(project: tuple[Path, Path]) -> None:
    from codesearch.faces.answers import estimate_tokens

    root, index_dir = project
    base = _keyword("--mode", "bm25", "--index-dir", str(index_dir), "--json")
    whole = _run("search", "session auth redirect", str(root), *base)
    assert estimate_tokens(whole.stdout.strip()) > 300
    for budget in ("150", "300", "2000"):
        proc = _run("search", "session auth redirect", str(root), *base, "--max-tokens", budget)
        answer = json.loads(proc.stdout)
        assert estimate_tokens(proc.stdout.strip()) <= int(budget) == answer["max_tokens"]
    assert answer["trimmed"] == answer["dropped"] == 0
    small = json.loads(_run("search", "session auth redirect", str(root), *base, "--max-tokens", "150").stdout)
    assert small["trimmed"] + small["dropped"] > 0
    human = _run("search", "session auth redirect", str(root), *base[:-1], "--max-tokens", "150")
    assert "left out to fit 150 tokens" in human.stderr
    compact = json.loads(_run("search", "session auth", str(root), *base, "--compact").stdout)
    assert set(compact["hits"][0]) == {"location", "symbols", "line"}
    _one_line_error(_run("search", "session", str(root), *base, "--max-tokens", "10"), "below the smallest answer")


def test_read_only_search_and_status_write_nothing(project: tuple[Path, Path]) -> None:
    root, index_dir = project
    (index_dir / "LOCK").unlink()
    before = {p: p.read_bytes() for p in index_dir.rglob("*") if p.is_file()}
    (root / "src" / "pkg" / "zoo.py").write_text("def zebra_crossing():\n    return 'stripes'\n")
    found = _run("search", "zebra_crossing", str(root), *_keyword("--mode", "bm25", "--index-dir", str(index_dir),
                                                                  "--read-only", "--json"))
    answer = json.loads(found.stdout)
    assert answer["hits"][0]["path"] == "src/pkg/zoo.py" and answer["refreshed"] == 1
    status = json.loads(_run("status", str(root), *_keyword("--index-dir", str(index_dir), "--read-only", "--json")).stdout)
    assert status["read_only"] is True and status["changed_files"] == 1
    assert {p: p.read_bytes() for p in index_dir.rglob("*") if p.is_file()} == before
    _usage_error(_run("index", str(root), *_keyword("--index-dir", str(index_dir)), "--read-only"), "No such option")


def test_fp32_and_static_only_reach_the_api(project: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    from conftest import HashingEmbedder

    import codesearch.search as search_module

    root, index_dir = project
    real = search_module.CodeSearch
    seen: list[dict[str, object]] = []

    def recording(path, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(kwargs)
        kwargs.update(model=HashingEmbedder(name="dense"), static=HashingEmbedder(name="dense", dim=64, salt="s"))
        return real(path, **kwargs)

    monkeypatch.setattr(search_module, "CodeSearch", recording)
    fresh = index_dir.parent / "two-tier"
    static = CliRunner().invoke(main, ["index", str(root), "--index-dir", str(fresh), "--static-only", "--json", "--fp32"])
    assert static.exit_code == 0, static.output
    report = json.loads(static.output)
    assert (report["tier"], report["embedded"], report["static_embedded"]) == ("static", 0, report["chunks"])
    assert seen[-1]["int8"] is False
    full = CliRunner().invoke(main, ["index", str(root), "--index-dir", str(fresh), "--json"])
    assert json.loads(full.output)["tier"] == "full" and seen[-1]["int8"] is True


def test_export_passes_out_and_int8(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from types import SimpleNamespace

    import codesearch.embedding.export as export_module

    seen: list[dict[str, object]] = []

    def fake_export(model, **kwargs):  # type: ignore[no-untyped-def]
        seen.append({"model": model, **kwargs})
        return SimpleNamespace(spec=SimpleNamespace(name=model), path=kwargs["out"] or "cache", int8_used=kwargs["int8"],
                               gate={"passed": True}, cached=False, seconds=1.234)

    monkeypatch.setattr(export_module, "export_model", fake_export)
    result = CliRunner().invoke(main, ["export", "minilm", "--int8", "--out", str(tmp_path / "out"), "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert seen == [{"model": "minilm", "int8": True, "out": str(tmp_path / "out"), "progress": False}]
    assert json.loads(result.output) == {"model": "minilm", "path": str(tmp_path / "out"), "int8_used": True,
                                         "gate": {"passed": True}, "cached": False, "seconds": 1.23}
    plain = CliRunner().invoke(main, ["export", "minilm", "--json"])
    assert plain.exit_code == 0 and seen[-1] == {"model": "minilm", "int8": False, "out": None, "progress": False}


def test_agent_setup_prints_registrations_and_the_guide_and_writes_nothing(project: tuple[Path, Path]) -> None:
    root, index_dir = project
    before = sorted(p for p in root.parent.rglob("*"))
    text = CliRunner().invoke(main, ["agent-setup", str(root)])
    assert text.exit_code == 0
    assert "claude mcp add codesearch -- " in text.output and f"mcp {root.resolve()}" in text.output
    assert "find_definition" in text.output and "find_references" in text.output and "grep" in text.output
    cursor = CliRunner().invoke(main, ["agent-setup", str(root), "--client", "cursor"])
    block = cursor.output[cursor.output.index("{"):]
    server = json.loads(block)["mcpServers"]["codesearch"]
    assert server["args"] == ["mcp", str(root.resolve())] and "guide" not in cursor.output.lower()
    shared = json.loads(CliRunner().invoke(main, ["agent-setup", str(root), "--index-dir", str(index_dir),
                                                  "--read-only", "--json"]).output)
    assert shared["command"][-4:] == [str(root.resolve()), "--index-dir", str(index_dir.resolve()), "--read-only"]
    assert set(shared["clients"]) == {"claude-code", "claude-desktop", "cursor", "vscode", "codex"}
    assert "[mcp_servers.codesearch]" in shared["clients"]["codex"]["text"] and "AGENTS.md" not in shared["guide"]
    assert f"answers for {root.resolve()} and the folders under them" in shared["serves"]
    assert f"answers for {root.resolve()} and the folders under them" in text.output and "--allow-any-repo" in text.output
    anywhere = json.loads(CliRunner().invoke(main, ["agent-setup", str(root), "--allow-any-repo", "--json"]).output)
    assert anywhere["command"][-1] == "--allow-any-repo" and "any folder this user can read" in anywhere["serves"]
    assert sorted(p for p in root.parent.rglob("*")) == before


# -- issue 38: one line for every error, escaped names in text, exact JSON ---------------------------------


@pytest.mark.parametrize("args", [
    ["search", "x", "REPO", "-k", "0"],
    ["search", "x", "REPO", "--max-tokens", "0"],
    ["search", "x", "REPO", "--lines", "x"],
    ["search", "x", "REPO", "--index-dir", "FILE"],
    ["def", "x", "REPO", "--index-dir", "FILE"],
    ["search", "x", "REPO", "--no-such-option"],
    ["search"],
    ["refs", "x", "REPO", "-k", "many"],
    ["corpus", "search", "x"],
    ["nonsense"],
])
def test_usage_errors_are_one_line_with_exit_code_2(repo: Path, args: list[str]) -> None:
    """Issue 38 row 10: click printed three lines (Usage / Try / Error)."""
    args = [str(repo) if a == "REPO" else str(repo / "src" / "app.py") if a == "FILE" else a for a in args]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and "--help" in lines[0], result.stderr
    assert result.stdout == ""


def test_usage_errors_are_one_line_from_the_command_too(repo: Path) -> None:
    _one_line_error(_run("search", "x", str(repo), "-k", "0"), "'-k': 0 is not in the range x>=1")
    top = CliRunner().invoke(main, [])
    assert "Usage:" in top.output and "Commands:" in top.output  # no command: the help, as before


def test_a_bad_glob_is_one_line_with_the_librarys_message(repo: Path, keyword_index: Path) -> None:
    """Issue 38 row 8: '[z-a]' gave a 68-line traceback."""
    from codesearch.scope import Scope

    for option in ("--include", "--exclude"):
        proc = _run("search", "main", str(repo), "--mode", "bm25", "--model", "none", "--index-dir", str(keyword_index),
                    option, "[z-a]")
        _one_line_error(proc, "'[z-a]'")
        with pytest.raises(ValueError) as caught:
            Scope.of(**{option[2:]: ["[z-a]"]})
        assert proc.stderr.strip() == f"Error: {caught.value}"


FORGED = "e.py\nreal.py:99: FORGED"


@pytest.fixture
def hostile_names(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose file names hold a newline (forging a result line), a terminal escape and a byte that is
    not UTF-8, with its keyword index."""
    from codesearch import CodeSearch

    root = tmp_path / "host\x1bile"
    root.mkdir()
    (root / FORGED).write_text("def forged_name():\n    return 1\n")
    (root / "c\x1b[2Jd.py").write_text("from e import forged_name\n\nforged_name()\n")
    with open(os.fsencode(root) + b"/bad\xffname.py", "w") as handle:
        handle.write("def undecodable_name():\n    return forged_name()\n")
    index_dir = tmp_path / "hostile-index"
    CodeSearch(root, model=None, index_dir=index_dir).index()
    return root, index_dir


def _strict(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with a strict UTF-8 stdout and stderr: a raw surrogate escape could not be written."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    return subprocess.run([sys.executable, "-m", "codesearch.faces.cli", *args], capture_output=True, text=True,
                          timeout=300, env=env, encoding="utf-8", errors="strict")


def test_text_output_escapes_control_characters_in_paths_and_json_keeps_them_exact(
        hostile_names: tuple[Path, Path]) -> None:
    """Issue 38 row 12: a file named 'e.py\\nreal.py:99: FORGED' forged a result line of `refs`; with --model none a
    path holding a byte that is not UTF-8 could not be printed at all under a strict UTF-8 stdout."""
    root, index_dir = hostile_names
    base = ["--model", "none", "--index-dir", str(index_dir)]
    shown = {"e.py\\nreal.py:99: FORGED", "c\\x1b[2Jd.py", "bad\\xffname.py"}
    exact = {FORGED, "c\x1b[2Jd.py", "bad\udcffname.py"}
    texts = {
        "refs": _strict("refs", "forged_name", str(root), *base),
        "search": _strict("search", "forged_name undecodable_name", str(root), *base, "--mode", "bm25"),
        "def": _strict("def", "undecodable_name", str(root), *base),
        "status": _strict("status", str(root), *base),
    }
    for command, proc in texts.items():
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, (command, proc.stderr)
        assert not any(ch in proc.stdout + proc.stderr for ch in "\x1b\r"), command
        assert not any(line.startswith("real.py") for line in proc.stdout.splitlines()), command
    refs = texts["refs"].stdout.splitlines()
    assert {line.split(":")[0] for line in refs} == {"e.py\\nreal.py", "c\\x1b[2Jd.py", "bad\\xffname.py"}
    assert all(any(line.startswith(name + ":") for name in shown) for line in refs), refs
    assert "bad\\xffname.py:1-" in texts["def"].stdout
    ranked = [line for line in texts["search"].stdout.splitlines() if re.match(r"\s*\d+\. ", line)]
    assert len(ranked) == 3 and all(any(f". {name}:" in line for name in shown) for line in ranked), ranked
    assert "host\\x1bile" in texts["status"].stdout
    for command in (["refs", "forged_name"], ["search", "forged_name undecodable_name", "--mode", "bm25"]):
        proc = _strict(*command[:2], str(root), *base, *command[2:], "--json")
        assert proc.returncode == 0, proc.stderr
        assert {hit["path"] for hit in json.loads(proc.stdout)["hits"]} == exact, command


def test_smaller_rough_edges(repo: Path, keyword_index: Path, tmp_path: Path) -> None:
    """Issue 38's smaller items: each a true one-line message with exit code 2 (or a true note)."""
    base = ["--index-dir", str(keyword_index)]
    empty_model = _run("search", "main", str(repo), "--model", "", *base)
    _one_line_error(empty_model, "--model")
    assert "Error:  is" not in empty_model.stderr
    _one_line_error(_run("search", "main", str(repo), "--index-dir", "/dev/null"), "/dev/null", "not a folder")
    _one_line_error(_run("agent-setup", str(tmp_path / "nonexistent")), "does not exist")
    long_word = json.loads(_run("search", "a" * 70, str(repo), "--model", "none", "--mode", "bm25", *base,
                                "--json").stdout)
    assert long_word["hits"] == [] and "longer than 64" in long_word["note"] and "holds no word" not in long_word["note"]
    scoped = json.loads(_run("search", "main", str(repo), "--model", "none", "--mode", "bm25", *base,
                             "--scope", str(repo / "src"), "--json").stdout)
    assert [hit["path"] for hit in scoped["hits"]] == ["src/app.py"]
    _one_line_error(_run("search", "main", str(repo), "--model", "none", "--mode", "bm25", *base,
                         "--scope", str(tmp_path.parent)), "outside the repository")
    huge = _run("def", "x" * 100_000, str(repo), "--model", "none", *base)
    _one_line_error(huge, "100,000 characters")
    assert len(huge.stderr) < 500


# -- issue 40: options defined once, checks from the library ----------------------------------------


def _command(*path: str) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def test_every_search_like_command_takes_the_same_scope_options() -> None:
    """`search` and `corpus search` narrow a search alike: the same options, with the same help (defined once)."""
    scope = ("scope", "include", "exclude", "kinds", "no_tests", "no_docs")

    def options(*path: str) -> dict[str, tuple[tuple[str, ...], str | None]]:
        return {p.name: (tuple(p.opts), getattr(p, "help", None)) for p in _command(*path).params
                if p.name in scope}

    assert set(options("search")) == set(scope)
    assert options("search") == options("corpus", "search")
    for shared in ("k", "mode", "preview_lines", "max_tokens", "compact", "as_json"):
        assert shared in {p.name for p in _command("corpus", "search").params}, shared


def test_the_query_and_k_are_checked_by_the_library_once_for_every_face(tmp_path: Path) -> None:
    """An empty query is refused with the library's own message (types.check_search), by a search of several paths
    and by a corpus search alike, before anything is opened."""
    from codesearch import MultiSearch
    from codesearch.types import check_search

    with pytest.raises(ValueError) as expected:
        check_search("  ", 10, "hybrid")
    several = _run("search", "  ", str(tmp_path), str(tmp_path))
    _one_line_error(several, str(expected.value))
    with pytest.raises(ValueError, match="k must be at least 1"):
        MultiSearch([tmp_path], model=None).search("x", k=0)
    pytest.importorskip("pyarrow")
    refused = _run("corpus", "search", "  ", str(tmp_path / "no-corpus"))
    _one_line_error(refused, str(expected.value))
    assert not (tmp_path / "no-corpus").exists()
