"""Smoke tests: the benchmark scripts' code paths on a tiny corpus (never their timings)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import ann, chunker_speed, freshness, monorepo, peer_data, quality, seed_requests

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


def test_query_profile_counts_each_stage_once_and_puts_every_original_back(tiny_requests: Path, tmp_path: Path) -> None:
    from conftest import HashingEmbedder

    from benchmarks import query_profile
    from codesearch import CodeSearch
    from codesearch.ranking import stages

    before = (CodeSearch.search, stages.fuse)
    out = tmp_path / "profile.json"
    options = {"model": HashingEmbedder(name="dense"), "static": HashingEmbedder(name="dense", dim=64, salt="static")}
    assert query_profile.main(["--repo", str(tiny_requests), "--runs", "2", "-k", "3", "--json", str(out)],
                              searcher_options=options) == 0
    data = json.loads(out.read_text())
    rows = {row["stage"]: row for row in data["stages"]}
    order = [stage for _, _, stage in query_profile.STAGES] + [query_profile.EMBEDDING]
    assert list(rows) == [stage for stage in order if stage in rows]  # in the path's order
    assert rows["search (rest)"]["calls"] == rows["answer (rest)"]["calls"] == rows["fusion"]["calls"] == 1
    assert rows["bm25 scores"]["calls"] == 1 and rows["dense product"]["calls"] == 1
    assert rows["hit building"]["calls"] == 3 and rows[query_profile.EMBEDDING]["calls"] == 1  # k hits, one query
    assert "dense graph" not in rows  # a small index is scored exactly
    assert data["plain"]["n"] == data["profiled"]["n"] == 2 * len(seed_requests.QUESTIONS)
    assert (CodeSearch.search, stages.fuse) == before  # the wrappers are gone


def test_query_profile_times_a_stage_without_what_it_calls() -> None:
    from benchmarks.query_profile import Profiler

    now = [0.0]

    def clock() -> float:
        return now[0]

    profiler = Profiler(clock)

    def inner() -> None:
        now[0] += 2.0

    wrapped_inner = profiler.wrap(inner, "inner")

    def outer() -> None:
        now[0] += 1.0
        wrapped_inner()
        wrapped_inner()
        now[0] += 0.5

    profiler.wrap(outer, "outer")()
    assert profiler.take() == ({"outer": 1500.0, "inner": 4000.0}, {"outer": 1, "inner": 2})
    assert profiler.take() == ({}, {})


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
    pytest.importorskip("codesearch.chunking._chunker")
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


LOG2_3 = 1.5849625007211563  # log2(3): the discount at rank 2


def test_ndcg_matches_semble_definition_by_hand() -> None:
    """semble's benchmarks/ at 8d737ab: ndcg_at_k(ranks of each target's first match, len(task.all_relevant), 10)."""
    t = peer_data.Target
    semble = peer_data.ndcg_at_10_all_targets
    # One target found at rank 2: 1/log2(3) over the ideal 1.
    assert semble([("src/b.py", 1, 10), ("src/a.py", 1, 10)], [t("a.py")]) == pytest.approx(1 / LOG2_3)
    # Two targets met by one chunk at rank 1: the rank counts once, the ideal is over both targets.
    both = [t("src/a.py"), t("a.py", 5, 6)]
    assert semble([("src/a.py", 1, 10)], both) == pytest.approx(1 / (1 + 1 / LOG2_3))
    # A target no chunk of any index holds still counts in the ideal: 1 / (1 + 1/log2 3).
    assert semble([("src/a.py", 1, 10)], [t("src/a.py"), t("gone.py")]) == pytest.approx(0.6131471927654584)
    # A target with lines matches only overlapping chunks.
    assert semble([("src/a.py", 1, 10)], [t("a.py", 12, 14)]) == 0.0
    # Two targets at ranks 1 and 3 of three listed: (1 + 1/2) / (1 + 1/log2 3).
    three = [("src/a.py", 1, 10), ("x.py", 1, 2), ("src/b.py", 1, 10)]
    assert semble(three, [t("a.py"), t("b.py")]) == pytest.approx(1.5 / (1 + 1 / LOG2_3))
    # The ideal is capped at 10: twelve targets, ten of them first matched at ranks 1-10, score 1.
    many = [t(f"f{i}.py") for i in range(12)]
    assert semble([(f"f{i}.py", 1, 2) for i in range(12)], many) == pytest.approx(1.0)
    # A match below rank 10 does not count.
    assert semble([("x.py", 1, 2)] * 10 + [("a.py", 1, 2)], [t("a.py")]) == 0.0
    assert semble([("a.py", 1, 2)], []) == 0.0
    assert peer_data.path_matches("/abs/root/src/a.py", "src/a.py") and not peer_data.path_matches("xa.py", "a.py")


def test_ndcg_over_findable_targets_by_hand() -> None:
    """Ours (``ndcg10``): the ideal is over the targets some chunk of the system's own index matches."""
    t = peer_data.Target
    indexed = [("src/a.py", 1, 10), ("src/b.py", 1, 10), ("src/c.py", 1, 10), ("src/a.py", 11, 20)]
    assert peer_data.ndcg_at_10([("src/b.py", 1, 10), ("src/a.py", 1, 10)], [t("a.py")], indexed) == pytest.approx(
        1 / LOG2_3)
    # One chunk matching both findable targets counts once, over an ideal of two.
    both = [t("src/a.py"), t("a.py", 5, 6)]
    assert peer_data.ndcg_at_10([("src/a.py", 1, 10)], both, indexed) == pytest.approx(1 / (1 + 1 / LOG2_3))
    # A target no indexed chunk matches leaves the ideal: 1.0 where semble's figure is 0.613.
    assert peer_data.ndcg_at_10([("src/a.py", 1, 10)], [t("src/a.py"), t("gone.py")], indexed) == 1.0
    assert peer_data.ndcg_at_10([("src/a.py", 1, 10)], [t("a.py", 12, 14)], indexed) == 0.0
    assert peer_data.ndcg_at_10([], [t("gone.py")], indexed) == 0.0
    # Both figures of a repository's queries at once, in task order.
    task = peer_data.Task("r", "go", "q", "semantic", (t("src/a.py"), t("gone.py")))
    scores = peer_data.score_results([[("src/a.py", 1, 10)]], [task], indexed)
    assert scores.ndcg10 == [1.0] and scores.ndcg10_all_targets == [pytest.approx(0.6131471927654584)]
    assert scores.means()["ndcg10_all_targets"] == pytest.approx(0.6131471927654584)


