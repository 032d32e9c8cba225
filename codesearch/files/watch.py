"""Watching a repository for changes, so a long-lived searcher needs no stat pass before each query.

The one module that touches :mod:`watchfiles` (the Rust ``notify`` crate
underneath: inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW on
Windows). A :class:`FolderWatcher` runs ``watchfiles.watch`` in a daemon thread
and gathers the paths it reports, relative to the root, into one pending set:
a burst of 5,000 events between two searches is one set, taken whole by the
next search (:meth:`FolderWatcher.take`), so it costs one refresh.

What is watched follows the walker (:mod:`codesearch.files.walk`):

- on Linux, each folder the walk entered, alone (``recursive=False``). inotify
  needs one watch per folder, and a recursive watch would also spend them on
  ``.git``, ``node_modules``, build output and ignored folders, which the walk
  prunes and whose churn (a checkout's object writes, a build) would only be
  filtered out again; so a repository near the ``fs.inotify.max_user_watches``
  limit stays under it, and the index kept inside a repository is not watched.
  A folder added later is seen as an entry of its parent; the refresh that
  follows walks, and the searcher starts a new watcher over the new folders.
- elsewhere, the root recursively (FSEvents and ReadDirectoryChangesW watch a
  tree for the price of one folder); events under a skipped folder name or the
  excluded folders are dropped here.

Limits, said plainly: ``watchfiles`` drops the kernel's queue-overflow notice
(an event without a path), so a burst that overflows the inotify queue (16,384
events by default) could lose paths; a burst that large also leaves more than
:data:`MAX_PENDING` paths pending, and then :attr:`Pending.rescan` asks for a
whole stat pass instead of the paths. Events reach the pending set within a
few steps (:data:`STEP_MS`) of the write.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from codesearch.files.walk import SKIP_DIRS

STEP_MS = 10
"""How often the watcher's Rust loop looks for events (ms): the latency from a write to the pending set is one to two
steps. Each step takes the GIL for a moment, so a smaller step costs searches in the same process a little."""
DEBOUNCE_MS = 200
"""The longest a stream of events is held back before it is handed over as one batch (ms)."""
RUST_TIMEOUT_MS = 200
"""How long the Rust loop waits with nothing to report before returning to Python (ms); the first return says the
watches are in place."""
MAX_PENDING = 1024
"""Pending paths beyond which the watcher stops listing them and asks for a whole stat pass (:attr:`Pending.rescan`)."""
NETWORK_FILE_SYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "gpfs", "davfs",
    "fuse.sshfs", "fuse.rclone", "fuse.gcsfuse", "fuse.s3fs", "drvfs", "virtiofs", "vboxsf", "prl_fs",
})
"""File systems (``/proc/self/mounts`` types) where inotify sees only this machine's writes, so it is not used."""

RECURSIVE = not sys.platform.startswith("linux")
"""Whether a watcher watches the root's tree (FSEvents, ReadDirectoryChangesW) rather than each walked folder (inotify)."""

STARTING, WATCHING, FAILED, STOPPED = "starting", "watching", "failed", "stopped"


@dataclass(frozen=True, slots=True)
class Pending:
    """What changed since the last :meth:`FolderWatcher.take`.

    Attributes:
        paths: changed paths relative to the root (files, folders and ignore files alike; ``/``-separated).
        rescan: the paths are not the whole story (too many, or the root itself changed): stat everything.
    """

    paths: frozenset[str] = frozenset()
    rescan: bool = False

    def __bool__(self) -> bool:
        return bool(self.paths) or self.rescan


