"""The ``codesearch`` command: thin commands over the public API.

Every error the library raises on purpose, and every usage error (a bad
option value, a missing argument), becomes one line on stderr and exit code 2;
``--json`` gives machine-readable output for tools. Text output shows paths
and lines through :func:`codesearch.display.printable`, so a file name holding
a newline or a terminal escape cannot forge a line; JSON keeps them exact.
"""

from __future__ import annotations

import functools
import os
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from codesearch.display import printable
from codesearch.exceptions import CodeSearchError

F = TypeVar("F", bound=Callable[..., Any])


def _fail(message: str) -> None:
    click.echo(f"Error: {printable(message)}", err=True)
    sys.exit(2)


class _OneLineUsageError(click.UsageError):
    """A usage error shown as every other error is: one line (what was wrong, and where the help is), exit code 2."""

    def show(self, file: Any = None) -> None:
        where = f" See '{self.ctx.command_path} --help'." if self.ctx is not None else ""
        click.echo(f"Error: {printable(self.format_message()).rstrip('.')}.{where}", file=file, err=file is None)


class _Commands(click.Group):
    """A command group whose usage errors are one line instead of click's three (usage, hint, error).

    Subgroups are of this class too; no arguments at all still prints the help.
    """

    group_class = type

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _one_line(exc) from exc

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            raise _one_line(exc) from exc


def _one_line(exc: click.UsageError) -> click.UsageError:
    if isinstance(exc, (_OneLineUsageError, click.exceptions.NoArgsIsHelpError)):
        return exc
    return _OneLineUsageError(exc.format_message(), exc.ctx)