def test_language_and_category_means_weigh_as_semble_does() -> None:
    language_of = {"a": "go", "b": "go", "c": "zig"}
    # Two Go repositories (0.2, 0.6 -> 0.4) and one Zig (1.0): languages (0.4 + 1.0) / 2, repositories 1.8 / 3.
    assert peer_data.language_mean({"a": 0.2, "b": 0.6, "c": 1.0}, language_of) == pytest.approx(0.7)
    assert peer_data.macro({"a": 0.2, "b": 0.6, "c": 1.0}) == pytest.approx(0.6)
    task = lambda category: peer_data.Task("x", "go", "q", category, ())  # noqa: E731
    tasks = {"a": [task("symbol"), task("symbol"), task("semantic")], "b": [task("symbol")]}
    # symbol: a's mean (0 + 1) / 2 and b's 1.0 -> 0.75 (not 2/3 over the three queries); semantic: a's alone.
    assert peer_data.category_means({"a": [0.0, 1.0, 0.5], "b": [1.0]}, tasks) == {"semantic": 0.5, "symbol": 0.75}


def test_dev_folds_are_fixed_disjoint_and_cover_dev() -> None:
    a, b = peer_data.DEV_FOLDS["A"], peer_data.DEV_FOLDS["B"]
    assert (len(a), len(b)) == (9, 10) and not set(a) & set(b)
    assert sorted(a + b) == sorted(peer_data.DEV_REPOSITORIES)
    # The written folds are the rule applied to the recorded chunk counts: smallest first, dealt A B B A A B B A ...;
    # a repository that joined later sits at the end of the fold it joined.
    first = [n for n in peer_data.DEV_REPOSITORIES if n not in peer_data.DEV_JOINED]
    by_size = sorted(first, key=lambda n: peer_data.DEV_CHUNKS_AT_SPLIT[n])
    split = dict(zip("AB", peer_data.snake_split(by_size)))
    for name, fold in peer_data.DEV_JOINED.items():
        split[fold] += (name,)
    assert (split["A"], split["B"]) == (a, b)
    assert peer_data.snake_split(list("abcdefg")) == (("a", "d", "e"), ("b", "c", "f", "g"))
    assert [peer_data.size_bucket(n) for n in (0, 299, 300, 499, 500, 10**6)] == [
        "small", "small", "medium", "medium", "large", "large"]


def test_two_fold_protocol_chooses_on_one_half_and_reports_on_the_other() -> None:
    folds = {"A": ("r1", "r2"), "B": ("r3", "r4")}
    table = {
        # variant: r1, r2 (fold A); r3, r4 (fold B)
        "default": {"r1": 0.5, "r2": 0.7, "r3": 0.6, "r4": 0.6},  # A 0.60, B 0.60, DEV 0.600
        "x": {"r1": 0.9, "r2": 0.7, "r3": 0.4, "r4": 0.4},  # A 0.80, B 0.40, DEV 0.600
        "y": {"r1": 0.6, "r2": 0.6, "r3": 0.7, "r4": 0.7},  # A 0.60, B 0.70, DEV 0.650
    }
    found = peer_data.two_fold(table, folds, baseline="default")
    assert found.folds["x"] == pytest.approx({"A": 0.8, "B": 0.4, "dev": 0.6, "held_back_mean": 0.6})
    (on_a, on_b) = found.choices
    # Chosen on A: x (0.80), reported on B: 0.40. Chosen on B: y (0.70), reported on A: 0.60.
    assert (on_a.chosen_on, on_a.variant, on_a.reported_on) == ("A", "x", "B")
    assert on_a.chosen_figure == pytest.approx(0.8) and on_a.held_back_figure == pytest.approx(0.4)
    assert (on_b.variant, on_b.reported_on) == ("y", "A") and on_b.held_back_figure == pytest.approx(0.6)
    # Held back: (0.4 + 0.6) / 2 = 0.5, against the in-sample choice y at 0.65 on all of DEV;
    # the default's own halves give 0.6, so the choice does not land.
    assert found.held_back_mean == pytest.approx(0.5)
    assert (found.dev_choice, found.dev_figure) == ("y", pytest.approx(0.65))
    assert found.baseline_held_back == pytest.approx(0.6) and found.lands is False and found.verdict == "loses"
    assert found.as_dict()["choices"][0]["variant"] == "x"
    # A tie goes to the variant named first (the default): nothing changes on equal figures.
    tied = peer_data.two_fold({"default": table["default"], "same": dict(table["default"])}, folds, baseline="default")
    assert [c.variant for c in tied.choices] == ["default", "default"]
    assert tied.verdict == "unchanged" and tied.lands is False
    # Both halves choosing z: it lands on a held-back gain of MIN_GAIN or more, and is a tie below it.
    for gain, verdict in ((peer_data.MIN_GAIN * 3, "lands"), (peer_data.MIN_GAIN / 3, "tie"),
                          (-peer_data.MIN_GAIN / 3, "tie"), (-peer_data.MIN_GAIN * 3, "loses")):
        z = {repo: figure + gain for repo, figure in table["default"].items()}
        decided = peer_data.two_fold({"default": table["default"], "z": z}, folds, baseline="default")
        expected = ["z", "z"] if gain > 0 else ["default", "default"]
        assert [c.variant for c in decided.choices] == expected
        assert decided.verdict == (verdict if gain > 0 else "unchanged"), gain
        assert decided.lands is (verdict == "lands" and gain > 0)
    # The halves choosing different variants whose held-back mean is within MIN_GAIN of the default's: a tie.
    split = peer_data.two_fold({
        "default": {"r1": 0.5, "r2": 0.5, "r3": 0.5, "r4": 0.5},
        "on_a": {"r1": 0.6, "r2": 0.6, "r3": 0.5, "r4": 0.5},  # gains A only
        "on_b": {"r1": 0.49995, "r2": 0.5, "r3": 0.6, "r4": 0.6},  # gains B, a hair below on A
    }, folds, baseline="default")
    assert [c.variant for c in split.choices] == ["on_a", "on_b"]
    assert split.verdict == "tie" and split.lands is False and split.as_dict()["verdict"] == "tie"
    with pytest.raises(ValueError, match="fold B has no repository"):
        peer_data.two_fold({"default": {"r1": 1.0}}, folds)
    assert peer_data.fold_figures({"r1": 1.0}, folds) == {"A": 1.0, "B": None, "dev": 1.0, "held_back_mean": None}


