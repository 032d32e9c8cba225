"""The search page at ``/``: a form, and results as ``path:start-end`` with their code highlighted (Pygments).

Rendered on the server from the same :class:`Served` answers as the API
(``GET /?q=...&mode=&scope=&kind=&repo=``), so it works without scripts; the
one script (``static/page.js``) adds keys: ``/`` to the query box, ``j`` and
``k`` between results. Every asset is served from the package: the page loads
nothing from elsewhere.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from codesearch.display import printable
from codesearch.exceptions import CodeSearchError
from codesearch.server.api import KINDS, one_line, status_of
from codesearch.server.served import Served

HERE = Path(__file__).parent
MODES = (("search", "code"), ("definitions", "definitions"), ("references", "references"))
PAGE_K = 10


@functools.lru_cache(maxsize=1)
def _templates() -> Any:
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                              trim_blocks=True, lstrip_blocks=True)


@functools.lru_cache(maxsize=1)
def highlight_css() -> str:
    """Pygments' colours for ``.hl`` blocks, a light and a dark scheme."""
    from pygments.formatters import HtmlFormatter

    light = HtmlFormatter(style="default").get_style_defs(".hl")
    dark = HtmlFormatter(style="github-dark").get_style_defs(".hl")
    return f"{light}\n@media (prefers-color-scheme: dark) {{\n{dark}\n}}\n"


@functools.lru_cache(maxsize=256)
def _lexer(suffix_name: str) -> Any:
    from pygments.lexers import TextLexer, get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        return get_lexer_for_filename(suffix_name, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer(stripnl=False, ensurenl=False)


def highlighted(path: str, text: str, start: int, marked: list[int]) -> str:
    """``text`` (lines ``start``...) as highlighted HTML with its line numbers, ``marked`` lines emphasised."""
    from markupsafe import Markup
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    name = Path(path).name
    formatter = HtmlFormatter(linenos="inline", linenostart=start, cssclass="hl", wrapcode=True,
                              hl_lines=[line - start + 1 for line in marked])
    return Markup(highlight(text, _lexer(name), formatter))  # Pygments escapes the code it renders


def _url(**params: Any) -> str:
    return "/?" + urlencode([(k, v) for k, v in params.items() if v not in (None, "")], errors="surrogateescape")


def render(served: Served, params: dict[str, str]) -> tuple[int, str]:
    """The page for ``params`` (``q``, ``mode``, ``scope``, ``kind``, ``repo``): its status and HTML."""
    q = params.get("q", "")
    mode = params.get("mode") or "search"
    mode = mode if mode in {m for m, _ in MODES} | {"related"} else "search"
    scope, kind, repo = params.get("scope", ""), params.get("kind", ""), params.get("repo", "")
    status, error = 200, None
    try:
        names = served.repositories()
    except (CodeSearchError, ValueError, OSError) as exc:  # a corpus whose corpus.json is damaged
        names, status, error = [], status_of(exc), one_line(exc)
    repositories = [(name, Path(name).name if served.corpus is None else name) for name in names]
    context: dict[str, Any] = {
        "q": q, "mode": mode, "scope": scope, "kind": kind, "repo": repo, "modes": MODES, "kinds": KINDS,
        "repositories": repositories, "answer": None, "error": error, "hits": [],
        "what": "the corpus" if served.corpus is not None else ", ".join(label for _, label in repositories)}
    if error is None and (q.strip() or (q and mode != "search")):
        started = time.perf_counter()
        try:
            answer = _answer(served, mode, q, scope, kind, repo)
        except (CodeSearchError, ValueError, OSError) as exc:
            status, context["error"] = status_of(exc), one_line(exc)
        else:
            context.update(_results(served, answer, mode, q, scope, kind, repo))
            context["ms"] = f"{(time.perf_counter() - started) * 1000:.0f}"
    elif error is None and q:
        status, context["error"] = 400, "the query is empty; give words, a question or an identifier"
    return status, _templates().get_template("page.html").render(context)


def _answer(served: Served, mode: str, q: str, scope: str, kind: str, repo: str) -> dict[str, Any]:
    where = repo or None
    if mode == "definitions":
        return served.definitions(q, k=PAGE_K, repo=where)
    if mode == "references":
        return served.references(q, k=PAGE_K * 3, repo=where)
    if mode == "related":
        return served.related(q, k=PAGE_K, repo=where)
    return served.search(q, k=PAGE_K, mode="bm25" if served.keyword_only else "hybrid", scope=scope or None,
                         kind=[kind] if kind else [], repo=where)


def _results(served: Served, answer: dict[str, Any], mode: str, q: str, scope: str, kind: str,
             repo: str) -> dict[str, Any]:
    hits = []
    for hit in answer["hits"]:
        repository = hit.get("repo") or hit.get("root")
        where = repository or repo
        code = "\n".join(printable(line, keep_tabs=True) for line in hit.get("text", "").split("\n"))
        hits.append({  # names from disk as display shows them: control characters and stray bytes escaped
            "location": printable(hit["location"]), "kind": hit.get("kind", ""), "score": hit.get("score"),
            "defines": printable(hit["defines"]) if hit.get("defines") else None,
            "repository": printable(Path(repository).name if hit.get("root") else repository or ""),
            "related": _url(q=f"{hit['path']}:{hit['start_line']}", mode="related", repo=where),
            "symbols": [{"name": printable(s), "href": _url(q=s, mode="definitions", repo=where)}
                        for s in hit.get("symbols", [])],
            "code": highlighted(hit["path"], code, hit["start_line"], list(hit.get("lines", []))),
        })
    tier = answer.get("tier")
    facets = [(label, _url(q=q, mode=mode, scope=scope, kind=value, repo=repo), value == kind)
              for label, value in [("all", ""), *((k, k) for k in KINDS)]] if mode == "search" else []
    return {"answer": answer, "hits": hits, "note": answer.get("note"), "facets": facets,
            "tier": tier if isinstance(tier, str) else ", ".join(sorted({str(t) for t in (tier or {}).values()}))}


def routes(served: Served) -> list[Route | Mount]:
    """``/`` (the page), ``/static/highlight.css`` and the page's other assets under ``/static``."""
    import anyio.to_thread

    async def page(request: Request) -> Response:
        params = {key: request.query_params.get(key, "") for key in ("q", "mode", "scope", "kind", "repo")}
        status, html = await anyio.to_thread.run_sync(render, served, params)
        return HTMLResponse(html, status_code=status)

    async def colours(request: Request) -> Response:
        return Response(highlight_css(), media_type="text/css")

    return [Route("/", page, methods=["GET"]), Route("/static/highlight.css", colours, methods=["GET"]),
            Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static")]


__all__ = ["highlight_css", "highlighted", "render", "routes"]
