"""``codesearch serve``: one process with a JSON API, MCP over streamable HTTP and a search page.

Public names: :class:`Served` (what a server answers for, and its answers), :func:`create_app` (the Starlette
app) and :func:`run` (serve it with uvicorn). Needs the ``serve`` extra's packages (starlette and uvicorn come
with ``mcp``; jinja2 and pygments draw the page).
"""

from __future__ import annotations

from codesearch.server.app import DEFAULT_PORT, create_app, run
from codesearch.server.served import Served

__all__ = ["DEFAULT_PORT", "Served", "create_app", "run"]
