"""Symbol navigation over an index in memory: where a name is defined, and where it is used.

Definitions come from the symbol table the definition chunker records
(:attr:`~codesearch.ranking.ChunkFacts.symbols`), references from the
keyword postings: every identifier is kept whole as a BM25 term (lowercased,
:func:`~codesearch.keyword.tokens.split_identifier`), so the chunks that may
use a name are one posting list away, and each is then checked for the name
as a whole word with its case (``grep -w``'s rule). Both read chunks only
through :meth:`LoadedIndex.hit`, :attr:`LoadedIndex.facts` and
:attr:`LoadedIndex.bm25`.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace

import numpy as np

from codesearch.chunking.symbols import QUALIFIERS, SymbolTable, definition_names
from codesearch.files.kinds import CONFIG, DOC, TEST
from codesearch.index.loaded import LoadedIndex
from codesearch.keyword.tokens import split_identifier
from codesearch.ranking.paths import COMPAT, EXAMPLE, STUB, squash_name
from codesearch.types import Hit, SymbolHits

_IDENTIFIER = re.compile(r"\w+")
_CLASS_RANK = {STUB: 1, COMPAT: 1, EXAMPLE: 1, TEST: 2, DOC: 3, CONFIG: 3}
"""Where a definition's file stands when a name is defined several times: source (0) first, docs and config last."""
CAVEAT = "textual: whole-word matches; dynamic dispatch, reflection and names built at run time are missed"


def _unified(name: str) -> str:
    """A qualified name with every qualifier (``::``, ``->``, ``#``, ``\\``, ``:``) written as ``.``."""
    return QUALIFIERS.sub(".", name)


def find_definitions(loaded: LoadedIndex, name: str, k: int) -> SymbolHits:
    """The chunks that define ``name``, best first; see :meth:`codesearch.CodeSearch.definitions`.

    A bare name matches every symbol whose last part it is (``send`` matches
    ``Session.send``); a qualified one matches symbols that end with it, in
    any qualifier syntax (``Session.send`` matches ``requests.Session.send``
    and ``Session::send``). Matches with the same case come first, then the
    rest by: the file's kind (source, then stubs/compat/examples, tests, docs
    and config), a file named after the name, a whole-symbol match before a
    member, then path and line. The later line windows of a long definition
    are left out (its first window holds the signature).

    When the symbol table holds no symbol of that last name (a language's top-level property
    or macro it does not record, a definition the chunker missed), the lines
    that read like a declaration of it (``val NAME``, ``class NAME``,
    ``#define NAME`` ...) answer instead, marked :attr:`SymbolHits.textual`.
    """
    asked = definition_names(name.strip())[0]
    wanted = _unified(asked)
    last = definition_names(asked)[-1]
    qualified = wanted != last
    facts = loaded.facts
    found: list[tuple[tuple[object, ...], Hit]] = []
    seen: set[int] = set()
    previous: dict[tuple[int, str], Hit] = {}  # (file, symbol) -> the last chunk found defining it
    for entry in facts.symbols.get(last.lower()):
        chunk = entry.chunk
        if chunk in seen:
            continue
        seen.add(chunk)
        hit = loaded.hit(chunk, 1.0)
        symbol = _matching_symbol(hit.symbols, wanted, last, qualified)
        if symbol is None:
            continue
        file = int(facts.file_of[chunk])
        before = previous.get((file, symbol))
        previous[(file, symbol)] = hit
        if before is not None and before.start_line < hit.start_line <= before.end_line:
            continue  # a later window of the same long definition
        written = _unified(definition_names(symbol)[0])
        exact = written.endswith(wanted) if qualified else definition_names(symbol)[-1] == last
        named = squash_name(facts.stems[file]) == squash_name(last)
        place = max((_CLASS_RANK.get(c, 0) for c in facts.classes[file]), default=0)
        whole = written.lower() == wanted.lower()
        key = (not exact, place, not named, not whole, facts.files[file], hit.start_line)
        found.append((key, replace(hit, score=1.0 if exact else 0.5, defines=symbol)))
    found.sort(key=lambda item: item[0])
    hits = tuple(hit for _, hit in found[:k])
    if not hits:
        return _declarations(loaded, asked, last if last.lower() not in facts.symbols else "", k)
    note = f"the first {k} of {len(found)} definitions; raise k for the rest" if len(found) > k else None
    return SymbolHits(asked, hits, capped=len(found) > k, note=note)


