"""What ``codesearch agent-setup`` prints: the MCP server's registration for common clients, and a guide for agents.

Nothing here writes a file: each client keeps its configuration in its own
place, and the user decides what goes there.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

AGENT_GUIDE = """\
## Finding code: the codesearch MCP server

- Know the symbol's name (a class, function or method)? `find_definition` with it (`Session.send`, `send`,
  `Foo::bar`): exact, from the symbol table, same case first. An unknown name answers a `note` with the
  closest names.
- Where is an identifier used? `find_references`: whole-word matches with their case, as `grep -w`, in file
  and line order, each with the `lines` that use it. Textual: dynamic dispatch, reflection and names built at
  run time are missed. `capped` means there are more (raise `k`).
- Know what the code does but not what it is called? `search` with a question or a description
  ("where are redirects turned into GETs"); narrow it with `scope`, `include`, `exclude` or `kinds`.
- Have a location and want code like it? `find_related` with `path:line`.
- Use grep for exact strings that are not identifiers (messages, config values), for regular expressions,
  and for files the index does not hold (`index_status` says what it holds).
- Keep answers small: `max_tokens` caps an answer (hit texts are cut, then hits dropped, and it says how
  many); `compact: true` gives locations and one line per hit, for when you will open the files yourself.
- An empty answer carries a `note` saying why (nothing indexed under the scope, no such symbol, ...).
"""
"""A short guide an agent can keep in AGENTS.md or CLAUDE.md: which tool for which question."""


def server_command(paths: Sequence[str], *, index_dir: str | None = None, read_only: bool = False,
                   allow_any_repo: bool = False) -> list[str]:
    """The command line that starts the MCP server for ``paths`` (absolute), with the ``codesearch`` found here.

    The ``codesearch`` script on ``PATH`` when there is one, else this Python running the CLI module.
    """
    found = shutil.which("codesearch")
    command = [found] if found else [sys.executable, "-m", "codesearch.faces.cli"]
    command += ["mcp", *(str(Path(p).expanduser().resolve()) for p in paths)]
    if index_dir is not None:
        command += ["--index-dir", str(Path(index_dir).expanduser().resolve())]
    if read_only:
        command.append("--read-only")
    if allow_any_repo:
        command.append("--allow-any-repo")
    return command


def serves(paths: Sequence[str], *, allow_any_repo: bool = False) -> str:
    """What a server started for ``paths`` lets its tools read: those folders and the ones under them, or any."""
    if allow_any_repo:
        return ("with --allow-any-repo, a tool's `repo` may name any folder this user can read; it is indexed on "
                "first use, its index left in the cache")
    roots = ", ".join(str(Path(p).expanduser().resolve()) for p in paths)
    return (f"the server answers for {roots} and the folders under them; a `repo` anywhere else is refused "
            "(add --allow-any-repo to serve any folder this user can read)")


def registrations(command: Sequence[str]) -> dict[str, dict[str, str]]:
    """Each client's registration of the server ``command``: a title, where it goes, and the text itself."""
    program, args = command[0], list(command[1:])
    servers = {"codesearch": {"command": program, "args": args}}
    desktop = json.dumps({"mcpServers": servers}, indent=2)
    vscode = json.dumps({"servers": {"codesearch": {"type": "stdio", "command": program, "args": args}}}, indent=2)
    codex = f"[mcp_servers.codesearch]\ncommand = {json.dumps(program)}\nargs = {json.dumps(args)}\n"
    config_home = "%APPDATA%" if os.name == "nt" else "~/Library/Application Support (macOS) or ~/.config"
    return {
        "claude-code": {"title": "Claude Code", "how": "Run once in the repository:",
                        "text": f"claude mcp add codesearch -- {shlex.join(command)}\n"},
        "claude-desktop": {"title": "Claude Desktop",
                           "how": f"Merge into claude_desktop_config.json (under {config_home}/Claude):",
                           "text": desktop + "\n"},
        "cursor": {"title": "Cursor", "how": "Merge into .cursor/mcp.json (this project) or ~/.cursor/mcp.json:",
                   "text": desktop + "\n"},
        "vscode": {"title": "VS Code (Copilot agent mode)", "how": "Merge into .vscode/mcp.json:", "text": vscode + "\n"},
        "codex": {"title": "Codex CLI", "how": "Add to ~/.codex/config.toml:", "text": codex},
    }


__all__ = ["AGENT_GUIDE", "registrations", "server_command", "serves"]
