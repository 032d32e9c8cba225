"""The organisation-scale path: thousands of repositories built on Ray Data, stored in Lance, ranked as one.

``from codesearch.corpus import Corpus``. Modules, one job each:

- :mod:`~codesearch.corpus.schema`: the Lance tables' schemas, chunk ids, the manifest;
- :mod:`~codesearch.corpus.store`: the store (Lance datasets at pinned versions, one writer, kill-safe commits);
- :mod:`~codesearch.corpus.cluster`: Ray, started for a call or joined at an address;
- :mod:`~codesearch.corpus.changes`: what changed since the corpus recorded it, from stats alone;
- :mod:`~codesearch.corpus.build`: the Ray Data pipeline and its actor (scan, cut, embed), or that actor in process;
- :mod:`~codesearch.corpus.keywords`: a repository's exact BM25, and the full-text index across repositories;
- :mod:`~codesearch.corpus.source`: candidates and ranking facts for the ranking stages;
- :mod:`~codesearch.corpus.corpus`: :class:`Corpus`, the facade.

Needs the ``corpus`` extra (``ray[data]``, ``pylance``, ``pyarrow``).
"""

from __future__ import annotations

from codesearch.corpus.corpus import Corpus, CorpusReport

__all__ = ["Corpus", "CorpusReport"]
