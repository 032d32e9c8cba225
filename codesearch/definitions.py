"""Definition-aware chunking: chunks that follow functions, classes and methods.

:func:`chunk_definitions` parses a file with a tree-sitter grammar (one maintained
PyPI wheel per language, working offline) and cuts it along its definitions:

* a definition that fits the budget (``target_tokens * chars_per_token``
  characters, each line costing its length + 1) is one chunk, together with the
  comments, decorators and attributes directly above it (no blank line between);
* a class (or Rust ``impl``/``trait``/``mod``, Java interface/enum/record, TS
  interface/namespace) too big for the budget is split into its members; its
  header -- signature, docstring and whatever comes before the first member --
  is a chunk of its own or is grouped with the members after it;
* a function too big for the budget is cut by the line-window chunker
  (:func:`codesearch.chunking.chunk_lines`) over its own lines, every window
  recording the function's symbol;
* tiny definitions (under a quarter of the budget each) and the statements
  between definitions (imports, constants) are grouped into chunks up to the
  budget; a statement run bigger than the budget is cut into line windows.

Line numbers are those of an editor (``\\r\\n`` and a lone ``\\r`` end a line),
every non-blank line lands in at least one chunk, and a chunk's text is exactly
its lines joined by ``"\\n"`` -- the contract of :func:`~codesearch.chunking.chunk_text`.

``Chunk.symbols`` holds qualified names: ``"Session.rebuild_method"`` (Python,
JavaScript/TypeScript, Java: ``Outer.Inner.method``), ``"super_len"``; Go methods
are ``"Client.Do"`` whatever the receiver (``*Client`` and ``Client`` both give
``Client``, type parameters dropped); Rust impls are ``"impl Foo"`` or
``"impl fmt::Display for Foo"`` and their items ``"Foo::bar"``, trait and module
items ``"Trait::item"``/``"module::item"``. A chunk with a whole class lists the
class and its members; a header or member-level statement chunk of a split class
lists the class; module-level statement chunks have ``()``.

Files in other languages, and every language when its grammar package is not
installed, go to the line-window chunker with ``symbols=()``. Files with syntax
errors are still cut along the definitions tree-sitter recovered. The function
never raises on any text: an unexpected failure is logged and the file falls
back to line windows.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, NamedTuple

from codesearch.chunking import Chunk, ChunkParams, chunk_lines, chunk_text, split_lines

if TYPE_CHECKING:  # pragma: no cover
    from tree_sitter import Node, Parser

log = logging.getLogger(__name__)

#: Languages with definition-aware chunking, as :func:`language_for` names them.
SUPPORTED_LANGUAGES: tuple[str, ...] = ("python", "javascript", "typescript", "tsx", "go", "rust", "java")

#: Lower-cased file extension -> language.
EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
}

#: Definitions smaller than this fraction of the budget are grouped with their
#: neighbours; bigger ones are a chunk of their own.
TINY_FRACTION = 0.25

# Containers nested deeper than this are not split further (guards recursion).
_MAX_DEPTH = 40

# language -> (module, function returning the grammar's language pointer)
_GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
}

_PARSERS: dict[str, Parser | None] = {}
_PARSER_LOCK = threading.Lock()


def language_for(path: str) -> str | None:
    """Return the language of ``path`` by its extension, or ``None`` if unsupported.

    Returns:
        One of :data:`SUPPORTED_LANGUAGES` (``"tsx"`` for ``.tsx``, which needs
        its own grammar), or ``None``.
    """
    name = path.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    dot = name.rfind(".")
    if dot <= 0:
        return None
    return EXTENSIONS.get(name[dot:].lower())


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
    try:
        import tree_sitter

        module_name, function = _GRAMMARS[language]
        grammar = getattr(importlib.import_module(module_name), function)()
        parser = tree_sitter.Parser(tree_sitter.Language(grammar))
    except Exception as exc:  # ImportError, or a grammar built for another tree-sitter ABI
        log.warning(
            "codesearch: no tree-sitter grammar for %s (%s); its files get line-window chunks. "
            "Install it with `pip install tree-sitter %s`.",
            language,
            exc,
            _GRAMMARS.get(language, ("?",))[0].replace("_", "-"),
        )
    _PARSERS[language] = parser
    return parser


def chunk_definitions(path: str, text: str, params: ChunkParams = ChunkParams()) -> list[Chunk]:
    """Cut one file's text into chunks that follow its definitions.

    Args:
        path: the file's path (its extension picks the language).
        text: the file's text, any line endings.
        params: the chunk budget; also the line-window fallback's sizes.

    Returns:
        Chunks sorted by start line, covering every non-blank line, each with the
        qualified names of the definitions it holds. For an unsupported language
        or a missing grammar, exactly :func:`~codesearch.chunking.chunk_text`.
    """
    language = language_for(path)
    if language is None:
        return chunk_text(path, text, params)
    try:
        chunks = _chunk_definitions(path, text, params, language)
    except Exception:  # never fail a whole index over one file
        log.warning("codesearch: definition chunking failed for %s; using line windows", path, exc_info=True)
        return chunk_text(path, text, params)
    return chunk_text(path, text, params) if chunks is None else chunks


def _chunk_definitions(path: str, text: str, params: ChunkParams, language: str) -> list[Chunk] | None:
    """The work of :func:`chunk_definitions`; ``None`` when the grammar is missing. May raise."""
    parser = _parser(language)
    if parser is None:
        return None
    lines = split_lines(text)
    if not lines:
        return []
    source = "\n".join(lines).encode("utf-8", "replace")
    with _PARSER_LOCK:  # a Parser is not safe to share between threads mid-parse
        tree = parser.parse(source)
    cutter = _Cutter(lines, params, _LANGS[language])
    try:
        pieces = cutter.cut(tree.root_node)
    except RecursionError:
        return None
    return [
        Chunk(path, start + 1, end + 1, "\n".join(lines[start : end + 1]), symbols) for start, end, symbols in pieces
    ]


# --------------------------------------------------------------------------- languages


class _Def(NamedTuple):
    """A recognised definition node.

    Attributes:
        symbols: its qualified name(s) (several for ``let a = () => 1, b = ...``).
        body: the node holding its members, for containers that may be split.
        prefix: the qualifier its members get (``"Session"``, Rust ``"Foo"``).
    """

    symbols: tuple[str, ...]
    body: Node | None = None
    prefix: str = ""


_Classify = Callable[["Node", str], "_Def | None"]


@dataclass(frozen=True)
class _Lang:
    """How to read one grammar.

    Attributes:
        classify: ``(node, prefix) -> _Def | None`` for a child of a module or body.
        attach: node types that stick to the definition right below them
            (comments, decorators, attributes).
        transparent: node types whose children are read as if they were at this
            level (error recovery nodes, Java's enum body declarations).
        sep: the qualifier separator of member names.
    """

    classify: _Classify
    attach: frozenset[str]
    transparent: frozenset[str] = frozenset({"ERROR"})
    sep: str = "."


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def _name(node: Node, field_name: str = "name") -> str:
    return _text(node.child_by_field_name(field_name)).strip()


def _qual(prefix: str, name: str, sep: str = ".") -> str:
    return f"{prefix}{sep}{name}" if prefix else name


def _py_classify(node: Node, prefix: str) -> _Def | None:
    if node.type == "decorated_definition":
        inner = node.child_by_field_name("definition")
        if inner is None:
            return None
        node = inner
    if node.type == "function_definition":
        name = _name(node)
        return _Def((_qual(prefix, name),)) if name else None
    if node.type == "class_definition":
        name = _name(node)
        if not name:
            return None
        qual = _qual(prefix, name)
        return _Def((qual,), node.child_by_field_name("body"), qual)
    return None


_JS_FUNCTIONS = frozenset(
    {
        "function_declaration",
        "generator_function_declaration",
        "function_signature",
        "method_definition",
        "method_signature",
        "abstract_method_signature",
        "type_alias_declaration",
        "enum_declaration",
    }
)
_JS_CLASSES = frozenset({"class_declaration", "abstract_class_declaration", "class", "interface_declaration"})
_JS_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function", "class"})


def _js_classify(node: Node, prefix: str) -> _Def | None:
    kind = node.type
    if kind in ("export_statement", "ambient_declaration"):
        inner = node.child_by_field_name("declaration")
        candidates = [inner] if inner is not None else node.named_children
        for child in candidates:
            found = _js_classify(child, prefix)
            if found is not None:
                return found
        if kind == "export_statement" and node.child_by_field_name("value") is not None:
            value = node.child_by_field_name("value")
            if value is not None and value.type in _JS_FUNCTION_VALUES:
                return _Def((_qual(prefix, "default"),))
        return None
    if kind in _JS_FUNCTIONS:
        name = _name(node) or "default"
        return _Def((_qual(prefix, name),))
    if kind in _JS_CLASSES:
        name = _name(node) or "default"
        qual = _qual(prefix, name)
        return _Def((qual,), node.child_by_field_name("body"), qual)
    if kind in ("internal_module", "module"):
        name = _name(node).strip("'\"`")
        if not name:
            return None
        qual = _qual(prefix, name)
        return _Def((qual,), node.child_by_field_name("body"), qual)
    if kind in ("lexical_declaration", "variable_declaration"):
        names = tuple(
            _qual(prefix, _name(d))
            for d in node.named_children
            if d.type == "variable_declarator"
            and (value := d.child_by_field_name("value")) is not None
            and value.type in _JS_FUNCTION_VALUES
            and _name(d)
        )
        return _Def(names) if names else None
    if kind in ("public_field_definition", "field_definition"):
        value = node.child_by_field_name("value")
        name = _name(node) or _name(node, "property")
        if value is not None and value.type in _JS_FUNCTION_VALUES and name:
            return _Def((_qual(prefix, name),))
        return None
    if kind == "expression_statement":
        for child in node.named_children:
            if child.type in ("internal_module", "module"):
                return _js_classify(child, prefix)
            if child.type == "assignment_expression":
                right = child.child_by_field_name("right")
                left = _text(child.child_by_field_name("left")).strip()
                if right is not None and right.type in _JS_FUNCTION_VALUES and left and len(left) <= 120:
                    return _Def((_qual(prefix, left),))
        return None
    return None


def _go_receiver(node: Node) -> str:
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return ""
    for param in receiver.named_children:
        if param.type != "parameter_declaration":
            continue
        kind = param.child_by_field_name("type")
        while kind is not None and kind.type in ("pointer_type", "generic_type", "parenthesized_type"):
            if kind.type == "generic_type":
                kind = kind.child_by_field_name("type")
            else:
                kind = kind.named_children[0] if kind.named_children else None
        return _text(kind).strip()
    return ""


def _go_classify(node: Node, prefix: str) -> _Def | None:
    kind = node.type
    if kind == "function_declaration":
        name = _name(node)
        return _Def((name,)) if name else None
    if kind == "method_declaration":
        name = _name(node)
        if not name:
            return None
        receiver = _go_receiver(node)
        return _Def((_qual(receiver, name),))
    if kind == "type_declaration":
        names = tuple(
            _name(spec) for spec in node.named_children if spec.type in ("type_spec", "type_alias") and _name(spec)
        )
        return _Def(names) if names else None
    return None


def _rust_type(node: Node | None) -> str:
    """A Rust type's text without generic arguments: ``Foo<T>`` -> ``Foo``."""
    return _text(node).split("<", 1)[0].strip()


def _rust_classify(node: Node, prefix: str) -> _Def | None:
    kind = node.type
    if kind in (
        "function_item",
        "function_signature_item",
        "struct_item",
        "enum_item",
        "union_item",
        "type_item",
        "macro_definition",
    ):
        name = _name(node)
        return _Def((_qual(prefix, name, "::"),)) if name else None
    if kind == "impl_item":
        target = _qual(prefix, _rust_type(node.child_by_field_name("type")), "::")
        trait = _rust_type(node.child_by_field_name("trait"))
        symbol = f"impl {trait} for {target}" if trait else f"impl {target}"
        return _Def((symbol,), node.child_by_field_name("body"), target)
    if kind in ("trait_item", "mod_item"):
        body = node.child_by_field_name("body")
        name = _name(node)
        if not name or body is None:
            return None
        qual = _qual(prefix, name, "::")
        return _Def((qual,), body, qual)
    return None


_JAVA_CONTAINERS = frozenset(
    {
        "class_declaration",
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
        "annotation_type_declaration",
    }
)
_JAVA_MEMBERS = frozenset(
    {
        "method_declaration",
        "constructor_declaration",
        "compact_constructor_declaration",
        "annotation_type_element_declaration",
    }
)


def _java_classify(node: Node, prefix: str) -> _Def | None:
    name = _name(node)
    if not name:
        return None
    if node.type in _JAVA_MEMBERS:
        return _Def((_qual(prefix, name),))
    if node.type in _JAVA_CONTAINERS:
        qual = _qual(prefix, name)
        return _Def((qual,), node.child_by_field_name("body"), qual)
    return None


_JS_LANG = _Lang(_js_classify, frozenset({"comment", "decorator"}))
_LANGS: dict[str, _Lang] = {
    "python": _Lang(_py_classify, frozenset({"comment"})),
    "javascript": _JS_LANG,
    "typescript": _JS_LANG,
    "tsx": _JS_LANG,
    "go": _Lang(_go_classify, frozenset({"comment"})),
    "rust": _Lang(_rust_classify, frozenset({"line_comment", "block_comment", "attribute_item"}), sep="::"),
    "java": _Lang(
        _java_classify,
        frozenset({"line_comment", "block_comment"}),
        transparent=frozenset({"ERROR", "enum_body_declarations"}),
    ),
}


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
    container: _Def | None = None
    depth: int = 0
    header: bool = False


@dataclass(slots=True)
class _Group:
    """A chunk being built; ``header`` while it holds only a split class's header."""

    start: int
    end: int
    symbols: list[str] = field(default_factory=list)
    header: bool = False


def _end_row(node: Node) -> int:
    """The last row holding the node's text (a node ending in a newline ends on the row before)."""
    row, column = node.end_point
    start_row = node.start_point[0]
    return row - 1 if column == 0 and row > start_row else row


class _Cutter:
    """Cuts one parsed file; rows are 0-based and equal editor lines minus one."""

    def __init__(self, lines: list[str], params: ChunkParams, lang: _Lang) -> None:
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

    def cut(self, root: Node) -> list[tuple[int, int, tuple[str, ...]]]:
        segments = self.segments(root.named_children, 0, len(self.lines) - 1, "", (), 0)
        return self.group(segments)

    def children(self, nodes: Iterable[Node]) -> Iterable[Node]:
        for node in nodes:
            if node.type in self.lang.transparent:
                yield from self.children(node.named_children)
            else:
                yield node

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
        for node in self.children(nodes):
            start = node.start_point[0]
            end = _end_row(node)
            if node.type in lang.attach and start > last_end and not _inner_doc(node):
                pending.append(node)
                continue
            found = lang.classify(node, prefix)
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
            last_end = max(last_end, end)
            if start > end:
                continue
            container = found if found.body is not None and depth < _MAX_DEPTH else None
            if defs and start <= defs[-1].end:  # shares a row with the previous one: merge
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

    def group(self, segments: list[_Segment]) -> list[tuple[int, int, tuple[str, ...]]]:
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
                    flush()
                else:
                    flush()
                    out.append(_Group(segment.start, segment.end, list(symbols)))
                continue
            if group is not None and fits:
                group.end = segment.end
                group.symbols.extend(symbols)
                group.header = False
            else:
                flush()
                group = _Group(segment.start, segment.end, list(symbols), segment.header)
        flush()
        return [(g.start, g.end, tuple(dict.fromkeys(g.symbols))) for g in out]

    def whole_symbols(self, segment: _Segment) -> tuple[str, ...]:
        """A segment's symbols when it is one chunk: a container adds its members' names."""
        if segment.container is None:
            return segment.symbols
        return segment.symbols + self.member_symbols(segment.container, segment.depth + 1)

    def member_symbols(self, container: _Def, depth: int) -> tuple[str, ...]:
        if container.body is None or depth >= _MAX_DEPTH:
            return ()
        names: list[str] = []
        for node in self.children(container.body.named_children):
            found = self.lang.classify(node, container.prefix)
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
                groups = [_Group(s, e, list(symbols)) for s, e, symbols in self.group(parts)]
                if groups and not any(s in groups[0].symbols for s in segment.symbols):
                    # the header shares its row with the first member (`class A { f() {} ...`)
                    groups[0].symbols[:0] = segment.symbols
                return groups
        return self.windows(segment.start, segment.end, segment.symbols)

    def windows(self, start: int, end: int, symbols: tuple[str, ...]) -> list[_Group]:
        """Line windows over rows ``start..end``, each recording ``symbols``."""
        params = self.params
        body = "\n".join(self.lines[start : end + 1])
        return [
            _Group(start + first - 1, start + last - 1, list(symbols))
            for first, last, _ in chunk_lines(body, params.target_tokens, params.overlap_tokens, params.chars_per_token)
        ]


def _inner_doc(node: Node) -> bool:
    """Rust ``//!`` and ``/*!`` comments document the enclosing item, not the next one."""
    text = node.text or b""
    return text.startswith((b"//!", b"/*!"))


__all__ = [
    "EXTENSIONS",
    "SUPPORTED_LANGUAGES",
    "TINY_FRACTION",
    "chunk_definitions",
    "grammar_available",
    "language_for",
]
