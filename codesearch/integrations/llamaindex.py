"""A LlamaIndex retriever over codesearch: ``CodeSearchRetriever(CodeSearch("repo")).retrieve("query")``.

Needs ``llama-index-core`` (``pip install 'codesearch-hybrid[llamaindex]'``). Each hit becomes a
``NodeWithScore`` holding a ``TextNode`` of the chunk's text, its score, and metadata ``path``,
``start_line``, ``end_line``, ``location``, ``score``, ``kind``, ``symbols`` and ``repository``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

try:
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(f"{exc}; the LlamaIndex retriever needs llama-index-core: "
                      "pip install 'codesearch-hybrid[llamaindex]'") from exc

from codesearch.integrations.hits import SearchOptions, document_id, metadata, search
from codesearch.types import Hit

# What the language model reads of each node besides its text: where it is and what it defines, not the score.
_HIDDEN_FROM_LLM = ["score", "start_line", "end_line", "path", "repository"]


class CodeSearchRetriever(BaseRetriever):
    """Nodes for a query from a :class:`~codesearch.CodeSearch`, :class:`~codesearch.MultiSearch` or
    :class:`~codesearch.corpus.Corpus`, ranked and scored as its ``search`` ranks them.

    Args:
        searcher: what to search.
        k: how many nodes.
        mode: ``hybrid``, ``bm25`` or ``dense``.
        scope, include, exclude, kinds: the scope options of :meth:`CodeSearch.search`.
        repos: repositories of a corpus to search (default all of them).
        callback_manager, verbose: as for any LlamaIndex retriever.

    Errors are the searcher's own (:class:`ValueError` for an empty query, ``k`` below 1 or an unknown mode).
    """

    def __init__(self, searcher: Any, *, k: int = 10, mode: str = "hybrid", scope: str | None = None,
                 include: Iterable[str] = (), exclude: Iterable[str] = (), kinds: Iterable[str] | None = None,
                 repos: Iterable[str] | None = None, callback_manager: CallbackManager | None = None,
                 verbose: bool = False) -> None:
        self.searcher = searcher
        self.options = SearchOptions.of(k, mode, scope, include, exclude, kinds, repos)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    def _node(self, hit: Hit) -> NodeWithScore:
        node = TextNode(text=hit.text, id_=document_id(self.searcher, hit), metadata=metadata(self.searcher, hit),
                        excluded_llm_metadata_keys=list(_HIDDEN_FROM_LLM),
                        excluded_embed_metadata_keys=list(_HIDDEN_FROM_LLM))
        return NodeWithScore(node=node, score=hit.score)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [self._node(hit) for hit in search(self.searcher, query_bundle.query_str, self.options)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = await asyncio.to_thread(search, self.searcher, query_bundle.query_str, self.options)
        return [self._node(hit) for hit in hits]


__all__ = ["CodeSearchRetriever"]
