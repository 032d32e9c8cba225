"""`codesearch install CLIENT` / `uninstall`: real sample files of every client, merged in place.

The samples in tests/fixtures/agents hold other servers, settings and comments in each client's format. The
files written are read back here by the standard library (json, tomllib) and by a comment stripper of this
test's own, never by the module under test.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from codesearch.faces.agents import server_command
from codesearch.faces.cli import main

tomllib = pytest.importorskip("tomllib")

AGENT_FIXTURES = FIXTURES / "agents"

# (client, scope) -> the sample file, and where the client keeps that file (Linux; "~" is $HOME, "." the project).
CASES: dict[tuple[str, str], tuple[str, str]] = {
    ("claude-code", "project"): ("claude-code.mcp.json", "./.mcp.json"),
    ("claude-code", "user"): ("claude-code.claude.json", "~/.claude.json"),
    ("claude-desktop", "user"): ("claude-desktop.json", "~/.config/Claude/claude_desktop_config.json"),
    ("cursor", "project"): ("cursor.json", "./.cursor/mcp.json"),
    ("cursor", "user"): ("cursor.json", "~/.cursor/mcp.json"),
    ("vscode", "project"): ("vscode.jsonc", "./.vscode/mcp.json"),
    ("vscode", "user"): ("vscode.jsonc", "~/.config/Code/User/mcp.json"),
    ("windsurf", "user"): ("windsurf.json", "~/.codeium/windsurf/mcp_config.json"),
    ("zed", "project"): ("zed.jsonc", "./.zed/settings.json"),
    ("zed", "user"): ("zed.jsonc", "~/.config/zed/settings.json"),
    ("codex", "project"): ("codex.toml", "./.codex/config.toml"),
    ("codex", "user"): ("codex.toml", "~/.codex/config.toml"),
    ("gemini", "project"): ("gemini.jsonc", "./.gemini/settings.json"),
    ("gemini", "user"): ("gemini.jsonc", "~/.gemini/settings.json"),
    ("opencode", "project"): ("opencode.json", "./opencode.json"),
    ("opencode", "user"): ("opencode.json", "~/.config/opencode/opencode.json"),
}
DEFAULT_SCOPE = {"claude-code": "project", "claude-desktop": "user", "cursor": "project", "vscode": "project",
                 "windsurf": "user", "zed": "project", "codex": "project", "gemini": "project", "opencode": "project"}
KEY = {"claude-code": ["mcpServers"], "claude-desktop": ["mcpServers"], "cursor": ["mcpServers"],
       "vscode": ["servers"], "windsurf": ["mcpServers"], "zed": ["context_servers"], "codex": ["mcp_servers"],
       "gemini": ["mcpServers"], "opencode": ["mcp"]}


def expected_entry(client: str, command: list[str]) -> dict[str, Any]:
    """How each client's documentation spells a stdio server."""
    program, args = command[0], command[1:]
    return {
        "claude-code": {"type": "stdio", "command": program, "args": args, "env": {}},
        "vscode": {"type": "stdio", "command": program, "args": args},
        "zed": {"command": program, "args": args, "env": {}},
        "opencode": {"type": "local", "command": command},
    }.get(client, {"command": program, "args": args})


_TOKENS = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)


def read_jsonc(text: str) -> Any:
    """A JSONC reference reader: comments dropped outside strings, trailing commas dropped, then json.loads."""
    bare = _TOKENS.sub(lambda m: m.group() if m.group().startswith('"') else "", text)
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", bare))


def read(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text) if path.suffix == ".toml" else read_jsonc(text)


def comments(text: str, toml: bool) -> list[str]:
    if toml:
        return [line[line.index("#"):] for line in text.splitlines() if "#" in line]
    return [m.group() for m in _TOKENS.finditer(text) if not m.group().startswith('"')]


