"""The one file lock: an OS lock on a file (filelock's), held by one process at a time, naming its holder.

The index store (``DIR/LOCK``), the corpus's writer (``.writer.lock``) and the
model cache (``<folder>.lock``) take it. It is the kernel's (``flock`` on
POSIX, ``msvcrt`` on Windows), so it goes with a holder killed by ``kill -9``.
A process forked while it is held holds nothing: filelock closes the child's
copy of the descriptor (the lock stays the parent's, and goes when the parent
releases it or dies), and a :class:`FileLock` makes a lock of its own in each
process (filelock refuses one inherited across a fork).

What this adds to filelock's: the holder writes its pid into the file, so a
refused waiter's message names it (POSIX; Windows locks the file's first byte,
so there the holder is "pid unknown"), and a timeout means what it always has
here: 0 one try, a negative value forever.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

POLL_S = 0.02
"""Seconds between two tries while waiting for a lock."""


class LockHeld(TimeoutError):
    """Another process (or another thread's lock object) holds the lock past the timeout.

    Attributes:
        path: the lock file.
        holder: ``"pid N"`` as the holder wrote it, or ``"pid unknown"``.
    """

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held by {holder}")
        self.path = path
        self.holder = holder


class FileLock:
    """An exclusive lock on the file ``path`` (created if need be; its folder must exist).

    Args:
        path: the lock file.
        poll_s: seconds between two tries while waiting.
    """

    def __init__(self, path: str | os.PathLike[str], poll_s: float = POLL_S) -> None:
        self.path = Path(path)
        self.poll_s = poll_s
        self._lock: Any = None
        self._pid: int | None = None

    def __repr__(self) -> str:
        return f"FileLock({str(self.path)!r})"

    def _own(self) -> Any:
        """This process's filelock object (a new one after a fork)."""
        if self._lock is None or self._pid != os.getpid():
            import filelock

            self._lock, self._pid = filelock.FileLock(str(self.path)), os.getpid()
        return self._lock

    def acquire(self, timeout: float) -> None:
        """Take the lock and write this process's pid into it.

        Args:
            timeout: seconds to wait; 0 tries once, a negative value waits forever.

        Raises:
            LockHeld: it is still held after ``timeout``.
        """
        import filelock

        try:
            self._own().acquire(timeout=timeout, poll_interval=self.poll_s)
        except filelock.Timeout:
            raise LockHeld(self.path, self.holder()) from None
        self._write(f"{os.getpid()}\n")

    def release(self) -> None:
        """Let the lock go (this process's hold; nothing in a process that does not hold it)."""
        if self._lock is None or self._pid != os.getpid() or not self._lock.is_locked:
            return
        self._write("")
        self._lock.release()

    @contextmanager
    def held(self, timeout: float) -> Iterator[None]:
        """Hold the lock for the ``with`` block (see :meth:`acquire`)."""
        self.acquire(timeout)
        try:
            yield
        finally:
            self.release()

    def holder(self) -> str:
        """``"pid N"`` of the process that wrote itself into the lock file, or ``"pid unknown"``."""
        try:
            text = self.path.read_text("ascii", errors="replace").strip()
        except OSError:
            text = ""
        return f"pid {text}" if text.isdigit() else "pid unknown"

    def _write(self, text: str) -> None:
        """Replace the lock file's content (another descriptor: closing it leaves filelock's ``flock`` as it is)."""
        with suppress(OSError):  # Windows: the locked byte cannot be written through another handle
            fd = os.open(self.path, os.O_WRONLY)
            try:
                os.ftruncate(fd, 0)
                os.write(fd, text.encode("ascii"))
            finally:
                os.close(fd)


__all__ = ["POLL_S", "FileLock", "LockHeld"]
