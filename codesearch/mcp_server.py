"""``codesearch mcp``: the API as Model Context Protocol tools, over stdio (the official ``mcp`` SDK).

Tools (their names are fixed, so clients and docs can rely on them):

- ``search(query, repo?, k=10, mode="hybrid", scope?, include?, exclude?, kinds?, max_lines=40)``
- ``find_related(location, repo?, k=10, max_lines=40)``
- ``index_status(repo?)``
- ``reindex(repo?)``

``repo`` defaults to the first root the server was started with; any other
folder is indexed on first use. Each tool handler only parses its arguments,
calls :class:`~codesearch.search.CodeSearch` and shapes the answer: bad input
comes back as a tool error with the library's one-line message, and the
server keeps serving.

A repository answers from its static tier as soon as that exists; the
transformer tier is then built in a background thread of this process (one
per repository, holding the index's write lock; ``CodeSearch(background_upgrade=True)``),
and searches switch to it when it is committed.

Each repository is watched for changes (``CodeSearch(watch=True)``): a search
re-checks only the files the system reported changed, and none at all when
nothing did; where watching is not possible, each search runs the stat pass,
and ``index_status`` says which is active (``freshness``, ``freshness_reason``).
The watchers stop when the client closes the session.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from codesearch.exceptions import CodeSearchError
from codesearch.locations import parse_location
from codesearch.scope import as_strings
from codesearch.search import CodeSearch
from codesearch.types import Hit

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Search the code of local repositories by meaning and by keyword. Use `search` with a question, a "
    "description of behaviour or an identifier; each hit is a `path:start-end` location with its text. Use "
    "`find_related` on a location to see similar code, `index_status` to see what is indexed and how many files "
    "changed since, `reindex` to bring an index up to date (searches refresh changed files by themselves)."
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


def _trim(hit: Hit, max_lines: int) -> dict[str, Any]:
    data = hit.as_dict()
    lines = hit.text.split("\n")
    data["text"] = "\n".join(lines[:max_lines])
    data["truncated"] = len(lines) > max_lines
    return data


def _checked_lines(max_lines: int) -> int:
    if max_lines < 0:
        raise ToolInputError(f"max_lines must be 0 or more, got {max_lines}")
    return max_lines


def tool_search(ws: Workspace, query: str, repo: str | None = None, k: int = 10, mode: str = "hybrid",
                scope: str | None = None, include: list[str] | None = None, exclude: list[str] | None = None,
                kinds: list[str] | None = None, max_lines: int = 40) -> dict[str, Any]:
    """The ``search`` tool (mode, k and the query are checked by :meth:`CodeSearch.search` itself)."""
    _checked_lines(max_lines)
    cs, lock = ws.searcher(repo)
    with lock:
        hits = cs.search(query, k=k, mode=mode, scope=scope, include=as_strings(include),  # type: ignore[arg-type]
                         exclude=as_strings(exclude), kinds=as_strings(kinds) or None)
        info = cs.last_search
    return {"repo": str(cs.root), "tier": info.tier if info else None,
            "refreshed": info.refreshed if info else 0, "hits": [_trim(h, max_lines) for h in hits]}


def tool_find_related(ws: Workspace, location: str, repo: str | None = None, k: int = 10,
                      max_lines: int = 40) -> dict[str, Any]:
    """The ``find_related`` tool (k, and a path outside the repository, are checked by :meth:`CodeSearch.related`)."""
    _checked_lines(max_lines)
    path, line = parse_location(location)
    cs, lock = ws.searcher(repo)
    with lock:
        hits = cs.related(path, line, k=k)
    return {"repo": str(cs.root), "location": location, "hits": [_trim(h, max_lines) for h in hits]}


def tool_index_status(ws: Workspace, repo: str | None = None) -> dict[str, Any]:
    """The ``index_status`` tool."""
    cs, lock = ws.searcher(repo)
    with lock:
        if not cs.store.exists():
            return {"root": str(cs.root), "indexed": False, "index_dir": str(cs.store.directory)}
        return {"indexed": True, **cs.status()}


def tool_reindex(ws: Workspace, repo: str | None = None) -> dict[str, Any]:
    """The ``reindex`` tool."""
    cs, lock = ws.searcher(repo)
    with lock:
        return {"repo": str(cs.root), **cs.index().as_dict()}


def build_server(ws: Workspace) -> Any:
    """An :class:`mcp.server.mcpserver.MCPServer` with the four tools bound to ``ws``."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from codesearch import __version__

    server = MCPServer("codesearch", instructions=INSTRUCTIONS, version=__version__)

    def answer(call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = call(ws, *args, **kwargs)
            return result
        except (CodeSearchError, ValueError, OSError) as exc:  # one line, and the server keeps serving
            raise ToolError(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None

    @server.tool()
    def search(query: str, repo: str | None = None, k: int = 10, mode: str = "hybrid", scope: str | None = None,
               include: list[str] | None = None, exclude: list[str] | None = None, kinds: list[str] | None = None,
               max_lines: int = 40) -> dict[str, Any]:
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
        """
        return answer(tool_search, query, repo, k, mode, scope, include, exclude, kinds, max_lines)

    @server.tool()
    def find_related(location: str, repo: str | None = None, k: int = 10, max_lines: int = 40) -> dict[str, Any]:
        """Code most similar to the chunk at a location (path:line or path:start-end), without that chunk.

        Args:
            location: path:line or path:start-end, the path relative to the repository.
            repo: a repository folder; default the server's first.
            k: how many hits.
            max_lines: lines of each hit's text to return.
        """
        return answer(tool_find_related, location, repo, k, max_lines)

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


__all__ = ["INSTRUCTIONS", "ToolInputError", "Workspace", "build_server", "serve", "tool_find_related",
           "tool_index_status", "tool_reindex", "tool_search"]