_DECLARING = ("class", "struct", "union", "interface", "trait", "enum", "type", "typedef", "typealias", "protocol",
              "object", "record", "module", "namespace", "fn", "func", "fun", "def", "defp", "defmodule", "function",
              "macro")
"""Words that declare the name after them in the languages indexed (``class Foo``, ``fun send``)."""
_BINDING = ("const", "let", "var", "val")
"""Words that declare the name after them when a type or value follows (``val HttpTimeout: ...``, ``const x =``);
alone they also qualify a type (C++'s ``const Foo&``)."""


def _declarations(loaded: LoadedIndex, asked: str, last: str, k: int) -> SymbolHits:
    """When the symbol table has no ``last`` at all: the lines that read like its declaration (a declaring word,
    or ``#define``, then the name), textual and said to be so; else (or with ``last`` empty: the table has the
    name, under other qualifiers) no hits and the closest symbol names."""
    if not _IDENTIFIER.fullmatch(last):
        found: list[tuple[tuple[object, ...], Hit]] = []
    else:
        name = re.escape(last)
        declared = re.compile(rf"(?<![\w.])(?:(?:{'|'.join(_DECLARING)})\s+(?:[\w.:]+(?:\.|::))?{name}(?!\w)"
                              rf"|(?:{'|'.join(_BINDING)})\s+{name}\s*[:=])|#\s*define\s+{name}(?!\w)")
        facts = loaded.facts
        found = []
        reported: dict[int, set[int]] = {}  # file -> lines already given (overlapping windows repeat lines)
        for chunk in _candidates(loaded, last):
            hit = loaded.hit(chunk, 0.5)
            file = int(facts.file_of[chunk])
            done = reported.setdefault(file, set())
            lines = [line for line in _lines_with(declared, hit.text, hit.start_line) if line not in done]
            done.update(lines)
            if lines:
                place = max((_CLASS_RANK.get(c, 0) for c in facts.classes[file]), default=0)
                named = squash_name(facts.stems[file]) == squash_name(last)
                found.append(((place, not named, facts.files[file], lines[0]), replace(hit, lines=tuple(lines))))
        found.sort(key=lambda item: item[0])
    if found:
        note = (f"no symbol named {asked!r} in the symbol table; these lines read like its declaration "
                f"({found[0][1].path}:{found[0][1].lines[0]} ...): textual")
        return SymbolHits(asked, tuple(hit for _, hit in found[:k]), capped=len(found) > k, note=note, textual=True)
    hint = closest_names(loaded, asked)
    note = (f"no symbol named {asked!r} is defined in the indexed files"
            + (f"; closest names: {', '.join(hint)}" if hint else "")
            + "; it may be defined outside the repository (find its uses with references)")
    return SymbolHits(asked, (), note=note)


def _matching_symbol(symbols: tuple[str, ...], wanted: str, last: str, qualified: bool) -> str | None:
    """The first of a chunk's symbols that answers to the name asked (case-insensitive), exact case preferred."""
    loose = None
    for symbol in symbols:
        forms = definition_names(symbol)
        if forms[-1].lower() != last.lower():
            continue
        if qualified:
            written = _unified(forms[0])
            if not (written.lower() == wanted.lower() or written.lower().endswith("." + wanted.lower())):
                continue
            exact = written.endswith(wanted)
        else:
            exact = forms[-1] == last
        if exact:
            return symbol
        loose = loose or symbol
    return loose


