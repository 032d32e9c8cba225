"""``codesearch install CLIENT``: write the MCP server's registration into an agent's own configuration file.

Each client (:data:`CLIENTS`) keeps its MCP servers in its own file, format
and key; :func:`plan` works out the file's new text, and :func:`apply`
writes it. The file is merged, never replaced: JSON and JSONC files are edited
in place (:mod:`codesearch.faces.jsonc`: comments, order and layout kept), Codex's
TOML through ``tomlkit`` (comments kept too). A file that cannot be parsed is
refused in one line and left as it was; a file that changes is backed up
first (``NAME.codesearch-backup`` beside it); running twice changes nothing
the second time.

User-scope files are found from the home folder (``$HOME``) and the
variables the clients themselves honour (``XDG_CONFIG_HOME``, ``APPDATA``,
``CODEX_HOME``, ``CLAUDE_CONFIG_DIR``); project-scope files under the first
repository given.
"""

from __future__ import annotations

import difflib
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from codesearch.exceptions import ConfigFileError, RootNotFoundError
from codesearch.faces.agents import server_command

Scope = Literal["project", "user"]
SCOPES: tuple[Scope, ...] = ("project", "user")
BACKUP_SUFFIX = ".codesearch-backup"
DEFAULT_NAME = "codesearch"


def _home() -> Path:
    return Path.home()


def _config_home() -> Path:
    """``$XDG_CONFIG_HOME`` or ``~/.config`` (Linux and the CLIs that follow XDG on macOS too)."""
    return Path(os.environ.get("XDG_CONFIG_HOME") or _home() / ".config")


def _app_data(*parts: str) -> Path:
    """A desktop application's settings folder: ``%APPDATA%`` on Windows, Application Support on macOS, else XDG."""
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or _home() / "AppData" / "Roaming", *parts)
    if sys.platform == "darwin":
        return _home().joinpath("Library", "Application Support", *parts)
    return _config_home().joinpath(*parts)


def _first_existing(*candidates: Path) -> Path:
    """The first candidate that exists, else the last (``opencode.jsonc`` before ``opencode.json``)."""
    return next((c for c in candidates if c.exists()), candidates[-1])


def _stdio(command: Sequence[str]) -> dict[str, Any]:
    return {"command": command[0], "args": list(command[1:])}


@dataclass(frozen=True)
class Client:
    """Where and how one agent keeps its MCP servers.

    Attributes:
        name: the name ``codesearch install`` takes.
        title: the product's name.
        format: ``json``, ``jsonc`` (comments and trailing commas allowed) or ``toml``.
        key: the keys, from the top of the file, of the table of servers.
        entry: the registration of a server command line, as the client spells it.
        project: the project-scope file under a repository, or ``None``.
        user: the user-scope file, or ``None``.
        docs: where the client documents its format.
        skeleton: members a new file starts with (opencode's ``$schema``).
        newer_key: where a newer format of the file keeps its servers (opencode V2's ``mcp.servers``), used
            when the file already has it.
    """

    name: str
    title: str
    format: Literal["json", "jsonc", "toml"]
    key: tuple[str, ...]
    entry: Callable[[Sequence[str]], dict[str, Any]]
    project: Callable[[Path], Path] | None
    user: Callable[[], Path] | None
    docs: str
    skeleton: dict[str, Any] = field(default_factory=dict)
    newer_key: tuple[str, ...] | None = None

    @property
    def scopes(self) -> tuple[Scope, ...]:
        return tuple(s for s in SCOPES if (self.project if s == "project" else self.user) is not None)

    def file(self, scope: Scope, project: Path) -> Path:
        """The configuration file for ``scope`` (``project`` is the repository's folder).

        Raises:
            ValueError: the client has no file of that scope.
        """
        if scope == "project" and self.project is not None:
            return self.project(project)
        if scope == "user" and self.user is not None:
            return self.user()
        raise ValueError(f"{self.title} has no {scope}-scope configuration; use --scope {self.scopes[0]}")

    def servers_key(self, document: Any) -> tuple[str, ...]:
        """Where the servers go in this file: :attr:`newer_key` when the file already has that object, else :attr:`key`."""
        if self.newer_key is not None and isinstance(_dig(document, self.newer_key), dict):
            return self.newer_key
        return self.key