def test_published_figures_are_read_for_dev_names_only(tmp_path: Path) -> None:
    entry = lambda name, language, ndcg: {  # noqa: E731
        "repo": name, "language": language, "chunks": 100, "ndcg5": ndcg, "ndcg10": ndcg, "p50_ms": 1.0,
        "p90_ms": 1.0, "p95_ms": 1.0, "p99_ms": 1.0, "index_ms": 9.0, "by_category": {"symbol": ndcg}}
    results = tmp_path / "semble-hybrid-000000000000.json"
    results.write_text(json.dumps({
        "sha": "f" * 40, "model": "minishlab/potion-code-16M",
        "summary": {"ndcg10": 0.5, "by_category": {"symbol": 0.5}}, "by_language": {"go": {"ndcg10": 0.5}},
        "repos": [entry("chi", "go", 0.8), entry("flask", "python", "not read"), entry("gson", "java", 0.6)],
        "avg_ndcg10": 0.5}))
    published = peer_data.load_published(results, ["chi", "gson"])
    assert published.model == "minishlab/potion-code-16M" and published.sha == "f" * 40
    assert published.ndcg10 == {"chi": 0.8, "gson": 0.6}
    assert set(published.repos) == {"chi", "gson"} and published.repos["chi"]["chunks"] == 100
    with pytest.raises(SystemExit, match="independent check"):
        peer_data.load_published(results, ["flask"])
    with pytest.raises(SystemExit, match="no entry for redux"):
        peer_data.load_published(results, ["chi", "redux"])
    (tmp_path / "other.json").write_text(json.dumps({"tool": "x", "by_mode": {}}))
    with pytest.raises(SystemExit, match="not a semble results file"):
        peer_data.load_published(tmp_path / "other.json", ["chi"])


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

    # A snapshot mirror without one blob (top.go's): a root that does not hold it exports whole, one that does is
    # refused in one line, its partial tree removed and no stamp written.
    blob = subprocess.check_output(["git", "--git-dir", str(mirrors / "repo"), "rev-parse", f"{head}:top.go"],
                                   text=True).strip()
    (mirrors / "repo" / "objects" / blob[:2] / blob[2:]).unlink()
    sub_only = peer_data.Repo("lib3", "go", "https://github.com/acme/lib.git", head, "sub")
    whole = peer_data.Repo("lib4", "go", "https://github.com/acme/lib.git", head, None)
    peer_data.export_trees([sub_only], tmp_path / "mirrors", tmp_path / "trees")
    assert (sub_only.root / "a.go").read_text() == "package a\n"
    with pytest.raises(SystemExit, match=r"^error: cannot export lib4 at [0-9a-f]{10} from .*: ") as refused:
        peer_data.export_trees([whole], tmp_path / "mirrors", tmp_path / "trees")
    assert "\n" not in str(refused.value)
    assert not (tmp_path / "trees" / "lib4").exists() and not (tmp_path / "trees" / "lib4.exported-revision").exists()


def test_language_report_sums_each_language_over_the_trees(tmp_path: Path) -> None:
    from benchmarks import languages

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


# --- the peer benchmark end to end, with stand-ins for semble and the models -----------------------

ONE_AT_RANK_2 = 1 / LOG2_3
SMOKE_REPOS = {
    # name: (owner, language, benchmark_root, files, tasks as (query, category, targets))
    "chi": ("go-chi", "go", None, {
        "mux.go": "package chi\n\n// Mux routes requests.\ntype Mux struct{}\n\nfunc NewMux() *Mux { return &Mux{} }\n",
        "tree.go": "package chi\n\n// match a route pattern against a path\nfunc matchPattern(pattern, path string) bool {\n"
                   "\treturn pattern == path\n}\n",
        "middleware/logger.go": "package middleware\n\n// Logger logs each request.\nfunc Logger() {}\n",
    }, [("Mux", "symbol", ["mux.go"]), ("how routes match a pattern", "architecture", ["tree.go"]),
        ("log each request", "semantic", ["middleware/logger.go"])]),
    "redux": ("reduxjs", "javascript", "src", {
        "src/createStore.js": "export function createStore(reducer) {\n  let state\n  return { getState: () => state }\n}\n",
        "src/combineReducers.js": "// combine reducers into one reducer\nexport function combineReducers(reducers) {\n"
                                  "  return (state, action) => state\n}\n",
        "README.md": "outside the benchmark root\n",
    }, [("createStore", "symbol", ["createStore.js"]),
        ("combine reducers into one", "semantic", ["combineReducers.js", "gone.js"])]),
}


