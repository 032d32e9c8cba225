"""``codesearch mcp``: the API as Model Context Protocol tools, over stdio (the official ``mcp`` SDK).

Tools (their names are fixed, so clients and docs can rely on them):

- ``search(query, repo?, k=10, mode="hybrid", scope?, include?, exclude?, kinds?, max_lines=40, max_tokens?, compact=false)``
- ``find_related(location, repo?, k=10, max_lines=40, max_tokens?, compact=false)``
- ``find_definition(name, repo?, k=10, max_lines=40, max_tokens?, compact=false)``
- ``find_references(name, repo?, k=20, max_lines=40, max_tokens?, compact=false)``
- ``index_status(repo?)``
- ``reindex(repo?)``

``repo`` defaults to the first root the server was started with; any other
folder is indexed on first use. Each tool handler only parses its arguments,
calls :class:`~codesearch.search.CodeSearch` and shapes the answer
(:mod:`codesearch.answers`): bad input comes back as a tool error with the
library's one-line message, and the server keeps serving. With
``max_tokens``, the answer's text as the SDK sends it stays within that many
tokens by the rule of :func:`codesearch.answers.estimate_tokens`.

A repository answers from its static tier as soon as that exists; the
transformer tier is then built in a background thread of this process (one
per repository, holding the index's write lock; ``CodeSearch(background_upgrade=True)``),
and searches switch to it when it is committed. A read-only index
(``codesearch mcp --read-only``, or a folder this process cannot write) is
never written: any number of servers can read it at once.

Each repository is watched for changes (``CodeSearch(watch=True)``): a search
re-checks only the files the system reported changed, and none at all when
nothing did; where watching is not possible, each search runs the stat pass,
and ``index_status`` says which is active (``freshness``, ``freshness_reason``).
The watchers stop when the client closes the session.

``codesearch mcp --corpus STORE`` serves a corpus (:class:`codesearch.corpus.Corpus`)
instead: ``search`` (``repo`` names a repository of the corpus; without it,
every repository) and ``index_status``, with the same arguments and answers,
each hit naming its ``repo``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codesearch.answers import check_max_tokens, fit_to_budget, hits_data, symbol_answer
from codesearch.exceptions import CodeSearchError
from codesearch.locations import parse_location
from codesearch.scope import as_strings
from codesearch.search import CodeSearch
from codesearch.types import SymbolHits

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Search the code of local repositories by meaning and by keyword. Use `search` with a question, a "
    "description of behaviour or an identifier; each hit is a `path:start-end` location with its text. Use "
    "`find_definition` for where a known symbol is defined and `find_references` for where an identifier is used "
    "(textual, whole word), `find_related` on a location to see similar code, `index_status` to see what is indexed "
    "and how many files changed since, `reindex` to bring an index up to date (searches refresh changed files by "
    "themselves). Pass `max_tokens` to keep an answer within a budget, `compact=true` for locations and one line "
    "per hit."
)


class ToolInputError(ValueError):
    """A tool was called with arguments it cannot use."""


class Workspace:
    """The repositories one server answers for: a :class:`CodeSearch` each, created on first use.

    Args:
        roots: the repositories named on the command line; the first is the default.
        background: build the transformer tier in a background thread after a
            repository's first answer (``CodeSearch(background_upgrade=True)``;
            off in tests that want a fixed tier).
        **options: passed to every :class:`CodeSearch` (``model``, ``int8``, ...);
            ``watch`` is on unless set to ``False``.
    """

    def __init__(self, roots: list[str], *, background: bool = True, **options: Any) -> None:
        if not roots:
            roots = ["."]
        self.default = Path(roots[0]).expanduser().resolve()
        self.options = {"watch": True, **options, "background_upgrade": background}
        self._searchers: dict[Path, CodeSearch] = {}
        self._locks: dict[Path, threading.Lock] = {}
        self._guard = threading.Lock()
        for root in roots:
            self.searcher(root)  # check every root now: a bad one fails at start, not at first use

    def searcher(self, repo: str | None) -> tuple[CodeSearch, threading.Lock]:
        root = self.default if not repo else Path(repo).expanduser().resolve()
        with self._guard:
            found = self._searchers.get(root)
            if found is None:
                options = dict(self.options)
                if root != self.default:
                    options.pop("index_dir", None)  # one index_dir names the default repository's index
                found = self._searchers[root] = CodeSearch(root, **options)
                self._locks[root] = threading.Lock()
            return found, self._locks[root]

    def wait_for_upgrades(self, timeout: float | None = None) -> None:
        for searcher in list(self._searchers.values()):
            searcher.wait_for_upgrade(timeout)

    def close(self) -> None:
        """Stop every repository's file watcher (searches after this stat the files)."""
        with self._guard:
            searchers = list(self._searchers.values())
        for searcher in searchers:
            searcher.close()


