"""Doc comments and the code they document, read from one file with the library's own grammars.

:func:`extract_docs` parses a file with the tree-sitter grammar
:mod:`codesearch.chunking.definitions` loads for it and walks its definitions the way
the chunker does (the language table of :mod:`codesearch.chunking.languages`: the same
definitions, containers, wrappers, attached comments and transparent nodes).
For every definition it finds the doc the language's style gives it:

* the contiguous comment block right above it (``///``, ``/** */``, ``#``,
  ``--``, ``-- |``, ``---``, Go's ``//``, comments above a bash function ...),
  attributes and decorators in between staying with the code;
* Python's docstring (the first statement of the body);
* Elixir's ``@doc`` before a ``def`` and ``@moduledoc`` inside a ``defmodule``;

and the definition's code **without** that doc (its rows, the doc's bytes cut
out, blank lines dropped, dedented, capped at :data:`MAX_CODE_CHARS` from the
top so the signature stays). A file's own doc -- Python's module docstring,
Go's package comment, Rust's and Zig's ``//!``, Haskell's module header, any
leading comment that is not a licence and not the first definition's doc --
pairs with the file's code, the doc and licence headers removed.

Doc text is returned raw (markers stripped, not yet summarised): cleaning and
filtering are :mod:`codesearch.training.docs`' job.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from codesearch.chunking.definitions import parse_tree
from codesearch.chunking.languages import READ_INSIDE, Definition, Language, language_for
from codesearch.training.docs import is_directive, is_licence, strip_comment, strip_string, without_header_fields

if TYPE_CHECKING:  # pragma: no cover
    from tree_sitter import Node

Kind = Literal["function", "class", "module"]
KINDS: tuple[Kind, ...] = ("function", "class", "module")

MAX_CODE_CHARS = 2400
"""Characters of code kept per pair, from the top (the model reads the first 128-256 tokens)."""

MIN_CODE_CHARS = 12
"""A definition whose code (doc removed) is shorter than this pairs with nothing."""

_MAX_DEPTH = 40
_COMMENT_LINE = re.compile(r"^\s*(?://|/\*|\*|#(?![\[!])|--|\{-)")

# Node types (the definition's own, under any wrapper) whose definitions are types: their docs are class docs.
_TYPE_NODES = frozenset({
    "class_definition", "class_declaration", "abstract_class_declaration", "class", "interface_declaration",
    "enum_declaration", "record_declaration", "annotation_type_declaration", "struct_declaration",
    "type_alias_declaration", "struct_item", "enum_item", "union_item", "trait_item", "type_item",
    "type_declaration", "data_type", "newtype", "type_synonym", "type_family", "data_family",
    "struct_specifier", "union_specifier", "enum_specifier", "class_specifier", "type_definition",
    "object_declaration", "companion_object", "type_alias", "protocol_declaration", "typealias_declaration",
    "object_definition", "trait_definition", "enum_definition", "trait_declaration",
    "module", "singleton_class", "alias_declaration", "concept_definition", "delegate_declaration",
})
# Containers that are namespaces rather than types: their docs are module docs.
_MODULE_NODES = frozenset({"mod_item", "namespace_definition", "namespace_declaration", "internal_module"})
_ELIXIR_MODULES = frozenset({"defmodule", "defprotocol", "defimpl"})
_JS_EXPORTS = frozenset({"export_statement", "ambient_declaration"})


@dataclass(frozen=True, slots=True)
class DocPair:
    """A doc (markers stripped, not yet summarised) and the code it documents.

    Attributes:
        kind: ``function``, ``class`` or ``module`` (a file's or a namespace's doc).
        symbol: the definition's qualified name; for a file's doc, its path.
        doc: the doc's text.
        code: the code without the doc, dedented, at most :data:`MAX_CODE_CHARS`.
        line: the 1-based line where the code starts.
    """

    kind: Kind
    symbol: str
    doc: str
    code: str
    line: int


def is_comment(node: Node) -> bool:
    """Whether a node is a comment of any grammar (Haskell's ``haddock`` too)."""
    return "comment" in node.type or node.type == "haddock"


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _end_row(node: Node) -> int:
    row, column = node.end_point
    return row - 1 if column == 0 and row > node.start_point[0] else row


def _inner_doc(node: Node) -> bool:
    return (node.text or b"").startswith((b"//!", b"/*!"))


def _core(node: Node, lang: Language) -> Node:
    """The definition node under its wrappers (decorators, ``export``, ``template <...>``)."""
    for _ in range(8):
        if node.type not in lang.wrappers and node.type not in _JS_EXPORTS:
            break
        inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
        if inner is None:
            inner = next((c for c in node.named_children if not is_comment(c) and c.type != "decorator"), None)
        if inner is None:
            break
        node = inner
    return node


def _elixir_target(node: Node) -> str:
    return _text(node.child_by_field_name("target")) if node.type == "call" else ""


def _kind(node: Node, found: Definition, lang: Language) -> Kind:
    core = _core(node, lang)
    if lang.name == "elixir":
        return "module" if _elixir_target(core) in _ELIXIR_MODULES else "function"
    if core.type in _MODULE_NODES or (core.type == "module" and lang.name in ("javascript", "typescript", "tsx")):
        return "module"
    if core.type in _TYPE_NODES:
        return "class"
    if core.type == "variable_declaration" and lang.name == "zig":
        return "class"
    if core.type in ("lexical_declaration", "variable_declaration") and any(
        (v := d.child_by_field_name("value")) is not None and v.type == "class" for d in core.named_children
    ):
        return "class"
    return "class" if found.body is not None else "function"


def _python_docstring(node: Node) -> Node | None:
    """The docstring statement of a Python module, class or function node, if it has one."""
    body = node if node.type == "module" else node.child_by_field_name("body")
    if body is None:
        return None
    for child in body.named_children:
        if child.type == "comment":
            continue
        if child.type == "expression_statement" and child.named_child_count == 1 and child.named_children[0].type in (
                "string", "concatenated_string"):
            return child
        return None
    return None


def _elixir_attribute(node: Node) -> tuple[str, Node | None]:
    """``("doc" | "moduledoc" | "typedoc" | other name, the value node)`` of an ``@name value`` node."""
    if node.type != "unary_operator" or not _text(node).startswith("@"):
        return "", None
    operand = node.named_children[0] if node.named_children else None
    if operand is None or operand.type != "call":
        return _text(operand), None
    name = _text(operand.child_by_field_name("target"))
    args = next((c for c in operand.named_children if c.type == "arguments"), None)
    value = args.named_children[0] if args is not None and args.named_children else None
    return name, value


def _elixir_doc_text(value: Node | None) -> str | None:
    """A ``@doc`` value's text; ``None`` for ``@doc false`` and values that are not strings."""
    if value is None or value.type not in ("string", "sigil"):
        return None
    return strip_string(_text(value))


_JS_LANGUAGES = frozenset({"javascript", "typescript", "tsx"})
_JS_FUNCTIONS = frozenset({"function_declaration", "function_expression", "function", "arrow_function",
                           "generator_function_declaration", "generator_function"})


def _js_function_body(node: Node) -> Node | None:
    """The block of the function a JavaScript statement declares or calls at once, if any.

    ``function f() {...}``, ``const f = function () {...}``, ``(function () {...}.call(this))``,
    ``(() => {...})()``; a function whose body is an expression has none.
    """
    for _ in range(12):
        if node.type in _JS_FUNCTIONS:
            body = node.child_by_field_name("body")
            return body if body is not None and body.type == "statement_block" else None
        if node.type in ("lexical_declaration", "variable_declaration"):
            declarators = [d for d in node.named_children if d.type == "variable_declarator"]
            value = declarators[0].child_by_field_name("value") if len(declarators) == 1 else None
            if value is None:
                return None
            node = value
        elif node.type == "call_expression":
            node = node.child_by_field_name("function") or node
            if node.type == "call_expression":
                return None
        elif node.type == "member_expression":
            node = node.child_by_field_name("object") or node
        elif node.type in ("expression_statement", "parenthesized_expression", "unary_expression") and node.named_children:
            node = node.named_children[-1] if node.type == "unary_expression" else node.named_children[0]
        else:
            return None
    return None


def _bash_desc(node: Node) -> tuple[Node, Node] | None:
    """``(statement, string)`` of a bash function whose body opens with ``declare desc="..."`` (or ``local``)."""
    body = node.child_by_field_name("body")
    first = next((c for c in body.named_children if c.type != "comment"), None) if body is not None else None
    if first is None or first.type != "declaration_command" or not _text(first).startswith(("declare desc=", "local desc=")):
        return None
    assignment = next((c for c in first.named_children if c.type == "variable_assignment"), None)
    value = assignment.child_by_field_name("value") if assignment is not None else None
    if value is None or value.type not in ("string", "raw_string"):
        return None
    return first, value


@dataclass(slots=True)
class _Record:
    node: Node
    found: Definition
    start_row: int
    end_row: int
    doc: str
    cut: list[tuple[int, int]]
    kind: Kind


class _FileWalker:
    """Finds the doc pairs of one parsed file."""

    def __init__(self, lang: Language, source: bytes) -> None:
        self.lang = lang
        self.source = source
        self.line_starts = [0]
        for i, byte in enumerate(source):
            if byte == 0x0A:
                self.line_starts.append(i + 1)
        self.records: list[_Record] = []

    # -- rows and code

    def row_span(self, start_row: int, end_row: int) -> tuple[int, int]:
        start = self.line_starts[start_row]
        end = self.line_starts[end_row + 1] - 1 if end_row + 1 < len(self.line_starts) else len(self.source)
        return start, end

    def code(self, start_row: int, end_row: int, cut: Iterable[tuple[int, int]]) -> str:
        """Rows ``start_row..end_row`` with the byte spans in ``cut`` removed, blank lines dropped, dedented, capped."""
        lo, hi = self.row_span(start_row, end_row)
        data = bytearray(self.source[lo:hi])
        merged: list[list[int]] = []
        for start, end in sorted(self.whole_lines(*span) for span in cut):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        for first, last in reversed(merged):
            start, end = max(first, lo), min(last, hi)
            if start < end:
                del data[start - lo : end - lo]
        lines = [line for line in data.decode("utf-8", "replace").split("\n") if line.strip()]
        while len(lines) > 1 and _COMMENT_LINE.match(lines[-1]):  # a grammar may end a node past the next one's doc
            lines.pop()
        text = textwrap.dedent("\n".join(lines))
        if len(text) > MAX_CODE_CHARS:
            cut_at = text.rfind("\n", 0, MAX_CODE_CHARS)
            text = text[: cut_at if cut_at > 0 else MAX_CODE_CHARS]
        return text

    def whole_lines(self, start: int, end: int) -> tuple[int, int]:
        """A cut span widened to its whole lines where nothing but blanks shares them (no indent left behind)."""
        line_start = self.source.rfind(b"\n", 0, start) + 1
        if not self.source[line_start:start].strip():
            start = line_start
        line_end = self.source.find(b"\n", end)
        line_end = len(self.source) if line_end < 0 else line_end
        if not self.source[end:line_end].strip():
            end = min(line_end + 1, len(self.source))
        return start, end

    # -- the tree

    def children(self, nodes: Iterable[Node], prefix: str) -> Iterator[tuple[Node, Definition | None]]:
        """As the chunker reads a level: transparent and misread nodes give their children."""
        for node in nodes:
            if node.type in self.lang.transparent:
                yield from self.children(node.named_children, prefix)
                continue
            found = self.lang.read(node, prefix)
            if found is READ_INSIDE:
                body = node.child_by_field_name("body")
                for child in node.named_children:
                    inside = body is not None and child.id == body.id
                    yield from self.children(child.named_children if inside else [child], prefix)
            else:
                yield node, found

    def level(self, nodes: Iterable[Node], prefix: str, depth: int, owner: _Record | None) -> None:
        """Record the definitions of one level with their docs, and descend into containers."""
        lang = self.lang
        pending: list[Node] = []
        last_end = -1
        elixir_doc: str | None = None
        previous: _Record | None = None
        for node, found in self.children(nodes, prefix):
            start, end = node.start_point[0], _end_row(node)
            if node.type in lang.attach and start > last_end and not _inner_doc(node):
                pending.append(node)
                continue
            if lang.name == "elixir" and node.type == "unary_operator":
                name, value = _elixir_attribute(node)
                if name == "doc":
                    elixir_doc = _elixir_doc_text(value) or ""
                elif name == "moduledoc" and owner is not None and owner.kind == "module":
                    text = _elixir_doc_text(value)
                    if text:
                        owner.doc, owner.cut = text, [(node.start_byte, node.end_byte)]
                pending.clear()
                last_end = max(last_end, end)
                continue
            if found is None or not found.symbols:
                pending.clear()
                last_end = max(last_end, end)
                elixir_doc = None
                inner = _js_function_body(node) if lang.name in _JS_LANGUAGES else None
                if inner is not None and depth < _MAX_DEPTH:  # `;(function() { ... }.call(this))`: lodash's IIFE
                    self.level(inner.named_children, prefix, depth + 1, owner)
                continue
            block: list[Node] = []
            for above in reversed(pending):  # the contiguous block right above the definition
                if _end_row(above) >= start - 1 and above.start_point[0] <= start:
                    block.insert(0, above)
                    start = min(start, above.start_point[0])
                else:
                    break
            pending.clear()
            same_name = (previous is not None and last_end <= previous.end_row and previous.found.symbols == found.symbols
                         and found.body is None and previous.found.body is None)
            last_end = max(last_end, end)
            if same_name and previous is not None:  # a Haskell signature and its equations, Elixir clauses
                previous.end_row = max(previous.end_row, end)
                continue
            doc_nodes = [n for n in block if is_comment(n) and not is_licence(_text(n))
                         and not is_directive(strip_comment(_text(n)))]
            doc = strip_comment("\n".join(_text(n).rstrip("\n") for n in doc_nodes)) if doc_nodes else ""
            cut = [(n.start_byte, n.end_byte) for n in doc_nodes]
            if lang.name == "python":  # the docstring is the doc; comments above stay with the code
                docstring = _python_docstring(_core(node, lang))
                doc, cut = ("", []) if docstring is None else (
                    strip_string(_text(docstring)), [(docstring.start_byte, docstring.end_byte)])
            elif lang.name == "bash" and (declared := _bash_desc(node)) is not None:  # dokku's `declare desc="..."`
                doc, cut = strip_string(_text(declared[1])), [(declared[0].start_byte, declared[0].end_byte)]
            elif lang.name == "elixir" and elixir_doc is not None:  # @doc wins; `@doc false` documents nothing
                doc, cut, start = elixir_doc, [], node.start_point[0]
            elixir_doc = None
            record = _Record(node, found, start, end, doc, cut, _kind(node, found, lang))
            self.records.append(record)
            previous = record
            if found.body is None and lang.name in _JS_LANGUAGES and depth < _MAX_DEPTH:
                inner = _js_function_body(_core(node, lang))
                if inner is not None:  # functions declared inside a function (lodash's runInContext)
                    self.level(inner.named_children, prefix, depth + 1, record)
            if found.body is not None and depth < _MAX_DEPTH:
                # Comments between a container's head and its body node (Ruby's) document its first member.
                parent = found.body.parent
                head = [c for c in parent.named_children if is_comment(c) and c.end_byte <= found.body.start_byte
                        and c.start_byte > node.start_byte] if parent is not None else []
                self.level([*head, *found.body.named_children], found.prefix, depth + 1, record)

    def first_row(self, start_row: int, end_row: int, cut: Iterable[tuple[int, int]]) -> int:
        """The first row of ``start_row..end_row`` that keeps code once ``cut`` is removed."""
        spans = [self.whole_lines(*span) for span in cut]
        for row in range(start_row, end_row + 1):
            lo, hi = self.row_span(row, row)
            if self.source[lo:hi].strip() and not any(a <= lo and hi <= b for a, b in spans):
                return row
        return start_row

    def pairs(self) -> list[DocPair]:
        out = []
        for record in self.records:
            if not record.doc.strip():
                continue
            code = self.code(record.start_row, record.end_row, record.cut)
            if len(code.strip()) < MIN_CODE_CHARS:
                continue
            line = self.first_row(record.start_row, record.end_row, record.cut) + 1
            out.append(DocPair(record.kind, record.found.symbols[0], record.doc, code, line))
        return out

    # -- the file's own doc

    def module_pair(self, root: Node, path: str) -> DocPair | None:
        """The file's doc paired with the file's code (doc and licence headers removed), if it has one."""
        lang = self.lang
        cut: list[tuple[int, int]] = []
        doc = ""
        if lang.name == "python":
            docstring = _python_docstring(root)
            if docstring is not None:
                doc = strip_string(_text(docstring))
                cut.append((docstring.start_byte, docstring.end_byte))
        elif lang.name == "elixir":
            tops = [r for r in self.records if r.kind == "module" and r.doc and r.node.parent is not None
                    and r.node.parent.id == root.id]
            if len(tops) == 1:  # one module in the file: its @moduledoc is the file's doc
                self.records.remove(tops[0])
                doc, cut = tops[0].doc, tops[0].cut
        else:
            doc, cut = self.leading_doc(root)
        if not doc:
            return None
        for block in self.leading_blocks(root):  # licence headers go too
            if is_licence("\n".join(_text(n) for n in block)):
                cut.extend((n.start_byte, n.end_byte) for n in block)
        last_row = max(len(self.line_starts) - 1, 0)
        code = self.code(0, last_row, cut)
        if len(code.strip()) < MIN_CODE_CHARS:
            return None
        return DocPair("module", path, doc, code, self.first_row(0, last_row, cut) + 1)

    def leading_blocks(self, root: Node) -> list[list[Node]]:
        """The comments before a file's first statement, in blocks of adjacent lines."""
        blocks: list[list[Node]] = []
        for node in root.named_children:
            if not is_comment(node):
                break
            if blocks and _end_row(blocks[-1][-1]) >= node.start_point[0] - 1:
                blocks[-1].append(node)
            else:
                blocks.append([node])
        return blocks

    def leading_doc(self, root: Node) -> tuple[str, list[tuple[int, int]]]:
        """The first comment block before the file's code that is neither a licence, a directive nor a definition's doc."""
        for nodes_of_block in self.leading_blocks(root):
            block = [n for n in nodes_of_block if not _text(n).startswith("#!")]
            text = "\n".join(_text(n).rstrip("\n") for n in block)
            if not block:
                continue
            stripped = strip_comment(text)
            if not stripped or is_directive(stripped) or is_licence(without_header_fields(stripped)):
                continue
            starts = {n.start_byte for n in block}
            if any(start in starts for r in self.records for start, _ in r.cut):
                return "", []  # the first definition's doc, not the file's
            return stripped, [(n.start_byte, n.end_byte) for n in block]
        return "", []


def extract_docs(path: str, text: str, lang: Language | None = None) -> list[DocPair]:
    """The doc pairs of one file: its definitions' docs with their code, then the file's own doc.

    Args:
        path: the file's path (picks the language unless ``lang`` is given).
        text: the file's text.
        lang: the language, when known.

    Returns:
        Pairs in file order, the file's doc (``kind="module"``, ``symbol=path``)
        last; an empty list for a file of no known language or whose grammar
        does not load.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    first_line = text.split("\n", 1)[0] if text.startswith("#!") else None
    lang = lang or language_for(path, first_line, text)
    if lang is None:
        return []
    source = text.encode("utf-8", "replace")
    tree = parse_tree(lang.name, source)
    if tree is None:
        return []
    walker = _FileWalker(lang, source)
    try:
        walker.level(tree.root_node.named_children, "", 0, None)
        module = walker.module_pair(tree.root_node, path)
    except RecursionError:
        return []
    pairs = walker.pairs()
    if module is not None:
        pairs.append(module)
    return pairs


__all__ = ["KINDS", "MAX_CODE_CHARS", "MIN_CODE_CHARS", "DocPair", "Kind", "extract_docs", "is_comment"]