def with_entry(document: dict[str, Any], key: list[str], name: str, entry: dict[str, Any]) -> dict[str, Any]:
    result = json.loads(json.dumps(document))
    node = result
    for part in key:
        node = node.setdefault(part, {})
    node[name] = entry
    return result


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A home folder and a project, both in tmp_path: every user-scope file lands under this home."""
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("def main():\n    return 1\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for name in ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "APPDATA"):
        monkeypatch.delenv(name, raising=False)
    return home, project


def _location(where: str, home: Path, project: Path) -> Path:
    return home / where[2:] if where.startswith("~/") else project / where[2:]


def _cli(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.output)
    return data


@pytest.mark.skipif(sys.platform != "linux", reason="the expected locations are Linux's")
@pytest.mark.parametrize(("client", "scope"), list(CASES), ids=[f"{c}-{s}" for c, s in CASES])
def test_install_merges_keeps_comments_backs_up_is_idempotent_and_uninstalls(
        places: tuple[Path, Path], client: str, scope: str) -> None:
    home, project = places
    sample, where = CASES[(client, scope)]
    target = _location(where, home, project)
    target.parent.mkdir(parents=True, exist_ok=True)
    original = (AGENT_FIXTURES / sample).read_text(encoding="utf-8")
    target.write_text(original, encoding="utf-8")
    toml = target.suffix == ".toml"

    data = _cli("install", client, str(project), "--scope", scope)
    assert Path(data["file"]) == target and data["changed"] is True and data["created"] is False
    command = server_command([str(project)])
    assert data["entry"] == expected_entry(client, command)
    written = target.read_text(encoding="utf-8")
    assert read(target) == with_entry(read(AGENT_FIXTURES / sample), KEY[client], "codesearch", expected_entry(client, command))
    assert comments(written, toml) == comments(original, toml)  # every comment kept, in order
    backup = target.with_name(target.name + ".codesearch-backup")
    assert Path(data["backup"]) == backup and backup.read_text(encoding="utf-8") == original

    backup.unlink()
    again = _cli("install", client, str(project), "--scope", scope)
    assert again["changed"] is False and again["backup"] is None
    assert target.read_text(encoding="utf-8") == written and not backup.exists()

    removed = _cli("uninstall", client, str(project), "--scope", scope)
    assert removed["changed"] is True and removed["entry"] is None
    assert read(target) == read(AGENT_FIXTURES / sample)
    if toml:
        assert comments(target.read_text(encoding="utf-8"), toml) == comments(original, toml)
    else:
        assert target.read_text(encoding="utf-8") == original  # byte for byte
    assert _cli("uninstall", client, str(project), "--scope", scope)["changed"] is False


@pytest.mark.skipif(sys.platform != "linux", reason="the expected locations are Linux's")
@pytest.mark.parametrize("client", list(DEFAULT_SCOPE))
def test_install_creates_a_missing_file_at_the_default_scope(places: tuple[Path, Path], client: str) -> None:
    home, project = places
    target = _location(CASES[(client, DEFAULT_SCOPE[client])][1], home, project)
    data = _cli("install", client, str(project))
    assert data["scope"] == DEFAULT_SCOPE[client] and Path(data["file"]) == target
    assert data["created"] is True and data["backup"] is None
    entry = expected_entry(client, server_command([str(project)]))
    want = with_entry({"$schema": "https://opencode.ai/config.json"} if client == "opencode" else {}, KEY[client],
                      "codesearch", entry)
    assert read(target) == want
    assert not list(target.parent.glob("*.codesearch-backup"))


def test_dry_run_prints_the_diff_and_writes_nothing(places: tuple[Path, Path]) -> None:
    home, project = places
    target = home / ".codex" / "config.toml"
    target.parent.mkdir()
    original = (AGENT_FIXTURES / "codex.toml").read_text()
    target.write_text(original)
    result = CliRunner().invoke(main, ["install", "codex", str(project), "--scope", "user", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"--- {target}\n+++ {target}\n")
    assert "+[mcp_servers.codesearch]" in result.output and f'"mcp", "{project.resolve()}"' in result.output
    assert target.read_text() == original and not (target.parent / "config.toml.codesearch-backup").exists()
    data = _cli("install", "cursor", str(project), "--dry-run")
    assert data["dry_run"] is True and data["created"] is True and data["diff"].startswith("--- /dev/null\n")
    assert not (project / ".cursor").exists()


@pytest.mark.parametrize(("sample", "client", "where", "needle"), [
    ("broken.json", "cursor", ".cursor/mcp.json", "line 4, column 5: expected ',' or '}'"),
    ("broken.toml", "codex", ".codex/config.toml", "line 1"),
])
def test_a_file_that_cannot_be_parsed_is_refused_in_one_line(places: tuple[Path, Path], sample: str, client: str,
                                                             where: str, needle: str) -> None:
    _, project = places
    target = project / where
    target.parent.mkdir()
    broken = (AGENT_FIXTURES / sample).read_text()
    target.write_text(broken)
    result = CliRunner().invoke(main, ["install", client, str(project)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: cannot parse {target}: ") and needle in lines[0]
    assert "nothing was written" in lines[0]
    assert target.read_text() == broken and len(list(target.parent.iterdir())) == 1


def test_a_changed_registration_is_updated_and_names_keep_servers_apart(places: tuple[Path, Path],
                                                                        tmp_path: Path) -> None:
    _, project = places
    other = tmp_path / "other"
    other.mkdir()
    target = project / ".vscode" / "mcp.json"
    target.parent.mkdir()
    target.write_text((AGENT_FIXTURES / "vscode.jsonc").read_text())
    _cli("install", "vscode", str(project))
    updated = _cli("install", "vscode", str(project), "--read-only", "--index-dir", str(tmp_path / "shared"))
    assert updated["changed"] is True and updated["entry"]["args"][-3:] == ["--index-dir", str(tmp_path / "shared"),
                                                                         "--read-only"]
    _cli("install", "vscode", str(project), str(other), "--name", "codesearch-both")
    servers = read(target)["servers"]
    assert list(servers) == ["tracker", "codesearch", "codesearch-both"]
    assert servers["codesearch"]["args"][-1] == "--read-only"
    assert servers["codesearch-both"]["args"][-2:] == [str(project.resolve()), str(other.resolve())]


def test_opencode_v2_files_keep_servers_under_mcp_servers(places: tuple[Path, Path]) -> None:
    _, project = places
    target = project / "opencode.jsonc"
    target.write_text((AGENT_FIXTURES / "opencode-v2.jsonc").read_text())
    data = _cli("install", "opencode", str(project))
    assert Path(data["file"]) == target
    servers = read(target)["mcp"]["servers"]
    assert list(servers) == ["everything", "codesearch"]
    assert servers["codesearch"] == {"type": "local", "command": server_command([str(project)])}
    assert "// V2 keeps servers under mcp.servers" in target.read_text()


def test_user_files_follow_the_clients_own_variables(places: tuple[Path, Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _, project = places
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude-home"))
    assert Path(_cli("install", "codex", str(project), "--scope", "user")["file"]) == \
        tmp_path / "codex-home" / "config.toml"
    assert Path(_cli("install", "claude-code", str(project), "--scope", "user")["file"]) == \
        tmp_path / "claude-home" / ".claude.json"


@pytest.mark.parametrize(("args", "needle"), [
    (["install", "claude-desktop", "--scope", "project"], "Claude Desktop has no project-scope configuration"),
    (["install", "cursor", "{missing}"], "not a directory"),
    (["install", "cursor", ".", "--name", " "], "name is empty"),
])
def test_bad_requests_are_one_line(places: tuple[Path, Path], tmp_path: Path, args: list[str], needle: str) -> None:
    _, project = places
    args = [a.replace("{missing}", str(tmp_path / "missing")) for a in args]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and needle in lines[0], result.output
    assert not (project / ".cursor").exists()
