"""The command line: output, --json, one-line errors with exit code 2, --help everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from codesearch.chunking import BACKEND
from codesearch.cli import main


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
        [sys.executable, "-m", "codesearch.cli", "stats", str(path)], capture_output=True, text=True
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
    result = CliRunner().invoke(main, ["stats", str(requests_corpus), "--json"])
    data = json.loads(result.output)
    assert (data["files_seen"], data["files_indexed"], data["bytes"], data["chunks"]) == (129, 117, 625_261, 318)
    assert data["skipped"]["binary"] == 10
