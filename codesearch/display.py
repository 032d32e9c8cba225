"""How text from files and callers is shown by the faces: escaped where it could forge a line, cut where it is unbounded.

A file name is whatever bytes the file system holds: a newline, a terminal
escape (``\\x1b``) or a byte that is not UTF-8 (kept in a path as a surrogate
escape, ``os.fsdecode``) would print raw and could forge a result line or
break a strict UTF-8 stream. :func:`printable` is the one rendering every text
command uses for them; JSON keeps the exact string (:func:`exact_text`).
:func:`clipped` bounds what a face echoes of a caller's input.
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# C0 and C1 controls and DEL; lone surrogates (undecodable bytes kept by os.fsdecode, U+DC80-U+DCFF, or any other);
# line and paragraph separators; the bidirectional controls that can reorder what a terminal shows.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")
_UNPRINTABLE_BUT_TAB = re.compile(_UNPRINTABLE.pattern.replace("\x00-\x1f", "\x00-\x08\x0a-\x1f"))


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    point = ord(char)
    if 0xDC80 <= point <= 0xDCFF:  # a byte os.fsdecode could not decode: shown as that byte
        return f"\\x{point - 0xDC00:02x}"
    return f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}"


def printable(text: str, *, keep_tabs: bool = False) -> str:
    """``text`` with every character that cannot be shown safely on one line written as an escape.

    Newline, carriage return and tab become ``\\n``, ``\\r``, ``\\t``; other
    control characters ``\\xNN``; a byte that was not UTF-8 (a surrogate
    escape) ``\\xNN`` of that byte; line separators and bidirectional controls
    ``\\uNNNN``. Everything else is kept as it is. With ``keep_tabs``, tabs
    stay (for lines of code).
    """
    pattern = _UNPRINTABLE_BUT_TAB if keep_tabs else _UNPRINTABLE
    return pattern.sub(_escape, text) if pattern.search(text) else text


def exact_text(text: str) -> str:
    """``text`` (JSON written with ``ensure_ascii=False``) with each lone surrogate as its JSON escape ``\\udcNN``.

    The result encodes as strict UTF-8, and a JSON parser reads the exact
    string back (a path holding a byte that is not UTF-8 comes back with its
    surrogate escape). Only JSON text may be given: outside a JSON string the
    escape would be text.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def clipped(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters, marked ``…[+N chars]`` where it was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[+{len(text) - limit:,} chars]"


__all__ = ["clipped", "exact_text", "printable"]