def _smoke_benchmark(tmp_path: Path) -> tuple[Path, Path]:
    """semble's benchmarks/ folder and git mirrors for chi (fold B) and redux (fold A), tiny and made up."""
    import subprocess

    bench, mirrors = tmp_path / "semble-benchmarks", tmp_path / "mirrors"
    (bench / "annotations").mkdir(parents=True)
    specs = []
    for name, (owner, language, root, files, tasks) in SMOKE_REPOS.items():
        work = tmp_path / "work" / name
        for path, text in files.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(text)
        git = ["git", "-C", str(work), "-c", "user.email=t@t", "-c", "user.name=t"]
        subprocess.run([*git, "init", "-q"], check=True)
        subprocess.run([*git, "add", "."], check=True)
        subprocess.run([*git, "commit", "-qm", "one"], check=True)
        head = subprocess.check_output([*git, "rev-parse", "HEAD"], text=True).strip()
        subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirrors / f"{owner}+{name}" / "repo")], check=True)
        specs.append({"name": name, "language": language, "url": f"https://github.com/{owner}/{name}.git",
                      "revision": head, "benchmark_root": root})
        (bench / "annotations" / f"{name}.json").write_text(json.dumps(
            [{"query": q, "category": c, "relevant": targets[:1], "secondary": targets[1:]} for q, c, targets in tasks]))
    (bench / "repos.json").write_text(json.dumps(specs))
    return bench, mirrors


def fake_semble(repos):  # type: ignore[no-untyped-def]
    """semble's side, made up: each query's first target at rank 2 under an unrelated chunk; index seconds 0.5."""
    out = {}
    for repo in repos:
        files = [str(p.relative_to(repo.root)) for p in sorted(repo.root.rglob("*")) if p.is_file()]
        out[repo.name] = {"name": repo.name, "index_s": 0.5, "chunks": len(files), "latencies_ms": [2.0] * len(repo.tasks),
                          "results": [[["elsewhere.txt", 1, 2], [t.targets[0].path, 1, 5]] for t in repo.tasks],
                          "indexed": [[f, 1, 5] for f in files]}
    return out


