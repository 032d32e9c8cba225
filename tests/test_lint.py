"""The code stays lint-clean and type-checked (ruff and mypy, configured in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, missing_reference

REPO = ROOT


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


def _ruff() -> str | None:
    """ruff on PATH, else the one installed beside this Python (a venv's bin/ need not be on PATH)."""
    found = shutil.which("ruff")
    if found is None:
        beside = Path(sys.executable).parent / ("ruff.exe" if sys.platform == "win32" else "ruff")
        found = str(beside) if beside.is_file() else None
    return found


def test_ruff_finds_nothing() -> None:
    ruff = _ruff()
    if ruff is None:
        missing_reference("ruff is not installed (pip install -e '.[test]')")
    result = _run(ruff, "check", "codesearch", "benchmarks", "tests", "setup.py")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing() -> None:
    pytest.importorskip("mypy")
    result = _run(sys.executable, "-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr
