"""What the ``codesearch`` commands share: one-line errors, the options several commands take, and their output.

Every error the library raises on purpose, and every usage error (a bad
option value, a missing argument), becomes one line on stderr and exit code 2
(:func:`reports_errors`, :class:`Commands`). An option several commands take
is defined here once (``-k``, ``--lines``, ``--mode``, the scope options, the
index and answer options). Text output shows paths and lines through
:func:`codesearch.display.printable`, so a file name holding a newline or a
terminal escape cannot forge a line; JSON keeps them exact.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, TypeVar

import click

from codesearch.display import printable
from codesearch.exceptions import CodeSearchError

F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str) -> None:
    click.echo(f"Error: {printable(message)}", err=True)
    sys.exit(2)


class OneLineUsageError(click.UsageError):
    """A usage error shown as every other error is: one line (what was wrong, and where the help is), exit code 2."""

    def show(self, file: Any = None) -> None:
        where = f" See '{self.ctx.command_path} --help'." if self.ctx is not None else ""
        click.echo(f"Error: {printable(self.format_message()).rstrip('.')}.{where}", file=file, err=file is None)


class Commands(click.Group):
    """A command group whose usage errors are one line instead of click's three (usage, hint, error).

    Subgroups are of this class too; no arguments at all still prints the help.
    """

    group_class = type

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise one_line(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise one_line(exc) from exc


def one_line(exc: click.UsageError) -> click.UsageError:
    if isinstance(exc, (OneLineUsageError, click.exceptions.NoArgsIsHelpError)):
        return exc
    return OneLineUsageError(exc.format_message(), exc.ctx)


def reports_errors(command: F) -> F:
    """Turn codesearch errors (and a few OS errors) into one line and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (CodeSearchError, ValueError) as exc:  # the library's errors and bad arguments say the fix
            fail(str(exc))
        except KeyboardInterrupt:
            fail("interrupted")
        except ImportError as exc:
            fail(f"a required package is missing ({exc}); reinstall codesearch-hybrid with its dependencies")
        except OSError as exc:
            fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))

    return wrapper  # type: ignore[return-value]


def echo_json(data: Any) -> None:
    """``data`` as JSON, exact: a path that is not UTF-8 keeps its escape (:func:`codesearch.faces.answers.pretty_json`)."""
    from codesearch.faces.answers import pretty_json

    click.echo(pretty_json(data))


def echo_hits(hits: Sequence[dict[str, Any]], preview_lines: int, with_root: bool = False) -> None:
    """Hits (as :func:`codesearch.faces.answers.hit_data` shapes them) as a numbered list: the location in bold, kind and
    score (or the symbol a definition matched), then the first lines of each."""
    for rank, hit in enumerate(hits, start=1):
        where = f"{hit['root']}/" if with_root and hit.get("root") else ""
        facts = f"  {hit['kind']}  {hit['score']:.4f}" if "kind" in hit else ""
        if hit.get("defines"):
            facts = f"  defines {printable(hit['defines'])}" + facts
        click.echo(click.style(f"{rank:>2}. {printable(where + hit['location'])}", bold=True) + facts)
        text = hit["text"] if "text" in hit else hit["line"]
        for line in text.replace("\r\n", "\n").split("\n")[:preview_lines]:
            click.echo(f"      {printable(line[:160], keep_tabs=True)}")


def echo_facts(facts: Mapping[str, Any], as_json: bool, width: int, leave_out: Collection[str] = ()) -> bool:
    """Print ``facts`` as JSON, or as one ``key value`` line each (keys padded to ``width``; those in
    ``leave_out`` left to the caller). Returns whether it printed text (the caller may add to it)."""
    if as_json:
        echo_json(facts)
        return False
    for key, value in facts.items():
        if key not in leave_out:
            click.echo(f"{key:<{width}}{printable(str(value))}")
    return True


def echo_answer(answer: dict[str, Any], as_json: bool, max_tokens: int | None,
                 human: Callable[[dict[str, Any]], None]) -> None:
    """Print an answer: as JSON, or by ``human``; within ``max_tokens`` either way (the JSON form is what is
    counted). Its note (why it is empty, or what to bear in mind) goes to stderr in text mode."""
    from codesearch.faces.answers import fit_to_budget

    fitted = fit_to_budget(answer, max_tokens)
    if as_json:
        echo_json(fitted)
        return
    human(fitted)
    if fitted.get("note"):
        click.echo(f"({printable(fitted['note'])})", err=True)
    if fitted.get("trimmed") or fitted.get("dropped"):
        click.echo(f"({fitted['trimmed']} hits cut and {fitted['dropped']} left out to fit {max_tokens} tokens)", err=True)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for tools instead of text.")


def answer_options(command: F) -> F:
    """``--max-tokens`` and ``--compact``: options of every command that answers with hits."""
    command = click.option(
        "--max-tokens", type=click.IntRange(min=1), default=None,
        help="Keep the whole answer (its JSON) within this many tokens, counted as 1 per 3 bytes: hit texts are "
             "cut from the end, then hits left out, and the answer says how many.")(command)
    command = click.option("--compact", is_flag=True,
                           help="Locations, symbols and one line per hit, for agents that read the files themselves.")(command)
    return command


read_only_option = click.option(
    "--read-only", is_flag=True,
    help="Never write the index (no lock, no commit); changed files are refreshed in memory for this run only. "
         "A folder this process cannot write is read-only anyway.")
path_argument = click.argument("path", default=".", type=click.Path(file_okay=True, dir_okay=True))


class Folder(click.Path):
    """A folder that may not exist yet (it is made), but is not something else that does (a file, ``/dev/null``)."""

    def __init__(self) -> None:
        super().__init__(file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        value = super().convert(value, param, ctx)
        if os.path.exists(value) and not os.path.isdir(value):
            self.fail(f"'{printable(os.fsdecode(value))}' is not a folder", param, ctx)
        return value


def check_model_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: give minilm, bge-small, bge-m3, a hub id, a local model folder, or none",
                                 ctx, param)
    return value


no_ignore_option = click.option(
    "--no-ignore", is_flag=True, help="Do not honour .gitignore and .codesearchignore files."
)


def index_options(command: F) -> F:
    """Options shared by every command that touches an index."""
    command = click.option(
        "--index-dir", type=Folder(), default=None,
        help="Where the index lives (default: a folder in the user cache keyed by PATH).",
    )(command)
    command = click.option(
        "--model", "-m", default="minilm", show_default=True, callback=check_model_name,
        help="Embedding model: minilm, bge-small, bge-m3, a hub id, a local model folder, or none (keywords only).",
    )(command)
    command = click.option("--int8/--fp32", "int8", default=True, show_default=True,
                           help="The int8 export (kept only where it passed its quality gate) or fp32.")(command)
    return command


def options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several click options as one decorator, applied in the order listed (the first is the first in ``--help``)."""

    def apply(command: F) -> F:
        for decorator in reversed(decorators):
            command = decorator(command)
        return command

    return apply


def k_option(default: int = 10, what: str = "hits") -> Callable[[F], F]:
    """``-k``: how many ``what`` a command answers with, at least 1."""
    return click.option("-k", "k", type=click.IntRange(min=1), default=default, show_default=True,
                        help=f"How many {what}.")


def lines_option(what: str = "hit") -> Callable[[F], F]:
    """``--lines``: how many lines of each ``what`` the text output shows."""
    return click.option("--lines", "preview_lines", type=click.IntRange(min=0), default=4, show_default=True,
                        help=f"Lines of each {what} to show.")


mode_option = click.option("--mode", type=click.Choice(["hybrid", "bm25", "dense"]), default="hybrid",
                           show_default=True, help="Keywords (bm25), meaning (dense) or both fused (hybrid).")

scope_options = options(
    click.option("--scope", default=None, help="Only paths under this prefix, e.g. src/ (in every repository searched)."),
    click.option("--include", multiple=True, help="Only paths matching this glob (.gitignore syntax); repeatable."),
    click.option("--exclude", multiple=True, help="Leave out paths matching this glob (.gitignore syntax); repeatable."),
    click.option("--kind", "kinds", multiple=True, type=click.Choice(["source", "test", "doc", "config"]),
                 help="Only chunks of this kind; repeatable."),
    click.option("--no-tests", is_flag=True, help="Leave out test files."),
    click.option("--no-docs", is_flag=True, help="Leave out documentation."),
)
"""What every search-like command narrows its search by (:func:`scope_arguments` turns them into the API's)."""


def scope_arguments(scope: str | None, include: Sequence[str], exclude: Sequence[str], kinds: Sequence[str],
                    no_tests: bool, no_docs: bool) -> dict[str, Any]:
    """The scope options as the keyword arguments of :meth:`CodeSearch.search` and :meth:`Corpus.search`."""
    exclude_kinds = {kind for kind, flag in (("test", no_tests), ("doc", no_docs)) if flag}
    return {"scope": scope, "include": include, "exclude": exclude, "kinds": set(kinds) or None,
            "exclude_kinds": exclude_kinds}


__all__ = ["Commands", "F", "Folder", "OneLineUsageError", "answer_options", "check_model_name", "echo_answer",
           "echo_facts", "echo_hits", "echo_json", "fail", "index_options", "json_option", "k_option", "lines_option",
           "mode_option", "no_ignore_option", "one_line", "options", "path_argument", "read_only_option",
           "reports_errors", "scope_arguments", "scope_options"]
