"""Definition-aware chunking: chunks that follow functions, classes and methods.

:func:`cut_file` parses a file with the tree-sitter grammar of its language (see
:mod:`codesearch.chunking.languages`: one maintained PyPI wheel per language, working
offline) and cuts it along its definitions:

* a definition that fits the budget (``target_tokens * chars_per_token``
  characters, each line costing its length + 1) is one chunk, together with the
  comments, decorators and attributes directly above it (no blank line between);
* a container (class, module, namespace, impl, trait, object ...) too big for
  the budget is split into its members; its header -- signature, docstring and
  whatever comes before the first member -- joins the first member or is a
  chunk of its own;
* a function too big for the budget is cut by the line-window chunker
  (:func:`codesearch.chunking.chunk_lines`) over its own lines, every window
  recording the function's symbol;
* small neighbours -- tiny definitions (under a quarter of the budget each),
  imports, constants and comments between definitions -- are grouped up to the
  budget, and a group still under a quarter of the budget joins the chunk
  after it (or before it) when both fit, so a lone ``# -- section --`` comment
  is never a chunk of its own;
* adjacent definitions of the same name (a Haskell signature and its
  equations, TypeScript overloads) are one definition.

Line numbers are those of an editor (``\\r\\n`` and a lone ``\\r`` end a line),
every non-blank line lands in at least one chunk, and a chunk's text is exactly
its lines joined by ``"\\n"`` -- the contract of :func:`~codesearch.chunking.chunk_text`,
which also cuts a line too long to take whole (a data blob) into windows: such a
line reaches a chunk only through the line windows of what holds it, and a window
that ends inside it holds a piece of it.

``Chunk.symbols`` holds qualified names: ``"Session.rebuild_method"``,
``"super_len"``, ``"Client.Do"`` (Go, whatever the receiver), ``"impl fmt::Display
for Foo"`` and ``"Foo::bar"`` (Rust), ``"fmt::detail::buffer::push_back"`` (C++),
``"Rack::Request.call"`` (Ruby), ``"Plug.Conn.put_status"`` (Elixir). A chunk with
a whole class lists the class and its members; a header or member-level
statement chunk of a split class lists the class; module-level statement
chunks have ``()``.

Files of no known language, files whose grammar is missing or does not load,
files over :data:`MAX_PARSE_BYTES` and files tree-sitter cannot read at all go
to the line-window chunker with ``symbols=()``, and :func:`cut_file` says why
(:data:`FALLBACK_REASONS`). Files with syntax errors are still cut along the
definitions tree-sitter recovered. Nothing here raises on any text: an
unexpected failure is logged and the file falls back to line windows.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, NamedTuple

from codesearch.chunking.chunks import Chunk, ChunkParams, chunk_lines, chunk_text, split_lines
from codesearch.chunking.languages import LANGUAGES, READ_INSIDE, Definition, Language, language_for

if TYPE_CHECKING:  # pragma: no cover
    from tree_sitter import Node, Parser, Tree

log = logging.getLogger(__name__)

#: Languages with definition-aware chunking.
SUPPORTED_LANGUAGES: tuple[str, ...] = tuple(LANGUAGES)

#: Definitions smaller than this fraction of the budget are grouped with their
#: neighbours; bigger ones are a chunk of their own.
TINY_FRACTION = 0.25

#: Files larger than this are not parsed (their trees cost more than they give).
MAX_PARSE_BYTES = 512 * 1024

#: Why a file got line windows instead of definitions.
NO_LANGUAGE = "unknown extension"
NO_GRAMMAR = "no grammar"
PARSE_ERROR = "parse error"
TOO_LARGE = "too large"
FALLBACK_REASONS = (NO_LANGUAGE, NO_GRAMMAR, PARSE_ERROR, TOO_LARGE)

# Containers nested deeper than this are not split further (guards recursion).
_MAX_DEPTH = 40

_PARSERS: dict[str, Parser | None] = {}
_PARSER_LOCK = threading.Lock()
# tree-sitter-bash 0.25.1's scanner reads past a table on code points above the BMP (after a "{", say)
# and, the further past, the likelier it crashes the process (found by the random-text property in
# tests/test_languages.py). Its parser gets U+FFFD in their place: rows are unchanged, and the chunks
# keep the original text.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_ASTRAL_UNSAFE = frozenset({"bash"})
_ASTRAL_BYTES = re.compile(rb"[\xf0-\xf4][\x80-\xbf]{3}")
_WARNED: set[str] = set()


class FileChunks(NamedTuple):
    """What :func:`cut_file` made of one file.

    Attributes:
        chunks: the chunks, sorted by start line.
        language: the file's language name, or ``None`` when none is known.
        fallback: why the file got line windows (one of
            :data:`FALLBACK_REASONS`), or ``None`` when it was cut along its
            definitions.
    """

    chunks: list[Chunk]
    language: str | None
    fallback: str | None


def grammar_available(language: str) -> bool:
    """Whether the tree-sitter grammar for ``language`` is installed and loads."""
    return _parser(language) is not None


def _parser(language: str) -> Parser | None:
    """The cached parser for ``language``; ``None`` when its grammar cannot be loaded."""
    try:
        return _PARSERS[language]
    except KeyError:
        pass
    parser: Parser | None = None
    spec = LANGUAGES[language]
    try:
        import tree_sitter

        grammar = getattr(importlib.import_module(spec.grammar), spec.entry)()
        parser = tree_sitter.Parser(tree_sitter.Language(grammar))
    except Exception as exc:  # ImportError, or a grammar built for another tree-sitter ABI
        if language not in _WARNED:
            _WARNED.add(language)
            log.warning(
                "codesearch: no tree-sitter grammar for %s (%s); its files get line-window chunks. "
                "Install it with `pip install %s`.", language, exc, spec.package,
            )
    _PARSERS[language] = parser
    return parser


def parse_tree(language: str, source: bytes) -> Tree | None:
    """The tree-sitter tree of ``source`` in ``language`` (a key of ``LANGUAGES``), or ``None`` without its grammar.

    The parser is the one :func:`cut_file` uses, under the same lock; other
    readers of the library's grammars (training-pair mining) parse through here.
    """
    parser = _parser(language)
    if parser is None:
        return None
    if language in _ASTRAL_UNSAFE:  # as in _chunk_definitions, with the bytes' offsets kept (4 bytes for 4)
        source = _ASTRAL_BYTES.sub(b"____", source)
    with _PARSER_LOCK:
        return parser.parse(source)


def _first_line(text: str) -> str:
    end = text.find("\n", 0, 512)
    return text[: end if end >= 0 else 512]


def cut_file(path: str, text: str, params: ChunkParams | None = None) -> FileChunks:
    """Cut one file's text into chunks that follow its definitions, and say how it was cut.

    Args:
        path: the file's path (its extension or name picks the language; a
            ``#!`` line does when neither is known).
        text: the file's text, any line endings.
        params: the chunk budget; also the line-window fallback's sizes.
            Default: :meth:`ChunkParams.for_chunking` of ``"definitions"``.

    Returns:
        The chunks (sorted by start line, covering every non-blank line, each
        with the qualified names of the definitions it holds), the language
        and, for a file cut into line windows, the reason.
    """
    params = params if params is not None else ChunkParams.for_chunking("definitions")
    lang = language_for(path, _first_line(text) if text.startswith("#!") else None, text)
    if lang is None:
        return FileChunks(chunk_text(path, text, params), None, NO_LANGUAGE)
    if _parser(lang.name) is None:
        return FileChunks(chunk_text(path, text, params), lang.name, NO_GRAMMAR)
    if len(text) > MAX_PARSE_BYTES:
        return FileChunks(chunk_text(path, text, params), lang.name, TOO_LARGE)
    try:
        chunks = _chunk_definitions(path, text, params, lang)
    except Exception:  # never fail a whole index over one file
        log.warning("codesearch: definition chunking failed for %s; using line windows", path, exc_info=True)
        chunks = None
    if chunks is None:
        return FileChunks(chunk_text(path, text, params), lang.name, PARSE_ERROR)
    return FileChunks(chunks, lang.name, None)


def chunk_definitions(path: str, text: str, params: ChunkParams | None = None) -> list[Chunk]:
    """The chunks of :func:`cut_file` alone.

    For a file of no known language, or one whose grammar is missing, exactly
    :func:`~codesearch.chunking.chunk_text`.
    """
    return cut_file(path, text, params).chunks


def _chunk_definitions(path: str, text: str, params: ChunkParams, lang: Language) -> list[Chunk] | None:
    """The work of :func:`cut_file`; ``None`` when the tree cannot be read. May raise."""
    parser = _parser(lang.name)
    if parser is None:
        return None
    lines = split_lines(text)
    if not lines:
        return []
    joined = "\n".join(lines)
    if lang.name in _ASTRAL_UNSAFE and _ASTRAL.search(joined):
        joined = _ASTRAL.sub("\ufffd", joined)
    source = joined.encode("utf-8", "replace")
    with _PARSER_LOCK:  # a Parser is not safe to share between threads mid-parse
        tree = parser.parse(source)
    root = tree.root_node
    cutter = _Cutter(lines, params, lang)
    try:
        pieces = cutter.cut(root)
    except RecursionError:
        return None
    if root.has_error and not any(symbols for _, _, symbols, _ in pieces):
        return None  # nothing recovered: line windows cut it no worse
    return [
        Chunk(path, start + 1, end + 1, "\n".join(lines[start : end + 1]) if text is None else text, symbols)
        for start, end, symbols, text in pieces
    ]


# --------------------------------------------------------------------------- cutting


@dataclass(slots=True)
class _Segment:
    """A run of rows (0-based, inclusive) at one level: a definition or the statements between.

    Attributes:
        start: first row, with attached comments and decorators.
        end: last row.
        symbols: the names recorded for the segment's own lines.
        is_def: whether it is a definition (else statements between them).
        container: for a class-like definition, what to split it by when too big.
        depth: nesting depth of the level it was found at.
        header: the header of a split class, which may join the member after it.
    """

    start: int
    end: int
    symbols: tuple[str, ...]
    is_def: bool
    container: Definition | None = None
    depth: int = 0
    header: bool = False


@dataclass(slots=True)
class _Group:
    """A chunk being built.

    ``header`` while it holds only a split class's header; ``window`` for a line
    window; ``defines`` when it holds a definition (not only statements, whose
    symbols are those of the class around them); ``text`` for a window whose
    text is not its whole lines (it holds a piece of a line too long to take whole).
    """

    start: int
    end: int
    symbols: list[str] = field(default_factory=list)
    header: bool = False
    window: bool = False
    defines: bool = False
    text: str | None = None


def _end_row(node: Node) -> int:
    """The last row holding the node's text (a node ending in a newline ends on the row before)."""
    row, column = node.end_point
    start_row = node.start_point[0]
    return row - 1 if column == 0 and row > start_row else row


