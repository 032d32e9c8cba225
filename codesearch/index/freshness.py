"""Keeping an index in step with the files on disk: the stat pass, the refresh, and a background upgrade.

Before a search, :meth:`Freshness.refresh` stats the indexed files (size and
modification time, nothing read) and re-indexes the ones that changed. A
searcher that answers first from the static tier may build the transformer
tier in a background thread (:meth:`Freshness.upgrade_soon`); while that build
runs, a search whose files changed stops it at its next checkpoint, refreshes,
and the upgrade starts again after the answer (:meth:`Freshness.pause_upgrade_for_changes`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from codesearch.exceptions import CodeSearchError, IndexCancelledError, IndexLockedError
from codesearch.files import Changes, changed_files
from codesearch.index.loaded import LoadedIndex
from codesearch.index.manifest import IndexManifest
from codesearch.index.store import IndexStore

log = logging.getLogger("codesearch")


class Freshness:
    """The stat pass, refresh and background upgrade of one repository's index.

    Args:
        root: the repository folder.
        store: its index (its folder is never walked).
        use_ignore_files: whether the walk honours ignore files.
    """

    def __init__(self, root: Path, store: IndexStore, use_ignore_files: bool) -> None:
        self.root = root
        self.store = store
        self.use_ignore_files = use_ignore_files
        self._upgrade: threading.Thread | None = None
        self._guard = threading.Lock()

    def changes(self, manifest: IndexManifest) -> Changes:
        """Files added, modified and removed on disk since ``manifest``'s scan (a stat pass; nothing is read)."""
        return changed_files(self.root, manifest.stats or {}, use_ignore_files=self.use_ignore_files,
                             exclude_dirs=[self.store.directory], walk_stats=manifest.walk_stats)

    def refresh(self, loaded: LoadedIndex, rebuild: Callable[[], LoadedIndex]) -> tuple[LoadedIndex, int]:
        """Re-index the changed files, if any: ``(the index now, how many files changed)``.

        ``rebuild`` runs under the store's write lock, taken without waiting:
        when another writer holds it, the committed index answers as it is
        (0 files refreshed). A read-only store takes no lock: ``rebuild``
        builds in memory only. An index older than the stat pass is left for
        ``codesearch index`` to bring up to date.
        """
        if loaded.manifest.stats is None:
            return loaded, 0
        found = self.changes(loaded.manifest)
        if not found:
            return loaded, 0
        if self.store.read_only:
            return rebuild(), len(found)
        try:
            with self.store.write_lock(timeout=0):
                return rebuild(), len(found)
        except IndexLockedError:
            return loaded, 0

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

    def pause_upgrade_for_changes(self, manifest: IndexManifest, cancel: Callable[[], None]) -> bool | None:
        """Before a search while an upgrade runs: stat the files, and if some changed, stop the build at its
        next checkpoint so the search can refresh (and see the edit) first.

        Returns:
            The search's ``refresh``: ``None`` when no upgrade runs (the search's own stat pass decides),
            else whether files changed, so they are not statted twice.
        """
        running = self._upgrade
        if running is None or not running.is_alive():
            return None
        if not self.changes(manifest):
            return False
        cancel()
        running.join()
        return True

    def wait(self, timeout: float | None = None) -> None:
        """Wait for a background build to end."""
        running = self._upgrade
        if running is not None:
            running.join(timeout)


__all__ = ["Freshness"]
