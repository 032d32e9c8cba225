"""What one ``codesearch serve`` answers for, and its answers: the CLI's ``--json`` answers, from the API.

:class:`Served` holds the repositories named on the command line (one
:class:`~codesearch.faces.mcp_server.Workspace`, whose searchers the MCP tools use
too) or one corpus. Its methods take the API's arguments, call the library and
shape the answer with :mod:`codesearch.faces.answers`, exactly as the CLI's
``search``, ``def``, ``refs``, ``related`` and ``status`` (and ``corpus
search`` / ``corpus status``) do with ``--json``; the errors are the
library's, and a repository outside those served is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from codesearch.display import clipped
from codesearch.exceptions import IndexNotFoundError, RepositoryNotServedError
from codesearch.faces.answers import corpus_answer, fit_to_budget, hits_data, search_answer, symbol_answer
from codesearch.faces.locations import parse_location
from codesearch.faces.mcp_corpus import CorpusWorkspace
from codesearch.faces.mcp_server import Workspace, check_k

DEFAULT_MAX_K = 100
"""The most hits one request may ask for, unless ``--max-k`` says otherwise."""


class NotAvailableError(ValueError):
    """An endpoint the served store cannot answer (a corpus has search and status only)."""


class ServedWorkspace(Workspace):
    """The stdio server's :class:`Workspace` and its rule (the roots named and the folders under them, nothing
    else), where a ``repo`` may also name a root by its folder's name, and a refusal names what is served."""

    def served(self, repo: str | None) -> Path:
        if repo:
            named = [root for root in self.roots if root.name == repo]
            if len(named) == 1:
                return named[0]
        try:
            return super().served(repo)
        except RepositoryNotServedError:
            served = ", ".join(str(root) for root in self.roots)
            raise RepositoryNotServedError(f"{clipped(repo or '')} is not served here; this server serves {served} "
                                           "and the folders under them") from None


