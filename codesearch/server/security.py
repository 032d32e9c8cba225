"""What keeps ``codesearch serve`` safe to run for a team: where it may bind, who may ask, and how much.

- :func:`check_bind`: a loopback address by default; any other needs a token
  or an explicit ``--no-auth``.
- :class:`Guard`, an ASGI middleware in front of every route: the bearer token
  (``Authorization: Bearer``, compared in constant time; a browser gets a
  cookie from ``/?token=...``), the ``Host`` header on a loopback bind (a page
  elsewhere cannot reach the server by rebinding a name to 127.0.0.1), bounded
  request bodies and query strings, and headers that keep the page to its own
  assets (a content security policy; no external asset is ever loaded).

CORS stays off (no ``Access-Control-*`` header) unless ``--cors-origin`` names
origins (``starlette``'s ``CORSMiddleware``, in :mod:`codesearch.server.app`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_COOKIE = "codesearch_token"
MAX_BODY = 1024 * 1024
"""The largest request body accepted (an MCP message; the API takes none)."""
MAX_QUERY = 8 * 1024
"""The longest query string accepted."""
LOOPBACK_NAMES = ("localhost",)
PUBLIC_PREFIXES = ("/static/",)
"""Paths served without a token: the page's own assets, which hold no data."""
CONTENT_SECURITY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or name) is this machine only."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None, no_auth: bool) -> None:
    """Refuse a bind that would serve other machines with no token, or a token with ``--no-auth``.

    Raises:
        ValueError: a non-loopback ``host`` with neither a token nor ``no_auth``; both a token and ``no_auth``;
            an empty token.
    """
    if token is not None and not token.strip():
        raise ValueError("the token is empty; give a long random one (e.g. `python -c 'import secrets; "
                         "print(secrets.token_urlsafe())'`)")
    if token is not None and no_auth:
        raise ValueError("give either --token or --no-auth, not both")
    if not is_loopback(host) and token is None and not no_auth:
        raise ValueError(f"{host} serves every machine that can reach it: give --token (or set CODESEARCH_TOKEN), "
                         "or --no-auth to serve it open")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8700`` gives ``[::1]``)."""
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if ":" in header else header


class Guard:
    """ASGI middleware: token, host, size limits and security headers (see the module's docstring).

    Args:
        app: the application behind it.
        token: the bearer token every request but the page's assets must carry; ``None``: no token.
        allowed_hosts: the names the ``Host`` header may hold (any port); ``None``: any.
        max_body: the largest ``Content-Length`` accepted.
        max_query: the longest query string accepted.
    """

    def __init__(self, app: ASGIApp, *, token: str | None = None, allowed_hosts: set[str] | None = None,
                 max_body: int = MAX_BODY, max_query: int = MAX_QUERY) -> None:
        self.app = app
        self.token = token.encode() if token is not None else None
        self.allowed_hosts = {h.lower() for h in allowed_hosts} if allowed_hosts is not None else None
        self.max_body = max_body
        self.max_query = max_query

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await self._respond(send, *refusal)
            return
        path: str = scope.get("path", "")
        token = self._query_token(scope)
        if token is not None and path == "/" and self._matches(token):
            # A browser's first visit: keep the token in a cookie and drop it from the address bar.
            rest = urlencode([(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
                              if k != "token"])
            cookie = f"{TOKEN_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
            await self._respond(send, 303, "", [(b"location", ("/?" + rest if rest else "/").encode()),
                                                (b"set-cookie", cookie.encode())])
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"),
                            (b"x-frame-options", b"DENY"), (b"content-security-policy", CONTENT_SECURITY.encode())]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, secured)

    def _refusal(self, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        """Why a request is refused (status, message, headers), or ``None``."""
        if self.allowed_hosts is not None:
            host = _host_name(_header(scope, b"host") or "")
            if host.lower() not in self.allowed_hosts:
                return 403, f"host {host or '(none)'} is not served here", []
        if len(scope.get("query_string", b"")) > self.max_query:
            return 414, f"the query string is longer than {self.max_query} bytes", []
        length = _header(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return 413, f"the request body is larger than {self.max_body} bytes", []
        if self.token is not None and not scope.get("path", "").startswith(PUBLIC_PREFIXES) \
                and not self._authorized(scope):
            return 401, "this server needs a token: send Authorization: Bearer TOKEN (a browser: open /?token=TOKEN)", \
                [(b"www-authenticate", b'Bearer realm="codesearch"')]
        return None

    def _matches(self, given: str) -> bool:
        assert self.token is not None
        return hmac.compare_digest(given.encode(), self.token)

    def _query_token(self, scope: Scope) -> str | None:
        if self.token is None or scope.get("path") != "/" or scope.get("method") != "GET":
            return None
        return dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("token")

    def _authorized(self, scope: Scope) -> bool:
        header = _header(scope, b"authorization")
        if header is not None and header[:7].lower() == "bearer " and self._matches(header[7:].strip()):
            return True
        cookie = _header(scope, b"cookie")
        if cookie is not None and not scope.get("path", "").startswith("/mcp"):  # MCP clients send the header
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(cookie)
            except Exception:  # a cookie header that does not parse carries no token
                return False
            morsel = jar.get(TOKEN_COOKIE)
            if morsel is not None and self._matches(morsel.value):
                return True
        query = self._query_token(scope)
        return query is not None and self._matches(query)

    @staticmethod
    async def _respond(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]]) -> None:
        body = (json.dumps({"error": message}, indent=2) + "\n").encode() if message else b""
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]})
        await send({"type": "http.response.body", "body": body})


__all__ = ["CONTENT_SECURITY", "MAX_BODY", "MAX_QUERY", "TOKEN_COOKIE", "Guard", "check_bind", "is_loopback"]