def reports_errors(command: F) -> F:
    """Turn codesearch errors (and a few OS errors) into one line and exit code 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (CodeSearchError, ValueError) as exc:  # the library's errors and bad arguments say the fix
            _fail(str(exc))
        except KeyboardInterrupt:
            _fail("interrupted")
        except ImportError as exc:
            _fail(f"a required package is missing ({exc}); reinstall codesearch-hybrid with its dependencies")
        except OSError as exc:
            _fail(f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc))

    return wrapper  # type: ignore[return-value]


def _echo_json(data: Any) -> None:
    """``data`` as JSON, exact: a path that is not UTF-8 keeps its escape (:func:`codesearch.faces.answers.pretty_json`)."""
    from codesearch.faces.answers import pretty_json

    click.echo(pretty_json(data))


def _echo_hits(hits: Sequence[dict[str, Any]], preview_lines: int, with_root: bool = False) -> None:
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


def _echo_answer(answer: dict[str, Any], as_json: bool, max_tokens: int | None,
                 human: Callable[[dict[str, Any]], None]) -> None:
    """Print an answer: as JSON, or by ``human``; within ``max_tokens`` either way (the JSON form is what is
    counted). Its note (why it is empty, or what to bear in mind) goes to stderr in text mode."""
    from codesearch.faces.answers import fit_to_budget

    fitted = fit_to_budget(answer, max_tokens)
    if as_json:
        _echo_json(fitted)
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


class _Folder(click.Path):
    """A folder that may not exist yet (it is made), but is not something else that does (a file, ``/dev/null``)."""

    def __init__(self) -> None:
        super().__init__(file_okay=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        value = super().convert(value, param, ctx)
        if os.path.exists(value) and not os.path.isdir(value):
            self.fail(f"'{printable(os.fsdecode(value))}' is not a folder", param, ctx)
        return value


def _model_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: give minilm, bge-small, bge-m3, a hub id, a local model folder, or none",
                                 ctx, param)
    return value


no_ignore_option = click.option(
    "--no-ignore", is_flag=True, help="Do not honour .gitignore and .codesearchignore files."
)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="codesearch-hybrid", prog_name="codesearch")
def main() -> None:
    """Find code by meaning and by keyword in a local repository."""


@main.command()
@path_argument
@no_ignore_option
@click.option("--chunking", type=click.Choice(["definitions", "lines"]), default="definitions", show_default=True,
              help="Count the index's definition chunks, or the published line windows.")
@json_option
@reports_errors
def stats(path: str, no_ignore: bool, chunking: str, as_json: bool) -> None:
    """Count what would be indexed under PATH: files, skips, bytes, chunks, and how each language was cut."""
    from codesearch.stats import repo_stats

    report = repo_stats(path, use_ignore_files=not no_ignore, chunking=chunking)  # type: ignore[arg-type]
    if as_json:
        data = report.as_dict()
        data.pop("root")
        _echo_json(data)
        return
    click.echo(f"root           {printable(str(report.root))}")
    click.echo(f"files seen     {report.files_seen:,}")
    click.echo(f"files indexed  {report.files_indexed:,}")
    for reason, count in report.skipped.items():
        click.echo(f"  skipped {reason:<18} {count:,}")
    click.echo(f"bytes          {report.bytes:,}")
    click.echo(f"chunks         {report.chunks:,} ({report.chunking})")
    click.echo(f"chunker        {report.backend}")
    if report.languages:
        click.echo(f"\n{'language':<12} {'files':>6} {'chunks':>7} {'symbols':>8}  line windows")
    for name, lang in report.languages.items():
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(Counter(lang.fallbacks.values()).items()))
        click.echo(f"{name:<12} {lang.files:>6,} {lang.chunks:>7,} {lang.symbol_share:>8.0%}  {reasons}")
        for file, reason in list(lang.fallbacks.items())[:5] if name != "other" else []:
            click.echo(f"    {printable(file)}: {printable(reason)}")


def index_options(command: F) -> F:
    """Options shared by every command that touches an index."""
    command = click.option(
        "--index-dir", type=_Folder(), default=None,
        help="Where the index lives (default: a folder in the user cache keyed by PATH).",
    )(command)
    command = click.option(
        "--model", "-m", default="minilm", show_default=True, callback=_model_name,
        help="Embedding model: minilm, bge-small, bge-m3, a hub id, a local model folder, or none (keywords only).",
    )(command)
    command = click.option("--int8/--fp32", "int8", default=True, show_default=True,
                           help="The int8 export (kept only where it passed its quality gate) or fp32.")(command)
    return command


def _model(name: str) -> str | None:
    """``--model none`` is the keyword-only searcher."""
    return None if name.lower() == "none" else name


def _searcher(path: str, model: str, index_dir: str | None, int8: bool, no_ignore: bool = False,  # type: ignore[no-untyped-def]
              read_only: bool = False, **options: Any):
    from codesearch.search import CodeSearch

    # A command answers once and exits: it waits for the check of the index files it reads (verify_first).
    return CodeSearch(path, model=_model(model), index_dir=index_dir, int8=int8, use_ignore_files=not no_ignore,
                      read_only=True if read_only else None, verify_first=True, **options)


@main.command()
@path_argument
@index_options
@no_ignore_option
@click.option("--static-only", is_flag=True, help="Only keywords and static vectors: seconds, not minutes.")
@click.option("--embed-tests/--no-embed-tests", default=None,
              help="Whether the transformer reads test files too (default: as the index was built; new indexes leave "
                   "tests to keywords and static vectors).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option("--wait", type=click.FloatRange(min=0), default=30.0, show_default=True,
              help="Seconds to wait for another process writing the same index.")
@json_option
@reports_errors
def index(
    path: str, model: str, index_dir: str | None, int8: bool, no_ignore: bool, static_only: bool,
    embed_tests: bool | None, quiet: bool, wait: float, as_json: bool,
) -> None:
    """Build the index of PATH, or bring it up to date (only changed chunks are embedded)."""
    searcher = _searcher(path, model, index_dir, int8, no_ignore, embed_tests=embed_tests)
    searcher.lock_timeout = wait
    report = searcher.index(progress=not quiet and not as_json, tier="static" if static_only else None)
    if as_json:
        _echo_json(report.as_dict())
        return
    click.echo(
        f"indexed {report.files:,} files, {report.chunks:,} chunks ({report.tier} tier): {report.embedded:,} embedded, "
        f"{report.reused:,} reused, {report.removed:,} removed in {report.seconds:.1f} s"
        + (f"; {report.shared:,} later windows of long definitions share their first window's vector"
           if report.shared else "")
        + (f"; {report.unread:,} test chunks left to keywords and static vectors" if report.unread else "")
    )


@main.command()
@click.argument("query")
@click.argument("paths", nargs=-1, type=click.Path(file_okay=True, dir_okay=True))
@index_options
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="How many hits.")
@click.option(
    "--mode", type=click.Choice(["hybrid", "bm25", "dense"]), default="hybrid", show_default=True,
    help="Keywords (bm25), meaning (dense) or both fused (hybrid).",
)
@click.option("--scope", default=None, help="Only paths under this prefix, e.g. src/.")
@click.option("--include", multiple=True, help="Only paths matching this glob (.gitignore syntax); repeatable.")
@click.option("--exclude", multiple=True, help="Leave out paths matching this glob (.gitignore syntax); repeatable.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["source", "test", "doc", "config"]),
              help="Only chunks of this kind; repeatable.")
@click.option("--no-tests", is_flag=True, help="Leave out test files.")
@click.option("--no-docs", is_flag=True, help="Leave out documentation.")
@click.option("--no-source-first", is_flag=True,
              help="Rank tests, docs and config purely on relevance (by default source wins among similar hits).")
@click.option("--no-refresh", is_flag=True, help="Do not re-index files changed since the last index first.")
@click.option("--lines", "preview_lines", type=click.IntRange(min=0), default=4, show_default=True,
              help="Lines of each hit to show.")
@answer_options
@read_only_option
@json_option
@reports_errors
def search(
    query: str, paths: tuple[str, ...], model: str, index_dir: str | None, int8: bool, k: int, mode: str,
    scope: str | None, include: tuple[str, ...], exclude: tuple[str, ...], kinds: tuple[str, ...],
    no_tests: bool, no_docs: bool, no_source_first: bool, no_refresh: bool, preview_lines: int, max_tokens: int | None,
    compact: bool, read_only: bool, as_json: bool,
) -> None:
    """Search PATH (or several: PATH1 PATH2 ...) for QUERY; builds the index first if there is none.

    A repository never indexed answers from its static tier within seconds;
    `codesearch index PATH` adds the transformer's (the JSON says which tier answered).
    """
    if not query.strip():
        _fail("the query is empty; give words, a question or an identifier")
    paths = paths or (".",)
    if len(paths) > 1 and index_dir is not None:
        _fail("--index-dir names one index; leave it out to search several paths")
    exclude_kinds = {kind for kind, flag in (("test", no_tests), ("doc", no_docs)) if flag}
    options: dict[str, Any] = {
        "k": k, "mode": mode, "scope": scope, "include": include, "exclude": exclude, "kinds": set(kinds) or None,
        "exclude_kinds": exclude_kinds, "source_first": False if no_source_first else None,
        "refresh": False if no_refresh else None,
    }
    from codesearch.faces.answers import search_answer

    if len(paths) == 1:
        searcher = _searcher(paths[0], model, index_dir, int8, read_only=read_only, progress=not as_json)
        hits = searcher.search(query, **options)
        infos = [(str(searcher.root), searcher.last_search)]
        unwritable = searcher.read_only
    else:
        from codesearch.multi import MultiSearch

        multi = MultiSearch(paths, model=_model(model), int8=int8, progress=not as_json,
                            read_only=True if read_only else None, verify_first=True)
        hits = multi.search(query, **options)
        infos = [(str(s.root), info) for s, info in zip(multi.searchers, multi.last_search)]
        unwritable = all(s.read_only for s in multi.searchers)
    answer = search_answer(query, infos, hits, compact=compact)
    tiers = {root: info.tier if info else None for root, info in infos}
    in_memory = answer["refreshed_in_memory"]

    def human(fitted: dict[str, Any]) -> None:
        if not fitted["hits"]:
            click.echo("no hits")
        _echo_hits(fitted["hits"], preview_lines, with_root=len(paths) > 1)
        if in_memory:
            why = "it is read-only here" if unwritable else "another process holds its write lock"
            click.echo(f"({in_memory} changed files were read into memory for this answer; the stored index is as it "
                       f"was: {why})", err=True)
        static_roots = [root for root, tier in tiers.items() if tier == "static"]
        if static_roots:
            click.echo(f"(answered from the static tier; `codesearch index {printable(static_roots[0])}` adds the "
                       "transformer's)", err=True)

    _echo_answer(answer, as_json, max_tokens, human)


@main.command()
@click.argument("location")
@click.argument("path", default=".", type=click.Path(file_okay=False, dir_okay=True))
@index_options
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="How many hits.")
@click.option("--lines", "preview_lines", type=click.IntRange(min=0), default=4, show_default=True,
              help="Lines of each hit to show.")
@answer_options
@read_only_option
@json_option
@reports_errors
def related(location: str, path: str, model: str, index_dir: str | None, int8: bool, k: int, preview_lines: int,
            max_tokens: int | None, compact: bool, read_only: bool, as_json: bool) -> None:
    """Code most like the chunk at LOCATION (FILE:LINE or FILE:START-END) in PATH."""
    from codesearch.faces.answers import hits_data
    from codesearch.faces.locations import parse_location

    file, line = parse_location(location)
    searcher = _searcher(path, model, index_dir, int8, read_only=read_only)
    hits = searcher.related(file, line, k=k)
    _echo_answer({"location": location, "hits": hits_data(hits, compact=compact)}, as_json, max_tokens,
                 lambda fitted: _echo_hits(fitted["hits"], preview_lines))


name_argument = click.argument("name")
path_default_dir = click.argument("path", default=".", type=click.Path(file_okay=False, dir_okay=True))


@main.command("def")
@name_argument
@path_default_dir
@index_options
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="How many definitions.")
@click.option("--lines", "preview_lines", type=click.IntRange(min=0), default=4, show_default=True,
              help="Lines of each definition to show.")
@answer_options
@read_only_option
@json_option
@reports_errors
def def_(name: str, path: str, model: str, index_dir: str | None, int8: bool, k: int, preview_lines: int,
         max_tokens: int | None, compact: bool, read_only: bool, as_json: bool) -> None:
    """Where NAME is defined in PATH: `Session.send`, `send` or `Foo::bar` (the symbol table; exact case first).

    An unknown name prints nothing and, on stderr, the closest symbol names (exit code 0).
    """
    from codesearch.faces.answers import symbol_answer

    found = _searcher(path, model, index_dir, int8, read_only=read_only).definitions(name, k=k)
    _echo_answer(symbol_answer(found, compact=compact), as_json, max_tokens,
                 lambda fitted: _echo_hits(fitted["hits"], preview_lines))


@main.command()
@name_argument
@path_default_dir
@index_options
@click.option("-k", "k", type=click.IntRange(min=1), default=50, show_default=True, help="How many chunks at most.")
@answer_options
@read_only_option
@json_option
@reports_errors
def refs(name: str, path: str, model: str, index_dir: str | None, int8: bool, k: int, max_tokens: int | None,
         compact: bool, read_only: bool, as_json: bool) -> None:
    """Where the identifier NAME is used in PATH, as a whole word with its case (as grep -w), by file and line.

    Textual: calls through dynamic dispatch, reflection or names built at run time are not found. Prints
    FILE:LINE: TEXT per use, a definition marked; whether the list was capped goes to stderr.
    """
    from codesearch.faces.answers import symbol_answer

    found = _searcher(path, model, index_dir, int8, read_only=read_only).references(name, k=k)

    def human(fitted: dict[str, Any]) -> None:
        for hit in fitted["hits"]:
            path_of = hit["location"].rsplit(":", 1)[0]
            start = int(hit["location"].rsplit(":", 1)[1].split("-")[0])
            text = hit["text"].split("\n") if "text" in hit else []
            for line in hit["lines"]:
                shown = text[line - start] if 0 <= line - start < len(text) else hit.get("line", "")
                mark = f"  (defines {printable(hit['defines'])})" if hit.get("defines") and line == hit["lines"][0] else ""
                click.echo(f"{printable(path_of)}:{line}: {printable(shown.strip()[:160], keep_tabs=True)}{mark}")

    _echo_answer(symbol_answer(found, compact=compact), as_json, max_tokens, human)


@main.command()
@path_argument
@index_options
@read_only_option
@json_option
@reports_errors
def status(path: str, model: str, index_dir: str | None, int8: bool, read_only: bool, as_json: bool) -> None:
    """The index of PATH: model, tier, counts, last update, files changed on disk since (nothing is re-indexed), and
    how searches find changes (freshness: a one-shot command runs a stat pass; the MCP server watches)."""
    facts = _searcher(path, model, index_dir, int8, read_only=read_only).status()
    if as_json:
        _echo_json(facts)
        return
    for key, value in facts.items():
        if key != "changes":
            click.echo(f"{key:<19}{printable(str(value))}")


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False, dir_okay=True))
@index_options
@read_only_option
@click.option("--allow-any-repo", is_flag=True,
              help="Let a tool's `repo` name any folder this user can read (indexed on first use), not only PATHS and "
                   "the folders under them.")
@click.option("--corpus", "corpus_store", default=None,
              help="Serve this corpus (codesearch corpus build) instead of PATHS: `repo` names one of its repositories.")
@reports_errors
def mcp(paths: tuple[str, ...], model: str, index_dir: str | None, int8: bool, read_only: bool, allow_any_repo: bool,
        corpus_store: str | None) -> None:
    """Serve PATHS (default: the working directory) to MCP clients over stdio.

    Tools: search, find_definition, find_references, find_related,
    index_status, reindex. A tool's `repo` may name PATHS or a folder under
    one of them; any other folder is refused (--allow-any-repo serves any).
    Register it with an agent as the command `codesearch mcp /path/to/repo`
    (`codesearch agent-setup` prints how). With --corpus STORE: search and
    index_status over the corpus.
    """
    if corpus_store is not None:
        if paths:
            _fail("give either PATHS or --corpus STORE, not both")
        from codesearch.faces.mcp_server import serve_corpus

        serve_corpus(corpus_store, model=_model(model) or "minilm", int8=int8)
        return
    from codesearch.faces.mcp_server import serve

    serve(list(paths) or ["."], model=_model(model), int8=int8, index_dir=index_dir,
          read_only=True if read_only else None, allow_any_repo=allow_any_repo)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(file_okay=False, dir_okay=True))
@index_options
@click.option("--corpus", "corpus_store", default=None, help="Serve this corpus instead of PATHS.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to bind; any but a loopback one needs --token or --no-auth.")
@click.option("--port", type=click.IntRange(0, 65535), default=8700, show_default=True, help="0: any free port.")
@click.option("--token", envvar="CODESEARCH_TOKEN", default=None,
              help="A bearer token every request must carry (or $CODESEARCH_TOKEN).")
@click.option("--no-auth", is_flag=True, help="Serve a non-loopback address with no token.")
@click.option("--allow-refresh", is_flag=True,
              help="Write the indexes: build a missing one, commit changed files, build the transformer tier in the "
                   "background, accept MCP reindex. Without it every index is read-only and must exist.")
@click.option("--cors-origin", "cors_origins", multiple=True,
              help="An origin whose pages may call the API and MCP (CORS is off without it); repeatable.")
@click.option("--max-k", type=click.IntRange(min=1), default=100, show_default=True,
              help="The most hits one request may ask for.")
@reports_errors
def serve(paths: tuple[str, ...], model: str, index_dir: str | None, int8: bool, corpus_store: str | None, host: str,
          port: int, token: str | None, no_auth: bool, allow_refresh: bool, cors_origins: tuple[str, ...],
          max_k: int) -> None:
    """Serve PATHS (default: here) or a corpus over HTTP: a JSON API, MCP and a search page.

    /api/search, /api/definitions, /api/references, /api/related and /api/status answer what the matching
    commands print with --json (/api/openapi.json describes them); MCP clients connect to /mcp (streamable
    HTTP, the same tools as `codesearch mcp`); people open / in a browser. Only the repositories (or the corpus)
    named here are served.
    """
    from codesearch.server import Served, run
    from codesearch.server.security import check_bind

    check_bind(host, token, no_auth)  # before any index is opened
    if corpus_store is not None:
        if paths:
            _fail("give either PATHS or --corpus STORE, not both")
        served = Served(corpus=corpus_store, model=_model(model) or "minilm", int8=int8, max_k=max_k)
    else:
        served = Served(list(paths) or ["."], model=_model(model), int8=int8, index_dir=index_dir,
                        allow_refresh=allow_refresh, max_k=max_k)
    run(served, host=host, port=port, token=token, no_auth=no_auth, cors_origins=cors_origins)


@main.group()
def corpus() -> None:
    """Many repositories in one store (Ray Data builds it, Lance holds it), searched with the same ranking.

    Needs the corpus extra: pip install 'codesearch-hybrid[corpus]'.
    """


store_argument = click.argument("store")
ray_address_option = click.option(
    "--ray-address", default=None,
    help="A Ray cluster's HOST:PORT (or auto); default: a local Ray started for this command.")
corpus_model_option = click.option("--model", "-m", default="minilm", show_default=True, callback=_model_name,
                                   help="The corpus's model (a corpus holds one model's vectors).")


def _corpus(store: str, model: str, int8: bool = True, progress: bool = False):  # type: ignore[no-untyped-def]
    from codesearch.corpus import Corpus

    return Corpus(store, model=model, int8=int8, progress=progress)


def _echo_report(report: Any, as_json: bool, verb: str) -> None:
    if as_json:
        _echo_json(report.as_dict())
        return
    click.echo(f"{verb} {report.repos:,} repositories: {report.files:,} files, {report.chunks:,} chunks "
               f"({report.tier} tier); {report.changed_files:,} files cut, {report.inserted:,} rows written, "
               f"{report.deleted:,} removed, {report.embedded_static:,} + {report.embedded_full:,} chunks embedded "
               f"(static + transformer) by {report.actors} actors in {report.seconds:.1f} s")


@corpus.command("build")
@store_argument
@click.argument("paths", nargs=-1, required=True)
@corpus_model_option
@click.option("--tier", type=click.Choice(["static", "full"]), default="static", show_default=True,
              help="static: keywords and static vectors; full: the transformer's vectors too (~5x the compute).")
@click.option("--actors", type=click.IntRange(min=1), default=None, help="Actors in the pool (default: the CPUs).")
@ray_address_option
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@json_option
@reports_errors
def corpus_build(store: str, paths: tuple[str, ...], model: str, tier: str, actors: int | None,
                 ray_address: str | None, quiet: bool, as_json: bool) -> None:
    """Build STORE from repositories PATH... (PATH or NAME=PATH; a repository is named after its folder).

    Repositories already in STORE are brought up to date.
    """
    report = _corpus(store, model, progress=not quiet and not as_json).build(
        list(paths), ray_address=ray_address, tier=tier, actors=actors)  # type: ignore[arg-type]
    _echo_report(report, as_json, "built")


@corpus.command("refresh")
@store_argument
@click.argument("paths", nargs=-1)
@corpus_model_option
@click.option("--tier", type=click.Choice(["static", "full"]), default=None,
              help="full adds the transformer's vectors (default: each repository's tier).")
@click.option("--actors", type=click.IntRange(min=1), default=None, help="Actors in the pool (default: the CPUs).")
@ray_address_option
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@json_option
@reports_errors
def corpus_refresh(store: str, paths: tuple[str, ...], model: str, tier: str | None, actors: int | None,
                   ray_address: str | None, quiet: bool, as_json: bool) -> None:
    """Bring repositories of STORE up to date (PATH...: some of them; none: all, from the folders they were built
    from). Only changed files are cut, only new chunk texts embedded, only changed rows written."""
    report = _corpus(store, model, progress=not quiet and not as_json).refresh(
        list(paths) or None, ray_address=ray_address, tier=tier, actors=actors)  # type: ignore[arg-type]
    _echo_report(report, as_json, "refreshed")


@corpus.command("search")
@click.argument("query")
@store_argument
@click.option("--repo", "repos", multiple=True, help="Only this repository of the corpus; repeatable.")
@corpus_model_option
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="How many hits.")
@click.option("--mode", type=click.Choice(["hybrid", "bm25", "dense"]), default="hybrid", show_default=True,
              help="Keywords (bm25), meaning (dense) or both fused (hybrid).")
@click.option("--scope", default=None, help="Only paths under this prefix (in every repository), e.g. src/.")
@click.option("--include", multiple=True, help="Only paths matching this glob (.gitignore syntax); repeatable.")
@click.option("--exclude", multiple=True, help="Leave out paths matching this glob; repeatable.")
@click.option("--kind", "kinds", multiple=True, type=click.Choice(["source", "test", "doc", "config"]),
              help="Only chunks of this kind; repeatable.")
@click.option("--lines", "preview_lines", type=click.IntRange(min=0), default=4, show_default=True,
              help="Lines of each hit to show.")
@answer_options
@json_option
@reports_errors
def corpus_search(query: str, store: str, repos: tuple[str, ...], model: str, k: int, mode: str, scope: str | None,
                  include: tuple[str, ...], exclude: tuple[str, ...], kinds: tuple[str, ...], preview_lines: int,
                  max_tokens: int | None, compact: bool, as_json: bool) -> None:
    """Search STORE for QUERY, across every repository or those named by --repo; each hit names its repository."""
    from codesearch.faces.answers import corpus_answer

    if not query.strip():
        _fail("the query is empty; give words, a question or an identifier")
    hits = _corpus(store, model).search(query, k=k, repos=list(repos) or None, mode=mode,  # type: ignore[arg-type]
                                        scope=scope, include=include, exclude=exclude, kinds=set(kinds) or None)
    answer = corpus_answer(query, repos, hits, compact=compact)

    def human(fitted: dict[str, Any]) -> None:
        if not fitted["hits"]:
            click.echo("no hits")
        _echo_hits(fitted["hits"], preview_lines, with_root=False)

    _echo_answer(answer, as_json, max_tokens, lambda fitted: human({**fitted, "hits": [
        {**h, "location": f"{h['repo']}:{h['location']}"} for h in fitted["hits"]]}))


@corpus.command("status")
@store_argument
@json_option
@reports_errors
def corpus_status(store: str, as_json: bool) -> None:
    """STORE's models, tier, counts and dataset versions, and every repository's files, chunks, tier and update."""
    from codesearch.corpus import Corpus

    facts = Corpus(store).status()
    if as_json:
        _echo_json(facts)
        return
    for key, value in facts.items():
        if key != "repositories":
            click.echo(f"{key:<10}{printable(str(value))}")
    for name, repo in facts["repositories"].items():
        click.echo(f"  {printable(name):<24} {repo['files']:>7,} files {repo['chunks']:>9,} chunks  {repo['tier']:<6} "
                   f"{repo['updated']}  {printable(str(repo['root']))}")


@main.command("agent-setup")
@click.argument("paths", nargs=-1, type=click.Path(exists=True, file_okay=False, dir_okay=True))
@click.option("--client", type=click.Choice(["all", "claude-code", "claude-desktop", "cursor", "vscode", "codex"]),
              default="all", show_default=True, help="Print the registration for this client only.")
@click.option("--index-dir", type=_Folder(), default=None,
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
        _echo_json({"command": command, "serves": reach, "clients": chosen, "guide": AGENT_GUIDE})
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
        _echo_json({**change.as_dict(), "dry_run": dry_run, "backup": str(backup) if backup else None,
                    **({"diff": change.diff()} if dry_run else {})})
        return
    if dry_run:
        click.echo(change.diff() or f"{change.file}: nothing to change", nl=not change.changed)
        return
    verb = "removed from" if options.get("remove") else "registered in"
    click.echo(f"{name} {verb} {change.file}" + (f" (backup: {backup})" if backup else "") if change.changed
               else f"{change.file} already {'lacks' if options.get('remove') else 'has'} {name}; nothing changed")


@main.command()
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


@main.command()
@install_client
@_install_options
@reports_errors
def uninstall(client: str, paths: tuple[str, ...], scope: str | None, name: str, dry_run: bool, as_json: bool) -> None:
    """Remove the MCP server's registration from CLIENT's configuration file (the rest of the file is kept)."""
    _install(client, paths, scope, name, dry_run, as_json, remove=True)


@main.command()
@path_argument
@click.option("--index-dir", type=_Folder(), default=None, help="Where the index lives.")
@click.option("--model", "-m", default=None, callback=_model_name,
              help="Also say whether this model (name, hub id or folder) is the one that built the index.")
@json_option
@reports_errors
def info(path: str, index_dir: str | None, model: str | None, as_json: bool) -> None:
    """Describe the index of PATH: model, fingerprint, counts, location, last update."""
    from codesearch.search import CodeSearch

    searcher = CodeSearch(path, model=model, index_dir=index_dir)
    facts = searcher.info()
    if model is not None:
        facts["model_matches"] = searcher.embedder.fingerprint == facts["fingerprint"]
    if as_json:
        _echo_json(facts)
        return
    for key, value in facts.items():
        click.echo(f"{key:<15}{printable(str(value))}")


@main.command()
@path_argument
@click.option("--index-dir", type=_Folder(), default=None, help="Where the index lives.")
@json_option
@reports_errors
def verify(path: str, index_dir: str | None, as_json: bool) -> None:
    """Check every file of the index of PATH against its sha256 (searches check them in the background)."""
    from codesearch.search import CodeSearch

    searcher = CodeSearch(path, model=None, index_dir=index_dir)
    checked = searcher.verify()
    if as_json:
        _echo_json({"index_dir": str(searcher.store.directory), "verified": True, "bytes": checked})
        return
    click.echo(f"verified {checked:,} bytes of the index at {printable(str(searcher.store.directory))}")


@main.command()
@click.argument("model")
@click.option("--int8", is_flag=True, help="Quantise to int8 if it passes the quality gate on real code chunks.")
@click.option("--out", type=click.Path(file_okay=False), default=None, help="Write here instead of the cache.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@json_option
@reports_errors
def export(model: str, int8: bool, out: str | None, quiet: bool, as_json: bool) -> None:
    """Export MODEL (minilm, bge-small, bge-m3, a hub id or a folder) to a fused ONNX graph."""
    from codesearch.embedding.export import export_model

    result = export_model(model, int8=int8, out=out, progress=not quiet and not as_json)
    if as_json:
        _echo_json({"model": result.spec.name, "path": str(result.path), "int8_used": result.int8_used,
                    "gate": result.gate, "cached": result.cached, "seconds": round(result.seconds, 2)})
        return
    click.echo(str(result))


if __name__ == "__main__":  # pragma: no cover
    main()
