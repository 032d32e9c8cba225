"""``path:line`` and ``path:start-end`` locations, as editors and search hits write them."""

from __future__ import annotations

import re

from codesearch.display import clipped

_LOCATION = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$", re.DOTALL)  # a path may hold a newline


def parse_location(location: str) -> tuple[str, int]:
    """Split ``path:line`` or ``path:start-end`` into the path and the (first) line.

    Raises:
        ValueError: the text is not of either form, or a line is 0.
    """
    match = _LOCATION.match(location.strip())
    if match is None:
        raise ValueError(f"{clipped(location)!r} is not a location; write PATH:LINE or PATH:START-END (src/app.py:42)")
    start = int(match.group("start"))
    end = int(match.group("end") or start)
    if start < 1 or end < start:
        raise ValueError(f"{clipped(location)!r} has no valid line range; lines start at 1 and END is not before START")
    return match.group("path"), start


__all__ = ["parse_location"]
