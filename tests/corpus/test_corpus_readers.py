"""Readers during refreshes (issue 42, item 3): `codesearch serve --corpus` and `codesearch mcp --corpus`, each
asked by its own query processes, scoped and across repositories, while another process refreshes the corpus again
and again; every answer from one version, none an error. The figures are ``benchmarks/corpus_readers.py``'s; the
test runs it shorter and asserts no time."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("lance")
pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from benchmarks import corpus_readers as readers
from codesearch.corpus import Corpus


@pytest.mark.slow
def test_four_readers_during_refreshes_answer_each_from_one_version(ray_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two API readers and two MCP readers against a refresher toggling six files at once: no error, no answer
    that mixes versions or differs from another at its version; and the check sees an answer that does."""
    repos = readers.make_repos(tmp_path / "repos")
    store = str(tmp_path / "store")
    Corpus(store).build([f"{name}={root}" for name, root in repos.items()])  # the default model's static tier
    work = tmp_path / "records"
    result = readers.run(store, repos, work, seconds=6, idle_seconds=3)
    assert result["errors"] == 0, result["error_samples"]
    assert result["inconsistent"] == 0, result["inconsistent_samples"]
    assert result["refresh_errors"] == 0 and result["refreshes"] >= 2
    assert set(result["states_refreshed"]) == {"A", "B"}
    assert result["versions_seen"] >= 3  # the readers answered from the first version and from refreshed ones
    for name, figures in result["readers"].items():
        assert figures["idle_n"] and figures["refresh_n"], (name, figures)
        assert figures["p99_ratio"] is not None  # measured; the benchmark reports its size (no time is asserted)

    # The check itself: answers relabelled with another version, or mixing two versions' hits, are caught.
    answers = {name: readers.load_records(work / f"{name}.jsonl") for name in readers.READERS}
    refreshes = readers.load_records(work / "refresher.jsonl")
    named = [r["versions"] for r in refreshes if r["error"] is None]
    initial = next(r["versions"] for r in answers["api-org"] if r["versions"] not in named)
    named.append(initial)
    assert readers.check_answers(answers, store, named) == {name: [] for name in readers.READERS}
    state = {readers.version_key(r["versions"]): r["state"] for r in refreshes if r["error"] is None}
    org = [r for r in answers["api-org"] if readers.version_key(r["versions"]) in state and r["q"] == 0]
    a = next(r for r in org if state[readers.version_key(r["versions"])] == "A")
    b = next(r for r in org if state[readers.version_key(r["versions"])] == "B")
    relabelled = {**copy.deepcopy(a), "versions": b["versions"]}
    toggled = [i for i, hit in enumerate(b["hits"]) if hit[5] == "B"]
    mixed = copy.deepcopy(b)
    mixed["hits"][toggled[0]] = next(hit for hit in a["hits"] if hit[5] == "A")
    unnamed = {**copy.deepcopy(a), "versions": {**a["versions"], "files.lance": 10_000}}
    found = readers.check_answers({"api-org": [relabelled, mixed, b, unnamed]}, store, named)["api-org"]
    assert [i for i, _ in found] == [0, 1, 3], found
    assert "unlike the other answers" not in found[0][1]  # caught by the rows of the version it names
