"""Keeping an index in step with the files on disk: the stat pass or a watcher, the refresh, a background upgrade.

Before a search, :meth:`Freshness.refresh` finds the files that changed and
re-indexes them, in one of two ways (:meth:`Freshness.describe` says which is
active, and why):

- ``stat``: stat the indexed files (size and modification time, nothing read).
  One-shot commands do this, and so does a searcher that cannot watch.
- ``watch`` (``CodeSearch(watch=True)``, the MCP server): a
  :class:`~codesearch.files.watch.FolderWatcher` gathers the paths the system
  reports changed; a search with none pending checks nothing at all, and one
  with some stats only those (a burst of events between two searches is one
  refresh). Until the watcher is in place, and once right after (a change made
  before its watches existed), a search runs the stat pass. A watcher that
  cannot start (the inotify watch limit, a network file system) leaves the
  stat pass in charge, with one warning.

A searcher that answers first from the static tier may build the transformer
tier in a background thread (:meth:`Freshness.upgrade_soon`); while that build
runs, a search whose files changed stops it at its next checkpoint, refreshes,
and the upgrade starts again after the answer (:meth:`Freshness.pause_upgrade_for_changes`).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from codesearch.exceptions import CodeSearchError, IndexCancelledError, IndexLockedError
from codesearch.files import Changes
from codesearch.files.changes import StatPass
from codesearch.files.watch import FAILED, WATCHING, FolderWatcher, Pending
from codesearch.index.loaded import LoadedIndex
from codesearch.index.store import IndexStore

log = logging.getLogger("codesearch")

STAT, WATCH = "stat", "watch"
"""The two ways of finding changed files (:meth:`Freshness.describe`)."""


class Freshness:
    """The stat pass or watcher, refresh and background upgrade of one repository's index.

    Args:
        root: the repository folder.
        store: its index (its folder is never walked, nor watched).
        use_ignore_files: whether the walk honours ignore files.
        watch: find changes with a file watcher instead of a stat pass before each search.
    """

    def __init__(self, root: Path, store: IndexStore, use_ignore_files: bool, *, watch: bool = False) -> None:
        self.root = root
        self.store = store
        self.use_ignore_files = use_ignore_files
        self.watch = watch
        self._upgrade: threading.Thread | None = None
        self._guard = threading.Lock()
        self._prepared: tuple[LoadedIndex, StatPass] | None = None
        self._watcher: FolderWatcher | None = None
        self._followed: LoadedIndex | None = None
        self._caught_up = False
        self._failure: str | None = None
        self._closed = False
        # Every watcher started, so that one dropped with its searcher (never closed) still stops.
        self._watchers: list[FolderWatcher] = []
        weakref.finalize(self, _stop_all, self._watchers)

    def changes(self, loaded: LoadedIndex) -> Changes:
        """Files added, modified and removed on disk since ``loaded`` was built (a stat pass; nothing is read).

        In watch mode what it finds is also handed to the watcher, so the next search refreshes it even when
        the system's report of it is still on its way (a report lags a write by a step or two).
        """
        found = self._stat_pass(loaded).changes()
        if found and self._watcher is not None and loaded is self._followed:
            self._watcher.put_back(Pending(frozenset((*found.added, *found.modified, *found.removed))))
        return found

    def _stat_pass(self, loaded: LoadedIndex) -> StatPass:
        """``loaded``'s file stats prepared for stat passes, once per index (paths joined and encoded, numbers in arrays)."""
        prepared = self._prepared
        if prepared is None or prepared[0] is not loaded:
            prepared = self._prepared = (loaded, StatPass(
                self.root, loaded.known_stats(), walk_stats=loaded.manifest.walk_stats,
                use_ignore_files=self.use_ignore_files, exclude_dirs=[self.store.directory]))
        return prepared[1]

    # -- the watcher ------------------------------------------------------------------

    def follow(self, loaded: LoadedIndex) -> None:
        """In watch mode, have a watcher over ``loaded``'s folders (started in the background; nothing else waits).

        A new index whose walk entered folders the watcher does not watch gets a new watcher (inotify watches
        folder by folder); the stat pass covers the time until it is in place.
        """
        if not self.watch or self._closed or self._failure is not None or loaded is self._followed:
            return
        self._followed = loaded
        walk_stats = loaded.manifest.walk_stats
        folders = frozenset(key[:-1] if key != "/" else "" for key in walk_stats or {} if key.endswith("/")) or {""}
        running = self._watcher
        if running is not None and (running.recursive or folders <= running.folders):
            return
        if running is not None:
            self._retire(running)
        watcher = FolderWatcher(self._stat_pass(loaded).root, folders, exclude=[self.store.directory],
                                recursive=True if not walk_stats else None)
        self._watchers.append(watcher)
        self._watcher = watcher
        self._caught_up = False
        watcher.start()

    def _watching(self, loaded: LoadedIndex) -> FolderWatcher | None:
        """The watcher when it alone can say what changed; ``None`` while a stat pass must (not watching, the
        watcher starting, or it just started: the pass finds what changed before its watches were in place)."""
        self.follow(loaded)
        watcher = self._watcher
        if watcher is None or self._failure is not None:
            return None
        state = watcher.state
        if state == WATCHING:
            if self._caught_up:
                return watcher
            watcher.take()  # the stat pass that follows sees all of it, and what changed before the watcher
            self._caught_up = True
            return None
        if state == FAILED:
            if isinstance(watcher.error, FileNotFoundError):
                # A folder went away before its watch was added: the stat pass sees it, and the index it
                # rebuilds gets a watcher over the folders that are there.
                self._retire(watcher)
            else:
                self._give_up(watcher.reason or "the watcher stopped")
        return None

    def _retire(self, watcher: FolderWatcher) -> None:
        watcher.stop(timeout=0)
        if watcher in self._watchers:
            self._watchers.remove(watcher)
        if self._watcher is watcher:
            self._watcher = None

    def _give_up(self, reason: str) -> None:
        """Leave the stat pass in charge for good, saying why once."""
        self._failure = reason
        for watcher in self._watchers:
            watcher.stop(timeout=0)
        log.warning("codesearch: not watching %s for changes: %s. Searches stat the indexed files instead "
                    "(the index is as it was, and nothing is missed).", self.root, reason)

    def describe(self) -> dict[str, Any]:
        """How changes are found now: ``{"freshness": "watch" or "stat", "freshness_reason": why}``."""
        watcher = self._watcher
        if not self.watch:
            mode, reason = STAT, ("a stat pass before each search (watch=False; long-lived processes watch instead: "
                                  "the MCP server, CodeSearch(watch=True))")
        elif self._failure is not None:
            mode, reason = STAT, self._failure
        elif self._closed:
            mode, reason = STAT, "the searcher was closed; its watcher is stopped"
        elif watcher is None:
            mode, reason = STAT, "the watcher starts with the first search"
        elif watcher.state == WATCHING:
            how = "the tree" if watcher.recursive else f"{len(watcher.folders):,} folders"
            mode, reason = WATCH, f"watching {how}: a search re-checks only the paths reported changed"
        elif watcher.state == FAILED:
            mode, reason = STAT, watcher.reason or "the watcher stopped"
        else:
            mode, reason = STAT, "the watcher is starting; searches stat the files until it is in place"
        return {"freshness": mode, "freshness_reason": reason}

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop watching (and wait up to ``timeout`` seconds for the watcher's thread); searches fall back to stat passes."""
        self._closed = True
        for watcher in self._watchers:
            watcher.stop(timeout)
        self._watchers.clear()
        self._watcher = None

    # -- finding changes ----------------------------------------------------------------

    def _find(self, loaded: LoadedIndex) -> tuple[Changes, Pending | None]:
        """What changed since ``loaded``, and the watcher's paths taken to find it (to put back if not acted on)."""
        watcher = self._watching(loaded) if self.watch else None
        if watcher is None:
            found = self._stat_pass(loaded).changes()
            # Not acted on, a stat pass's finding is found again by the next one: a watcher is told to rescan.
            return found, (Pending(rescan=True) if found and self.watch else None)
        if not watcher.has_pending():
            return Changes(), None
        pending = watcher.take()
        return self._changes_among(loaded, pending), pending

    def _changes_among(self, loaded: LoadedIndex, pending: Pending) -> Changes:
        prepared = self._stat_pass(loaded)
        if pending.rescan:
            return prepared.changes()
        found = prepared.among(pending.paths)
        return prepared.walked() if found is None else found

    def _put_back(self, pending: Pending | None) -> None:
        if pending is not None and self._watcher is not None:
            self._watcher.put_back(pending)

    def refresh(self, loaded: LoadedIndex, rebuild: Callable[[Changes, bool], LoadedIndex]) -> tuple[LoadedIndex, int]:
        """Re-index the changed files, if any: ``(the index now, how many files changed)``.

        ``rebuild(changes, commit)`` builds on ``loaded``. It commits under the
        store's write lock, taken without waiting. When another process holds
        the lock (``codesearch index`` running), or the store is read-only and
        takes none, it builds in memory only (``commit=False``): the answer
        sees the files as they are on disk, the stored index stays as it was,
        and the index returned names the files it holds otherwise
        (:attr:`LoadedIndex.unstored`). The first refresh that finds the lock
        free commits what was refreshed in memory.
        """
        found, taken = self._find(loaded)
        behind = bool(loaded.unstored) and not self.store.read_only
        if not found and not behind:
            return loaded, 0
        try:
            with ExitStack() as held:
                commit = not self.store.read_only and self._lock(held)
                if not found and not commit:
                    return loaded, 0  # memory is up to date; the stored index catches up once the lock is free
                return rebuild(found, commit), len(found)
        except BaseException:
            self._put_back(taken)  # seen again by the next search
            raise

    def _lock(self, held: ExitStack) -> bool:
        """Take the store's write lock into ``held`` if no one holds it; whether it was taken."""
        try:
            held.enter_context(self.store.write_lock(timeout=0))
        except IndexLockedError:
            return False
        return True

    def recheck(self, paths: Iterable[str]) -> None:
        """Have the next search check ``paths`` again: files an index refreshed in memory held otherwise than the
        committed one that replaced it may (a watcher reported them once; a stat pass checks every file anyway)."""
        if self._watcher is not None and paths:
            self._watcher.put_back(Pending(frozenset(paths)))

    # -- the transformer tier, built in the background ----------------------------

    @property
    def upgrading(self) -> bool:
        """Whether a background build runs now."""
        return self._upgrade is not None and self._upgrade.is_alive()

    def upgrade_soon(self, build: Callable[[], object]) -> None:
        """Run ``build`` (the transformer tier's) in a background thread, unless one runs already.

        A build stopped for a search (:class:`IndexCancelledError`) ends
        quietly, keeping its checkpoints; any other library error is logged
        and the index keeps its committed tiers.
        """
        with self._guard:
            if self.upgrading:
                return
            self._upgrade = threading.Thread(target=self._run, args=(build,), daemon=True,
                                             name=f"codesearch-index-{self.root.name}")
            self._upgrade.start()

    def _run(self, build: Callable[[], object]) -> None:
        try:
            build()
        except IndexCancelledError:
            pass  # a search needed the lock to refresh; it starts the upgrade again after answering
        except CodeSearchError as exc:  # another writer, a model that cannot load: keep the static tier
            log.warning("codesearch: the transformer tier of %s was not built: %s", self.root, exc)

    def pause_upgrade_for_changes(self, loaded: LoadedIndex, cancel: Callable[[], None]) -> bool | None:
        """Before a search while an upgrade runs: stat the files, and if some changed, stop the build at its
        next checkpoint so the search can refresh (and see the edit) first.

        Returns:
            The search's ``refresh``: ``None`` when no upgrade runs (the search's own stat pass decides),
            else whether files changed, so they are not statted twice. In watch mode, with nothing
            pending, nothing is statted at all.
        """
        running = self._upgrade
        if running is None or not running.is_alive():
            return None
        found, taken = self._find(loaded)
        if not found:
            return False
        self._put_back(taken)  # the search's refresh takes them again (a stat pass finds them again by itself)
        cancel()
        running.join()
        return True

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background build to end."""
        running = self._upgrade
        if running is not None:
            running.join(timeout)


def _stop_all(watchers: list[FolderWatcher]) -> None:
    for watcher in watchers:
        watcher.stop(timeout=0)


__all__ = ["STAT", "WATCH", "Freshness"]
