"""The README's promises: two set-up commands, CI runs the same test command, code blocks run."""

from __future__ import annotations

import os
import re
from pathlib import Path

from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _bash_blocks() -> list[str]:
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S)]


def test_exactly_two_setup_commands() -> None:
    blocks = _bash_blocks()
    assert len(blocks) == 2
    install, tests = blocks
    assert "pip install torch==2.13.0" in install and "codesearch search" in install
    assert "pytest" in tests and "CODESEARCH_PUREPYTHON=1" in tests


def test_ci_runs_the_readme_test_command() -> None:
    test_command = _bash_blocks()[1]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_command in ci_lines


def test_cli_usage_in_readme_matches_commands() -> None:
    from codesearch.faces.cli import main

    usage = README.split("## Command line", 1)[1].split("```", 2)[1]
    documented = set(re.findall(r"^codesearch ([\w-]+)", usage, flags=re.M))
    assert documented == set(main.commands)


def test_python_example_runs(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The README's API example, run as written on a small repository with the real default model."""
    import pytest

    pytest.importorskip("onnxruntime")
    block = re.search(r"```python\n(.*?)```", README, flags=re.S).group(1)  # type: ignore[union-attr]
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "sessions.py").write_text(
        "def rebuild_method(prepared_request, response):\n"
        '    """When being redirected we may want to change the method of the request."""\n'
        "    if response.status_code == 303:\n"
        '        prepared_request.method = "GET"\n'
    )
    monkeypatch.setenv("CODESEARCH_CACHE_DIR", os.environ.get("CODESEARCH_CACHE_DIR", str(tmp_path / "cache")))
    namespace: dict[str, object] = {}
    exec(compile(block.replace("path/to/repo", str(repo)), "README.md", "exec"), namespace)
    hits = namespace["hits"]
    assert hits and hits[0].path == "src/sessions.py"  # type: ignore[index,attr-defined]


def test_retriever_example_runs(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The README's retriever example, run as written (both frameworks, the real default model, offline)."""
    import pytest

    for package in ("onnxruntime", "langchain_core", "llama_index.core"):
        pytest.importorskip(package)
    block = next(b for b in re.findall(r"```python\n(.*?)```", README, flags=re.S) if "CodeSearchRetriever" in b)
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "sessions.py").write_text(
        "def rebuild_method(prepared_request, response):\n"
        '    """When being redirected we may want to change the method of the request."""\n'
        "    if response.status_code == 303:\n"
        '        prepared_request.method = "GET"\n'
    )
    monkeypatch.setenv("CODESEARCH_CACHE_DIR", os.environ.get("CODESEARCH_CACHE_DIR", str(tmp_path / "cache")))
    namespace: dict[str, object] = {}
    exec(compile(block.replace("path/to/repo", str(repo)), "README.md", "exec"), namespace)
    docs, nodes = namespace["docs"], namespace["nodes"]
    assert [d.metadata["path"] for d in docs] == ["src/sessions.py"]  # type: ignore[attr-defined]
    assert [n.node.metadata["location"] for n in nodes] == ["src/sessions.py:1-4"]  # type: ignore[attr-defined]


def test_ci_fails_at_once_without_the_requests_corpus(tmp_path: Path) -> None:
    """.ci/run needs ../shared/corpora/requests-2.32.3.tar.gz: without it, it stops before installing anything."""
    import shutil
    import subprocess

    project = tmp_path / "project"
    (project / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", project / ".ci" / "run")
    proc = subprocess.run(["bash", str(project / ".ci" / "run")], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "CODESEARCH_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode != 0
    assert "requests-2.32.3.tar.gz is missing" in proc.stderr and "skip" not in proc.stderr + proc.stdout
    assert not (project / ".venv").exists()
