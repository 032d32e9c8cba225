"""Retrievers for RAG frameworks over a :class:`~codesearch.CodeSearch`, a :class:`~codesearch.MultiSearch` or a
:class:`~codesearch.corpus.Corpus`.

- :mod:`codesearch.integrations.langchain`: ``CodeSearchRetriever``, a ``langchain_core`` retriever
  (``pip install 'codesearch-hybrid[langchain]'``).
- :mod:`codesearch.integrations.llamaindex`: ``CodeSearchRetriever``, a ``llama_index.core`` retriever
  (``pip install 'codesearch-hybrid[llamaindex]'``).

Both search through :func:`codesearch.integrations.hits.search`, so they return the same hits, in the same
order and with the same scores, as the searcher's own ``search``.
"""
