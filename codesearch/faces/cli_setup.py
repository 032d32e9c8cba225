"""``codesearch agent-setup``, ``install`` and ``uninstall``: the MCP server registered with agents.

``agent-setup`` prints each client's registration and a guide for
``AGENTS.md`` (:mod:`codesearch.faces.agents`); ``install`` and ``uninstall``
write it into a client's own configuration file (:mod:`codesearch.faces.install`).
"""

from __future__ import annotations

from typing import Any

import click

from codesearch.display import printable
from codesearch.faces.options import F, Folder, echo_json, json_option, reports_errors


@click.command("agent-setup")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False, dir_okay=True))
@click.option("--client", type=click.Choice(["all", "claude-code", "claude-desktop", "cursor", "vscode", "codex"]),
              default="all", show_default=True, help="Print the registration for this client only.")
@click.option("--index-dir", type=Folder(), default=None,
              help="A shared index the server should read (e.g. one built in CI).")
@click.option("--read-only", is_flag=True, help="Register the server read-only (for a shared index).")
@click.option("--allow-any-repo", is_flag=True,
              help="Register a server whose tools may search any folder this user can read, not only PATHS.")
@json_option
@reports_errors
def agent_setup(paths: tuple[str, ...], client: str, index_dir: str | None, read_only: bool, allow_any_repo: bool,
                as_json: bool) -> None:
    """Print how to register the MCP server for PATHS with common agents, and a guide for AGENTS.md or CLAUDE.md.

    Nothing is written: copy what you need.
    """
    from codesearch.faces.agents import AGENT_GUIDE, registrations, server_command, serves

    paths = paths or (".",)
    command = server_command(paths, index_dir=index_dir, read_only=read_only, allow_any_repo=allow_any_repo)
    found = registrations(command)
    chosen = found if client == "all" else {client: found[client]}
    reach = serves(paths, allow_any_repo=allow_any_repo)
    if as_json:
        echo_json({"command": command, "serves": reach, "clients": chosen, "guide": AGENT_GUIDE})
        return
    click.echo(f"({printable(reach)})\n")
    for entry in chosen.values():
        click.echo(click.style(f"# {entry['title']}", bold=True))
        click.echo(entry["how"])
        click.echo(entry["text"].rstrip() + "\n")
    if client == "all":
        click.echo(click.style("# A guide for AGENTS.md or CLAUDE.md", bold=True))
        click.echo(AGENT_GUIDE)


def _client_names() -> list[str]:
    from codesearch.faces.install import CLIENTS

    return list(CLIENTS)


install_client = click.argument("client", type=click.Choice(_client_names()))
install_options = [
    click.argument("paths", nargs=-1, type=click.Path(file_okay=False, dir_okay=True)),
    click.option("--scope", type=click.Choice(["project", "user"]), default=None,
                 help="The project's file (under the first PATH) or the user's; default the project's where the "
                      "client has one."),
    click.option("--name", default="codesearch", show_default=True, help="The server's name in the file."),
    click.option("--dry-run", is_flag=True, help="Print the change as a diff and write nothing."),
    json_option,
]


def _install_options(command: F) -> F:
    for option in reversed(install_options):
        command = option(command)
    return command


def _install(client: str, paths: tuple[str, ...], scope: str | None, name: str, dry_run: bool, as_json: bool,
             **options: Any) -> None:
    from codesearch.faces.install import apply, plan

    change = plan(client, paths or (".",), scope=scope, name=name, **options)  # type: ignore[arg-type]
    backup = None if dry_run else apply(change)
    if as_json:
        echo_json({**change.as_dict(), "dry_run": dry_run, "backup": str(backup) if backup else None,
                    **({"diff": change.diff()} if dry_run else {})})
        return
    if dry_run:
        click.echo(change.diff() or f"{change.file}: nothing to change", nl=not change.changed)
        return
    verb = "removed from" if options.get("remove") else "registered in"
    click.echo(f"{name} {verb} {change.file}" + (f" (backup: {backup})" if backup else "") if change.changed
               else f"{change.file} already {'lacks' if options.get('remove') else 'has'} {name}; nothing changed")


@click.command()
@install_client
@_install_options
@click.option("--index-dir", type=click.Path(file_okay=False), default=None,
              help="A shared index the server should read (e.g. one built in CI).")
@click.option("--read-only", is_flag=True, help="Register the server read-only (for a shared index).")
@click.option("--allow-any-repo", is_flag=True,
              help="Register a server whose tools may name any folder, not only PATHS and the folders under them.")
@reports_errors
def install(client: str, paths: tuple[str, ...], scope: str | None, name: str, dry_run: bool, as_json: bool,
            index_dir: str | None, read_only: bool, allow_any_repo: bool) -> None:
    """Register the MCP server for PATHS (default: here) in CLIENT's own configuration file.

    Merges into the file (other servers, settings and comments are kept), backs it up first
    (FILE.codesearch-backup), and changes nothing when the registration is already there.
    """
    _install(client, paths, scope, name, dry_run, as_json, index_dir=index_dir, read_only=read_only,
             allow_any_repo=allow_any_repo)


@click.command()
@install_client
@_install_options
@reports_errors
def uninstall(client: str, paths: tuple[str, ...], scope: str | None, name: str, dry_run: bool, as_json: bool) -> None:
    """Remove the MCP server's registration from CLIENT's configuration file (the rest of the file is kept)."""
    _install(client, paths, scope, name, dry_run, as_json, remove=True)


SETUP_COMMANDS = (agent_setup, install, uninstall)
"""The commands this module adds to ``codesearch``."""

__all__ = ["SETUP_COMMANDS"]