def test_peer_benchmark_runs_end_to_end_with_stand_ins(tmp_path: Path) -> None:
    from conftest import HashingEmbedder

    from benchmarks import peer_benchmark

    pytest.importorskip("matplotlib")
    bench, mirrors = _smoke_benchmark(tmp_path)
    published = tmp_path / "semble-hybrid-000000000000.json"
    published.write_text(json.dumps({"sha": "f" * 40, "model": "minishlab/potion-code-16M", "repos": [
        {"repo": "chi", "language": "go", "chunks": 3, "ndcg10": 0.9}, {"repo": "redux", "language": "javascript",
                                                                         "chunks": 2, "ndcg10": 0.5}]}))
    out = tmp_path / "peer.json"
    options = {"model": HashingEmbedder(), "static": HashingEmbedder(salt="static")}
    assert peer_benchmark.main(["--semble-benchmarks", str(bench), "--mirrors", str(mirrors), "--trees",
                                str(tmp_path / "trees"), "--repos", "chi,redux", "--index-dir", str(tmp_path / "indexes"),
                                "--semble-published", str(published), "--json", str(out)],
                               semble_runner=fake_semble, searcher_options=options) == 0
    data = json.loads(out.read_text())
    # semble's side by hand: every query's first target at rank 2 (1/log2 3); redux's second query also names
    # gone.js, which no index holds: findable 1/log2 3, all targets (1/log2 3) / (1 + 1/log2 3).
    all_redux = (ONE_AT_RANK_2 + ONE_AT_RANK_2 / (1 + ONE_AT_RANK_2)) / 2
    assert data["semble"]["ndcg10"] == pytest.approx(ONE_AT_RANK_2)
    assert data["repos"]["redux"]["semble"]["ndcg10_all_targets"] == pytest.approx(all_redux)
    assert data["semble"]["ndcg10_all_targets"] == pytest.approx((ONE_AT_RANK_2 + all_redux) / 2)
    assert data["semble"]["language_mean_ndcg10"] == pytest.approx(data["semble"]["ndcg10"])  # one repo per language
    assert data["semble_ndcg10"] == data["semble"]["ndcg10"]
    # The fold split: redux is in fold A, chi in fold B.
    split = data["semble"]["split"]["ndcg10_all_targets"]
    assert split["A"] == pytest.approx(all_redux) and split["B"] == pytest.approx(ONE_AT_RANK_2)
    assert split["held_back_mean"] == pytest.approx(data["semble"]["ndcg10_all_targets"])
    # codesearch: every figure a share, the all-targets one never above the findable one.
    for system in ("codesearch", "codesearch_static"):
        assert 0.0 <= data[system]["ndcg10_all_targets"] <= data[system]["ndcg10"] <= 1.0
    assert data["static_ndcg10"] == data["codesearch_static"]["ndcg10"] and data["static_index_s"] > 0
    assert data["repos"]["chi"]["codesearch_static"]["chunks"] >= 3
    assert set(data["ablations"]) >= {"default", "-diversity", "rank fusion only"}
    assert set(data["ablations"]["default"]["folds"]) == {"A", "B", "dev", "held_back_mean"}
    assert data["protocol"]["choices"][0]["chosen_on"] == "A" and data["protocol"]["baseline"] == "default"
    # Per category (one query each of architecture in chi) and per size bucket (both small).
    assert set(data["categories"]) == {"architecture", "semantic", "symbol"}
    assert data["categories"]["semantic"]["queries"] == 2 and data["categories"]["semantic"]["repos"] == 2
    assert data["categories"]["architecture"]["semble"]["ndcg10"] == pytest.approx(ONE_AT_RANK_2)
    assert list(data["size_buckets"]) == ["small"] and sorted(data["size_buckets"]["small"]["repos"]) == ["chi", "redux"]
    # semble's published figures, DEV entries only, next to the live run.
    assert data["semble_published_ndcg10"] == pytest.approx(0.7)
    assert data["repos"]["chi"]["semble_published"]["ndcg10"] == 0.9
    # The picture: three points (full tier, static tier, semble), written next to the JSON.
    assert [p["label"] for p in data["plot_points"]] == ["codesearch (full tier)", "codesearch (static tier)", "semble"]
    assert data["plot_points"][2]["first_answer_s"] == pytest.approx(0.502)
    png = out.with_suffix(".png")
    assert data["plot"] == str(png) and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_peer_benchmark_puts_another_models_tiers_beside_the_default(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``--model``: the other model's full tier in the ablation table, its static tier beside the default's, each
    with fold figures, and the protocol's choice among the static tiers."""
    from conftest import HashingEmbedder

    from benchmarks import models, peer_benchmark

    bench, mirrors = _smoke_benchmark(tmp_path)
    other = {"model": HashingEmbedder(salt="other"), "static": HashingEmbedder(salt="other static")}
    monkeypatch.setattr(models, "model_options", lambda model: other if model == "trained" else pytest.fail(model))
    out = tmp_path / "peer.json"
    options = {"model": HashingEmbedder(), "static": HashingEmbedder(salt="static")}
    assert peer_benchmark.main(["--semble-benchmarks", str(bench), "--mirrors", str(mirrors), "--trees",
                                str(tmp_path / "trees"), "--repos", "chi,redux", "--index-dir", str(tmp_path / "indexes"),
                                "--model", "trained", "--json", str(out), "--plot", str(tmp_path / "p.png")],
                               semble_runner=fake_semble, searcher_options=options) == 0
    data = json.loads(out.read_text())
    row = data["ablations"]["model trained"]
    assert set(row["per_repo"]) == {"chi", "redux"} and row["index_s"] > 0
    assert set(row["folds"]) == {"A", "B", "dev", "held_back_mean"}
    assert list(data["static_tiers"]) == ["static tier", "model trained, static tier"]
    shipped = data["static_tiers"]["static tier"]
    assert shipped["per_repo"] == {n: data["repos"][n]["codesearch_static"]["ndcg10"] for n in ("chi", "redux")}
    assert (tmp_path / "indexes" / "trained" / "chi-static").is_dir()  # its own indexes, not the default's
    assert data["static_protocol"]["baseline"] == "static tier"


@pytest.mark.slow
def test_own_code_benchmark_scores_both_models_on_the_trees_questions(tmp_path: Path) -> None:
    """own_code.py with MiniLM's own weights as the "trained" folder: the full tiers rank alike (same weights, same
    ranking), and every figure is the share the questions' ranks give."""
    from benchmarks import own_code
    from codesearch.embedding.catalogue import MODELS

    minilm_folder = MODELS["minilm"].local_path()
    assert minilm_folder is not None

    tree = tmp_path / "tree"
    (tree / "lib").mkdir(parents=True)
    (tree / "lib" / "pool.rb").write_text("class Pool\n  def grow(count)\n    @workers += count\n  end\nend\n")
    (tree / "lib" / "log.rb").write_text("module Log\n  def self.write(line)\n    $stderr.puts(line)\n  end\nend\n")
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({"corpora": {"tree": {"folder": "tree"}}, "questions": [
        {"id": "t-1", "corpus": "tree", "kind": "behaviour", "query": "add more workers to the pool",
         "answers": [{"path": "lib/pool.rb", "line": 2}]},
        {"id": "t-2", "corpus": "tree", "kind": "identifier", "query": "Log",
         "answers": [{"path": "lib/log.rb", "line": 1}]}]}))
    out = tmp_path / "own.json"
    assert own_code.main(["--questions", str(questions), "--tree", str(tree), "--model", str(minilm_folder),
                          "--index-dir", str(tmp_path / "idx"), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["questions"] == 2 and set(data["models"]) == {"minilm", "trained"}
    full = data["models"]["minilm"]["full"]
    assert full["ranks"] == data["models"]["trained"]["full"]["ranks"]
    assert full["metrics"]["hit@10"] == sum(bool(r) for r in full["ranks"].values()) / 2
    assert set(full["by_kind"]) == {"behaviour", "identifier"} and full["index_s"] > 0


@pytest.mark.slow
def test_serve_parity_compares_the_api_with_the_cli_on_annotated_queries(tmp_path: Path) -> None:
    from benchmarks import serve_parity

    bench, mirrors = _smoke_benchmark(tmp_path)
    out = tmp_path / "parity.json"
    assert serve_parity.main(["--semble-benchmarks", str(bench), "--mirrors", str(mirrors), "--trees",
                              str(tmp_path / "trees"), "--repos", "chi", "--per-repo", "1", "--index-dir",
                              str(tmp_path / "indexes"), "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["queries"] == data["equal"] == data["with_hits"] == 1 and data["repos"]["chi"]["differences"] == []
    hit = {"path": "a.go", "start_line": 1, "score": 0.00529029258536389}
    assert serve_parity.same_answer({"hits": [hit]}, {"hits": [{**hit, "score": 0.0052902925853638896}]})
    assert not serve_parity.same_answer({"hits": [hit]}, {"hits": [{**hit, "path": "b.go"}]})
    assert not serve_parity.same_answer({"hits": [hit]}, {"hits": [{**hit, "score": 0.0053}]})


def test_first_answer_versions_times_both_checkouts_on_each_tree(tmp_path: Path) -> None:
    """This checkout against itself as the baseline: both sides answer from a new process, and the ratio is the
    medians' quotient."""
    from benchmarks import first_answer_versions
    from benchmarks._harness import ROOT

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "errors.py").write_text("def report_error(message):\n    raise RuntimeError(message)\n")
    out = tmp_path / "fa.json"
    assert first_answer_versions.main([str(tree), "--baseline-src", str(ROOT), "--baseline-module",
                                       "codesearch.faces.cli", "--rounds", "1", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    times = data["trees"][str(tree)]
    assert times["baseline_s"] > 0 and times["current_s"] > 0
    assert times["ratio"] == pytest.approx(times["current_s"] / times["baseline_s"]) == data["max_ratio"]


def test_navigation_benchmark_runs_end_to_end(tmp_path: Path) -> None:
    from conftest import HashingEmbedder

    from benchmarks import navigation

    bench, mirrors = _smoke_benchmark(tmp_path)
    out = tmp_path / "navigation.json"
    models = (HashingEmbedder(name="dense"), HashingEmbedder(name="dense", dim=64, salt="static"))
    assert navigation.main(["--semble-benchmarks", str(bench), "--mirrors", str(mirrors), "--trees",
                            str(tmp_path / "trees"), "--repos", "chi,redux", "--index-dir", str(tmp_path / "indexes"),
                            "--references", "chi,redux", "--identifiers", "2", "--shared", "chi", "--json", str(out)],
                           models=models) == 0
    data = json.loads(out.read_text())
    assert (data["definitions"]["queries"], data["definitions"]["rank1"]) == (2, 2)  # Mux and createStore, at rank 1
    assert data["references"]["recall"] == data["references"]["precision"] == 1.0  # as grep -w finds them
    assert data["references"]["identical"] == data["references"]["identifiers"] == 4
    assert data["budget"]["over_budget"] == 0 and data["budget"]["answers"] > 0
    ndcg = data["budget"]["ndcg10_bm25"]
    assert ndcg["full"] == ndcg["compact"] == ndcg["compact@8000"]
    shared = data["shared"]
    assert shared["embedded_read_only"] == shared["writable_reindex_embedded"] == 0 and shared["index_unchanged"]
    assert shared["refreshed_in_memory"] == shared["files"] == 3


def test_quality_speed_plot_is_drawn(tmp_path: Path) -> None:
    from benchmarks import peer_benchmark

    pytest.importorskip("matplotlib")
    points = [{"label": "a", "ndcg10": 0.8, "ndcg10_all_targets": 0.7, "first_answer_s": 1.5, "p50_ms": 3.0},
              {"label": "b", "ndcg10": 0.6, "ndcg10_all_targets": 0.6, "first_answer_s": 0.3, "p50_ms": 1.0}]
    png = tmp_path / "q.png"
    assert peer_benchmark.plot_quality_speed(png, points, explicit=True)
    assert png.stat().st_size > 10_000


def test_tune_reranks_stored_indexes_and_applies_the_protocol(tmp_path: Path) -> None:
    from conftest import HashingEmbedder

    from benchmarks import tune
    from codesearch import CodeSearch

    bench, mirrors = _smoke_benchmark(tmp_path)
    options = {"model": HashingEmbedder(), "static": HashingEmbedder(salt="static")}
    args = ["--semble-benchmarks", str(bench), "--mirrors", str(mirrors), "--trees", str(tmp_path / "trees"),
            "--repos", "chi,redux", "--index-dir", str(tmp_path / "indexes")]
    with pytest.raises(SystemExit, match="no stored index"):
        tune.main(args, searcher_options=options)
    repos = peer_data.load_repos(bench, ["chi", "redux"])
    peer_data.export_trees(repos, mirrors, tmp_path / "trees")
    stamps = {}
    # chi's as the peer benchmark stores it (<repo>-int8), redux's as first_answer.py does (<repo>).
    folders = {"chi": tmp_path / "indexes" / "chi-int8", "redux": tmp_path / "indexes" / "redux"}
    for repo in repos:
        CodeSearch(repo.root, index_dir=folders[repo.name], **options).index()
        stamps[repo.name] = sorted(p.stat().st_mtime_ns for p in folders[repo.name].rglob("*"))
    out = tmp_path / "tune.json"
    assert tune.main([*args, "--variants", "coherence_boost=0.2,keyword_priors=none,diversity_similar=(0.5, 0.7)",
                      "--json", str(out)], searcher_options=options) == 0
    data = json.loads(out.read_text())
    # The default first; a comma inside brackets belongs to its value.
    assert list(data["variants"]) == ["default", "coherence_boost=0.2", "keyword_priors=none",
                                      "diversity_similar=(0.5, 0.7)"]
    assert data["variants"]["diversity_similar=(0.5, 0.7)"]["changes"] == {"diversity_similar": [0.5, 0.7]}
    assert data["variants"]["keyword_priors=none"]["changes"] == {"keyword_priors": []}
    for variant in data["variants"].values():
        assert set(variant["per_repo"]) == {"chi", "redux"}
        assert 0.0 <= variant["ndcg10_all_targets"] <= variant["ndcg10"] <= 1.0
        assert variant["folds"]["A"] == variant["per_repo"]["redux"] and variant["folds"]["B"] == variant["per_repo"]["chi"]
        # Per category, the mean over repositories of each one's queries of it: chi asks one query of each
        # category, redux a symbol and a semantic one, so the categories add up to the repositories' sums.
        categories, per_repo = variant["categories"], variant["per_repo"]
        assert set(categories) == {"architecture", "semantic", "symbol"}
        assert 2 * categories["symbol"] + 2 * categories["semantic"] + categories["architecture"] == pytest.approx(
            3 * per_repo["chi"] + 2 * per_repo["redux"])
    protocol = data["protocol"]
    assert [c["chosen_on"] for c in protocol["choices"]] == ["A", "B"] and protocol["baseline"] == "default"
    gain = protocol["held_back_mean"] - protocol["baseline_held_back"]
    choices = [c["variant"] for c in protocol["choices"]]
    assert protocol["verdict"] == ("unchanged" if choices == ["default", "default"] else "lands"
                                   if gain >= peer_data.MIN_GAIN else "loses" if gain <= -peer_data.MIN_GAIN else "tie")
    assert protocol["lands"] == (protocol["verdict"] == "lands")
    # Re-ranking only: the stored indexes are untouched.
    for repo in repos:
        assert stamps[repo.name] == sorted(p.stat().st_mtime_ns for p in folders[repo.name].rglob("*"))
    with pytest.raises(SystemExit):
        tune.main([*args, "--variants", "no-such-variant"], searcher_options=options)


def test_tune_reports_the_questions_without_tuning_on_them(tmp_path: Path, tiny_requests: Path) -> None:
    from conftest import HashingEmbedder

    from benchmarks import tune
    from codesearch import CodeSearch

    bench, mirrors = _smoke_benchmark(tmp_path)
    options = {"model": HashingEmbedder(), "static": HashingEmbedder(salt="static")}
    index_dir = tmp_path / "indexes"
    repos = peer_data.load_repos(bench, ["chi", "redux"])
    peer_data.export_trees(repos, mirrors, tmp_path / "trees")
    corpora = tmp_path / "corpora"
    (corpora / "toy").mkdir(parents=True)
    (corpora / "toy" / "lib.py").write_text("def parse_config(path):\n    \"\"\"Read settings from an ini file.\"\"\"\n"
                                            "    return {}\n")
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({"corpora": {"toy": {"folder": "toy"}}, "questions": [
        {"id": "toy-01", "corpus": "toy", "kind": "identifier", "query": "parse_config",
         "answers": [{"path": "lib.py", "symbol": "parse_config", "line": 1}]}]}))
    roots = {**{r.name: r.root for r in repos}, "q-toy": corpora / "toy", "q-requests": tiny_requests}
    for folder, root in roots.items():
        CodeSearch(root, index_dir=index_dir / folder, **options).index()
    out = tmp_path / "tune.json"
    assert tune.main(["--semble-benchmarks", str(bench), "--mirrors", str(mirrors), "--trees", str(tmp_path / "trees"),
                      "--repos", "chi,redux", "--index-dir", str(index_dir), "--variants", "keyword_priors=none",
                      "--questions", "--corpora", str(corpora), "--requests", str(tiny_requests), "--heldout",
                      str(questions), "--json", str(out)], searcher_options=options) == 0
    for variant in json.loads(out.read_text())["variants"].values():
        assert variant["heldout_ndcg10"] == 1.0  # parse_config: its one definition first
        assert variant["requests"]["questions"] == 10 and len(variant["requests"]["identifier_ranks"]) == 2
        assert variant["requests_floor"] == (variant["requests"]["top5"] >= 6 and variant["requests"]["top10"] >= 8
                                             and variant["requests"]["identifier_ranks"] == [1, 1])


# --- the monorepo benchmark -----------------------------------------------------------------


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


def test_freshness_runs_every_part_keyword_only(tmp_path: Path) -> None:
    pytest.importorskip("watchfiles")
    out = tmp_path / "freshness.json"
    assert freshness.main(["--files", "120", "--rounds", "1", "--model", "none", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    (floor,) = result["floor"].values()
    assert floor["files"] == 120 and floor["ratio"] > 0 and floor["floor_ms"] > 0 and floor["pass_python_ms"] > 0
    (warm,) = result["warm"].values()
    assert warm["refreshed"] == 0 and {"watch_p50_ms", "stat_p50_ms", "norefresh_p50_ms"} <= set(warm)
    assert result["edit_to_search_refreshed"] == [1] and sum(result["edit_to_search_watch_refreshed"]) == 1

def test_ann_benchmark_runs_on_synthetic_vectors(tmp_path: Path) -> None:
    import onnxruntime  # noqa: F401  (before usearch: see codesearch.index.vectors._usearch)

    pytest.importorskip("usearch")
    out, md = tmp_path / "ann.json", tmp_path / "ann.md"
    assert ann.main(["run", "--synthetic", "3000", "--sizes", "3000", "--libraries", "usearch",
                     "--json", str(out), "--markdown", str(md)]) == 0
    data = json.loads(out.read_text())
    assert {r["setting"] for r in data["sets"]} == {"i8", "i8 flat scan", "f16", "f32"}
    methods = {r["method"] for r in data["end_to_end"]}
    assert methods == {"exact product + top_k (today)", "VectorSearch graph"}
    assert all(r["recall@100"] >= 0.99 for r in data["end_to_end"])
    assert len(data["refresh"]) == 3 and "| set | size | scope |" in md.read_text()


def test_corpus_scale_projects_throughput_from_cpu_accounting(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Two actors of 30 CPU-s each and a driver of 6 on 2 cores take at least 33 s: 99,000 chunks -> 3,000/s."""
    pytest.importorskip("lance")
    from benchmarks import corpus_scale

    monkeypatch.setattr(corpus_scale.os, "cpu_count", lambda: 2)
    report = {"inserted": 99_000, "pipeline_s": 66.0, "actors": 2, "driver_peak_rss_mb": 500.0,
              "driver_pipeline_cpu_s": 6.0, "workers": {"1": {"cpu_s": 30.0, "peak_rss_mb": 400.0},
                                                        "2": {"cpu_s": 30.0, "peak_rss_mb": 420.0}}}
    facts = corpus_scale.with_projection(report)
    assert facts["chunks_per_s"] == 1500.0 and facts["projected_chunks_per_s"] == 3000.0
    assert facts["per_actor_chunks_per_cpu_s"] == 1650.0 and facts["worker_peak_mb"] == [400.0, 420.0]
    corpus_scale.print_tables({"sizes": {"100k": {"chunks": 99_000, "build": {"static_2_actor": facts}}}, "notes": []})
    assert "static_2_actor: 1500.0" in capsys.readouterr().out
    # With the stream timed apart from Ray's start, the driver's CPU while it streamed is what competes.
    streamed = corpus_scale.with_projection({**report, "stream_s": 55.0, "driver_stream_cpu_s": 2.0})
    assert streamed["stream_chunks_per_s"] == 1800.0 and streamed["projected_chunks_per_s"] == 3193.5  # 62 / 2 = 31 s
    assert "work_chunks_per_s" not in streamed  # a report without the actors' window (an older corpus) has none
    working = corpus_scale.with_projection({**report, "stream_s": 55.0, "work_s": 49.5, "driver_stream_cpu_s": 2.0})
    assert working["work_chunks_per_s"] == 2000.0
    busy_driver = corpus_scale.with_projection({**report, "stream_s": 55.0, "driver_stream_cpu_s": 36.0})
    assert busy_driver["projected_chunks_per_s"] == 2062.5  # (30 + 30 + 36) / 2 cores = 48 s
    build = {"static_1_actor": facts, "static_2_actor": facts, "static_actor_speedup": 1.05,
             "static_actor_speedup_stream": 1.1, "static_actor_speedup_work": 1.3, "static_actor_speedup_projected": 1.55,
             "static_actor_speedup_rounds": [0.9, 1.05, 1.2]}
    corpus_scale.print_tables({"sizes": {"10k": {"chunks": 9_956, "build": build}}, "notes": []})
    assert ("static: 2 actors / 1 actor, wall 1.05, streaming 1.1, working (actors' start left out) 1.3, "
            "projected 1.55 (medians of 3 rounds)") in \
        capsys.readouterr().out


# --- the harness every script measures with ----------------------------------------------------


def test_the_harness_percentile_is_numpys_linear_interpolation_and_its_helpers_measure(tmp_path: Path) -> None:
    import numpy as np

    from benchmarks import _harness as harness

    values = [5.0, 1.0, 3.0, 2.0, 8.0, 13.0, 21.0]
    for q in (0, 10, 50, 90, 95, 99, 100):
        assert harness.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert harness.percentiles(values, (50, 95), digits=None) == {"p50": 5.0, "p95": pytest.approx(18.6), "n": 7}
    assert harness.percentiles([], (50,)) == {"p50": 0.0, "n": 0}
    assert harness.table(["name", "n"], [["a", 1], ["bb", 22]], title="T") == "T\nname   n\n----  --\na      1\nbb    22"
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_bytes(b"1234")
    (tmp_path / "y").write_bytes(b"56")
    assert harness.folder_bytes(tmp_path) == 6
    result, ms = harness.timed(lambda: sum(range(1000)))
    assert result == 499500 and ms >= 0
    # The peak is measured in a new process, as a benchmark's: the suite's own process has been through too much
    # (threads of Ray and onnxruntime, memory freed but kept) for its counters to say what one block costs.
    probe = ("from benchmarks import _harness as h\n"
             "with h.PeakMemory() as m:\n"
             "    block = bytearray(64 << 20)\n"
             "    block[:: 4096] = b'x' * len(block[:: 4096])\n"
             "print(m.mb)\n")
    measured = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                              env=harness.script_env(), timeout=120)
    assert float(measured.stdout) >= (32 if sys.platform == "linux" else 0)
    assert harness.script_command("rankings")[1:] == ["-m", "benchmarks.rankings"]
    assert harness.script_env({"PYTHONPATH": "/x"})["PYTHONPATH"] == os.pathsep.join([str(harness.ROOT), "/x"])


def test_corpus_parity_compares_hits_exactly_scores_within_a_tolerance_and_the_stores() -> None:
    from benchmarks import corpus_parity

    def dump(score: float, hits: list[str], digest: str = "d") -> dict[str, Any]:
        ranking = [[h, score] for h in hits]
        return {"scoped": {"r\tq": ranking}, "single": {"r\tq": ranking}, "org": {"hybrid\tr\tq": [["r", *h] for h in
                                                                                                   ranking]},
                "scoped_identical": [1, 1], "digest_shared": {"chunks": "s"}, "digest_built": {"chunks": digest}}

    before = dump(0.5, ["a.py:1-9", "b.py:1-4"], "s")
    assert corpus_parity.compare(before, dump(0.5 + 1e-17, ["a.py:1-9", "b.py:1-4"], "s"), 1e-9) == []
    assert len(corpus_parity.compare(before, dump(0.6, ["a.py:1-9", "b.py:1-4"], "s"), 1e-9)) == 3  # every part
    swapped = corpus_parity.compare(before, dump(0.5, ["b.py:1-4", "a.py:1-9"], "s"), 1e-9)
    assert len(swapped) == 3 and all("hits differ" in line for line in swapped)
    assert corpus_parity.compare(before, dump(0.5, ["a.py:1-9", "b.py:1-4"], "other"), 1e-9) == [
        "a store built now differs from digest_built before"]
