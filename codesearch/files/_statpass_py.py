"""Pure-Python stat table: the reference twin of ``_statpass.pyx``.

A :class:`StatTable` holds absolute paths with the ``(size, mtime_ns)`` a scan
recorded for them, prepared once; :meth:`StatTable.differences` stats every
path and says which no longer match. Both twins expose the same class and must
give identical answers (a test holds them to it). This one is written for
reading; the Cython one calls ``stat(2)`` directly, with the GIL released.
"""

from __future__ import annotations

import os
from collections.abc import Sequence


class StatTable:
    """Paths and their recorded stats, to be compared with the disk again and again.

    Args:
        paths: absolute paths (``str``; encoded as :func:`os.fsencode` would).
        sizes: the recorded sizes.
        mtimes: the recorded modification times in nanoseconds (-1 never matches a real file's).
        check_sizes: per path, whether the size is compared too (not for a folder).
    """

    def __init__(self, paths: Sequence[str], sizes: Sequence[int], mtimes: Sequence[int],
                 check_sizes: Sequence[bool]) -> None:
        if not len(paths) == len(sizes) == len(mtimes) == len(check_sizes):
            raise ValueError("paths, sizes, mtimes and check_sizes must have the same length")
        self._rows = [(os.fspath(p), int(s), int(m), bool(c)) for p, s, m, c in zip(paths, sizes, mtimes, check_sizes)]

    def __len__(self) -> int:
        return len(self._rows)

    def differences(self) -> list[tuple[int, bool]]:
        """``(row, gone)`` for each path whose stat no longer matches, in row order (``gone``: it cannot be stat'ed)."""
        found: list[tuple[int, bool]] = []
        stat = os.stat
        for row, (path, size, mtime_ns, check_size) in enumerate(self._rows):
            try:
                info = stat(path)
            except (OSError, ValueError):  # ValueError: a NUL in the path
                found.append((row, True))
                continue
            if info.st_mtime_ns != mtime_ns or (check_size and info.st_size != size):
                found.append((row, False))
        return found


__all__ = ["StatTable"]
