"""The ``codesearch`` command: thin commands over the public API.

Every error the library raises on purpose becomes one line on stderr and exit
code 2; ``--json`` gives machine-readable output for tools.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from codesearch.exceptions import CodeSearchError

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(2)


def reports_errors(command: F) -> F:
    """Turn codesearch errors (and a few OS errors) into one line and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except CodeSearchError as exc:
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted")
        except OSError as exc:
            _fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))

    return wrapper  # type: ignore[return-value]


def _echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for tools instead of text.")
path_argument = click.argument("path", default=".", type=click.Path(file_okay=True, dir_okay=True))
no_ignore_option = click.option(
    "--no-ignore", is_flag=True, help="Do not honour .gitignore and .codesearchignore files."
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="codesearch-hybrid", prog_name="codesearch")
def main() -> None:
    """Find code by meaning and by keyword in a local repository."""


@main.command()
@path_argument
@no_ignore_option
@json_option
@reports_errors
def stats(path: str, no_ignore: bool, as_json: bool) -> None:
    """Count what would be indexed under PATH: files, skips per reason, bytes, chunks."""
    from codesearch.stats import repo_stats

    report = repo_stats(path, use_ignore_files=not no_ignore)
    if as_json:
        data = report.as_dict()
        data.pop("root")
        _echo_json(data)
        return
    click.echo(f"root           {report.root}")
    click.echo(f"files seen     {report.files_seen:,}")
    click.echo(f"files indexed  {report.files_indexed:,}")
    for reason, count in report.skipped.items():
        click.echo(f"  skipped {reason:<18} {count:,}")
    click.echo(f"bytes          {report.bytes:,}")
    click.echo(f"chunks         {report.chunks:,}")
    click.echo(f"chunker        {report.backend}")


if __name__ == "__main__":  # pragma: no cover
    main()
