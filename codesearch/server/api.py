"""The JSON API: one table of endpoints and their parameters, read by the request parser and the OpenAPI document.

Each endpoint answers what a CLI command prints with ``--json`` (the same
text: :func:`codesearch.faces.answers.pretty_json`), from :class:`Served`. Errors are
one line, ``{"error": "..."}``, with the status that fits: 400 for a bad
argument (the library's message, or the parser's for a value that is not the
type asked), 404 for a repository, index or endpoint that is not here, 403 for
a write to a read-only index, 409 for another model's index, 503 while another
process holds an index's write lock.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from codesearch.exceptions import (
    CodeSearchError,
    CorpusNotFoundError,
    IndexLockedError,
    IndexNotFoundError,
    IndexReadOnlyError,
    ModelMismatchError,
    ModelNotAvailableError,
    RepositoryNotInCorpusError,
    RepositoryNotServedError,
    RootNotFoundError,
)
from codesearch.faces.answers import pretty_json
from codesearch.server.served import NotAvailableError, Served

Kind = Literal["string", "integer", "boolean", "array"]
KINDS = ("source", "test", "doc", "config")
MODES = ("hybrid", "bm25", "dense")


@dataclass(frozen=True)
class Param:
    """One query parameter: its name (the :class:`Served` method's argument), type, and what it means."""

    name: str
    kind: Kind
    help: str
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Endpoint:
    """One ``GET`` endpoint: the :class:`Served` method it calls and the CLI command whose ``--json`` it answers."""

    path: str
    method: str
    summary: str
    cli: str
    params: tuple[Param, ...]
    corpus: bool = False


REPO = Param("repo", "string", "A repository served here (its path or folder name; a corpus: one of its "
                               "repositories). Default: the first one, or for search every one.")
BUDGET = (Param("max_tokens", "integer", "Keep the whole answer (its JSON) within this many tokens, counted as 1 per "
                                         "3 bytes: hit texts are cut from the end, then hits left out."),
          Param("compact", "boolean", "Locations, symbols and one line per hit.", default=False))

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("/api/search", "search", "Find code by meaning and by keyword.", "codesearch search Q PATH...", (
        Param("q", "string", "Words, a question or an identifier.", required=True),
        Param("k", "integer", "How many hits.", default=10),
        Param("mode", "string", "Keywords (bm25), meaning (dense) or both fused (hybrid).", default="hybrid",
              choices=MODES),
        Param("scope", "string", "Only paths under this prefix, e.g. src/."),
        Param("include", "array", "Only paths matching these globs (.gitignore syntax); repeatable."),
        Param("exclude", "array", "Leave out paths matching these globs; repeatable."),
        Param("kind", "array", "Only chunks of these kinds; repeatable.", choices=KINDS),
        Param("no_tests", "boolean", "Leave out test files.", default=False),
        Param("no_docs", "boolean", "Leave out documentation.", default=False),
        REPO, *BUDGET), corpus=True),
    Endpoint("/api/definitions", "definitions", "Where a symbol is defined (Session.send, send, Foo::bar).",
             "codesearch def NAME PATH", (
                 Param("name", "string", "The symbol, bare or qualified.", required=True),
                 Param("k", "integer", "How many definitions.", default=10), REPO, *BUDGET)),
    Endpoint("/api/references", "references", "Where an identifier is used, as a whole word (as grep -w).",
             "codesearch refs NAME PATH", (
                 Param("name", "string", "An identifier.", required=True),
                 Param("k", "integer", "How many chunks.", default=50), REPO, *BUDGET)),
    Endpoint("/api/related", "related", "Code most like the chunk at a location.", "codesearch related LOCATION PATH", (
        Param("location", "string", "PATH:LINE or PATH:START-END, the path relative to the repository.",
              required=True),
        Param("k", "integer", "How many hits.", default=10), REPO, *BUDGET)),
    Endpoint("/api/status", "status", "The index: model, tier, counts, last update, files changed since.",
             "codesearch status PATH", (REPO,), corpus=True),
)

_INTEGER = re.compile(r"-?\d{1,9}")
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def parse(endpoint: Endpoint, query: Any) -> dict[str, Any]:
    """The keyword arguments of ``endpoint``'s method from a request's query parameters (a multi-dict).

    Only the types are checked here (an integer, a boolean, one value); the values are the library's to check.

    Raises:
        ValueError: an unknown or repeated parameter, a missing one, or a value of the wrong type.
    """
    known = {p.name: p for p in endpoint.params}
    unknown = sorted(set(query.keys()) - set(known))
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r} for {endpoint.path}; it takes {', '.join(known)}")
    arguments: dict[str, Any] = {}
    for param in endpoint.params:
        values = query.getlist(param.name)
        if not values:
            if param.required:
                raise ValueError(f"{param.name} is required")
            continue
        if param.kind == "array":
            arguments[param.name] = values
            continue
        if len(values) > 1:
            raise ValueError(f"give {param.name} once, not {len(values)} times")
        value = values[0]
        if param.kind == "integer":
            if not _INTEGER.fullmatch(value.strip()):
                raise ValueError(f"{param.name} must be an integer, got {value[:40]!r}")
            arguments[param.name] = int(value)
        elif param.kind == "boolean":
            if value.lower() not in _TRUE + _FALSE:
                raise ValueError(f"{param.name} must be true or false, got {value[:40]!r}")
            arguments[param.name] = value.lower() in _TRUE
        else:
            arguments[param.name] = value if value or param.required else None
    return arguments


