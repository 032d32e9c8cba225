"""One repository's index, by role: what is stored and how, what a query reads, how it is built and kept fresh.

- :mod:`~codesearch.index.store`: checksummed generations on disk (:class:`IndexSnapshot`, ``CURRENT``, commit,
  verified read, clean-up), one writer at a time; beside it :mod:`~codesearch.index.snapshot` (what a generation
  holds), :mod:`~codesearch.index.pointer` (``CURRENT``), :mod:`~codesearch.index.integrity` (the files' sha256,
  checked as read or in the background), :mod:`~codesearch.index.mapping` (memory-mapped arrays, linked into the
  next generation) and :mod:`~codesearch.index.checkpoints` (vectors kept before a commit);
- :mod:`~codesearch.index.manifest`: the typed manifest (:class:`IndexManifest`);
- :mod:`~codesearch.index.loaded`: :class:`LoadedIndex`, the index in memory, answering through the ranking;
- :mod:`~codesearch.index.tiers`: :class:`Tiers`, the models, their guards, and which tier answers;
- :mod:`~codesearch.index.builder`: :class:`IndexBuilder`, scan -> chunk -> embed -> keywords -> store;
- :mod:`~codesearch.index.freshness`: :class:`Freshness`, the stat pass, refresh and background upgrade;
- :mod:`~codesearch.index.vectors`: :class:`VectorSearch`, one tier's dense candidates (exact, or a rescored graph).
"""

from __future__ import annotations

from codesearch.index.builder import CHECKPOINT_EVERY, BuildOptions, IndexBuilder
from codesearch.index.freshness import Freshness
from codesearch.index.loaded import LoadedIndex
from codesearch.index.manifest import IndexManifest, TierFacts
from codesearch.index.snapshot import FORMAT_VERSION, IndexSnapshot
from codesearch.index.store import IndexStore
from codesearch.index.tiers import Tiers
from codesearch.index.vectors import EXACT_BELOW, TIER_PARAMS, DenseCandidates, GraphParams, VectorSearch

__all__ = ["CHECKPOINT_EVERY", "EXACT_BELOW", "FORMAT_VERSION", "BuildOptions", "DenseCandidates",
           "Freshness", "GraphParams", "IndexBuilder", "IndexManifest", "IndexSnapshot", "IndexStore", "LoadedIndex",
           "TIER_PARAMS", "TierFacts", "Tiers", "VectorSearch"]
