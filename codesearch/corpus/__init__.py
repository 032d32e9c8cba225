"""The organisation-scale path: thousands of repositories built on Ray Data, stored in Lance, ranked as one.

``from codesearch.corpus import Corpus``. Modules, one job each:

- :mod:`~codesearch.corpus.corpus`: :class:`Corpus`, the facade;
- :mod:`~codesearch.corpus.driver`: the build and refresh driver (:class:`CorpusReport`);
- :mod:`~codesearch.corpus.build`: the Ray Data pipeline and its actor (scan, cut, embed), or that actor in process;
- :mod:`~codesearch.corpus.cluster`: Ray, started for a call or joined at an address;
- :mod:`~codesearch.corpus.changes`: the stat pass of a refresh (the change rule is :mod:`codesearch.files.changes`);
- :mod:`~codesearch.corpus.views`: one repository in memory, as a single index of it (scoped searches);
- :mod:`~codesearch.corpus.candidates`: a search across repositories, its rows from Lance's indexes;
- :mod:`~codesearch.corpus.keywords`: the stored BM25 fits, and the full-text index across repositories;
- :mod:`~codesearch.corpus.indexes`: the Lance index policy (which indexes, when trained again, how probed);
- :mod:`~codesearch.corpus.schema`: the Lance tables' schemas, chunk ids, the manifest;
- :mod:`~codesearch.corpus.store`: the store (Lance datasets at pinned versions, one writer, kill-safe commits);
- :mod:`~codesearch.corpus.integrity`: the sha256 of the files each version reads, recorded as it is committed and
  checked before a command answers from it.

Ranking, change detection, tiers and BM25 fitting are the library's own
(:mod:`codesearch.ranking`, :mod:`codesearch.files.changes`,
:mod:`codesearch.index.tiers`, :mod:`codesearch.keyword`): the corpus keeps
only where its rows come from and how they are written.

Needs the ``corpus`` extra (``ray[data]``, ``pylance``, ``pyarrow``).
"""

from __future__ import annotations

from codesearch.corpus.corpus import Corpus
from codesearch.corpus.driver import CorpusReport

__all__ = ["Corpus", "CorpusReport"]
