"""The README's promises: two set-up commands, CI runs the same test command, code blocks run."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
    from codesearch.cli import main

    usage = README.split("## Command line", 1)[1].split("```", 2)[1]
    documented = set(re.findall(r"^codesearch (\w+)", usage, flags=re.M))
    assert documented == set(main.commands)