class _Cutter:
    """Cuts one parsed file; rows are 0-based and equal editor lines minus one."""

    def __init__(self, lines: list[str], params: ChunkParams, lang: Language) -> None:
        self.lines = lines
        self.params = params
        self.lang = lang
        self.budget = params.target_tokens * params.chars_per_token
        self.tiny = self.budget * TINY_FRACTION
        self.offsets = list(accumulate((len(line) + 1 for line in lines), initial=0))

    # -- sizes and rows

    def size(self, start: int, end: int) -> int:
        return self.offsets[end + 1] - self.offsets[start]

    def blank(self, row: int) -> bool:
        return not self.lines[row].strip()

    def trim(self, start: int, end: int) -> tuple[int, int] | None:
        """``(start, end)`` without blank rows at either side, ``None`` if all blank."""
        while start <= end and self.blank(start):
            start += 1
        while end >= start and self.blank(end):
            end -= 1
        return (start, end) if start <= end else None

    def trivial(self, start: int, end: int) -> bool:
        """Whether the rows hold only punctuation, like a closing ``}``."""
        return not any(ch.isalnum() for row in range(start, end + 1) for ch in self.lines[row])

    # -- the tree

    def cut(self, root: Node) -> list[tuple[int, int, tuple[str, ...], str | None]]:
        segments = self.segments(root.named_children, 0, len(self.lines) - 1, "", (), 0)
        return [(g.start, g.end, tuple(dict.fromkeys(g.symbols)), g.text) for g in self.group(segments)]

    def children(self, nodes: Iterable[Node], prefix: str) -> Iterable[tuple[Node, Definition | None]]:
        """The nodes of one level with what each defines; transparent and misread nodes give their children."""
        for node in nodes:
            if node.type in self.lang.transparent:
                yield from self.children(node.named_children, prefix)
                continue
            found = self.lang.read(node, prefix)
            if found is READ_INSIDE:  # its parts, and what its body holds, stand at this level
                body = node.child_by_field_name("body")
                for child in node.named_children:
                    inside = body is not None and child.id == body.id
                    yield from self.children(child.named_children if inside else [child], prefix)
            else:
                yield node, found

    def segments(
        self, nodes: Iterable[Node], lo: int, hi: int, prefix: str, glue: tuple[str, ...], depth: int
    ) -> list[_Segment]:
        """Tile rows ``lo..hi`` (blank runs left out) with definitions and the statements between.

        Args:
            nodes: the children of a module or of a container's body.
            lo: first row of the level.
            hi: last row of the level.
            prefix: qualifier for names found here.
            glue: symbols recorded for statements between definitions.
            depth: nesting depth, to stop recursion in pathological input.
        """
        lang = self.lang
        defs: list[_Segment] = []
        pending: list[Node] = []  # comments/decorators since the last statement
        last_end = lo - 1  # last row touched by a statement or definition
        for node, found in self.children(nodes, prefix):
            start = node.start_point[0]
            end = _end_row(node)
            if node.type in lang.attach and start > last_end and not _inner_doc(node):
                pending.append(node)
                continue
            if found is None or not found.symbols:
                pending.clear()
                last_end = max(last_end, end)
                continue
            for above in reversed(pending):  # the contiguous block right above the definition
                if _end_row(above) >= start - 1:
                    start = min(start, above.start_point[0])
                else:
                    break
            pending.clear()
            start, end = max(start, lo), min(end, hi)
            # Nothing but comments since the previous definition, and the same name: one definition
            # (a Haskell signature and its equations, TypeScript overloads).
            same_name = (bool(defs) and last_end <= defs[-1].end and defs[-1].symbols == found.symbols
                         and found.body is None and defs[-1].container is None)
            last_end = max(last_end, end)
            if start > end:
                continue
            container = found if found.body is not None and depth < _MAX_DEPTH else None
            if defs and (start <= defs[-1].end or same_name):  # shares a row with the previous one: merge
                previous = defs[-1]
                previous.end = max(previous.end, end)
                previous.symbols += found.symbols
                previous.container = None
                continue
            defs.append(_Segment(start, end, found.symbols, True, container, depth))
        out: list[_Segment] = []
        row = lo
        for segment in defs:
            if segment.start > row and (span := self.trim(row, segment.start - 1)):
                out.append(_Segment(span[0], span[1], glue, False))
            out.append(segment)
            row = segment.end + 1
        if row <= hi and (span := self.trim(row, hi)):
            out.append(_Segment(span[0], span[1], glue, False))
        return out

    def group(self, segments: list[_Segment]) -> list[_Group]:
        """Turn one level's segments into chunks: whole, split, or grouped up to the budget."""
        out: list[_Group] = []
        group: _Group | None = None

        def flush() -> None:
            nonlocal group
            if group is not None:
                out.append(group)
                group = None

        for segment in segments:
            if not segment.is_def and self.trivial(segment.start, segment.end):
                target = group or (out[-1] if out else None)
                if target is not None:  # a closing brace stays with what it closes
                    if target.text is not None:
                        target.text = "\n".join([target.text, *self.lines[target.end + 1 : segment.end + 1]])
                    target.end = segment.end
                    continue
            size = self.size(segment.start, segment.end)
            if size > self.budget:
                flush()
                out.extend(self.split(segment))
                continue
            symbols = self.whole_symbols(segment)
            fits = group is not None and self.size(group.start, segment.end) <= self.budget
            if segment.is_def and size >= self.tiny:
                if group is not None and group.header and fits:  # a class header joins its first member
                    group.end = segment.end
                    group.symbols.extend(symbols)
                    group.defines = True
                    flush()
                else:
                    flush()
                    out.append(_Group(segment.start, segment.end, list(symbols), defines=True))
                continue
            if group is not None and fits:
                group.end = segment.end
                group.symbols.extend(symbols)
                group.header = False
                group.defines = group.defines or segment.is_def
            else:
                flush()
                group = _Group(segment.start, segment.end, list(symbols), segment.header, defines=segment.is_def)
        flush()
        return self.absorb_small(out)

    def absorb_small(self, groups: list[_Group]) -> list[_Group]:
        """Let small chunks join a neighbour: glue before or after it, a very small definition before it.

        Glue is a chunk without definitions (imports, constants, comments)
        under the tiny size; a definition joins only when under half of that
        (one-liners), since a definition appended to another chunk may fall
        past what the model reads of it.

        Joining the chunk before keeps every definition's chunk starting at its
        own signature (what the model reads first); line windows neither join
        nor take others, so a long definition keeps its windows as cut.
        """
        out: list[_Group] = []
        carry: _Group | None = None  # a small chunk that found no room before it
        for group in groups:
            g = group
            if carry is not None:
                if not g.window and self.size(carry.start, g.end) <= self.budget:
                    g = _Group(carry.start, g.end, carry.symbols + g.symbols, g.header, defines=g.defines)
                else:
                    out.append(carry)
                carry = None
            size = self.size(g.start, g.end)
            if g.window or size >= self.tiny or (g.defines and size >= self.tiny / 2):
                out.append(g)  # big enough, or a definition worth its own vector
                continue
            last = out[-1] if out else None
            if last is not None and not last.window and not g.header and self.size(last.start, g.end) <= self.budget:
                out[-1] = _Group(last.start, g.end, last.symbols + g.symbols, last.header, defines=True)
            elif g.defines:
                out.append(g)  # a small definition stands alone rather than go in front of the next one
            else:
                carry = g
        if carry is not None:
            out.append(carry)
        return out

    def whole_symbols(self, segment: _Segment) -> tuple[str, ...]:
        """A segment's symbols when it is one chunk: a container adds its members' names."""
        if segment.container is None:
            return segment.symbols
        return segment.symbols + self.member_symbols(segment.container, segment.depth + 1)

    def member_symbols(self, container: Definition, depth: int) -> tuple[str, ...]:
        if container.body is None or depth >= _MAX_DEPTH:
            return ()
        names: list[str] = []
        for _, found in self.children(container.body.named_children, container.prefix):
            if found is None:
                continue
            names.extend(found.symbols)
            if found.body is not None:
                names.extend(self.member_symbols(found, depth + 1))
        return tuple(names)

    def split(self, segment: _Segment) -> list[_Group]:
        """Cut a segment bigger than the budget: a container by its members, else line windows."""
        container = segment.container
        if container is not None and container.body is not None:
            members = self.segments(
                container.body.named_children,
                segment.start,
                segment.end,
                container.prefix,
                segment.symbols,
                segment.depth + 1,
            )
            first = next((i for i, m in enumerate(members) if m.is_def), None)
            if first is not None:
                parts = members[first:]
                head = members[first].start - 1
                if head >= segment.start and (span := self.trim(segment.start, head)):
                    parts.insert(0, _Segment(span[0], span[1], segment.symbols, False, header=True))
                groups = self.group(parts)
                if groups and not any(s in groups[0].symbols for s in segment.symbols):
                    # the header shares its row with the first member (`class A { f() {} ...`)
                    groups[0].symbols[:0] = segment.symbols
                return groups
        return self.windows(segment.start, segment.end, segment.symbols)

    def windows(self, start: int, end: int, symbols: tuple[str, ...]) -> list[_Group]:
        """Line windows over rows ``start..end``, each recording ``symbols`` (and its text, when it holds a piece of
        a line too long to take whole)."""
        params = self.params
        body = "\n".join(self.lines[start : end + 1])
        groups = []
        for first, last, text in chunk_lines(body, params.target_tokens, params.overlap_tokens,
                                             params.chars_per_token):
            rows = (start + first - 1, start + last - 1)
            whole = len(text) == self.size(*rows) - 1  # a window's text is a run of its lines: whole, or a piece
            groups.append(_Group(*rows, list(symbols), window=True, defines=True, text=None if whole else text))
        return groups


def _inner_doc(node: Node) -> bool:
    """Rust ``//!`` and ``/*!`` comments document the enclosing item, not the next one."""
    text = node.text or b""
    return text.startswith((b"//!", b"/*!"))


__all__ = [
    "FALLBACK_REASONS",
    "MAX_PARSE_BYTES",
    "SUPPORTED_LANGUAGES",
    "TINY_FRACTION",
    "FileChunks",
    "chunk_definitions",
    "cut_file",
    "grammar_available",
    "parse_tree",
]
