"""``codesearch mcp``: the API as Model Context Protocol tools, over stdio (the official ``mcp`` SDK).

Tools (their names are fixed, so clients and docs can rely on them):

- ``search(query, repo?, k=10, mode="hybrid", scope?, include?, exclude?, kinds?, max_lines=40, max_tokens?, compact=false)``
- ``find_related(location, repo?, k=10, max_lines=40, max_tokens?, compact=false)``
- ``find_definition(name, repo?, k=10, max_lines=40, max_tokens?, compact=false)``
- ``find_references(name, repo?, k=20, max_lines=40, max_tokens?, compact=false)``
- ``index_status(repo?)``
- ``reindex(repo?)``

``repo`` defaults to the first root the server was started with. The roots
named on its command line, and the folders under them, are all it serves: a
``repo`` anywhere else (once symlinks and ``..`` are resolved; a relative one
is taken from the server's working directory) is a one-line tool error, and
nothing is read or written for it. ``codesearch mcp --allow-any-repo`` serves
any folder the user can read instead, indexed on first use.

Each tool handler only parses its arguments, calls
:class:`~codesearch.search.CodeSearch` and shapes the answer
(:mod:`codesearch.faces.answers`): bad input comes back as a one-line tool error
(the library's message; for an argument of the wrong type, its name and what
it must be: integers are strict, so ``k: true`` is refused), and the server
keeps serving. Answers are bounded: ``max_lines`` cuts each hit's lines, and
each line to :data:`~codesearch.faces.answers.MAX_LINE_CHARS`; with ``max_tokens``,
the answer's text as the SDK sends it stays within that many tokens by the rule
of :func:`codesearch.faces.answers.estimate_tokens`. The SDK writes strict UTF-8, so
a path holding a byte that is not UTF-8 (a surrogate escape) is sent with that
character as the text ``\\udcNN``; a request whose JSON holds a lone surrogate
escape has it read as U+FFFD, as a byte that is not UTF-8 is.

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

import json
import logging
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Protocol

from pydantic import Strict, ValidationError

from codesearch.display import clipped, printable
from codesearch.exceptions import CodeSearchError, RepositoryNotServedError
from codesearch.faces.answers import check_max_tokens, fit_to_budget, hits_data, symbol_answer
from codesearch.faces.locations import parse_location
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


Int = Annotated[int, Strict()]
"""A tool's integer argument: a JSON integer, never a boolean, a float or a string of digits."""
Flag = Annotated[bool, Strict()]
"""A tool's true-or-false argument: a JSON boolean, never 1 or "yes"."""
ERROR_CHARS = 1000
"""The longest tool error: a message is cut there (it may echo a caller's input)."""


class Bounded(Protocol):
    """What a tool reads of the workspace it serves: its bound on ``k`` (``None``: none)."""

    max_k: int | None


class ToolInputError(ValueError):
    """A tool was called with arguments it cannot use."""


