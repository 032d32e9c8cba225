"""Reads that cannot be swapped: the one way a repository's file is read, and the reasons a file is not indexed.

Every read of a repository's file -- the scan's, the index's cutters', the
hash of a file in the racy window, an ignore file's -- goes through
:func:`read_file`, so that no read can be swapped: the file is opened without
following a link (``O_NOFOLLOW``) and without waiting (``O_NONBLOCK``), and the
open descriptor must be a regular file under the size cap before a byte is
read. A file swapped for a link between listing and reading is skipped as
``symlink``; for a FIFO, socket or device as ``special_file`` (a FIFO is never
read, so it cannot block); one grown over the cap as ``too_large``. (The walker
reads ignore files and the scan imports the walker: these reads are a module
of their own, below both.)
"""

from __future__ import annotations

import errno
import os
import stat


class SkipReason:
    """Why a file (or folder) was not indexed; the keys of :attr:`ScanResult.skipped`."""

    SKIPPED_DIR = "skipped_dir"
    LOCKFILE = "lockfile"
    IGNORED = "ignored"
    EXCLUDED_EXTENSION = "excluded_extension"
    TOO_LARGE = "too_large"
    BINARY = "binary"
    UNREADABLE = "unreadable"
    SPECIAL = "special_file"
    """A FIFO, socket or device where a file was listed: never opened for reading (a FIFO would block)."""
    NAME_NOT_UTF8 = "name_not_utf8"
    """A name a store of UTF-8 strings cannot hold (a corpus; a single index keeps every name as it is)."""
    SYMLINK = "symlink"
    OUTSIDE_ROOT = "outside_root"
    SYMLINK_LOOP = "symlink_loop"


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_OPEN_FLAGS = (os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
_LINK_ERRORS = frozenset({errno.ELOOP, errno.EMLINK})
"""What ``open`` answers for a link under ``O_NOFOLLOW`` (``EMLINK`` on FreeBSD)."""


class SkippedFile(Exception):
    """A file :func:`read_file` did not read; :attr:`reason` is a :class:`SkipReason`."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def read_file(path: str, max_bytes: int) -> bytes:
    """The bytes of the regular file at ``path``, read through one descriptor that cannot be swapped.

    The last part of ``path`` is not followed when it is a link (where the
    system has ``O_NOFOLLOW``; elsewhere it is checked just before opening),
    the open never waits, and nothing is read unless the descriptor is a
    regular file of at most ``max_bytes``.

    Raises:
        SkippedFile: with the reason: ``symlink`` (the path is a link),
            ``special_file`` (a FIFO, socket, device or folder), ``too_large``
            (over ``max_bytes``, now or while read), ``unreadable`` (anything
            else the system refuses: gone, no permission ...).
    """
    try:
        if not _NOFOLLOW and os.path.islink(path):  # pragma: no cover - Windows
            raise SkippedFile(SkipReason.SYMLINK)
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as err:
        if err.errno in _LINK_ERRORS and _NOFOLLOW:
            raise SkippedFile(SkipReason.SYMLINK) from None
        if err.errno in (errno.ENXIO, errno.EISDIR):  # a socket; a folder
            raise SkippedFile(SkipReason.SPECIAL) from None
        raise SkippedFile(SkipReason.UNREADABLE) from None
    except ValueError:  # a NUL in the path
        raise SkippedFile(SkipReason.UNREADABLE) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SkippedFile(SkipReason.SPECIAL)
        if info.st_size > max_bytes:
            raise SkippedFile(SkipReason.TOO_LARGE)
        blocks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            block = os.read(fd, min(left, max(info.st_size + 1, 1 << 16)))
            if not block:
                break
            blocks.append(block)
            left -= len(block)
    except OSError:
        raise SkippedFile(SkipReason.UNREADABLE) from None
    finally:
        os.close(fd)
    data = b"".join(blocks)
    if len(data) > max_bytes:  # grew since it was stat'ed
        raise SkippedFile(SkipReason.TOO_LARGE)
    return data


__all__ = ["SkipReason", "SkippedFile", "read_file"]
