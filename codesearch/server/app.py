"""``codesearch serve``: the JSON API, MCP over streamable HTTP and the search page, in one Starlette app.

:func:`create_app` wires the roles: :mod:`~codesearch.server.api` (``/api/...``),
the MCP server of :mod:`codesearch.faces.mcp_server` (the same tools as stdio, built
by the same function, at ``/mcp``), :mod:`~codesearch.server.page` (``/``) and
:mod:`~codesearch.server.security` in front of them all. :func:`run` serves it
with uvicorn.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response

from codesearch.server import api, page
from codesearch.server.security import MAX_BODY, Guard, check_bind, is_loopback
from codesearch.server.served import Served

DEFAULT_PORT = 8700


def _mcp_app(served: Served, host: str, cors_origins: Sequence[str], max_body: int) -> Any:
    """The SDK's streamable HTTP app over the stdio server's own tools (repositories) or corpus tools."""
    from mcp.server.transport_security import TransportSecuritySettings

    from codesearch.faces.mcp_corpus import build_corpus_server
    from codesearch.faces.mcp_server import build_server

    if served.corpus is not None:
        server = build_corpus_server(served.corpus)
    else:
        assert served.workspace is not None
        server = build_server(served.workspace)
    if is_loopback(host):
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", *cors_origins])
    else:  # the token guards the server; the Host a client uses (a name, a proxy) is not known here
        security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return server, server.streamable_http_app(streamable_http_path="/mcp", transport_security=security, host=host,
                                              max_request_body_size=max_body)


def create_app(served: Served, *, host: str = "127.0.0.1", token: str | None = None, no_auth: bool = False,
               cors_origins: Sequence[str] = (), max_body: int = MAX_BODY) -> Starlette:
    """The whole server over ``served``: ``/api/...``, ``/api/openapi.json``, ``/mcp``, ``/`` and ``/static/...``.

    Args:
        served: what it answers for.
        host: the address it will bind (a loopback bind also checks the ``Host`` header).
        token: the bearer token every request must carry (the page's assets excepted).
        no_auth: serve a non-loopback address with no token.
        cors_origins: origins a browser page elsewhere may call the API and MCP from (default none).
        max_body: the largest request body.

    Raises:
        ValueError: a non-loopback ``host`` with neither a token nor ``no_auth`` (see :func:`check_bind`).
    """
    check_bind(host, token, no_auth)
    for package in ("jinja2", "pygments"):  # the page's; fail at start, not at the first visit
        try:
            __import__(package)
        except ImportError as exc:
            raise ImportError(f"{package} is missing: codesearch serve needs the serve extra "
                              "(pip install 'codesearch-hybrid[serve]')") from exc
    server, mcp_app = _mcp_app(served, host, cors_origins, max_body)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.session_manager.run():
            yield

    routes = [*api.routes(served), *page.routes(served), *mcp_app.routes]
    allowed = {"127.0.0.1", "localhost", "[::1]", host.lower()} if is_loopback(host) else None
    middleware = [Middleware(Guard, token=token, allowed_hosts=allowed, max_body=max_body)]
    if cors_origins:
        middleware.insert(0, Middleware(CORSMiddleware, allow_origins=list(cors_origins),
                                        allow_methods=["GET", "POST", "DELETE"],
                                        allow_headers=["Authorization", "Content-Type", "Mcp-Session-Id",
                                                       "Mcp-Protocol-Version", "Last-Event-ID"],
                                        expose_headers=["Mcp-Session-Id"]))
    async def not_found(request: Request, exc: Exception) -> Response:
        return api.error_response(404, f"no such endpoint: {request.url.path}")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return api.error_response(405, f"{request.method} is not allowed on {request.url.path}")

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                     exception_handlers={404: not_found, 405: not_allowed})


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (bound here, so that a port in use is one line, not uvicorn's exit).

    Raises:
        OSError: the address cannot be bound (the message names it).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio sets TCP_NODELAY only on accepted sockets whose protocol says TCP, and
    # without it every answer after the first on a kept-alive connection waited ~40 ms (Nagle's algorithm against
    # the client's delayed ACK: uvicorn writes the head and the body apart).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot serve on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def run(served: Served, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
        no_auth: bool = False, cors_origins: Sequence[str] = (), announce: bool = True) -> None:
    """Serve until interrupted (Ctrl-C, SIGTERM), then exit the process (a background build is left as its
    checkpoints have it, as the stdio server does). The address it listens on is printed to stderr first.

    Raises:
        ValueError: as :func:`create_app`.
        OSError: the address cannot be bound.
    """
    import logging

    import uvicorn

    logging.getLogger("mcp").setLevel(logging.WARNING)  # the SDK's session manager announces itself at INFO
    app = create_app(served, host=host, token=token, no_auth=no_auth, cors_origins=cors_origins)

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets)
            if announce and self.servers:
                bound = self.servers[0].sockets[0].getsockname()
                where = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                print(f"codesearch serve: http://{where}:{bound[1]}/ (API /api, MCP /mcp)", file=sys.stderr,
                      flush=True)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False,
                            timeout_graceful_shutdown=3, server_header=False)
    server = Server(config)
    try:
        server.run(sockets=[_bind(host, port)])
    finally:
        served.close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


__all__ = ["DEFAULT_PORT", "create_app", "run"]