class Workspace:
    """The repositories one server answers for: a :class:`CodeSearch` each, created on first use.

    Args:
        roots: the repositories named on the command line; the first is the
            default. They and the folders under them are all a ``repo`` may name.
        background: build the transformer tier in a background thread after a
            repository's first answer (``CodeSearch(background_upgrade=True)``;
            off in tests that want a fixed tier).
        allow_any_repo: let a ``repo`` name any folder (indexed on first use).
        max_k: the most hits one call may ask for (``codesearch serve --max-k``); ``None``: no bound.
        **options: passed to every :class:`CodeSearch` (``model``, ``int8``, ...);
            ``watch`` is on unless set to ``False``.
    """

    def __init__(self, roots: list[str], *, background: bool = True, allow_any_repo: bool = False,
                 max_k: int | None = None, **options: Any) -> None:
        if not roots:
            roots = ["."]
        self.roots = tuple(Path(root).expanduser().resolve() for root in roots)
        self.default = self.roots[0]
        self.allow_any_repo = allow_any_repo
        self.max_k = max_k
        # A long-lived server verifies an index before its first answer (about 0.3 s once at 90k chunks): no answer
        # ever comes from a file whose sha256 has not been checked.
        self.options = {"watch": True, "verify_first": True, **options, "background_upgrade": background}
        self._searchers: dict[Path, CodeSearch] = {}
        self._locks: dict[Path, threading.Lock] = {}
        self._guard = threading.Lock()
        for root in roots:
            self.searcher(root)  # check every root now: a bad one fails at start, not at first use

    def served(self, repo: str | None) -> Path:
        """The folder ``repo`` names (symlinks and ``..`` resolved), or the default root for none.

        Raises:
            RepositoryNotServedError: it is outside every root (unless ``allow_any_repo``).
        """
        if not repo:
            return self.default
        root = Path(repo).expanduser().resolve()
        if self.allow_any_repo or any(root == served or root.is_relative_to(served) for served in self.roots):
            return root
        raise RepositoryNotServedError(
            f"{clipped(repo)!r} is outside the folders this server serves ({', '.join(map(str, self.roots))}); name "
            "one of them or a folder under one (the server's command line names them; --allow-any-repo serves any)")

    def searcher(self, repo: str | None) -> tuple[CodeSearch, threading.Lock]:
        """The searcher of ``repo`` (see :meth:`served`) and the lock its calls take turns by; made on first use."""
        root = self.served(repo)
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


