"""Smoke tests: the benchmark scripts' code paths on a tiny corpus (never their timings)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import chunker_speed  # noqa: E402
import quality  # noqa: E402
import seed_requests  # noqa: E402

TARGETS = {
    "sessions.py": ["should_strip_auth", "rebuild_method", "resolve_redirects"],
    "utils.py": ["rewind_body", "super_len", "should_bypass_proxies", "atomic_open", "guess_json_utf",
                 "get_netrc_auth"],
    "auth.py": ["handle_401"],
    "models.py": ["raise_for_status"],
    "exceptions.py": [],
}


@pytest.fixture
def tiny_requests(tmp_path: Path) -> Path:
    root = tmp_path / "requests"
    pkg = root / "src" / "requests"
    pkg.mkdir(parents=True)
    for name, functions in TARGETS.items():
        body = "\n\n".join(f"def {f}(value):\n    \"\"\"Handle the {f.replace('_', ' ')} step.\"\"\"\n    return value"
                           for f in functions)
        (pkg / name).write_text(body + "\n")
    (pkg / "exceptions.py").write_text("class UnrewindableBodyError(Exception):\n    pass\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_utils.py").write_text("def test_super_len():\n    assert super_len('password') == 8\n")
    (root / "README.md").write_text("Send a GET, loop, start, big, local, half, bytes, login, hash.\n")
    return root


def test_seed_requests_runs_keyword_only(tiny_requests: Path, tmp_path: Path) -> None:
    out, md, png = tmp_path / "seed.json", tmp_path / "seed.md", tmp_path / "seed.png"
    args = ["--repo", str(tiny_requests), "--models", "", "--json", str(out), "--markdown", str(md)]
    pytest.importorskip("matplotlib")
    assert seed_requests.main([*args, "--plot", str(png)]) == 0
    data = json.loads(out.read_text())
    assert data["corpus"]["files_indexed"] == 7 and data["corpus_matches"] is False
    assert len(data["grep"]) == 12 and data["grep"][0]["word_count"] == 1  # "password" appears once
    ranks = data["ranks"]["whole"]
    assert [row["target"] for row in ranks] == [q.target for q in seed_requests.QUESTIONS]
    assert all(isinstance(row["bm25"], int) or row["bm25"] is None for row in ranks)
    assert ranks[-1]["bm25"] == 1  # UnrewindableBodyError: its definition first
    assert set(data["summary"]["whole"]) == {"bm25"}
    assert "## Top 5 / top 10" in md.read_text()
    assert png.stat().st_size > 1000


def test_seed_requests_article_mode_counts_line_chunks(tiny_requests: Path, tmp_path: Path) -> None:
    out = tmp_path / "seed.json"
    assert seed_requests.main(["--repo", str(tiny_requests), "--models", "", "--mode", "article",
                               "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["chunks_ranked"] == data["corpus"]["chunks"]


def test_grep_count_is_matching_lines_case_insensitive() -> None:
    assert seed_requests.grep_count(["GET get\nnothing\r\nTarget"], "get") == 2


def test_chunker_speed_runs(tiny_requests: Path, tmp_path: Path) -> None:
    pytest.importorskip("codesearch._chunker")
    out = tmp_path / "speed.json"
    assert chunker_speed.main(["--corpus", str(tiny_requests), "--min-mb", "0.0001", "--repeat", "1",
                               "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert set(data) >= {"mb", "cython_mb_s", "python_mb_s", "speedup", "identical", "max_speedup"}
    assert data["identical"] is True
    assert data["max_speedup"] > 0


@pytest.mark.slow
def test_quality_runs_both_configs_side_by_side(tiny_requests: Path, tmp_path: Path, minilm_embedder) -> None:
    corpora = tmp_path / "corpora"
    (corpora / "toy").mkdir(parents=True)
    (corpora / "toy" / "lib.py").write_text(
        "def retry_with_backoff(call):\n    \"\"\"Call again after waiting longer each time.\"\"\"\n    return call()\n\n\n"
        "def parse_config(path):\n    \"\"\"Read settings from an ini file.\"\"\"\n    return {}\n"
    )
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({
        "description": "toy",
        "corpora": {"toy": {"folder": "toy"}},
        "questions": [
            {"id": "toy-01", "corpus": "toy", "kind": "behaviour", "query": "wait longer before trying again",
             "answers": [{"path": "lib.py", "symbol": "retry_with_backoff", "line": 1}]},
            {"id": "toy-02", "corpus": "toy", "kind": "identifier", "query": "parse_config",
             "answers": [{"path": "lib.py", "symbol": "parse_config", "line": 6}]},
        ],
    }))
    out = tmp_path / "quality.json"
    assert quality.main(["--questions", str(questions), "--corpora", str(corpora), "--requests", str(tiny_requests),
                         "--index-dir", str(tmp_path / "indexes"), "--json", str(out)]) == 0
    data = json.loads(out.read_text())["models"]["minilm"]
    assert set(data["configs"]) == {"article", "default"}
    for config in data["configs"].values():
        assert set(config["heldout"]) == {"bm25", "dense", "hybrid"}
        assert config["index_s"] > 0 and config["query_p50_ms"] > 0 and config["chunks"] >= 2
        assert config["requests"]["hybrid"]["questions"] == 10
    assert data["configs"]["default"]["heldout"]["bm25"]["hit@1"] >= 0.5  # parse_config: its definition first
    assert "ndcg10_gain_hybrid" in data


# --- the peer benchmark's data and metric -------------------------------------------------

import peer_data  # noqa: E402


def test_ndcg_matches_semble_definition_by_hand() -> None:
    t = peer_data.Target
    indexed = [("src/a.py", 1, 10), ("src/b.py", 1, 10), ("src/c.py", 1, 10), ("src/a.py", 11, 20)]
    # One target found at rank 2: 1/log2(3) over the ideal 1.
    assert peer_data.ndcg_at_10([("src/b.py", 1, 10), ("src/a.py", 1, 10)], [t("a.py")], indexed) == pytest.approx(
        1 / 1.5849625007211563)
    # Two targets, one chunk matching both counts once; the ideal is over the two findable targets.
    both = [t("src/a.py"), t("a.py", 5, 6)]
    score = peer_data.ndcg_at_10([("src/a.py", 1, 10)], both, indexed)
    assert score == pytest.approx(1 / (1 + 1 / 1.5849625007211563))
    # A target with lines matches only overlapping chunks; one no chunk can match leaves the ideal.
    assert peer_data.ndcg_at_10([("src/a.py", 1, 10)], [t("a.py", 12, 14)], indexed) == 0.0
    assert peer_data.ndcg_at_10([("src/a.py", 1, 10)], [t("src/a.py"), t("gone.py")], indexed) == 1.0
    assert peer_data.ndcg_at_10([], [t("gone.py")], indexed) == 0.0
    assert peer_data.path_matches("/abs/root/src/a.py", "src/a.py") and not peer_data.path_matches("xa.py", "a.py")


def test_load_repos_refuses_the_held_out_repositories(tmp_path: Path) -> None:
    (tmp_path / "annotations").mkdir()
    (tmp_path / "repos.json").write_text(json.dumps([
        {"name": "chi", "language": "go", "url": "https://github.com/go-chi/chi.git", "revision": "abc"},
        {"name": "flask", "language": "python", "url": "https://github.com/pallets/flask.git", "revision": "def"}]))
    (tmp_path / "annotations" / "chi.json").write_text(json.dumps([
        {"query": "Mux", "relevant": ["mux.go"], "secondary": [{"path": "tree.go", "start_line": 1, "end_line": 9}]},
        {"query": "how routes match", "relevant": ["tree.go"]}]))
    (repo,) = peer_data.load_repos(tmp_path, ["chi"])
    assert [t.category for t in repo.tasks] == ["symbol", "architecture"]
    assert repo.tasks[0].targets == (peer_data.Target("mux.go"), peer_data.Target("tree.go", 1, 9))
    with pytest.raises(SystemExit, match="independent check"):
        peer_data.load_repos(tmp_path, ["flask"])


def test_export_trees_takes_the_pin_or_records_the_newest_commit(tmp_path: Path) -> None:
    import subprocess

    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "a.go").write_text("package a\n")
    (work / "top.go").write_text("package top\n")
    git = ["git", "-C", str(work), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.check_output([*git, "rev-parse", "HEAD"], text=True).strip()
    mirrors = tmp_path / "mirrors" / "acme+lib"
    mirrors.mkdir(parents=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirrors / "repo")], check=True)
    pinned = peer_data.Repo("lib", "go", "https://github.com/acme/lib.git", head, "sub")
    missing = peer_data.Repo("lib2", "go", "https://github.com/acme/lib.git", "0" * 40, None)
    peer_data.export_trees([pinned, missing], tmp_path / "mirrors", tmp_path / "trees")
    assert pinned.pinned and pinned.root == tmp_path / "trees" / "lib" / "sub"
    assert (pinned.root / "a.go").read_text() == "package a\n"
    assert not missing.pinned and missing.exported_revision == head and (missing.root / "top.go").is_file()
    # The export's revision stamp lies beside the tree, so a search of the whole tree never indexes it.
    assert sorted(p.name for p in missing.root.iterdir()) == ["sub", "top.go"]
    stamp = tmp_path / "trees" / "lib2.exported-revision"
    assert stamp.read_text().strip() == head
    (missing.root / "kept.txt").write_text("x")
    peer_data.export_trees([missing], tmp_path / "mirrors", tmp_path / "trees")  # the same revision: reused
    assert (missing.root / "kept.txt").is_file()


def test_language_report_sums_each_language_over_the_trees(tmp_path: Path) -> None:
    import languages

    one, two = tmp_path / "one", tmp_path / "two"
    (one / "include").mkdir(parents=True)
    (one / "include" / "buf.h").write_text("namespace io {\nclass Buffer {\n public:\n  int size() const;\n};\n}\n")
    (one / "main.c").write_text("int main(void) {\n  return 0;\n}\n")
    two.mkdir()
    (two / "index.ts").write_text("export { a } from './a';\n")
    (two / "a.ts").write_text("export const a = 1;\n\nexport function b() {\n  return a;\n}\n")
    (two / "NOTES").write_text("no language\n")
    report = languages.language_reports({"one": one, "two": two})
    assert list(report) == ["c", "cpp", "typescript"]  # the header reads as C++; files of no language are left out
    assert report["cpp"]["repos"] == ["one"] and report["cpp"]["symbol_share"] == 1.0
    ts = report["typescript"]
    assert (ts["files"], ts["chunks"], ts["with_symbols"]) == (2, 2, 1)  # the re-export file names nothing
    assert ts["symbol_share"] == 0.5 and ts["fallbacks"] == {}


# --- the monorepo benchmark -----------------------------------------------------------------

import monorepo  # noqa: E402

GO_FILE = "package web\n\n// Route matches a path.\nfunc Route(path string) bool {\n\treturn path != \"\"\n}\n"
PY_FILE = ("def parse_headers(raw):\n    \"\"\"Parse HTTP request headers.\"\"\"\n"
           "    return dict(line.split(':', 1) for line in raw)\n")


class FakeSemble:
    """The semble side's interface with canned numbers; records the order of its first answers."""

    name = "semble"

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def first_answer(self, root: Path, query: str, cache: Path) -> dict:
        self.calls.append(("first_answer", root.name))
        return {"seconds": 2.0, "output_s": 1.5, "cpu_s": 3.0, "peak_rss": 300 << 20, "tree_peak_rss": 400 << 20, "hits": 10}

    def serve(self, root: Path, cache: Path, queries, runs: int) -> dict:
        self.calls.append(("serve", root.name))
        return {"timings_ms": [3.0] * (len(queries) * runs), "import_s": 0.5, "model_load_s": 0.1, "validate_s": 0.2,
                "open_s": 0.3, "revalidate_ms": 20.0, "stat_floor_ms": 2.0, "files": 3,
                "chunks": 10 * len(list(root.rglob("*.py"))), "index_bytes": 1 << 20, "rss": 200 << 20,
                "peak_rss": 250 << 20}