def status_of(exc: BaseException) -> int:
    """The HTTP status of an error the API answers."""
    if isinstance(exc, (NotAvailableError, RootNotFoundError, IndexNotFoundError, RepositoryNotInCorpusError,
                        RepositoryNotServedError, CorpusNotFoundError)):
        return 404
    if isinstance(exc, IndexReadOnlyError):
        return 403
    if isinstance(exc, ModelMismatchError):
        return 409
    if isinstance(exc, IndexLockedError):
        return 503
    if isinstance(exc, (ValueError, ModelNotAvailableError)):  # bad arguments; dense asked of a keyword-only index
        return 400
    return 500


def one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return Response(pretty_json({"error": message}) + "\n", status_code=status, media_type="application/json",
                    headers=headers)


def json_response(answer: Any) -> Response:
    return Response(pretty_json(answer) + "\n", media_type="application/json")


def call(served: Served, endpoint: Endpoint, arguments: dict[str, Any]) -> Any:
    """``endpoint``'s answer from ``served`` (raises what the library raises)."""
    method: Callable[..., Any] = getattr(served, endpoint.method)
    if endpoint.method == "search":
        return method(arguments.pop("q"), **arguments)
    if endpoint.method in ("definitions", "references"):
        return method(arguments.pop("name"), **arguments)
    if endpoint.method == "related":
        return method(arguments.pop("location"), **arguments)
    return method(**arguments)


def routes(served: Served) -> list[Route]:
    """The API's routes over ``served``, and ``/api/openapi.json``."""
    import anyio.to_thread

    from codesearch import __version__

    def handler(endpoint: Endpoint) -> Callable[[Request], Any]:
        async def answer(request: Request) -> Response:
            if served.corpus is not None and not endpoint.corpus:
                return error_response(404, f"{endpoint.path} is not available for a corpus; it answers /api/search "
                                           "and /api/status")
            try:
                arguments = parse(endpoint, request.query_params)
                found = await anyio.to_thread.run_sync(call, served, endpoint, arguments)
            except (CodeSearchError, ValueError, OSError) as exc:
                status = status_of(exc)
                return error_response(status, one_line(exc), {"Retry-After": "5"} if status == 503 else None)
            return json_response(found)

        return answer

    document = openapi(__version__, corpus=served.corpus is not None)

    async def description(request: Request) -> Response:
        return json_response(document)

    return [Route(e.path, handler(e), methods=["GET"]) for e in ENDPOINTS] + [
        Route("/api/openapi.json", description, methods=["GET"])]


_HIT = {"type": "object", "description": "A chunk: `location` is `path:start-end`; `root` (several repositories), "
                                         "`repo` (a corpus), `defines` and `lines` when set. Compact: location, "
                                         "symbols, line.",
        "properties": {"path": {"type": "string"}, "start_line": {"type": "integer"}, "end_line": {"type": "integer"},
                       "location": {"type": "string"}, "score": {"type": "number"}, "kind": {"type": "string"},
                       "symbols": {"type": "array", "items": {"type": "string"}}, "text": {"type": "string"},
                       "line": {"type": "string"}, "root": {"type": "string"}, "repo": {"type": "string"},
                       "defines": {"type": "string"}, "lines": {"type": "array", "items": {"type": "integer"}}}}


def openapi(version: str, *, corpus: bool = False) -> dict[str, Any]:
    """The API's OpenAPI 3.1 description, from :data:`ENDPOINTS` (those a corpus answers when ``corpus``)."""
    error = {"description": "One line saying what was wrong.",
             "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    paths: dict[str, Any] = {}
    for endpoint in ENDPOINTS:
        if corpus and not endpoint.corpus:
            continue
        parameters = []
        for param in endpoint.params:
            schema: dict[str, Any] = {"type": param.kind}
            if param.kind == "array":
                schema["items"] = {"type": "string", **({"enum": list(param.choices)} if param.choices else {})}
            elif param.choices:
                schema["enum"] = list(param.choices)
            if param.default is not None:
                schema["default"] = param.default
            parameters.append({"name": param.name, "in": "query", "required": param.required,
                               "description": param.help, "schema": schema,
                               **({"style": "form", "explode": True} if param.kind == "array" else {})})
        paths[endpoint.path] = {"get": {
            "operationId": endpoint.method, "summary": endpoint.summary,
            "description": f"The answer of `{endpoint.cli} --json`.", "parameters": parameters,
            "responses": {"200": {"description": f"What `{endpoint.cli} --json` prints.", "content": {
                "application/json": {"schema": {"type": "object", "properties": {
                    "hits": {"type": "array", "items": {"$ref": "#/components/schemas/Hit"}}}}}}},
                **{code: error for code in ("400", "401", "404", "409", "413", "503")}}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "codesearch", "version": version,
                 "description": "Find code by meaning and by keyword. Each endpoint answers what the CLI prints "
                                "with --json; MCP clients use /mcp (streamable HTTP) and people the page at /."},
        "paths": paths,
        "components": {"schemas": {"Hit": _HIT, "Error": {"type": "object", "required": ["error"],
                                                          "properties": {"error": {"type": "string"}}}},
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}, {}],
    }


__all__ = ["ENDPOINTS", "Endpoint", "Param", "call", "error_response", "json_response", "one_line", "openapi", "parse",
           "routes", "status_of"]
