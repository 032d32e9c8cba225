"""The keyword analyzer: text into BM25 terms, identifiers split the way code names them.

:func:`code_tokens` serves documents and queries alike: it cuts text into words
(``\\w+``), splits each word on ``_`` and camelCase, lowercases the parts and
also keeps the whole identifier, so ``should_strip_auth`` gives ``should,
strip, auth, should_strip_auth`` and ``HTTPAdapter`` gives ``http, adapter,
httpadapter``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import chain

MAX_TOKEN_CHARS = 64
"""Tokens longer than this (hashes, base64 blobs) are dropped; their parts are kept."""

_WORD = re.compile(r"\w+")
# Run over a "shape" string with one letter per character: U upper, l lower (or
# uncased letter), d digit, _ underscore. Spans found here are cut from the word.
_CAMEL = re.compile(r"U+(?=Ul)|U?l+|U+|d+")
def _shape_char(c: str) -> str:
    if c == "_":
        return "_"
    if c.isupper():
        return "U"
    if c.isdigit():
        return "d"
    return "l"


# The same shapes for ASCII characters in one C call (``str.translate``): upper U, digit d, ``_``, anything else l.
_ASCII_SHAPE = {c: ("U" if chr(c).isupper() else "d" if chr(c).isdigit() else "_" if chr(c) == "_" else "l")
                for c in range(128)}


@lru_cache(maxsize=1 << 17)
def split_identifier(word: str) -> tuple[str, ...]:
    """Split one word on ``_``, camelCase and letter/digit boundaries.

    Returns:
        The lowercased parts, then the whole word (lowercased, outer
        underscores stripped) when it has more than one part. Tokens longer
        than :data:`MAX_TOKEN_CHARS` are left out. ``"UnrewindableBodyError"``
        gives ``("unrewindable", "body", "error", "unrewindablebodyerror")``;
        ``"__init__"`` gives ``("init",)``.
    """
    shape = word.translate(_ASCII_SHAPE) if word.isascii() else "".join(map(_shape_char, word))
    parts = [word[m.start() : m.end()].lower() for m in _CAMEL.finditer(shape)]
    if len(parts) > 1:
        parts.append(word.strip("_").lower())
    return tuple(p for p in parts if len(p) <= MAX_TOKEN_CHARS)


def code_tokens(text: str) -> list[str]:
    """Analyze text into BM25 terms; the same analyzer serves documents and queries.

    Returns:
        The terms of every ``\\w+`` word in order, as :func:`split_identifier`
        gives them.
    """
    return list(chain.from_iterable(map(split_identifier, _WORD.findall(text))))


__all__ = ["MAX_TOKEN_CHARS", "code_tokens", "split_identifier"]
