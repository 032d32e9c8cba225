"""A LangChain retriever over codesearch: ``CodeSearchRetriever(searcher=CodeSearch("repo")).invoke("query")``.

Needs ``langchain-core`` (``pip install 'codesearch-hybrid[langchain]'``). Each hit becomes a
``Document`` whose ``page_content`` is the chunk's text and whose metadata carry ``path``,
``start_line``, ``end_line``, ``location``, ``score``, ``kind``, ``symbols`` and ``repository``.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"{exc}; the LangChain retriever needs langchain-core: "
                      "pip install 'codesearch-hybrid[langchain]'") from exc
from pydantic import ConfigDict, Field

from codesearch.integrations.hits import SearchOptions, document_id, metadata, search
from codesearch.types import Hit


class CodeSearchRetriever(BaseRetriever):
    """Documents for a query from a :class:`~codesearch.CodeSearch`, :class:`~codesearch.MultiSearch` or
    :class:`~codesearch.corpus.Corpus`, ranked as its ``search`` ranks them.

    Attributes:
        searcher: what to search.
        k: how many documents (``invoke(query, k=3)`` overrides it for one call).
        mode: ``hybrid``, ``bm25`` or ``dense``.
        scope, include, exclude, kinds: the scope options of :meth:`CodeSearch.search`.
        repos: repositories of a corpus to search (default all of them).

    Any of them may be given to ``invoke`` for one call. Errors are the searcher's own
    (:class:`ValueError` for an empty query, ``k`` below 1 or an unknown mode).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    searcher: Any
    k: int = 10
    mode: str = "hybrid"
    scope: str | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    kinds: list[str] | None = None
    repos: list[str] | None = None

    def _options(self, overrides: dict[str, Any]) -> SearchOptions:
        unknown = set(overrides) - {"k", "mode", "scope", "include", "exclude", "kinds", "repos"}
        if unknown:
            raise TypeError(f"unknown search option(s): {', '.join(sorted(unknown))}")
        values = {name: overrides.get(name, getattr(self, name))
                  for name in ("k", "mode", "scope", "include", "exclude", "kinds", "repos")}
        return SearchOptions.of(**values)

    def _document(self, hit: Hit) -> Document:
        return Document(page_content=hit.text, metadata=metadata(self.searcher, hit),
                        id=document_id(self.searcher, hit))

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        return [self._document(hit) for hit in search(self.searcher, query, self._options(kwargs))]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       **kwargs: Any) -> list[Document]:
        options = self._options(kwargs)
        hits = await asyncio.to_thread(search, self.searcher, query, options)
        return [self._document(hit) for hit in hits]


__all__ = ["CodeSearchRetriever"]
