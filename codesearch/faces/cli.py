"""The ``codesearch`` command: thin commands over the public API.

Each command parses its options (defined once in
:mod:`codesearch.faces.options`, as its errors and output are), calls the
library, and prints the answer: text for people, ``--json`` for tools. The
library checks the arguments; its errors become one line and exit code 2.
The ``corpus`` commands are in :mod:`codesearch.faces.cli_corpus`, the agent
registrations in :mod:`codesearch.faces.cli_setup`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import click

from codesearch.display import printable
from codesearch.faces.cli_corpus import corpus
from codesearch.faces.cli_setup import SETUP_COMMANDS
from codesearch.faces.options import (
    Commands,
    Folder,
    answer_options,
    check_model_name,
    echo_answer,
    echo_facts,
    echo_hits,
    echo_json,
    fail,
    index_options,
    json_option,
    k_option,
    lines_option,
    mode_option,
    no_ignore_option,
    path_argument,
    read_only_option,
    reports_errors,
    scope_arguments,
    scope_options,
)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
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
        echo_json(data)
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
        echo_json(report.as_dict())
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
@k_option()
@mode_option
@scope_options
@click.option("--no-source-first", is_flag=True,
              help="Rank tests, docs and config purely on relevance (by default source wins among similar hits).")
@click.option("--no-refresh", is_flag=True, help="Do not re-index files changed since the last index first.")
@lines_option()
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
    paths = paths or (".",)
    if len(paths) > 1 and index_dir is not None:
        fail("--index-dir names one index; leave it out to search several paths")
    options: dict[str, Any] = {
        "k": k, "mode": mode, **scope_arguments(scope, include, exclude, kinds, no_tests, no_docs),
        "source_first": False if no_source_first else None, "refresh": False if no_refresh else None,
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
        echo_hits(fitted["hits"], preview_lines, with_root=len(paths) > 1)
        if in_memory:
            why = "it is read-only here" if unwritable else "another process holds its write lock"
            click.echo(f"({in_memory} changed files were read into memory for this answer; the stored index is as it "
                       f"was: {why})", err=True)
        static_roots = [root for root, tier in tiers.items() if tier == "static"]
        if static_roots:
            click.echo(f"(answered from the static tier; `codesearch index {printable(static_roots[0])}` adds the "
                       "transformer's)", err=True)

    echo_answer(answer, as_json, max_tokens, human)


@main.command()
@click.argument("location")
@click.argument("path", default=".", type=click.Path(file_okay=False, dir_okay=True))
@index_options
@k_option()
@lines_option()
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
    echo_answer({"location": location, "hits": hits_data(hits, compact=compact)}, as_json, max_tokens,
                 lambda fitted: echo_hits(fitted["hits"], preview_lines))


name_argument = click.argument("name")
path_default_dir = click.argument("path", default=".", type=click.Path(file_okay=False, dir_okay=True))


@main.command("def")
@name_argument
@path_default_dir
@index_options
@k_option(what="definitions")
@lines_option("definition")
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
    echo_answer(symbol_answer(found, compact=compact), as_json, max_tokens,
                 lambda fitted: echo_hits(fitted["hits"], preview_lines))


@main.command()
@name_argument
@path_default_dir
@index_options
@k_option(50, "chunks at most")
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

    echo_answer(symbol_answer(found, compact=compact), as_json, max_tokens, human)


@main.command()
@path_argument
@index_options
@read_only_option
@json_option
@reports_errors
def status(path: str, model: str, index_dir: str | None, int8: bool, read_only: bool, as_json: bool) -> None:
    """The index of PATH: model, tier, counts, last update, files changed on disk since (nothing is re-indexed), and
    how searches find changes (freshness: a one-shot command runs a stat pass; the MCP server watches)."""
    echo_facts(_searcher(path, model, index_dir, int8, read_only=read_only).status(), as_json, 19, {"changes"})


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
            fail("give either PATHS or --corpus STORE, not both")
        from codesearch.faces.mcp_corpus import serve_corpus

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
            fail("give either PATHS or --corpus STORE, not both")
        served = Served(corpus=corpus_store, model=_model(model) or "minilm", int8=int8, max_k=max_k)
    else:
        served = Served(list(paths) or ["."], model=_model(model), int8=int8, index_dir=index_dir,
                        allow_refresh=allow_refresh, max_k=max_k)
    run(served, host=host, port=port, token=token, no_auth=no_auth, cors_origins=cors_origins)


@main.command()
@path_argument
@click.option("--index-dir", type=Folder(), default=None, help="Where the index lives.")
@click.option("--model", "-m", default=None, callback=check_model_name,
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
    echo_facts(facts, as_json, 15)


@main.command()
@path_argument
@click.option("--index-dir", type=Folder(), default=None, help="Where the index lives.")
@json_option
@reports_errors
def verify(path: str, index_dir: str | None, as_json: bool) -> None:
    """Check every file of the index of PATH against its sha256 (searches check them in the background)."""
    from codesearch.search import CodeSearch

    searcher = CodeSearch(path, model=None, index_dir=index_dir)
    checked = searcher.verify()
    if as_json:
        echo_json({"index_dir": str(searcher.store.directory), "verified": True, "bytes": checked})
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
        echo_json({"model": result.spec.name, "path": str(result.path), "int8_used": result.int8_used,
                    "gate": result.gate, "cached": result.cached, "seconds": round(result.seconds, 2)})
        return
    click.echo(str(result))


@main.command()
@click.argument("repos", nargs=-1, type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(file_okay=False), required=True, help="The model folder to write.")
@click.option("--sources", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A sources list (training/sources.json): public repositories pinned by commit.")
@click.option("--mirrors", type=click.Path(exists=True, file_okay=False), default=None,
              help="The folder of the sources' git mirrors or checkouts.")
@click.option("--recipe", default=None, help="Fine-tuning knobs: a JSON object or a JSON file (training.finetune.Recipe).")
@click.option("--base", default="minilm", show_default=True, help="The model to start from (its weights must be here).")
@click.option("--work", type=click.Path(file_okay=False), default=None, help="Where pairs are kept (default: OUT-work).")
@click.option("--benchmark-list", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Refuse sources that overlap these owner/name lines.")
@click.option("--no-static", is_flag=True, help="Leave the static tier to a distillation on first use (no fit).")
@json_option
@reports_errors
def train(repos: tuple[str, ...], out: str, sources: str | None, mirrors: str | None, recipe: str | None, base: str,
          work: str | None, benchmark_list: str | None, no_static: bool, as_json: bool) -> None:
    """Train a code-search model on REPOS (your own checkouts) or on --sources; `--model OUT` then uses it.

    Doc comments are paired with the code they document, and the base model is fine-tuned on the pairs
    (sentence-transformers: in-batch and same-repository hard negatives).
    """
    from codesearch.training.pipeline import train_model

    chosen = None
    if recipe is not None:
        import json
        import os
        from pathlib import Path

        from codesearch.training.finetune import Recipe

        text = Path(recipe).read_text("utf-8") if os.path.isfile(recipe) else recipe
        try:
            chosen = Recipe.from_dict(json.loads(text))
        except (ValueError, TypeError) as exc:
            fail(f"--recipe: {exc}")
    result = train_model(out, sources=sources, mirrors=mirrors, repos=repos, recipe=chosen, base=base, work=work,
                         benchmark_list=benchmark_list, fit_static=not no_static, progress=not as_json)
    if as_json:
        echo_json(result.as_dict())
        return
    took = ", ".join(f"{step} {seconds:.0f} s" for step, seconds in result.seconds.items())
    click.echo(f"trained {printable(str(result.out))} on {result.pairs['train']} pairs ({took}); "
               f"use it with --model {printable(str(result.out))}")


main.add_command(corpus)
for _command in SETUP_COMMANDS:
    main.add_command(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
