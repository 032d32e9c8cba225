"""The MCP server over a corpus (``codesearch mcp --corpus STORE``): ``search`` and ``index_status`` across its
repositories, with the tools' arguments, limits and one-line errors of :mod:`codesearch.faces.mcp_server`."""

from __future__ import annotations

import os
import threading
from typing import Any

from codesearch.faces.answers import hits_data
from codesearch.faces.mcp_server import (
    INSTRUCTIONS,
    Flag,
    Int,
    answerer,
    checked_limits,
    fit,
    read_requests_through,
    readable_request,
    server_class,
)
from codesearch.scope import as_strings


class CorpusWorkspace:
    """The corpus one server answers for (one :class:`~codesearch.corpus.Corpus`; searches take turns)."""

    def __init__(self, corpus: Any, *, max_k: int | None = None) -> None:
        self.corpus = corpus
        self.max_k = max_k
        self.lock = threading.Lock()
        # A store that is not a corpus fails at start, not at first use; its files' sha256 are checked in a thread
        # from now, and the first answer waits for the verdict.
        corpus.verify_in_background()


def tool_corpus_search(ws: CorpusWorkspace, query: str, repo: str | None = None, k: int = 10, mode: str = "hybrid",
                       scope: str | None = None, include: list[str] | None = None, exclude: list[str] | None = None,
                       kinds: list[str] | None = None, max_lines: int = 40, max_tokens: int | None = None,
                       compact: bool = False) -> dict[str, Any]:
    """The ``search`` tool over a corpus: ``repo`` is one of its repositories (default: all of them)."""
    checked_limits(ws, k, max_lines, max_tokens)
    with ws.lock:
        hits = ws.corpus.search(query, k=k, repos=[repo] if repo else None, mode=mode, scope=scope,
                                include=as_strings(include), exclude=as_strings(exclude), kinds=as_strings(kinds) or None)
        versions = ws.corpus.last_versions
    return fit({"repo": repo, "versions": versions, "hits": hits_data(hits, max_lines=max_lines, compact=compact)},
               max_tokens)


def tool_corpus_status(ws: CorpusWorkspace, repo: str | None = None) -> dict[str, Any]:
    """The ``index_status`` tool over a corpus: the corpus's facts, or one repository's."""
    from codesearch.exceptions import RepositoryNotInCorpusError

    with ws.lock:
        facts: dict[str, Any] = ws.corpus.status()
    if repo is None:
        return facts
    found = facts["repositories"].get(repo)
    if found is None:
        raise RepositoryNotInCorpusError(f"{repo!r} is not in the corpus at {facts['store']}")
    return {"repo": repo, "store": facts["store"], "model": facts["model"], **found}


def build_corpus_server(ws: CorpusWorkspace) -> Any:
    """An :class:`mcp.server.mcpserver.MCPServer` with ``search`` and ``index_status`` over a corpus."""
    from codesearch import __version__

    server = server_class()("codesearch", instructions=INSTRUCTIONS.split(" Use `find_definition`", maxsplit=1)[0]
                             + " `repo` names a repository of the corpus; without it every repository is searched.",
                             version=__version__)

    answer = answerer(ws)

    @server.tool()
    def search(query: str, repo: str | None = None, k: Int = 10, mode: str = "hybrid", scope: str | None = None,
               include: list[str] | None = None, exclude: list[str] | None = None, kinds: list[str] | None = None,
               max_lines: Int = 40, max_tokens: Int | None = None, compact: Flag = False) -> dict[str, Any]:
        """Find code by meaning and keyword across the corpus's repositories; each hit names its `repo`.

        Args:
            query: what to look for.
            repo: one repository of the corpus; default all of them.
            k: how many hits.
            mode: hybrid (default), bm25 (keywords) or dense (meaning).
            scope: only paths under this prefix, e.g. "src/".
            include: only paths matching these .gitignore-style globs.
            exclude: leave out paths matching these globs.
            kinds: only these kinds: source, test, doc, config.
            max_lines: lines of each hit's text to return.
            max_tokens: keep the whole answer within this many tokens (1 token per 3 bytes of its JSON).
            compact: locations, symbols and one line per hit instead of texts.
        """
        return answer(tool_corpus_search, query, repo, k, mode, scope, include, exclude, kinds, max_lines, max_tokens,
                      compact)

    @server.tool()
    def index_status(repo: str | None = None) -> dict[str, Any]:
        """What the corpus holds: models, tier, repositories, files, chunks; or one repository's facts.

        Args:
            repo: one repository of the corpus; default the whole corpus.
        """
        return answer(tool_corpus_status, repo)

    return server


def serve_corpus(store: str, **options: Any) -> None:
    """Run the stdio server over the corpus at ``store`` until the client closes it."""
    import sys

    from codesearch.corpus import Corpus

    server = build_corpus_server(CorpusWorkspace(Corpus(store, **options)))
    read_requests_through(readable_request)
    server.run("stdio")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


__all__ = ["CorpusWorkspace", "build_corpus_server", "serve_corpus", "tool_corpus_search", "tool_corpus_status"]
