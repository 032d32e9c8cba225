"""JSON with comments, edited in place: set or remove one member and keep every other byte as it was.

Agents keep their MCP registrations in JSON files that people edit by hand,
several of them JSONC (VS Code, Zed, Gemini CLI, opencode: ``//`` and ``/* */``
comments, trailing commas). Loading such a file and dumping it again would lose
the comments, the order and the layout, so :func:`set_member` and
:func:`remove_member` change only the text of the member they touch, indented
like its neighbours, and check that the result parses to exactly the value
expected before returning it.

Written here rather than taken from a package: the Python ones that edit JSONC
in place either run Microsoft's ``jsonc-parser`` in a Node.js process
(``jsonc-edit``) or install themselves as the module ``json5``, the name of
another widely used package (``json-five``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_LITERAL = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null")
_SPACE = " \t\r\n\ufeff"


class JsoncError(ValueError):
    """Text that is not JSON with comments; the message names the line and column."""


@dataclass
class _Node:
    """A value in the text: ``start``/``end`` offsets (end exclusive); an object's members, an array's items."""

    kind: str  # "object", "array" or "scalar"
    start: int
    end: int = 0
    value: Any = None
    members: list[_Member] = field(default_factory=list)
    items: list[_Node] = field(default_factory=list)


@dataclass
class _Member:
    key: str
    key_start: int
    value: _Node
    comma: int | None = None  # the offset of the comma after the value, if any


def _where(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str, offset: int | None = None) -> JsoncError:
        return JsoncError(f"{_where(self.text, self.pos if offset is None else offset)}: {what}")

    def skip(self) -> None:
        """Move past whitespace and comments."""
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in _SPACE:
                self.pos += 1
            elif text.startswith("//", self.pos):
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", self.pos):
                end = text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.fail("a /* comment is never closed")
                self.pos = end + 2
            else:
                return

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> int:
        if self.peek() != char:
            found = repr(self.text[self.pos]) if self.pos < len(self.text) else "the end of the file"
            raise self.fail(f"expected {char!r}, found {found}")
        self.pos += 1
        return self.pos - 1

    def string(self) -> tuple[str, int, int]:
        start = self.pos
        index = start + 1
        text = self.text
        while True:
            if index >= len(text) or text[index] == "\n":
                raise self.fail("a string is never closed", start)
            if text[index] == "\\":
                index += 2
            elif text[index] == '"':
                break
            else:
                index += 1
        self.pos = index + 1
        try:
            return json.loads(text[start:self.pos]), start, self.pos
        except ValueError:
            raise self.fail("a string holds a bad escape", start) from None

    def value(self) -> _Node:
        char = self.peek()
        start = self.pos
        if char == "{":
            return self.object()
        if char == "[":
            return self.array()
        if char == '"':
            text, _, end = self.string()
            return _Node("scalar", start, end, text)
        found = _LITERAL.match(self.text, self.pos)
        if found is None:
            raise self.fail("expected a value" if char else "expected a value, found the end of the file")
        self.pos = found.end()
        return _Node("scalar", start, self.pos, json.loads(found.group()))

    def object(self) -> _Node:
        node = _Node("object", self.expect("{"))
        while self.peek() != "}":
            if self.peek() != '"':
                raise self.fail("expected a quoted key or '}'")
            key, key_start, _ = self.string()
            self.expect(":")
            member = _Member(key, key_start, self.value())
            node.members.append(member)
            if self.peek() == ",":
                member.comma = self.pos
                self.pos += 1
            elif self.peek() != "}":
                raise self.fail("expected ',' or '}'")
        node.end = self.expect("}") + 1
        node.value = {m.key: m.value.value for m in node.members}
        return node

    def array(self) -> _Node:
        node = _Node("array", self.expect("["))
        while self.peek() != "]":
            node.items.append(self.value())
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                raise self.fail("expected ',' or ']'")
        node.end = self.expect("]") + 1
        node.value = [item.value for item in node.items]
        return node

    def document(self) -> _Node | None:
        """The top-level value, or ``None`` for a text of nothing but space and comments."""
        if not self.peek():
            return None
        root = self.value()
        if self.peek():
            raise self.fail("unexpected text after the top-level value")
        return root


def _parse(text: str) -> _Node | None:
    return _Parser(text).document()


def loads(text: str) -> Any:
    """The value of a JSON-with-comments text (``None`` for an empty one).

    Raises:
        JsoncError: the text is not JSON with comments (the message says where).
    """
    root = _parse(text)
    return None if root is None else root.value


def _line_start(text: str, offset: int) -> int:
    return text.rfind("\n", 0, offset) + 1


def _indent_of(text: str, offset: int) -> str:
    """The whitespace that starts the line holding ``offset``."""
    start = _line_start(text, offset)
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def _first_on_line(text: str, offset: int) -> bool:
    return not text[_line_start(text, offset):offset].strip()


def _unit(text: str, root: _Node) -> str:
    """The file's indentation step: its first indented member's, else two spaces."""
    for member in root.members:
        if _first_on_line(text, member.key_start):
            indent = _indent_of(text, member.key_start)
            if indent:
                return indent
    return "  "


def _dump(value: Any, indent: str, unit: str, one_line: bool) -> str:
    """``value`` as JSON text whose later lines are indented by ``indent``: objects one member a line, arrays of
    scalars on one line (everything on one line when ``one_line``)."""
    if one_line or not isinstance(value, (dict, list)) or not value:
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        if not any(isinstance(item, (dict, list)) for item in value):
            return json.dumps(value, ensure_ascii=False)
        inner = indent + unit
        return "[\n" + ",\n".join(inner + _dump(item, inner, unit, False) for item in value) + f"\n{indent}]"
    inner = indent + unit
    members = (f"{inner}{json.dumps(key, ensure_ascii=False)}: {_dump(item, inner, unit, False)}"
               for key, item in value.items())
    return "{\n" + ",\n".join(members) + f"\n{indent}}}"


def _nest(path: Sequence[str], value: Any) -> Any:
    for key in reversed(path):
        value = {key: value}
    return value


def _find(node: _Node, key: str) -> _Member | None:
    found = [m for m in node.members if m.key == key]
    return found[-1] if found else None  # the last of repeated keys is the one a JSON reader keeps


def _expected(before: Any, path: Sequence[str], value: Any, remove: bool) -> Any:
    """``before`` with the member at ``path`` set to ``value`` (or removed): what the edited text must parse to."""
    result = json.loads(json.dumps(before))
    node = result
    for key in path[:-1]:
        node = node.setdefault(key, {})
    if remove:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return result


def _checked(new: str, want: Any) -> str:
    if loads(new) != want:  # pragma: no cover - a bug here must never reach a user's file
        raise JsoncError("the edit did not give the value expected; the file was left as it was")
    return new


def set_member(text: str, path: Sequence[str], value: Any) -> str:
    """``text`` with the member at ``path`` (object keys from the top) set to ``value``; the rest unchanged.

    Objects missing along the path are created. A new member goes after the
    last one of its object, on its own line (or inline in a one-line object),
    indented like its siblings; an existing member's value is replaced where
    it stands.

    Raises:
        JsoncError: ``text`` is not JSON with comments, or a value along the
            path (the top level included) is not an object.
    """
    if not path:
        raise ValueError("path names no member")
    root = _parse(text)
    if root is None:
        return (text.rstrip() + "\n" if text.strip() else "") + json.dumps(_nest(path, value), indent=2) + "\n"
    if root.kind != "object":
        raise JsoncError("the top level is not an object")
    unit = _unit(text, root)
    node = root
    for depth, key in enumerate(path):
        member = _find(node, key)
        rest = _nest(path[depth + 1:], value)
        if member is None:
            new = _insert(text, node, key, rest, unit, "\n" not in text[root.start:root.end])
            return _checked(new, _expected(root.value, path, value, remove=False))
        if depth == len(path) - 1:
            indent = _indent_of(text, member.key_start)
            one_line = not _first_on_line(text, member.key_start) and "\n" not in text[node.start:node.end]
            dumped = _dump(value, indent, unit, one_line)
            new = text[:member.value.start] + dumped + text[member.value.end:]
            return _checked(new, _expected(root.value, path, value, remove=False))
        if member.value.kind != "object":
            raise JsoncError(f"{_where(text, member.value.start)}: {'.'.join(path[:depth + 1])} is not an object")
        node = member.value
    raise AssertionError("unreachable")  # pragma: no cover


def _insert(text: str, node: _Node, key: str, value: Any, unit: str, file_one_line: bool) -> str:
    """``text`` with ``"key": value`` added as the last member of the object ``node`` (an empty object is opened
    onto lines unless the whole file is one line)."""
    outer = _indent_of(text, node.start)
    one_line = "\n" not in text[node.start:node.end]
    if not node.members:
        one_line = file_one_line
        inner = text[node.start + 1:node.end - 1]
        if one_line:
            member = f"{json.dumps(key)}: {_dump(value, '', unit, True)}"
            return text[:node.start + 1] + (member if not inner.strip() else inner + member) + text[node.end - 1:]
        indent = outer + unit
        member = f"{json.dumps(key)}: {_dump(value, indent, unit, False)}"
        if not inner.strip():
            return text[:node.start + 1] + f"\n{indent}{member}\n{outer}" + text[node.end - 1:]
        return text[:node.start + 1] + f"\n{indent}{member}" + text[node.start + 1:]
    last = node.members[-1]
    if one_line:
        member = f"{json.dumps(key)}: {_dump(value, '', unit, True)}"
        if last.comma is not None:
            return text[:last.comma + 1] + f" {member}," + text[last.comma + 1:]
        return text[:last.value.end] + f", {member}" + text[last.value.end:]
    indent = _indent_of(text, last.key_start) if _first_on_line(text, last.key_start) else outer + unit
    member = f"{json.dumps(key)}: {_dump(value, indent, unit, False)}"
    after = last.value.end if last.comma is None else last.comma + 1
    line_end = text.find("\n", after)
    line_end = len(text) if line_end < 0 else line_end
    tail = text[after:line_end].strip()
    # A comment that ends the last member's line stays on that line, after its comma.
    at = line_end if (not tail or tail.startswith("//") or (tail.startswith("/*") and tail.endswith("*/"))) \
        and line_end < node.end else after
    if last.comma is None:
        return text[:last.value.end] + "," + text[last.value.end:at] + f"\n{indent}{member}" + text[at:]
    return text[:at] + f"\n{indent}{member}," + text[at:]


def remove_member(text: str, path: Sequence[str]) -> str:
    """``text`` without the member at ``path`` (and its comma); unchanged when there is no such member.

    Raises:
        JsoncError: ``text`` is not JSON with comments.
    """
    root = _parse(text)
    if root is None or root.kind != "object":
        return text
    node: _Node = root
    for key in path[:-1]:
        found = _find(node, key)
        if found is None or found.value.kind != "object":
            return text
        node = found.value
    member = _find(node, path[-1])
    if member is None:
        return text
    want = _expected(root.value, path, None, remove=True)
    index = node.members.index(member)
    alone = len(node.members) == 1
    if alone:
        return _checked(text[:node.start + 1] + text[node.end - 1:], want) if not _comments_inside(text, node) \
            else _checked(_cut_lines(text, member.key_start, _member_end(member)), want)
    if member.comma is None:  # the last member: its comma is the previous member's
        previous = node.members[index - 1]
        assert previous.comma is not None
        if not text[previous.comma + 1:member.key_start].strip():  # nothing but space between: cut from the comma
            return _checked(text[:previous.comma] + text[member.value.end:], want)
        cut = _cut_lines(text, member.key_start, member.value.end)
        return _checked(cut[:previous.comma] + cut[previous.comma + 1:], want)
    return _checked(_cut_lines(text, member.key_start, member.comma + 1), want)


def _member_end(member: _Member) -> int:
    return member.value.end if member.comma is None else member.comma + 1


def _comments_inside(text: str, node: _Node) -> bool:
    inner = text[node.start + 1:node.end - 1]
    return "//" in inner or "/*" in inner


def _cut_lines(text: str, start: int, end: int) -> str:
    """``text`` without ``[start, end)``, and without the lines it leaves blank."""
    if _first_on_line(text, start):
        line_end = text.find("\n", end)
        if line_end >= 0 and not text[end:line_end].strip():
            return text[:_line_start(text, start)] + text[line_end + 1:]
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[:start] + text[end:]


__all__ = ["JsoncError", "loads", "remove_member", "set_member"]