def test_monorepo_run_measures_both_sides_keyword_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for size, copies in (("20", 1), ("40", 2)):
        for copy in range(copies):
            repo = data / f"size-{size}" / (f"copy-{copy + 1}" if copy else "") / "acme+web"
            repo.mkdir(parents=True)
            (repo / "route.go").write_text(GO_FILE)
            (repo / "headers.py").write_text(PY_FILE)
            (repo / "README.md").write_text("# web\n\nA tiny web toolkit.\n")  # BM25 gives words in half the files no weight
    semble = FakeSemble()
    out, png = tmp_path / "out.json", tmp_path / "out.png"
    args = ["run", "--data", str(data), "--sizes", "20,40", "--model", "none", "--rounds", "2", "--latency-runs", "1",
            "--json", str(out)]
    if importlib.util.find_spec("matplotlib"):
        args += ["--plot", str(png)]
    assert monorepo.main(args, semble=semble) == 0
    # Rounds alternate which system goes first; each size is served once.
    assert semble.calls == [("first_answer", "size-20"), ("first_answer", "size-20"), ("serve", "size-20"),
                            ("first_answer", "size-40"), ("first_answer", "size-40"), ("serve", "size-40")]
    result = json.loads(out.read_text())
    small, large = (result["sizes"][s]["codesearch"] for s in ("20", "40"))
    assert large["chunks"] == 2 * small["chunks"] > 0
    assert small["first_answer_tier"] == small["tier"] == "keyword" and small["first_answer_hits"] >= 1
    assert len(small["first_answer_rounds_s"]) == 2 and small["first_answer_peak_rss"] > 10 << 20
    assert 0 < small["first_answer_printed_s"] <= small["first_answer_s"] and small["first_answer_cpu_s"] > 0
    assert small["first_answer_tree_peak_rss"] > 0 and small["transformer_s"] is None
    assert small["open_s"] is not None and small["query_p50_ms"] > 0 and small["query_norefresh_p95_ms"] > 0
    assert (small["files"], large["files"]) == (3, 6) and small["freshness_over_floor"] > 0
    assert small["serving_rss"] > 10 << 20 and small["index_bytes"] > 0
    assert any("transformer tier not built (keyword-only" in note for note in result["sizes"]["20"]["notes"])
    per_chunk = result["per_chunk"]["40"]["codesearch"]
    assert per_chunk["index_bytes"] == pytest.approx(large["index_bytes"] / large["chunks"])
    assert per_chunk["transformer_s"] is None
    assert set(result["marginal"]["20-40"]) == {"codesearch", "semble"}
    assert result["sizes"]["40"]["semble"]["query_p50_ms"] == 3.0
    assert not list((data / "scratch").glob("size-*"))  # indexes and caches are removed without --keep
    if importlib.util.find_spec("matplotlib"):
        assert png.stat().st_size > 1000