def wire_safe(data: Any) -> Any:
    """``data`` with each lone surrogate in its strings (a byte of a path that is not UTF-8) as the text ``\\udcNN``:
    what the SDK, which writes strict UTF-8, can send."""
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return data.encode("utf-8", "backslashreplace").decode("utf-8")
        return data
    if isinstance(data, dict):
        return {wire_safe(key): wire_safe(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [wire_safe(item) for item in data]
    return data


def sdk_text(data: Any) -> str:
    """An answer as the SDK sends it to the client (the text the budget counts)."""
    import pydantic_core

    return pydantic_core.to_json(wire_safe(data), fallback=str, indent=2).decode()


def check_k(k: int, max_k: int | None) -> None:
    """Raise :class:`ToolInputError` for a ``k`` above a server's bound (``None``: no bound; ``k`` below 1 is the
    library's to refuse)."""
    if max_k is not None and k > max_k:
        raise ToolInputError(f"k must be at most {max_k} on this server, got {k}")


def checked_limits(ws: Bounded, k: int, max_lines: int, max_tokens: int | None) -> None:
    """Raise :class:`ToolInputError` for a ``k`` above the server's bound or a negative ``max_lines``,
    ``ValueError`` for a budget below 1."""
    check_k(k, ws.max_k)
    if max_lines < 0:
        raise ToolInputError(f"max_lines must be 0 or more, got {max_lines}")
    check_max_tokens(max_tokens)


def fit(answer: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    return fit_to_budget(answer, max_tokens, sdk_text)


def tool_search(ws: Workspace, query: str, repo: str | None = None, k: int = 10, mode: str = "hybrid",
                scope: str | None = None, include: list[str] | None = None, exclude: list[str] | None = None,
                kinds: list[str] | None = None, max_lines: int = 40, max_tokens: int | None = None,
                compact: bool = False) -> dict[str, Any]:
    """The ``search`` tool (mode, k and the query are checked by :meth:`CodeSearch.search` itself)."""
    checked_limits(ws, k, max_lines, max_tokens)
    cs, lock = ws.searcher(repo)
    with lock:
        hits = cs.search(query, k=k, mode=mode, scope=scope, include=as_strings(include),  # type: ignore[arg-type]
                         exclude=as_strings(exclude), kinds=as_strings(kinds) or None)
        info = cs.last_search
    answer: dict[str, Any] = {"repo": str(cs.root), "tier": info.tier if info else None,
                              "refreshed": info.refreshed if info else 0,
                              "refreshed_in_memory": info.refreshed_in_memory if info else 0}
    if info is not None and info.note:
        answer["note"] = info.note
    answer["hits"] = hits_data(hits, max_lines=max_lines, compact=compact)
    return fit(answer, max_tokens)


def tool_find_related(ws: Workspace, location: str, repo: str | None = None, k: int = 10, max_lines: int = 40,
                      max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
    """The ``find_related`` tool (k, and a path outside the repository, are checked by :meth:`CodeSearch.related`)."""
    checked_limits(ws, k, max_lines, max_tokens)
    path, line = parse_location(location)
    cs, lock = ws.searcher(repo)
    with lock:
        hits = cs.related(path, line, k=k)
    return fit({"repo": str(cs.root), "location": location,
                 "hits": hits_data(hits, max_lines=max_lines, compact=compact)}, max_tokens)


def tool_find_definition(ws: Workspace, name: str, repo: str | None = None, k: int = 10, max_lines: int = 40,
                         max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
    """The ``find_definition`` tool (the name and k are checked by :meth:`CodeSearch.definitions`)."""
    return _symbol_tool(ws, lambda cs: cs.definitions(name, k=k), repo, k, max_lines, max_tokens, compact)


def tool_find_references(ws: Workspace, name: str, repo: str | None = None, k: int = 20, max_lines: int = 40,
                         max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
    """The ``find_references`` tool (the name and k are checked by :meth:`CodeSearch.references`)."""
    return _symbol_tool(ws, lambda cs: cs.references(name, k=k), repo, k, max_lines, max_tokens, compact)


def _symbol_tool(ws: Workspace, find: Callable[[CodeSearch], SymbolHits], repo: str | None, k: int, max_lines: int,
                 max_tokens: int | None, compact: bool) -> dict[str, Any]:
    """A symbol tool's answer: ``find`` run on the repository's searcher under its lock, fitted to the budget."""
    checked_limits(ws, k, max_lines, max_tokens)
    cs, lock = ws.searcher(repo)
    with lock:
        found = find(cs)
    return fit({"repo": str(cs.root), **symbol_answer(found, max_lines=max_lines, compact=compact)}, max_tokens)


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


def one_line(message: str) -> str:
    """A tool error's text: its first line, shown safely (:func:`~codesearch.display.printable`) and bounded."""
    return clipped(printable(message.strip().split("\n")[0]), ERROR_CHARS)


def answerer(ws: Bounded) -> Callable[..., dict[str, Any]]:
    """``answer(tool, *args)``: the tool's answer for ``ws`` (as the SDK can send it, :func:`wire_safe`), or its error
    as a one-line tool error (the server keeps serving)."""
    from mcp.server.mcpserver.exceptions import ToolError

    def answer(call: Callable[..., dict[str, Any]], *args: Any, **kwargs: Any) -> dict[str, Any]:
        try:
            return wire_safe(call(ws, *args, **kwargs))  # type: ignore[no-any-return]
        except (CodeSearchError, ValueError, OSError) as exc:
            raise ToolError(one_line(str(exc)) or type(exc).__name__) from None
        except Exception as exc:  # a defect: said in one line here, its traceback in the server's log
            log.exception("%s failed", getattr(call, "__name__", "a tool"))
            raise ToolError(one_line(f"internal error ({type(exc).__name__}: {exc}); the server's log (its stderr) "
                                     "has the traceback")) from None

    return answer


_ARGUMENT_TYPES = {"int": "an integer", "string": "a string", "bool": "true or false", "list": "a list",
                   "float": "a number", "dict": "an object"}


def argument_error(error: ValidationError) -> str:
    """One line for arguments that do not fit a tool: the first wrong argument, and what it must be."""
    problems = error.errors(include_url=False)
    first = problems[0]
    name = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]).lstrip(".")
    if first["type"] == "missing":
        line = f"{name or 'an argument'} is required"
    else:
        what = _ARGUMENT_TYPES.get(first["type"].split("_")[0])
        given = clipped(json.dumps(first.get("input"), default=str), 80)
        line = f"{name} must be {what}, got {given}" if what else f"{name}: {first['msg']}"
    return printable(line + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""))


def server_class() -> type:
    """:class:`mcp.server.mcpserver.MCPServer` whose argument errors are one line (:func:`argument_error`) instead of
    pydantic's four, with a link."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError

    class OneLineArgumentErrors(MCPServer):  # type: ignore[misc]
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                cause = exc.__cause__
                if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                    raise
                raise ToolError(f"Error executing tool {name}: {argument_error(cause)}") from cause

    return OneLineArgumentErrors


def build_server(ws: Workspace) -> Any:
    """An :class:`mcp.server.mcpserver.MCPServer` with the six tools bound to ``ws``."""
    from codesearch import __version__

    server = server_class()("codesearch", instructions=INSTRUCTIONS, version=__version__)

    answer = answerer(ws)

    @server.tool()
    def search(query: str, repo: str | None = None, k: Int = 10, mode: str = "hybrid", scope: str | None = None,
               include: list[str] | None = None, exclude: list[str] | None = None, kinds: list[str] | None = None,
               max_lines: Int = 40, max_tokens: Int | None = None, compact: Flag = False) -> dict[str, Any]:
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
    def find_related(location: str, repo: str | None = None, k: Int = 10, max_lines: Int = 40,
                     max_tokens: Int | None = None, compact: Flag = False) -> dict[str, Any]:
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
    def find_definition(name: str, repo: str | None = None, k: Int = 10, max_lines: Int = 40,
                        max_tokens: Int | None = None, compact: Flag = False) -> dict[str, Any]:
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
    def find_references(name: str, repo: str | None = None, k: Int = 20, max_lines: Int = 40,
                        max_tokens: Int | None = None, compact: Flag = False) -> dict[str, Any]:
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


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def readable_request(line: bytes) -> bytes:
    """A JSON-RPC line with each lone surrogate escape (``\\udcff``, which JSON allows and the SDK's parser refuses,
    dropping the request unanswered) read as U+FFFD, as the SDK reads a byte that is not UTF-8; other lines as they
    are."""
    if b"\\ud" not in line.lower():
        return line
    try:
        message = json.loads(line)
    except ValueError:
        return line
    cleaned = _replace_lone_surrogates(message)
    return line if cleaned == message else json.dumps(cleaned).encode() + b"\n"


def _replace_lone_surrogates(data: Any) -> Any:
    if isinstance(data, str):
        return _LONE_SURROGATE.sub("\ufffd", data)
    if isinstance(data, dict):
        return {_replace_lone_surrogates(key): _replace_lone_surrogates(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_replace_lone_surrogates(item) for item in data]
    return data


def read_requests_through(cleaner: Callable[[bytes], bytes]) -> None:
    """Put a pipe on standard input (fd 0) that a thread fills with the real input's lines passed through ``cleaner``,
    so the SDK's stdio transport, which reads fd 0, sees the cleaned lines."""
    real_input = os.dup(0)
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)

    def pump() -> None:
        with open(real_input, "rb") as source, open(write_end, "wb") as sink:
            try:
                for line in iter(source.readline, b""):
                    sink.write(cleaner(line))
                    sink.flush()
            except OSError:  # the server closed its end: it is exiting
                return

    threading.Thread(target=pump, name="codesearch-stdin", daemon=True).start()


def serve(roots: list[str], **options: Any) -> None:
    """Run the stdio server until the client closes it, then exit the process.

    A transformer tier still being built in the background is left as its
    checkpoints have it (the committed index is untouched; the next run goes on
    from there), so the exit is immediate and never waits on a long embedding.
    """
    import sys

    ws = Workspace(roots, **options)
    try:
        server = build_server(ws)
        read_requests_through(readable_request)
        server.run("stdio")
    finally:
        ws.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


__all__ = ["ERROR_CHARS", "INSTRUCTIONS", "Bounded", "Flag", "Int", "ToolInputError", "Workspace", "answerer",
           "argument_error", "build_server", "check_k", "checked_limits", "fit", "one_line", "read_requests_through",
           "readable_request", "sdk_text", "serve", "server_class", "tool_find_definition", "tool_find_references",
           "tool_find_related", "tool_index_status", "tool_reindex", "tool_search", "wire_safe"]