CLIENTS: dict[str, Client] = {c.name: c for c in [
    Client("claude-code", "Claude Code", "json", ("mcpServers",),
           lambda cmd: {"type": "stdio", **_stdio(cmd), "env": {}},
           lambda repo: repo / ".mcp.json",
           lambda: Path(os.environ["CLAUDE_CONFIG_DIR"]) / ".claude.json" if os.environ.get("CLAUDE_CONFIG_DIR")
           else _home() / ".claude.json",
           "code.claude.com/docs/en/mcp (scopes: project .mcp.json, user ~/.claude.json)"),
    Client("claude-desktop", "Claude Desktop", "json", ("mcpServers",), _stdio, None,
           lambda: _app_data("Claude", "claude_desktop_config.json"),
           "modelcontextprotocol.io quickstart (claude_desktop_config.json)"),
    Client("cursor", "Cursor", "json", ("mcpServers",), _stdio,
           lambda repo: repo / ".cursor" / "mcp.json", lambda: _home() / ".cursor" / "mcp.json",
           "cursor.com/docs/mcp"),
    Client("vscode", "VS Code", "jsonc", ("servers",), lambda cmd: {"type": "stdio", **_stdio(cmd)},
           lambda repo: repo / ".vscode" / "mcp.json", lambda: _app_data("Code", "User", "mcp.json"),
           "code.visualstudio.com/docs/copilot/reference/mcp-configuration"),
    Client("windsurf", "Windsurf", "json", ("mcpServers",), _stdio, None,
           lambda: _home() / ".codeium" / "windsurf" / "mcp_config.json", "docs.windsurf.com/windsurf/cascade/mcp"),
    Client("zed", "Zed", "jsonc", ("context_servers",), lambda cmd: {**_stdio(cmd), "env": {}},
           lambda repo: repo / ".zed" / "settings.json",
           lambda: (Path(os.environ.get("APPDATA") or _home()) / "Zed" / "settings.json") if sys.platform == "win32"
           else _config_home() / "zed" / "settings.json",
           "zed.dev/docs/ai/mcp"),
    Client("codex", "Codex CLI", "toml", ("mcp_servers",), _stdio,
           lambda repo: repo / ".codex" / "config.toml",
           lambda: Path(os.environ.get("CODEX_HOME") or _home() / ".codex") / "config.toml",
           "developers.openai.com/codex/mcp (a project's .codex/config.toml is read in trusted projects)"),
    Client("gemini", "Gemini CLI", "jsonc", ("mcpServers",), _stdio,
           lambda repo: repo / ".gemini" / "settings.json", lambda: _home() / ".gemini" / "settings.json",
           "geminicli.com/docs/tools/mcp-server"),
    Client("opencode", "opencode", "jsonc", ("mcp",), lambda cmd: {"type": "local", "command": list(cmd)},
           lambda repo: _first_existing(repo / "opencode.jsonc", repo / "opencode.json"),
           lambda: _first_existing(_config_home() / "opencode" / "opencode.jsonc",
                                   _config_home() / "opencode" / "opencode.json"),
           "opencode.ai/docs/mcp-servers", {"$schema": "https://opencode.ai/config.json"}, ("mcp", "servers")),
]}
"""Every client ``codesearch install`` writes for, by the name it takes."""


@dataclass(frozen=True)
class Change:
    """What :func:`plan` found to do to one client's file.

    Attributes:
        client: the client's name.
        scope: ``project`` or ``user``.
        file: the configuration file.
        name: the server's name in it.
        entry: the registration (``None`` when removing).
        before: the file's text (``None`` when it does not exist).
        after: its new text.
    """

    client: str
    scope: Scope
    file: Path
    name: str
    entry: dict[str, Any] | None
    before: str | None
    after: str

    @property
    def changed(self) -> bool:
        return self.after != (self.before or "")

    def diff(self) -> str:
        """The change as a unified diff (empty when nothing changes)."""
        lines = difflib.unified_diff((self.before or "").splitlines(keepends=True), self.after.splitlines(keepends=True),
                                     fromfile=str(self.file) if self.before is not None else "/dev/null",
                                     tofile=str(self.file))
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)

    def as_dict(self) -> dict[str, Any]:
        return {"client": self.client, "scope": self.scope, "file": str(self.file), "name": self.name,
                "entry": self.entry, "changed": self.changed, "created": self.before is None and self.changed}


def client(name: str) -> Client:
    """The client called ``name``.

    Raises:
        ValueError: no such client (the message lists them).
    """
    found = CLIENTS.get(name)
    if found is None:
        raise ValueError(f"unknown client {name!r}; use one of {', '.join(CLIENTS)}")
    return found


def _read(file: Path) -> str | None:
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"cannot read {file}: not UTF-8 text ({exc.reason}); nothing was written") from None


def _refuse(file: Path, why: str) -> ConfigFileError:
    return ConfigFileError(f"cannot parse {file}: {why}; nothing was written (fix the file, or move it aside and "
                           f"run again)")