def test_monorepo_measure_reads_peak_memory_and_when_the_answer_came() -> None:
    # A child that touches 80 MiB, prints, then works on for 0.4 s (as semble's CLI saves its index after answering).
    child = "import time; b = bytearray(80 << 20); print('answer'); time.sleep(0.4)"
    run = monorepo.measure([sys.executable, "-c", child], dict(os.environ))
    assert run.stdout == "answer\n" and run.peak_rss >= 80 << 20 and run.tree_peak_rss >= run.peak_rss
    assert run.first_output_s <= run.seconds - 0.3 and run.cpu_s > 0
    with pytest.raises(SystemExit, match="exited 3"):
        monorepo.measure([sys.executable, "-c", "import sys; sys.exit(3)"], dict(os.environ))


def test_monorepo_prepare_exports_whole_repositories_and_composes_sizes(tmp_path: Path) -> None:
    import subprocess

    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "route.go").write_text(GO_FILE)
    (work / "headers.py").write_text(PY_FILE)
    (work / "big.bin").write_text("a blob the snapshot lacks\n")
    git = ["git", "-C", str(work), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    mirror = tmp_path / "mirrors" / "acme+web" / "repo"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirror)], check=True)  # loose objects, linked
    lacking = subprocess.check_output([*git, "rev-parse", "HEAD:big.bin"], text=True).strip()
    (mirror / "objects" / lacking[:2] / lacking[2:]).unlink(missing_ok=True)
    if subprocess.run(["git", "--git-dir", str(mirror), "cat-file", "-e", lacking]).returncode == 0:
        pytest.skip("could not make a mirror that lacks a blob")
    out = monorepo.prepare(tmp_path / "data", tmp_path / "mirrors", [2, 7], names=["acme+web"])
    facts = out["repositories"]["acme+web"]
    assert facts["missing_blobs"] == 1 and facts["files"] == 2
    assert (tmp_path / "data" / "base" / "acme+web" / "pkg" / "route.go").read_text() == GO_FILE
    from codesearch.stats import repo_stats

    assert facts["chunks"] == repo_stats(tmp_path / "data" / "base" / "acme+web").chunks  # the counter of `codesearch stats`
    small, large = out["sizes"]["2"], out["sizes"]["7"]
    assert small == {**small, "folders": ["acme+web"], "replicas": 0, "unique_text_share": 1.0}
    # The real repository runs out: replicas of it in copy-N/, the same texts again.
    assert large["folders"][0] == "acme+web" and large["replicas"] == len(large["folders"]) - 1 >= 1
    assert large["unique_text_share"] == pytest.approx(1 / len(large["folders"]))
    assert (tmp_path / "data" / "size-7" / "copy-2" / "acme+web" / "headers.py").read_text() == PY_FILE


def test_monorepo_compose_takes_whole_repositories_in_order() -> None:
    counts = {"a": 500, "b": 9000, "c": 3000, "d": 200}
    size = monorepo.compose(4000, counts, order=["a", "b", "c", "d"])
    assert size.folders == ["a", "c", "d"] and size.chunks == 3700 and size.replicas == 0  # b does not fit
    size = monorepo.compose(30000, counts, order=["a", "b", "c", "d"])
    assert size.folders[:4] == ["a", "b", "c", "d"] and size.folders[4:6] == ["copy-2/a", "copy-2/b"]
