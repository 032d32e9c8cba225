"""The committed index one searcher holds: opened memory-mapped, built when missing, kept fresh, and asked.

:class:`IndexSession` is what :class:`~codesearch.search.CodeSearch` does with
its roles (store, tiers, builder, freshness) between validating a call and
returning its answer: it opens the committed generation (building the first
one when there is none), refreshes the files that changed before an answer,
upgrades to the transformer tier in the background when asked to, and
answers a query through :meth:`LoadedIndex.rank`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesearch.exceptions import IndexCorruptError, IndexFormatError, IndexNotFoundError
from codesearch.files import Changes
from codesearch.index.builder import IndexBuilder
from codesearch.index.freshness import Freshness
from codesearch.index.loaded import LoadedIndex
from codesearch.index.manifest import IndexManifest
from codesearch.index.notes import why_empty
from codesearch.index.store import IndexStore
from codesearch.index.tiers import Tiers, default_tier
from codesearch.ranking import Ranking
from codesearch.scope import Scope
from codesearch.types import FULL, KEYWORD, STATIC, IndexReport, Mode, SearchInfo, Tier


@dataclass
class SessionOptions:
    """How a session keeps its index.

    Attributes:
        fast_start: build the static tier first for a repository never indexed.
        refresh: find and re-index changed files before each answer (a call may override it).
        background_upgrade: after an answer from the static tier, build the transformer's in the background.
        lock_timeout: seconds to wait for another writer of the same index.
        progress: show progress bars when an answer has to build the index first.
        verify_first: before an answer, wait for the sha256 of the files it reads (see :meth:`LoadedIndex.check`).
    """

    fast_start: bool = True
    refresh: bool = True
    background_upgrade: bool = False
    lock_timeout: float = 30.0
    progress: bool = False
    verify_first: bool = False


class IndexSession:
    """One searcher's committed index and what keeps it answering.

    Args:
        root: the repository folder.
        store: its index's store.
        tiers: its models.
        builder: what builds and updates the index.
        freshness: what finds changed files and runs the background upgrade.
        options: see :class:`SessionOptions`.
    """

    def __init__(self, root: Path, store: IndexStore, tiers: Tiers, builder: IndexBuilder, freshness: Freshness,
                 options: SessionOptions) -> None:
        self.root, self.store, self.tiers, self.builder, self.freshness = root, store, tiers, builder, freshness
        self.options = options
        self.loaded: LoadedIndex | None = None

    # -- the committed index ----------------------------------------------------------

    def build(self, tier: Tier, *, progress: bool, first_answer: bool = False) -> IndexReport:
        """Build or update the index under the write lock (see :meth:`IndexBuilder.build`)."""
        self.store.check_writable("be built or updated")
        with self.store.write_lock(timeout=self.options.lock_timeout):
            self.loaded, report = self.builder.build(tier, self.committed(), progress=progress,
                                                     first_answer=first_answer)
        return report

    def committed(self) -> LoadedIndex | None:
        """The committed index to update: the one in memory while it is current, else read (``None`` if damaged).

        A build copies what it keeps of it into the new generation, so its files' sha256 must have been checked
        first: a damaged index is rebuilt from nothing, never carried over under fresh checksums.
        """
        token = self.store.current_token()
        if token is None:
            return None
        if self.loaded is not None and self.loaded.token == token:
            return verified(self.loaded)
        try:
            return verified(LoadedIndex.from_snapshot(self.store.load(mmap=True), token))
        except IndexCorruptError:
            return None  # rebuilt from nothing (a damaged index, or one of an older format)

    def current(self) -> tuple[LoadedIndex, bool]:
        """The committed index in memory (built first when there is none) and whether it was just built.

        Raises:
            IndexNotFoundError: there is none, and this searcher may not write one.
        """
        token = self.store.current_token()
        if token is not None and (self.loaded is None or self.loaded.token != token):
            before = self.loaded
            try:
                self.loaded = LoadedIndex.from_snapshot(self.store.load(mmap=True), token)
            except IndexFormatError:
                token = None  # made by an older codesearch: built again, as if there were none
            if before is not None and before.unstored:
                self.freshness.recheck(before.unstored)  # the new commit may hold them otherwise than memory did
        if token is None:
            if self.store.read_only:
                raise IndexNotFoundError(
                    f"no index at {self.store.directory}, which is read-only here; build it where it is writable: "
                    f"`codesearch index {self.root} --index-dir {self.store.directory}`")
            self.build(default_tier(self.tiers, self.options.fast_start), progress=self.options.progress,
                       first_answer=True)
            assert self.loaded is not None
            return self.loaded, True
        assert self.loaded is not None
        return self.loaded, False

    # -- freshness -------------------------------------------------------------------

    def changes(self) -> Changes:
        """Files changed on disk since the stored index (empty when there is none)."""
        if not self.store.exists():
            return Changes()
        loaded = self.checked(self.current()[0])
        token = self.store.current_token()
        if token is not None and loaded.token == token and loaded.unstored:
            # Refreshed in memory: the changes are counted against the stored index, which is as it was.
            loaded = self.checked(LoadedIndex.from_snapshot(self.store.load(mmap=True), token))
        return self.freshness.changes(loaded)

    def refresh(self, loaded: LoadedIndex) -> tuple[LoadedIndex, int]:
        """Re-index the files changed since ``loaded`` (see :meth:`Freshness.refresh`): committed, or in memory
        only when the index is read-only here or another process holds its write lock."""

        def rebuild(found: Changes, commit: bool) -> LoadedIndex:
            tier = KEYWORD if self.tiers.keyword_only else loaded.manifest.tier
            built, _ = self.builder.build(tier, verified(loaded), commit=commit)
            if not commit:
                built.unstored = loaded.unstored | {*found.added, *found.modified, *found.removed}
            self.loaded = built
            return built

        return self.freshness.refresh(loaded, rebuild)

    def ready(self, refresh: bool | None) -> tuple[LoadedIndex, bool, int]:
        """The index, refreshed first unless ``refresh`` (or the session's default) says not: ``(index, just built,
        files refreshed)``."""
        loaded, built = self.current()
        self.freshness.follow(loaded)  # watch=True: a watcher over this index's folders, started once
        refreshed = 0
        if self._stat_pass_wanted(loaded, built, refresh):
            loaded, refreshed = self.refresh(loaded)
        return self.checked(loaded), built, refreshed

    def checked(self, loaded: LoadedIndex, tiers: Iterable[Tier] = ()) -> LoadedIndex:
        """``loaded``, fit to answer from ``tiers``: no file of it found damaged, and with ``verify_first`` the
        files such an answer reads checked first (see :meth:`LoadedIndex.check`).

        Raises:
            IndexCorruptError: a file is damaged; the message names it.
        """
        loaded.check(tiers, wait=self.options.verify_first)
        return loaded

    def _stat_pass_wanted(self, loaded: LoadedIndex, built: bool, refresh: bool | None) -> bool:
        wanted = self.options.refresh if refresh is None else refresh
        if wanted and self.options.background_upgrade and not built:
            # While the transformer tier is built in the background, its stat pass decides for this answer's.
            wanted = self.freshness.pause_upgrade_for_changes(loaded, self.builder.cancel) is not False
        # Refreshing embeds changed chunks, so it needs this searcher's model to be the index's.
        return not built and wanted and self.tiers.may_write(loaded.manifest.model_name)

    def upgrade_after(self, loaded: LoadedIndex, tier: Tier | None = None) -> None:
        """After an answer from the static tier, build the transformer's in the background (``background_upgrade``)."""
        if tier is None and not self.tiers.keyword_only:
            tier = FULL if FULL in loaded.vectors else STATIC if STATIC in loaded.vectors else None
        if self.options.background_upgrade and tier == STATIC and not self.store.read_only:
            self.freshness.upgrade_soon(lambda: self.build(FULL, progress=False))

    # -- answers -----------------------------------------------------------------------

    def answer(self, query: str, mode: Mode, where: Scope, ranking: Ranking, k: int,
               refresh: bool | None) -> tuple[LoadedIndex, list[tuple[int, float]], SearchInfo]:
        """Rank the chunks for ``query``: ``(the index answered from, (chunk, score) best first, how)``.

        With a stat pass, the query's vector is made on a worker thread while
        the changed files are found and refreshed (a refresh that changed the
        tier, another process having committed the transformer's, embeds it
        again); without one, here.
        """
        started = time.perf_counter()
        loaded, built = self.current()
        if mode != "bm25" and not built and not self.store.read_only \
                and self.tiers.static_outdated(loaded.manifest.of(STATIC)):
            # Static vectors of this model's earlier static tier (the package shipped a new one): recomputed where
            # a query needs the static model anyway, never on an open that needs none (def, refs, bm25, status).
            self.build(loaded.manifest.tier, progress=self.options.progress)
            loaded, built = self.current()
        self.freshness.follow(loaded)
        if mode != "bm25":
            self.tiers.check_name(loaded.manifest.model_name)
        stat_pass = self._stat_pass_wanted(loaded, built, refresh)
        mask = loaded.scope_mask(where)
        tier: Tier | None = None
        query_vector: np.ndarray | None = None
        pending: Future[np.ndarray] | None = None
        if mode != "bm25":
            tier, embedder = self.tiers.answering(loaded, mask)
            if stat_pass:  # made while the changed files are found; without a stat pass a thread's hop is all it adds
                pending = self.tiers.embed_query_soon(embedder, query)
        refreshed = 0
        if stat_pass:
            loaded, refreshed = self.refresh(loaded)
            if refreshed:
                mask = loaded.scope_mask(where)
        if mode != "bm25":
            now, now_embedder = self.tiers.answering(loaded, mask) if refreshed else (tier, embedder)
            query_vector = pending.result() if pending is not None and now_embedder is embedder else \
                now_embedder.embed_query(query)
            tier = now
            if not np.any(query_vector):
                query_vector = None  # a static model that knows none of the query's tokens: nothing to rank by
        static_vector = None
        if tier == FULL and ranking.static_share > 0 and STATIC in loaded.vectors and self.tiers.has_static:
            self.tiers.check(loaded.manifest.of(STATIC), STATIC, self.tiers.static_embedder)
            static_vector = self.tiers.static_embedder.embed_query(query)
        self.checked(loaded, [t for t in (tier, STATIC if static_vector is not None else None) if t is not None])
        ranked = loaded.rank(query, mode, tier, query_vector, ranking, k, mask, static_vector)
        note = None
        if not ranked:
            note = why_empty(loaded, where, mask, query, mode, self.root, self.freshness.use_ignore_files,
                             [self.store.directory])
        info = SearchInfo(tier or KEYWORD, refreshed, built, time.perf_counter() - started, note, len(loaded.unstored))
        self.upgrade_after(loaded, tier)
        return loaded, ranked, info

    # -- facts -------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The stored index's facts (see :meth:`CodeSearch.info`)."""
        raw = self.store.read_manifest()
        facts = IndexManifest.from_json(raw).describe()
        built_at = facts.pop("root")
        moved = {} if built_at == str(self.root) else {"built_at": built_at}
        return {"root": str(self.root), **moved, "index_dir": str(self.store.directory), **facts,
                "format_version": raw.get("format_version"), "read_only": self.store.read_only,
                "refreshed_in_memory": self._refreshed_in_memory()}

    def _refreshed_in_memory(self) -> int:
        """Files this searcher re-read into memory since the stored index, which holds them otherwise (0 when the
        stored index is what it answers from)."""
        loaded = self.loaded
        return len(loaded.unstored) if loaded is not None and loaded.token == self.store.current_token() else 0

    def status(self) -> dict[str, Any]:
        """:meth:`info`, the files changed since, and how changes are found (see :meth:`CodeSearch.status`)."""
        facts = self.info()
        changes = self.changes()
        facts["changed_files"] = len(changes)
        facts["changes"] = {"added": list(changes.added), "modified": list(changes.modified),
                            "removed": list(changes.removed)}
        self.freshness.follow(self.current()[0])
        facts.update(self.freshness.describe())
        return facts


def verified(loaded: LoadedIndex | None) -> LoadedIndex | None:
    """``loaded`` once the sha256 of all its files has been checked (here and by the background check at once);
    ``None`` if one is damaged."""
    if loaded is not None and loaded.verification is not None:
        try:
            loaded.verification.require()
        except IndexCorruptError:
            return None
    return loaded


__all__ = ["IndexSession", "SessionOptions", "verified"]