def find_references(loaded: LoadedIndex, name: str, k: int) -> SymbolHits:
    """The chunks that use ``name`` as a whole word, in file then line order; see
    :meth:`codesearch.CodeSearch.references`.

    Raises:
        ValueError: ``name`` holds no identifier.
    """
    asked = name.strip()
    identifier = asked if _IDENTIFIER.fullmatch(asked) else definition_names(asked)[-1]
    if not _IDENTIFIER.fullmatch(identifier):
        raise ValueError(f"references take an identifier (letters, digits, _), got {name!r}")
    facts = loaded.facts
    word = re.compile(rf"(?<!\w){re.escape(identifier)}(?!\w)")
    defining = {chunk for chunk, written in facts.defining([identifier]).items() if written == identifier
                or definition_names(written)[-1] == identifier}
    reported: dict[int, set[int]] = {}  # file -> lines already reported (overlapping windows repeat lines)
    hits: list[Hit] = []
    capped = False
    for chunk in _candidates(loaded, identifier):
        hit = loaded.hit(chunk, 1.0)
        file = int(facts.file_of[chunk])
        lines = _lines_with(word, hit.text, hit.start_line)
        done = reported.setdefault(file, set())
        new = tuple(line for line in lines if line not in done)
        if not new:
            continue
        if len(hits) == k:
            capped = True
            break
        done.update(new)
        symbol = _matching_symbol(hit.symbols, identifier, identifier, False) if chunk in defining else None
        hits.append(replace(hit, lines=new, defines=symbol))
    if not hits:
        hint = closest_names(loaded, identifier)
        note = (f"no indexed file uses {identifier!r} as a whole word"
                + (f"; closest symbol names: {', '.join(hint)}" if hint else ""))
    else:
        note = CAVEAT
        if identifier != asked:
            note = f"uses of {identifier!r}, the last part of {asked!r}, whatever it is called on; " + note
        if capped:
            note = f"the first {k} chunks of more; raise k for the rest; " + note
    return SymbolHits(asked, tuple(hits), capped=capped, note=note, textual=True)


def _candidates(loaded: LoadedIndex, identifier: str) -> list[int]:
    """Chunks whose keyword terms hold every term of ``identifier`` (a superset of those that use it), in file
    then chunk order; every chunk when the identifier leaves no term (each part too long to be one)."""
    bm25 = loaded.bm25
    found: np.ndarray | None = None
    for term in sorted(set(split_identifier(identifier)), key=len, reverse=True):
        t = bm25.vocabulary_.get(term)
        if t is None:
            return []
        postings = bm25.documents(t)
        found = postings if found is None else np.intersect1d(found, postings, assume_unique=True)
    chunks = range(len(loaded)) if found is None else found.tolist()
    files = loaded.facts.files
    file_of = loaded.facts.file_of
    return sorted(chunks, key=lambda c: (files[file_of[c]], c))


def _lines_with(word: re.Pattern[str], text: str, start_line: int) -> list[int]:
    """The lines (numbered from ``start_line``) of ``text`` where ``word`` matches."""
    lines: list[int] = []
    line, position = start_line, 0
    for match in word.finditer(text):
        line += text.count("\n", position, match.start())
        position = match.start()
        if not lines or lines[-1] != line:
            lines.append(line)
    return lines


def closest_names(loaded: LoadedIndex, name: str, n: int = 3) -> list[str]:
    """Up to ``n`` symbol names of the index most like ``name`` (by edit distance, among close matches), as
    written in the code; empty when none is close."""
    target = name.lower()
    table = loaded.facts.symbols
    assert isinstance(table, SymbolTable)  # a single index's, built with it
    near = difflib.get_close_matches(target, table.names.tolist(), n=10, cutoff=0.7)
    near.sort(key=lambda key: (edit_distance(target, key), key))
    return [table.get(key)[0].name for key in near[:n]]


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest one-character insertions, deletions and substitutions from ``a`` to ``b``."""
    if len(a) < len(b):
        a, b = b, a
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        diagonal, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (x != y))
    return row[-1]


__all__ = ["CAVEAT", "closest_names", "edit_distance", "find_definitions", "find_references"]