class FolderWatcher:
    """Gathers the paths that change under ``root`` in a daemon thread, until :meth:`stop`.

    Args:
        root: the repository folder, resolved.
        folders: the folders the walk entered, relative to the root (``""`` for the root itself); watched one by one
            when ``recursive`` is false.
        exclude: folders whose events are dropped (the index when it lives inside the repository).
        recursive: watch the root's whole tree instead of ``folders``; default :data:`RECURSIVE` (every system but
            Linux).

    Attributes:
        reported: how many paths the system reported so far (before filtering): a test or benchmark waits on it.
        error: the exception that stopped the watcher, if one did.
    """

    def __init__(self, root: Path, folders: Iterable[str] = ("",), *, exclude: Iterable[str | os.PathLike[str]] = (),
                 recursive: bool | None = None) -> None:
        self.root = root
        self.recursive = RECURSIVE if recursive is None else recursive
        self.folders = frozenset(folders)
        self._prefix = f"{root}{os.sep}"
        excluded = []
        for folder in exclude:
            real = os.path.realpath(folder)
            if real.startswith(self._prefix):
                excluded.append(real[len(self._prefix):].replace(os.sep, "/"))
        self._excluded = tuple(excluded)
        self._state = STARTING
        self._reason: str | None = None
        self._pending: set[str] = set()
        self._rescan = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._settled = threading.Event()
        self._thread: threading.Thread | None = None
        self.reported = 0
        self.error: BaseException | None = None

    # -- life -----------------------------------------------------------------------

    def start(self) -> FolderWatcher:
        """Start watching in a daemon thread; :attr:`state` turns ``watching`` once the watches are in place."""
        reason = unwatchable(self.root)
        if reason is not None:
            self._fail(reason)
            return self
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"codesearch-watch-{self.root.name}")
        self._thread.start()
        return self

    def wait_started(self, timeout: float | None = None) -> bool:
        """Wait until the watches are in place or watching failed; whether it is watching now."""
        self._settled.wait(timeout)
        return self._state == WATCHING

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop the thread (at its next step) and wait up to ``timeout`` seconds for it; ``None`` waits without limit."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread() and (timeout is None or timeout > 0):
            thread.join(timeout)
        with self._lock:
            if self._state in (STARTING, WATCHING):
                self._state = STOPPED
        self._settled.set()

    @property
    def state(self) -> str:
        """``starting``, ``watching``, ``failed`` (:attr:`reason` says why) or ``stopped``."""
        return self._state

    @property
    def reason(self) -> str | None:
        """Why watching failed, in a sentence that says the fix where there is one."""
        return self._reason

    @property
    def alive(self) -> bool:
        """Whether the thread still runs."""
        return self._thread is not None and self._thread.is_alive()

    # -- what changed ---------------------------------------------------------------

    def has_pending(self) -> bool:
        """Whether anything changed since the last :meth:`take` (no lock: a racing event is seen next time)."""
        return bool(self._pending) or self._rescan

    def take(self) -> Pending:
        """Everything changed since the last call, and forget it."""
        with self._lock:
            taken = Pending(frozenset(self._pending), self._rescan)
            self._pending = set()
            self._rescan = False
        return taken

    def put_back(self, pending: Pending) -> None:
        """Return paths taken but not acted on (a refresh that could not run), to be taken again."""
        if not pending:
            return
        with self._lock:
            self._pending |= pending.paths
            self._rescan = self._rescan or pending.rescan
            self._bound()

    # -- the thread -----------------------------------------------------------------

    def _run(self) -> None:
        import watchfiles

        root = str(self.root)
        paths = [root] if self.recursive else [f"{root}{os.sep}{f}" if f else root for f in sorted(self.folders)]
        try:
            for batch in watchfiles.watch(
                *paths, watch_filter=None, debounce=DEBOUNCE_MS, step=STEP_MS, stop_event=self._stop,
                rust_timeout=RUST_TIMEOUT_MS, yield_on_timeout=True, raise_interrupt=False, recursive=self.recursive,
                force_polling=False, ignore_permission_denied=False,
            ):
                if self._state == STARTING:
                    with self._lock:
                        if self._state == STARTING:
                            self._state = WATCHING
                    self._settled.set()
                if batch:
                    self._add(path for _, path in batch)
                    self.reported += len(batch)
        except Exception as exc:  # the watch limit, a folder gone before its watch was added, the Rust side's errors
            self.error = exc
            self._fail(describe_failure(exc, self.root, len(paths)))
            return
        with self._lock:
            if self._state in (STARTING, WATCHING):
                self._state = STOPPED
        self._settled.set()

    def _add(self, paths: Iterable[str]) -> None:
        prefix = self._prefix
        cut = len(prefix)
        root = str(self.root)
        found: set[str] = set()
        rescan = False
        for path in paths:
            if not path.startswith(prefix):
                rescan = rescan or path == root  # the root itself was moved, removed or changed
                continue
            rel = path[cut:] if os.sep == "/" else path[cut:].replace(os.sep, "/")
            if self._excluded and any(rel == ex or rel.startswith(f"{ex}/") for ex in self._excluded):
                continue
            if self.recursive and not SKIP_DIRS.isdisjoint(rel.split("/")[:-1]):
                continue
            found.add(rel)
        if not found and not rescan:
            return
        with self._lock:
            self._pending |= found
            self._rescan = self._rescan or rescan
            self._bound()

    def _bound(self) -> None:
        """Past :data:`MAX_PENDING` paths, ask for a whole stat pass instead (under the lock)."""
        if len(self._pending) > MAX_PENDING:
            self._pending = set()
            self._rescan = True

    def _fail(self, reason: str) -> None:
        with self._lock:
            self._state = FAILED
            self._reason = reason
        self._settled.set()


def describe_failure(exc: BaseException, root: Path, watches: int) -> str:
    """A one-line reason for a watcher that could not start or stopped, with the fix where there is one."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "limit" in text.lower() or getattr(exc, "errno", None) == 28:  # ENOSPC: inotify's max_user_watches
        limit = _read_int("/proc/sys/fs/inotify/max_user_watches")
        now = f" (fs.inotify.max_user_watches is {limit:,})" if limit else ""
        return (f"the inotify watch limit is reached{now}: {watches:,} folders of {root} need a watch each; raise it with "
                f"`sudo sysctl fs.inotify.max_user_watches=524288` (and in /etc/sysctl.conf to keep it)")
    if "instance" in text.lower() or getattr(exc, "errno", None) == 24:  # EMFILE: max_user_instances
        return (f"no more inotify instances for this user ({text}); raise `fs.inotify.max_user_instances` or close "
                f"other watchers")
    return f"watching {root} failed: {text}"


def unwatchable(root: Path) -> str | None:
    """Why events cannot be trusted under ``root`` (a network file system, or polling forced), or ``None``."""
    forced = os.environ.get("WATCHFILES_FORCE_POLLING")
    if forced and forced.lower() not in {"false", "disable", "disabled"}:
        return "WATCHFILES_FORCE_POLLING is set, and polling is what the stat pass already does"
    fstype = _file_system(root)
    if fstype in NETWORK_FILE_SYSTEMS:
        return f"{root} is on a {fstype} file system, where file events miss other machines' writes"
    return None


def _file_system(root: Path) -> str | None:
    """The type of the mount holding ``root`` (Linux; ``None`` elsewhere or when unknown)."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as mounts:
            table = [line.split() for line in mounts]
    except OSError:
        return None
    path = str(root)
    best, kind = -1, None
    for fields in table:
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) > best:
            best, kind = len(point), fields[2]
    return kind


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


__all__ = ["DEBOUNCE_MS", "FAILED", "MAX_PENDING", "NETWORK_FILE_SYSTEMS", "RECURSIVE", "STARTING", "STEP_MS", "STOPPED",
           "WATCHING", "FolderWatcher", "Pending", "describe_failure", "unwatchable"]