class Served:
    """The repositories or the corpus one server answers for.

    Args:
        roots: repository folders (the first is the default of ``repo``); or
        corpus: a corpus's store (``roots`` must then be empty).
        allow_refresh: write the indexes: build one missing, commit refreshed
            files, build the transformer tier in the background, accept the MCP
            ``reindex``. Without it every index is read-only (it must exist;
            changed files are refreshed in memory).
        max_k: the most hits a request may ask for.
        background: build the transformer tier in the background (with ``allow_refresh``).
        **options: for every :class:`CodeSearch` (``model``, ``int8``, ``index_dir``) or the corpus
            (``model``, ``int8``).

    Raises:
        ValueError: both or neither of roots and corpus, or ``max_k`` below 1.
        RootNotFoundError: a root is not a folder.
        IndexNotFoundError: a root has no index and ``allow_refresh`` is off.
        CorpusNotFoundError: the store holds no corpus.
    """

    def __init__(self, roots: Sequence[str] = (), *, corpus: str | None = None, allow_refresh: bool = False,
                 max_k: int = DEFAULT_MAX_K, background: bool = True, **options: Any) -> None:
        if corpus is not None and roots:
            raise ValueError("serve either repositories or a corpus, not both")
        if max_k < 1:
            raise ValueError(f"max_k must be at least 1, got {max_k}")
        self.max_k = max_k
        self.allow_refresh = allow_refresh
        self.workspace: ServedWorkspace | None = None
        self.corpus: CorpusWorkspace | None = None
        if corpus is not None:
            from codesearch.corpus import Corpus

            options.pop("index_dir", None)
            self.corpus = CorpusWorkspace(Corpus(corpus, **options), max_k=max_k)
            return
        read_only = None if allow_refresh else True
        self.workspace = ServedWorkspace(list(roots) or ["."], background=background and allow_refresh,
                                         max_k=max_k, read_only=read_only, **options)
        for root in self.workspace.roots:
            searcher = self.workspace.searcher(str(root))[0]
            if not allow_refresh and not searcher.store.exists():
                self.close()
                raise IndexNotFoundError(f"{root} has no index at {searcher.store.directory}; build it first "
                                         f"(`codesearch index {root}`) or let the server build it (--allow-refresh)")

    # -- what is served ----------------------------------------------------------------------------------

    @property
    def roots(self) -> list[Path]:
        return list(dict.fromkeys(self.workspace.roots)) if self.workspace is not None else []

    def repositories(self) -> list[str]:
        """What ``repo`` can name: each root's path, or each repository of the corpus."""
        if self.corpus is not None:
            return list(self.corpus.corpus.repos)  # their names (the answers wait for the files' check)
        return [str(root) for root in self.roots]

    @property
    def keyword_only(self) -> bool:
        """Whether the repositories are served by keywords alone (``--model none``): ``bm25`` is the only mode."""
        return self.workspace is not None and self.workspace.searcher(None)[0].model_name is None

    def close(self) -> None:
        if self.workspace is not None:
            self.workspace.close()

    def _k(self, k: int) -> int:
        check_k(k, self.max_k)  # the MCP tools' rule, with the same words
        return k

    def _workspace(self, what: str) -> ServedWorkspace:
        if self.workspace is None:
            raise NotAvailableError(f"{what} is not available for a corpus; it answers search and status")
        return self.workspace

    # -- answers -------------------------------------------------------------------------------------------

    def search(self, q: str, *, k: int = 10, mode: str = "hybrid", scope: str | None = None,
               include: Sequence[str] = (), exclude: Sequence[str] = (), kind: Sequence[str] = (),
               no_tests: bool = False, no_docs: bool = False, repo: str | None = None,
               max_tokens: int | None = None, compact: bool = False) -> dict[str, Any]:
        """``codesearch search Q PATH... --json``: one root (``repo``), or every root fused; or ``corpus search``."""
        self._k(k)
        options: dict[str, Any] = {"k": k, "mode": mode, "scope": scope, "include": list(include),
                                   "exclude": list(exclude), "kinds": set(kind) or None}
        if self.corpus is not None:
            repos = [repo] if repo else None
            with self.corpus.lock:
                hits = self.corpus.corpus.search(q, repos=repos, **options)
                versions = self.corpus.corpus.last_versions
            return fit_to_budget(corpus_answer(q, repos, hits, compact=compact, versions=versions), max_tokens)
        ws = self._workspace("search")
        options["exclude_kinds"] = {name for name, flag in (("test", no_tests), ("doc", no_docs)) if flag}
        roots = [ws.served(repo)] if repo else self.roots
        if len(roots) == 1:
            cs, lock = ws.searcher(str(roots[0]) if repo else None)
            with lock:
                hits = cs.search(q, **options)
                searches = [(str(cs.root), cs.last_search)]
        else:
            from codesearch.multi import MultiSearch

            pairs = [ws.searcher(str(root)) for root in roots]
            with ExitStack() as held:
                for _, lock in sorted(pairs, key=lambda pair: str(pair[0].root)):
                    held.enter_context(lock)
                multi = MultiSearch.of([cs for cs, _ in pairs])
                hits = multi.search(q, **options)
                searches = [(str(s.root), info) for s, info in zip(multi.searchers, multi.last_search)]
        return fit_to_budget(search_answer(q, searches, hits, compact=compact), max_tokens)

    def definitions(self, name: str, *, k: int = 10, repo: str | None = None, max_tokens: int | None = None,
                    compact: bool = False) -> dict[str, Any]:
        """``codesearch def NAME PATH --json``."""
        self._k(k)
        cs, lock = self._workspace("definitions").searcher(repo)
        with lock:
            found = cs.definitions(name, k=k)
        return fit_to_budget(symbol_answer(found, compact=compact), max_tokens)

    def references(self, name: str, *, k: int = 50, repo: str | None = None, max_tokens: int | None = None,
                   compact: bool = False) -> dict[str, Any]:
        """``codesearch refs NAME PATH --json``."""
        self._k(k)
        cs, lock = self._workspace("references").searcher(repo)
        with lock:
            found = cs.references(name, k=k)
        return fit_to_budget(symbol_answer(found, compact=compact), max_tokens)

    def related(self, location: str, *, k: int = 10, repo: str | None = None, max_tokens: int | None = None,
                compact: bool = False) -> dict[str, Any]:
        """``codesearch related LOCATION PATH --json``."""
        self._k(k)
        file, line = parse_location(location)
        cs, lock = self._workspace("related").searcher(repo)
        with lock:
            hits = cs.related(file, line, k=k)
        return fit_to_budget({"location": location, "hits": hits_data(hits, compact=compact)}, max_tokens)

    def status(self, *, repo: str | None = None) -> dict[str, Any]:
        """``codesearch status PATH --json``, or ``codesearch corpus status STORE --json``."""
        if self.corpus is not None:
            from codesearch.faces.mcp_corpus import tool_corpus_status

            if repo:
                return tool_corpus_status(self.corpus, repo)
            with self.corpus.lock:
                facts: dict[str, Any] = self.corpus.corpus.status()
            return facts
        cs, lock = self._workspace("status").searcher(repo)
        with lock:
            return cs.status()


__all__ = ["DEFAULT_MAX_K", "NotAvailableError", "Served", "ServedWorkspace"]