def sdk_text(data: Any) -> str:
    """An answer as the SDK sends it to the client (the text the budget counts)."""
    import pydantic_core

    return pydantic_core.to_json(data, fallback=str, indent=2).decode()


def _checked(max_lines: int, max_tokens: int | None) -> None:
    if max_lines < 0:
        raise ToolInputError(f"max_lines must be 0 or more, got {max_lines}")
    check_max_tokens(max_tokens)


def _fit(answer: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    return fit_to_budget(answer, max_tokens, sdk_text)


def tool_search(ws: Workspace, query: str, repo: str | None = None, k: int = 10, mode: str = "hybrid",
                scope: str | None = None, include: list[str] | None = None, exclude: list[str] | None = None,
                kinds: list[str] | None = None, max_lines: int = 40, max_tokens: int | None = None,
                compact: bool = False) -> dict[str, Any]:
    """The ``search`` tool (mode, k and the query are checked by :meth:`CodeSearch.search` itself)."""
    _checked(max_lines, max_tokens)
    cs, lock = ws.searcher(repo)
    with lock:
        hits = cs.search(query, k=k, mode=mode, scope=scope, include=as_strings(include),  # type: ignore[arg-type]
                         exclude=as_strings(exclude), kinds=as_strings(kinds) or None)
        info = cs.last_search
    answer: dict[str, Any] = {"repo": str(cs.root), "tier": info.tier if info else None,
                              "refreshed": info.refreshed if info else 0}
    if info is not None and info.note:
        answer["note"] = info.note
    answer["hits"] = hits_data(hits, max_lines=max_lines, compact=compact)
    return _fit(answer, max_tokens)


def tool_find_related(ws: Workspace, location: str, repo: str | None = None, k: int = 10, max_lines: int = 40,
                      max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
    """The ``find_related`` tool (k, and a path outside the repository, are checked by :meth:`CodeSearch.related`)."""
    _checked(max_lines, max_tokens)
    path, line = parse_location(location)
    cs, lock = ws.searcher(repo)
    with lock:
        hits = cs.related(path, line, k=k)
    return _fit({"repo": str(cs.root), "location": location,
                 "hits": hits_data(hits, max_lines=max_lines, compact=compact)}, max_tokens)


def tool_find_definition(ws: Workspace, name: str, repo: str | None = None, k: int = 10, max_lines: int = 40,
                         max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
    """The ``find_definition`` tool (the name and k are checked by :meth:`CodeSearch.definitions`)."""
    return _symbol_tool(ws, lambda cs: cs.definitions(name, k=k), repo, max_lines, max_tokens, compact)


def tool_find_references(ws: Workspace, name: str, repo: str | None = None, k: int = 20, max_lines: int = 40,
                         max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
    """The ``find_references`` tool (the name and k are checked by :meth:`CodeSearch.references`)."""
    return _symbol_tool(ws, lambda cs: cs.references(name, k=k), repo, max_lines, max_tokens, compact)


def _symbol_tool(ws: Workspace, find: Callable[[CodeSearch], SymbolHits], repo: str | None, max_lines: int,
                 max_tokens: int | None, compact: bool) -> dict[str, Any]:
    """A symbol tool's answer: ``find`` run on the repository's searcher under its lock, fitted to the budget."""
    _checked(max_lines, max_tokens)
    cs, lock = ws.searcher(repo)
    with lock:
        found = find(cs)
    return _fit({"repo": str(cs.root), **symbol_answer(found, max_lines=max_lines, compact=compact)}, max_tokens)


def tool_index_status(ws: Workspace, repo: str | None = None) -> dict[str, Any]:
    """The ``index_status`` tool."""
    cs, lock = ws.searcher(repo)
    with lock:
        if not cs.store.exists():
            return {"root": str(cs.root), "indexed": False, "index_dir": str(cs.store.directory),
                    "read_only": cs.read_only}
        return {"indexed": True, **cs.status()}


def tool_reindex(ws: Workspace, repo: str | None = None) -> dict[str, Any]:
    """The ``reindex`` tool."""
    cs, lock = ws.searcher(repo)
    with lock:
        return {"repo": str(cs.root), **cs.index().as_dict()}


def _answerer(ws: Workspace | CorpusWorkspace) -> Callable[..., dict[str, Any]]:
    """``answer(tool, *args)``: the tool's answer for ``ws``, or its error as a one-line tool error (the server keeps
    serving)."""
    from mcp.server.mcpserver.exceptions import ToolError

    def answer(call: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return call(ws, *args, **kwargs)
        except (CodeSearchError, ValueError, OSError) as exc:
            raise ToolError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None

    return answer


def build_server(ws: Workspace) -> Any:
    """An :class:`mcp.server.mcpserver.MCPServer` with the six tools bound to ``ws``."""
    from mcp.server.mcpserver import MCPServer

    from codesearch import __version__

    server = MCPServer("codesearch", instructions=INSTRUCTIONS, version=__version__)

    answer = _answerer(ws)

    @server.tool()
    def search(query: str, repo: str | None = None, k: int = 10, mode: str = "hybrid", scope: str | None = None,
               include: list[str] | None = None, exclude: list[str] | None = None, kinds: list[str] | None = None,
               max_lines: int = 40, max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
        """Find code by meaning and keyword: a question, a description of behaviour, or an identifier.

        Args:
            query: what to look for.
            repo: a repository folder; default the server's first.
            k: how many hits.
            mode: hybrid (default), bm25 (keywords) or dense (meaning).
            scope: only paths under this prefix, e.g. "src/".
            include: only paths matching these .gitignore-style globs.
            exclude: leave out paths matching these globs.
            kinds: only these kinds: source, test, doc, config.
            max_lines: lines of each hit's text to return.
            max_tokens: keep the whole answer within this many tokens (1 token per 3 bytes of its JSON); hit
                texts are cut from the end, then hits dropped, and the answer says how many (trimmed, dropped).
            compact: locations, symbols and one line per hit instead of texts.
        """
        return answer(tool_search, query, repo, k, mode, scope, include, exclude, kinds, max_lines, max_tokens, compact)

    @server.tool()
    def find_related(location: str, repo: str | None = None, k: int = 10, max_lines: int = 40,
                     max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
        """Code most similar to the chunk at a location (path:line or path:start-end), without that chunk.

        Args:
            location: path:line or path:start-end, the path relative to the repository.
            repo: a repository folder; default the server's first.
            k: how many hits.
            max_lines: lines of each hit's text to return.
            max_tokens: keep the whole answer within this many tokens (see search).
            compact: locations, symbols and one line per hit instead of texts.
        """
        return answer(tool_find_related, location, repo, k, max_lines, max_tokens, compact)

    @server.tool()
    def find_definition(name: str, repo: str | None = None, k: int = 10, max_lines: int = 40,
                        max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
        """Where a symbol is defined: "Session.send", "send", "Foo::bar" (exact name, same case first).

        Each hit's `defines` is the symbol that matched. An unknown name answers no hits and a `note` with
        the closest symbol names.

        Args:
            name: the symbol, bare or qualified.
            repo: a repository folder; default the server's first.
            k: how many definitions.
            max_lines: lines of each definition's text to return.
            max_tokens: keep the whole answer within this many tokens (see search).
            compact: locations, symbols and one line per hit instead of texts.
        """
        return answer(tool_find_definition, name, repo, k, max_lines, max_tokens, compact)

    @server.tool()
    def find_references(name: str, repo: str | None = None, k: int = 20, max_lines: int = 40,
                        max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
        """Where an identifier is used, as a whole word with its case (as grep -w), in file then line order.

        Textual: calls through dynamic dispatch, reflection or names built at run time are missed. Each hit's
        `lines` are the lines that use the name; a hit whose chunk defines it has `defines`. `capped` says
        whether there were more than k.

        Args:
            name: an identifier (a qualified name looks for its last part).
            repo: a repository folder; default the server's first.
            k: how many chunks.
            max_lines: lines of each chunk's text to return.
            max_tokens: keep the whole answer within this many tokens (see search).
            compact: locations, symbols and the first line that uses the name per hit instead of texts.
        """
        return answer(tool_find_references, name, repo, k, max_lines, max_tokens, compact)

    @server.tool()
    def index_status(repo: str | None = None) -> dict[str, Any]:
        """What is indexed: root, model and fingerprint, tier, files, chunks, last update, files changed since.

        Args:
            repo: a repository folder; default the server's first.
        """
        return answer(tool_index_status, repo)

    @server.tool()
    def reindex(repo: str | None = None) -> dict[str, Any]:
        """Bring the index up to date now (changed chunks are embedded, the rest reused); the report.

        Args:
            repo: a repository folder; default the server's first.
        """
        return answer(tool_reindex, repo)

    return server


class CorpusWorkspace:
    """The corpus one server answers for (one :class:`~codesearch.corpus.Corpus`; searches take turns)."""

    def __init__(self, corpus: Any) -> None:
        self.corpus = corpus
        self.lock = threading.Lock()
        corpus.status()  # a store that is not a corpus fails at start, not at first use


def tool_corpus_search(ws: CorpusWorkspace, query: str, repo: str | None = None, k: int = 10, mode: str = "hybrid",
                       scope: str | None = None, include: list[str] | None = None, exclude: list[str] | None = None,
                       kinds: list[str] | None = None, max_lines: int = 40, max_tokens: int | None = None,
                       compact: bool = False) -> dict[str, Any]:
    """The ``search`` tool over a corpus: ``repo`` is one of its repositories (default: all of them)."""
    _checked(max_lines, max_tokens)
    with ws.lock:
        hits = ws.corpus.search(query, k=k, repos=[repo] if repo else None, mode=mode, scope=scope,
                                include=as_strings(include), exclude=as_strings(exclude), kinds=as_strings(kinds) or None)
    return _fit({"repo": repo, "hits": hits_data(hits, max_lines=max_lines, compact=compact)}, max_tokens)


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
    from mcp.server.mcpserver import MCPServer

    from codesearch import __version__

    server = MCPServer("codesearch", instructions=INSTRUCTIONS.split(" Use `find_definition`", maxsplit=1)[0]
                       + " `repo` names a repository of the corpus; without it every repository is searched.",
                       version=__version__)

    answer = _answerer(ws)

    @server.tool()
    def search(query: str, repo: str | None = None, k: int = 10, mode: str = "hybrid", scope: str | None = None,
               include: list[str] | None = None, exclude: list[str] | None = None, kinds: list[str] | None = None,
               max_lines: int = 40, max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
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

    build_corpus_server(CorpusWorkspace(Corpus(store, **options))).run("stdio")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def serve(roots: list[str], **options: Any) -> None:
    """Run the stdio server until the client closes it, then exit the process.

    A transformer tier still being built in the background is left as its
    checkpoints have it (the committed index is untouched; the next run goes on
    from there), so the exit is immediate and never waits on a long embedding.
    """
    import sys

    ws = Workspace(roots, **options)
    try:
        build_server(ws).run("stdio")
    finally:
        ws.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


__all__ = ["INSTRUCTIONS", "CorpusWorkspace", "ToolInputError", "Workspace", "build_corpus_server", "build_server",
           "sdk_text", "serve", "serve_corpus", "tool_corpus_search", "tool_corpus_status", "tool_find_definition",
           "tool_find_references", "tool_find_related", "tool_index_status", "tool_reindex", "tool_search"]
