"""``codesearch corpus``: build, refresh, search and describe a corpus of many repositories (the ``corpus`` extra).

Thin commands over :class:`codesearch.corpus.Corpus`, with the options and
output of the other commands (:mod:`codesearch.faces.options`): a corpus
search takes the same scope options as ``codesearch search``.
"""

from __future__ import annotations

from typing import Any

import click

from codesearch.display import printable
from codesearch.faces.options import (
    Commands,
    answer_options,
    check_model_name,
    echo_answer,
    echo_facts,
    echo_hits,
    echo_json,
    fail,
    json_option,
    k_option,
    lines_option,
    mode_option,
    reports_errors,
    scope_arguments,
    scope_options,
)


@click.group(cls=Commands)
def corpus() -> None:
    """Many repositories in one store (Ray Data builds it, Lance holds it), searched with the same ranking.

    Needs the corpus extra: pip install 'codesearch-hybrid[corpus]'.
    """


store_argument = click.argument("store")
ray_address_option = click.option(
    "--ray-address", default=None,
    help="A Ray cluster's HOST:PORT (or auto); default: a local Ray started for this command.")
corpus_model_option = click.option("--model", "-m", default="minilm", show_default=True, callback=check_model_name,
                                   help="The corpus's model (a corpus holds one model's vectors).")


def _corpus(store: str, model: str, int8: bool = True, progress: bool = False):  # type: ignore[no-untyped-def]
    from codesearch.corpus import Corpus

    return Corpus(store, model=model, int8=int8, progress=progress)


def _echo_report(report: Any, as_json: bool, verb: str) -> None:
    if as_json:
        echo_json(report.as_dict())
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
@k_option()
@mode_option
@scope_options
@lines_option()
@answer_options
@json_option
@reports_errors
def corpus_search(query: str, store: str, repos: tuple[str, ...], model: str, k: int, mode: str, scope: str | None,
                  include: tuple[str, ...], exclude: tuple[str, ...], kinds: tuple[str, ...], no_tests: bool,
                  no_docs: bool, preview_lines: int, max_tokens: int | None, compact: bool, as_json: bool) -> None:
    """Search STORE for QUERY, across every repository or those named by --repo; each hit names its repository."""
    from codesearch.faces.answers import corpus_answer

    searched = _corpus(store, model)
    hits = searched.search(query, k=k, repos=list(repos) or None, mode=mode,  # type: ignore[arg-type]
                           **scope_arguments(scope, include, exclude, kinds, no_tests, no_docs))
    answer = corpus_answer(query, repos, hits, compact=compact, versions=searched.last_versions)

    def human(fitted: dict[str, Any]) -> None:
        if not fitted["hits"]:
            click.echo("no hits")
        echo_hits(fitted["hits"], preview_lines, with_root=False)

    echo_answer(answer, as_json, max_tokens, lambda fitted: human({**fitted, "hits": [
        {**h, "location": f"{h['repo']}:{h['location']}"} for h in fitted["hits"]]}))


@corpus.command("status")
@store_argument
@json_option
@reports_errors
def corpus_status(store: str, as_json: bool) -> None:
    """STORE's models, tier, counts and dataset versions, and every repository's files, chunks, tier and update."""
    from codesearch.corpus import Corpus

    facts = Corpus(store).status()
    if not echo_facts(facts, as_json, 10, {"repositories"}):
        return
    for name, repo in facts["repositories"].items():
        click.echo(f"  {printable(name):<24} {repo['files']:>7,} files {repo['chunks']:>9,} chunks  {repo['tier']:<6} "
                   f"{repo['updated']}  {printable(str(repo['root']))}")


@corpus.command("verify")
@store_argument
@json_option
@reports_errors
def corpus_verify(store: str, as_json: bool) -> None:
    """Check every file STORE's versions read against the sha256 its last build or refresh recorded (search and
    status check them too, once per process)."""
    from codesearch.corpus import Corpus

    facts = Corpus(store).verify()
    if not facts["verified"]:
        fail(f"the corpus at {facts['store']} records no checksums (written before codesearch recorded them); "
             f"`codesearch corpus refresh {facts['store']}` records them")
    if as_json:
        echo_json(facts)
        return
    click.echo(f"verified {facts['files']:,} files ({facts['bytes']:,} bytes) of the corpus at "
               f"{printable(facts['store'])}")


__all__ = ["corpus"]
