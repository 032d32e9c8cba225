"""What a query asks for: a symbol by name, or behaviour described in words.

:func:`analyze_query` reads a query once and gives every ranking stage the same
:class:`QueryProfile`: whether the whole query is a symbol (``Mux``,
``raise_for_status``, ``Session.send``, ``Sinatra::Base``), the identifiers it
names (the symbol itself, or camelCase / snake_case / dotted names embedded in
a sentence), and the content words that path matching compares with file and
folder names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

from codesearch.keyword.tokens import split_identifier
from codesearch.ranking.paths import squash_name

# A query that is one symbol: qualified (a.b, a::b, a\b, a->b), a leading
# underscore, an inner capital or underscore, or a capitalised word ("Router").
_SYMBOL_QUERY = re.compile(
    r"[A-Za-z_$][\w$]*(?:(?:::|\\|->|\.|#)[A-Za-z_$][\w$]*)+"
    r"|_\w*"
    r"|[A-Za-z$][\w$]*[A-Z_][\w$]*"
    r"|[A-Z][\w$]*"
)
# Names inside a sentence that can only be identifiers (acronyms such as JSON or HTTP are not).
_EMBEDDED = re.compile(
    r"[A-Za-z_]\w*(?:(?:::|\.)[A-Za-z_]\w*)+"  # dotted or :: qualified
    r"|[A-Za-z0-9]*_\w*[A-Za-z0-9]\w*"  # has an inner underscore
    r"|[A-Z]?[a-z][a-z0-9]*[A-Z]\w*"  # a capital after a lower-case letter (camelCase, PascalCase)
)
# A capitalised word inside a sentence ("how Encoder converts"): a type name only if one is defined.
_CAPITALISED = re.compile(r"[A-Z][a-z0-9]+")
_TOKEN = re.compile(r"[A-Za-z_$][\w$.:\\#>-]*")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_QUALIFIER = re.compile(r"::|\\|->|\.|#")

STOPWORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "get", "gets", "has",
    "have", "how", "i", "if", "in", "into", "is", "it", "its", "not", "of", "on", "or", "that", "the", "their",
    "then", "this", "to", "was", "what", "when", "where", "which", "who", "why", "will", "with",
})  # fmt: skip
"""Words that say nothing about which file holds the answer."""

TYPE_WORDS = frozenset({
    "type", "types", "typed", "typing", "typedef", "typedefs", "interface", "interfaces", "signature", "signatures",
    "definition", "definitions", "declaration", "declarations", "shape", "shapes",
})  # fmt: skip
"""Words of a question about types, not behaviour ("reducer type definition"): declaration files answer it."""


@dataclass(frozen=True, slots=True)
class QueryProfile:
    """One query, read once for every ranking stage.

    Attributes:
        text: the query as given, stripped.
        is_symbol: the whole query is one identifier (possibly qualified).
        symbols: the identifiers the query names, each as its forms from the
            most specific: ``(("Session.send", "send"),)`` for the symbol query
            ``Session.send``; for a sentence, one entry per identifier embedded
            in it (camelCase, snake_case, dotted, or a capitalised word after
            the first, which counts only where a definition is spelled so).
        words: lowercased content words of length 3 or more (stopwords out),
            identifiers split into their parts, for matching file and folder
            names.
        file_names: what a file asked for by name would be called, squashed
            (see :func:`~codesearch.ranking.paths.squash_name`): each content
            word as written, without a plural ``s``, and each pair of
            neighbouring words joined (``manage hook`` -> ``managehook``).
        asks_types: a sentence that asks about types, interfaces or
            signatures (one of :data:`TYPE_WORDS`), where a declaration
            file is an answer rather than a stand-in for the code.
    """

    text: str
    is_symbol: bool
    symbols: tuple[tuple[str, ...], ...]
    words: frozenset[str]
    file_names: frozenset[str] = frozenset()
    asks_types: bool = False


def _last_part(name: str) -> str:
    return _QUALIFIER.split(name)[-1]


@lru_cache(maxsize=1024)
def analyze_query(query: str) -> QueryProfile:
    """Read ``query`` into a :class:`QueryProfile`."""
    text = query.strip()
    is_symbol = bool(text) and " " not in text and _SYMBOL_QUERY.fullmatch(text) is not None
    if is_symbol:
        tokens = [text]
    elif " " not in text and text.isidentifier():
        tokens = [text]  # one plain word ("compose") may still be a name
    else:
        found = [t.strip(".:-#>\\") for t in _TOKEN.findall(text)]
        tokens = [t for t in found if _EMBEDDED.fullmatch(t)]
        tokens += [t for t in found[1:] if _CAPITALISED.fullmatch(t) and t not in tokens]
    symbols: list[tuple[str, ...]] = []
    for token in tokens:
        forms = tuple(dict.fromkeys((token, _last_part(token))))
        if token and forms not in symbols:
            symbols.append(forms)
    words = set()
    for word in _WORD.findall(text):
        for part in (word.lower(), *split_identifier(word)):
            if len(part) >= 3 and part not in STOPWORDS:
                words.add(part)
    written = _NAME.findall(text)
    names: set[str] = set()
    for word in written:
        name = squash_name(word)
        if len(name) >= 3 and name not in STOPWORDS:
            names.update((name, name.rstrip("s")))
    names.update(squash_name(a + b) for a, b in pairwise(written))
    asks_types = not is_symbol and any(word.lower() in TYPE_WORDS for word in written)
    return QueryProfile(text, is_symbol, tuple(symbols), frozenset(words), frozenset(names), asks_types)


__all__ = ["STOPWORDS", "TYPE_WORDS", "QueryProfile", "analyze_query"]