def _edit_json(found: Client, file: Path, text: str | None, name: str, entry: dict[str, Any] | None) -> str:
    from codesearch.faces.jsonc import JsoncError, loads, remove_member, set_member

    text = text or ""
    try:
        document = loads(text)
        if document is not None and not isinstance(document, dict):
            raise JsoncError("the top level is not an object")
        key = found.servers_key(document)
        if entry is None:
            return remove_member(text, [*key, name])
        if _dig(document, [*key, name]) == entry:
            return text
        if document is None:  # a new (or empty) file starts with the client's own members
            for member, value in found.skeleton.items():
                text = set_member(text, [member], value)
        return set_member(text, [*key, name], entry)
    except JsoncError as exc:
        raise _refuse(file, str(exc)) from None


def _dig(document: Any, key: Sequence[str]) -> Any:
    for part in key:
        document = document.get(part) if isinstance(document, dict) else None
    return document


def _edit_toml(found: Client, file: Path, text: str | None, name: str, entry: dict[str, Any] | None) -> str:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        document = tomlkit.parse(text or "")
    except TOMLKitError as exc:
        raise _refuse(file, str(exc)) from None
    servers = document.get(found.key[0])
    if entry is None:
        if servers is None or name not in servers:
            return text or ""
        del servers[name]
        return tomlkit.dumps(document)
    if servers is not None and not isinstance(servers, dict):
        raise _refuse(file, f"{found.key[0]} is not a table")
    if servers is not None and name in servers and _plain(servers[name]) == entry:
        return text or ""
    table = tomlkit.table()
    for key, value in entry.items():
        table[key] = value
    table.add(tomlkit.nl())  # a blank line before whatever table follows
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        if text and not text.endswith("\n\n"):
            document.add(tomlkit.nl())
        document[found.key[0]] = servers
    servers[name] = table
    after = tomlkit.dumps(document)
    return after[:-1] if after.endswith("\n\n") and not (text or "").endswith("\n\n") else after


def _plain(value: Any) -> Any:
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def plan(client_name: str, paths: Sequence[str] = (".",), *, scope: Scope | None = None, name: str = DEFAULT_NAME,
         index_dir: str | None = None, read_only: bool = False, allow_any_repo: bool = False,
         remove: bool = False) -> Change:
    """What installing (or with ``remove``, uninstalling) the server for ``paths`` does to the client's file.

    Args:
        client_name: a key of :data:`CLIENTS`.
        paths: the repositories the server serves; the first is the project
            whose project-scope file is written.
        scope: ``project`` or ``user``; default the project's file where the
            client has one, else the user's.
        name: the server's name in the file.
        index_dir: a shared index the server reads.
        read_only: register the server read-only.
        allow_any_repo: register a server whose tools may name any folder.
        remove: plan the removal of ``name`` instead.

    Raises:
        ValueError: an unknown client, a scope the client lacks, or an empty name.
        RootNotFoundError: a path is not a folder.
        ConfigFileError: the file exists but cannot be read or parsed.
    """
    found = client(client_name)
    if not name.strip():
        raise ValueError("the server's name is empty")
    if scope is None:
        scope = found.scopes[0]
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}; use one of {', '.join(SCOPES)}")
    paths = list(paths) or ["."]
    for path in paths:
        if not Path(path).expanduser().is_dir():
            raise RootNotFoundError(f"not a directory: {path}")
    project = Path(paths[0]).expanduser().resolve()
    file = found.file(scope, project)
    before = _read(file)
    entry = None if remove else found.entry(server_command(paths, index_dir=index_dir, read_only=read_only,
                                                           allow_any_repo=allow_any_repo))
    edit = _edit_toml if found.format == "toml" else _edit_json
    after = edit(found, file, before, name, entry)
    return Change(found.name, scope, file, name, entry, before, after)


def apply(change: Change) -> Path | None:
    """Write ``change`` (nothing when it changes nothing): back up the file, then replace it atomically.

    Returns:
        The backup's path, or ``None`` when no file was there to back up (or nothing changed).
    """
    if not change.changed:
        return None
    file = change.file
    backup = None
    file.parent.mkdir(parents=True, exist_ok=True)
    if change.before is not None:
        backup = file.with_name(file.name + BACKUP_SUFFIX)
        backup.write_text(change.before, encoding="utf-8")
    mode = file.stat().st_mode & 0o7777 if file.exists() else None
    fd, temporary = tempfile.mkstemp(prefix=f".{file.name}.", dir=file.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            out.write(change.after)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, file)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return backup


__all__ = ["BACKUP_SUFFIX", "CLIENTS", "DEFAULT_NAME", "SCOPES", "Change", "Client", "Scope", "apply", "client",
           "plan"]
