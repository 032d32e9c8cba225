"""How the grammars are read: a :class:`Language` entry's fields, the generic reader, and the few grammars' own.

Most grammars name a definition in a ``name`` field and hold its members in a
``body`` field, so the generic reader (:func:`generic_read`) does the rest;
the few whose names live elsewhere (C and C++ declarators, Go receivers, Rust
impls, JavaScript assignments, Elixir's ``def`` calls, Lua's dotted names,
Zig's ``const X = struct``) add a small ``classify`` function here, which
their entry in :data:`codesearch.chunking.languages.LANGUAGES` names.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # pragma: no cover
    from tree_sitter import Node


class Definition(NamedTuple):
    """A recognised definition node.

    Attributes:
        symbols: its qualified name(s) (several for ``let a = () => 1, b = ...``).
        body: the node holding its members, for containers that may be split.
        prefix: the qualifier its members get (``"Session"``, Rust ``"Foo"``).
    """

    symbols: tuple[str, ...]
    body: Node | None = None
    prefix: str = ""


NOT_A_DEFINITION = Definition(())
"""What a ``classify`` function returns for a node that must not count, whatever the tables say."""

READ_INSIDE = Definition(())
"""What a ``classify`` function returns for a node the grammar misread: its children are read in its place."""

Classify = Callable[["Node", str, "Language"], "Definition | None"]


@dataclass(frozen=True)
class Language:
    """How to find one language's files and read its grammar.

    Attributes:
        name: the language's name in reports (``"cpp"``, ``"csharp"``).
        grammar: the grammar wheel's import name (``tree_sitter_cpp``); its
            PyPI name is the same with dashes.
        entry: the function of that module returning the language pointer.
        extensions: lower-cased file extensions, with the dot.
        filenames: exact file names (``Rakefile``) that select the language.
        shebangs: interpreters in a ``#!`` line that select it (``bash``).
        functions: node kinds of named definitions without members.
        containers: node kinds of definitions whose members are definitions.
        wrappers: node kinds that wrap one definition (decorators, ``export``,
            ``template <...>``): the definition inside counts, over the
            wrapper's lines.
        attach: node kinds that stick to the definition right below them
            (comments, decorators, attributes).
        transparent: node kinds whose children are read as if they were at
            this level (error recovery, ``#ifdef`` blocks, ``extern "C"``).
        body_kinds: child kinds holding a container's members when it has no
            ``body`` field.
        default_names: a name for definitions that have none in the tree
            (``init_declaration`` -> ``init``).
        separator: between a container's name and its members' names.
        function_separator: between a container's name and a function
            member's name, when it differs (Ruby ``Rack::Request.call``).
        qualify: whether members are qualified by their container at all
            (Haskell class methods are not).
        classify: a reader for this grammar's odd nodes; it returns a
            definition, :data:`NOT_A_DEFINITION`, :data:`READ_INSIDE` (a
            misread node whose children stand in its place), or ``None`` to
            let the generic reader decide.
    """

    name: str
    grammar: str
    entry: str = "language"
    extensions: tuple[str, ...] = ()
    filenames: tuple[str, ...] = ()
    shebangs: tuple[str, ...] = ()
    functions: frozenset[str] = frozenset()
    containers: frozenset[str] = frozenset()
    wrappers: frozenset[str] = frozenset()
    attach: frozenset[str] = frozenset({"comment"})
    transparent: frozenset[str] = frozenset({"ERROR"})
    body_kinds: frozenset[str] = frozenset()
    default_names: Mapping[str, str] = field(default_factory=dict)
    separator: str = "."
    function_separator: str | None = None
    qualify: bool = True
    classify: Classify | None = None

    @property
    def package(self) -> str:
        """The PyPI distribution that ships the grammar."""
        return self.grammar.replace("_", "-")

    def qualified(self, prefix: str, name: str, function: bool = False) -> str:
        """``name`` inside ``prefix``, with this language's separator."""
        if not prefix or not self.qualify:
            return name
        sep = self.function_separator if function and self.function_separator else self.separator
        return f"{prefix}{sep}{name}"

    def read(self, node: Node, prefix: str) -> Definition | None:
        """The definition ``node`` is, or ``None``: the language's own reader first, then the generic one."""
        if self.classify is not None:
            found = self.classify(node, prefix, self)
            if found is not None:
                return found
        return generic_read(node, prefix, self)


# --------------------------------------------------------------------------- tree helpers


def text_of(node: Node | None) -> str:
    """A node's source text (empty for ``None``)."""
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def name_of(node: Node, field_name: str = "name") -> str:
    """The text of a node's ``name`` (or other) field, on one line."""
    return " ".join(text_of(node.child_by_field_name(field_name)).split())


_TEMPLATE_ARGS = re.compile(r"<[^<>]*>")


def without_type_arguments(name: str) -> str:
    """``buffer<T>::size`` -> ``buffer::size``; ``Foo<Bar<T>>`` -> ``Foo``."""
    previous = None
    while previous != name:
        previous, name = name, _TEMPLATE_ARGS.sub("", name)
    return name.strip()


def body_of(node: Node, lang: Language) -> Node | None:
    """The node holding a container's members: its ``body`` field or a child of a body kind."""
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    for child in node.named_children:
        if child.type in lang.body_kinds:
            return child
    return None


def generic_read(node: Node, prefix: str, lang: Language) -> Definition | None:
    """Read a definition named by its ``name`` field (or a default name) from the tables of ``lang``."""
    kind = node.type
    if kind in lang.wrappers:
        inner = node.child_by_field_name("definition") or node.child_by_field_name("declaration")
        for child in [inner] if inner is not None else node.named_children:
            found = lang.read(child, prefix)
            if found is not None:
                return found
        return None
    if kind not in lang.functions and kind not in lang.containers:
        return None
    name = without_type_arguments(name_of(node)) or lang.default_names.get(kind, "")
    if not name:
        return None
    if kind in lang.functions:
        return Definition((lang.qualified(prefix, name, function=True),))
    qualified = lang.qualified(prefix, name)
    return Definition((qualified,), body_of(node, lang), qualified)


# --------------------------------------------------------------------------- odd grammars


_JS_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "function", "generator_function", "class"})


def _js_import(value: Node) -> bool:
    """Whether a declarator's value only brings in a module: ``require("x")``, ``await import("x")``."""
    while value.type in ("await_expression", "member_expression", "parenthesized_expression") and value.named_children:
        value = value.named_children[0]
    if value.type != "call_expression":
        return False
    callee = value.child_by_field_name("function")
    return callee is not None and (callee.type == "import" or text_of(callee) == "require")


def js_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    kind = node.type
    if kind in ("export_statement", "ambient_declaration"):
        inner = node.child_by_field_name("declaration")
        for child in [inner] if inner is not None else node.named_children:
            found = lang.read(child, prefix)
            if found is not None:
                return found
        value = node.child_by_field_name("value")
        if kind == "export_statement" and value is not None and value.type in _JS_FUNCTION_VALUES:
            return Definition((lang.qualified(prefix, "default"),))
        return None
    if kind in ("class", "class_declaration", "abstract_class_declaration") and not name_of(node):
        return Definition((lang.qualified(prefix, "default"),), body_of(node, lang), lang.qualified(prefix, "default"))
    if kind in ("function_declaration", "generator_function_declaration") and not name_of(node):
        return Definition((lang.qualified(prefix, "default"),))
    if kind in ("internal_module", "module"):
        name = name_of(node).strip("'\"`")
        if not name:
            return None
        qualified = lang.qualified(prefix, name)
        return Definition((qualified,), node.child_by_field_name("body"), qualified)
    if kind in ("lexical_declaration", "variable_declaration"):
        # `const handler = () => ...`, `const v1Processor: Processor = {...}`, `export const MAX = 3`:
        # each names what it defines. `const fs = require("fs")` only imports.
        names = tuple(
            lang.qualified(prefix, name_of(d))
            for d in node.named_children
            if d.type == "variable_declarator"
            and (value := d.child_by_field_name("value")) is not None
            and not _js_import(value)
            and name_of(d)
        )
        return Definition(names) if names else None
    if kind in ("public_field_definition", "field_definition"):
        value = node.child_by_field_name("value")
        name = name_of(node) or name_of(node, "property")
        if value is not None and value.type in _JS_FUNCTION_VALUES and name:
            return Definition((lang.qualified(prefix, name),))
        return None
    if kind == "expression_statement":
        for child in node.named_children:
            if child.type in ("internal_module", "module"):
                return js_classify(child, prefix, lang)
            if child.type == "assignment_expression":
                right = child.child_by_field_name("right")
                left = text_of(child.child_by_field_name("left")).strip()
                if right is not None and right.type in _JS_FUNCTION_VALUES and left and len(left) <= 120:
                    return Definition((lang.qualified(prefix, left),))
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
        return text_of(kind).strip()
    return ""


def go_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    kind = node.type
    if kind == "method_declaration":
        name = name_of(node)
        return Definition((lang.qualified(_go_receiver(node), name),)) if name else None
    if kind == "type_declaration":
        names = tuple(name_of(s) for s in node.named_children if s.type in ("type_spec", "type_alias") and name_of(s))
        return Definition(names) if names else None
    return None


def _rust_type(node: Node | None) -> str:
    """A Rust type's text without generic arguments: ``Foo<T>`` -> ``Foo``."""
    return text_of(node).split("<", 1)[0].strip()


def rust_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    kind = node.type
    if kind == "impl_item":
        target = lang.qualified(prefix, _rust_type(node.child_by_field_name("type")))
        trait = _rust_type(node.child_by_field_name("trait"))
        symbol = f"impl {trait} for {target}" if trait else f"impl {target}"
        return Definition((symbol,), node.child_by_field_name("body"), target)
    if kind in ("trait_item", "mod_item") and node.child_by_field_name("body") is None:
        return NOT_A_DEFINITION  # `mod foo;` declares a file, it defines nothing here
    return None


# C and C++: a function's name sits at the bottom of its declarator chain.
_DECLARATOR_KINDS = frozenset(
    {"pointer_declarator", "function_declarator", "parenthesized_declarator", "attributed_declarator",
     "reference_declarator", "array_declarator"}
)  # fmt: skip
_NAME_KINDS = frozenset(
    {"identifier", "field_identifier", "qualified_identifier", "operator_name", "destructor_name",
     "type_identifier", "template_function", "template_method"}
)  # fmt: skip


# A C/C++ name, part by part between `::`: an identifier, a destructor or an operator.
_C_NAME_PART = re.compile(r"~?[A-Za-z_]\w*|operator\b.*")
_C_KEYWORDS = frozenset(
    {"namespace", "template", "typename", "struct", "class", "union", "enum", "typedef", "using", "return",
     "if", "else", "for", "while", "do", "switch", "case", "sizeof", "static", "extern", "inline", "const"}
)  # fmt: skip


def _c_name(name: str) -> str:
    """``name`` if it can be a declared C/C++ name, else ``""``.

    Macros the grammar cannot expand (``FMT_BEGIN_EXPORT``, ``FMT_API``) make
    it read comments, keywords and whole declarations as "names", and one such
    misread can span a thousand lines; those are no definitions.
    """
    parts = [part.strip() for part in name.split("::")]
    if not parts[-1] or parts[-1] in _C_KEYWORDS:
        return ""
    return name if all(_C_NAME_PART.fullmatch(part) for part in parts if part) else ""


def _declarator_name(node: Node | None) -> tuple[str, bool]:
    """The declared name under a C/C++ declarator, as written, and whether it declares a function."""
    is_function = False
    while node is not None and node.type in _DECLARATOR_KINDS:
        is_function = is_function or node.type == "function_declarator"
        node = node.child_by_field_name("declarator")
    if node is None or node.type not in _NAME_KINDS:
        return "", False
    return without_type_arguments(" ".join(text_of(node).split())), is_function


def c_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    kind = node.type
    if kind in ("function_definition", "declaration", "field_declaration"):
        written, is_function = _declarator_name(node.child_by_field_name("declarator"))
        name = _c_name(written)
        if written and not name and kind == "function_definition":
            return READ_INSIDE  # a macro misread as a type: the definitions are further in
        if not name or (kind != "function_definition" and not is_function):
            return None
        return Definition((lang.qualified(prefix, name, function=True),))
    if kind == "type_definition":
        names = [_c_name(_declarator_name(d)[0]) for d in node.children_by_field_name("declarator")]
        type_node = node.child_by_field_name("type")
        inner = name_of(type_node) if type_node is not None else ""
        symbols = tuple(dict.fromkeys(lang.qualified(prefix, n) for n in [*names, inner] if n))
        return Definition(symbols) if symbols else None
    if kind in ("struct_specifier", "union_specifier", "enum_specifier", "class_specifier"):
        name = _c_name(without_type_arguments(name_of(node)))
        if not name or node.child_by_field_name("body") is None:
            return None  # a use of the type, not its definition
        qualified = lang.qualified(prefix, name)
        body = node.child_by_field_name("body") if kind != "enum_specifier" and lang.name == "cpp" else None
        return Definition((qualified,), body, qualified)
    if kind == "namespace_definition":
        name = _c_name(name_of(node)) or "(anonymous)"
        qualified = lang.qualified(prefix, name)
        return Definition((qualified,), node.child_by_field_name("body"), qualified)
    return None


_ELIXIR_CONTAINERS = frozenset({"defmodule", "defprotocol", "defimpl"})
_ELIXIR_FUNCTIONS = frozenset(
    {"def", "defp", "defmacro", "defmacrop", "defguard", "defguardp", "defdelegate", "defn", "defnp"}
)


def elixir_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    if node.type != "call":
        return None
    target = text_of(node.child_by_field_name("target"))
    if target not in _ELIXIR_CONTAINERS and target not in _ELIXIR_FUNCTIONS:
        return None
    arguments = next((c for c in node.named_children if c.type == "arguments"), None)
    first = arguments.named_children[0] if arguments is not None and arguments.named_children else None
    if first is None:
        return None
    if target in _ELIXIR_CONTAINERS:
        name = " ".join(text_of(first).split())
        qualified = lang.qualified(prefix, name)
        body = next((c for c in node.named_children if c.type == "do_block"), None)
        return Definition((qualified,), body, qualified)
    head = first
    while head.type == "binary_operator" and head.child_by_field_name("left") is not None:  # `def f(x) when ...`
        head = head.child_by_field_name("left")  # type: ignore[assignment]
    name = (text_of(head.child_by_field_name("target")) if head.type == "call" else text_of(head)).strip()
    if not name.rstrip("?!").isidentifier():
        return None
    return Definition((lang.qualified(prefix, name, function=True),))


def lua_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    kind = node.type
    if kind == "function_declaration":
        name = name_of(node).replace(":", ".")
        return Definition((name,)) if name else None
    if kind in ("assignment_statement", "variable_declaration"):
        statement = node if kind == "assignment_statement" else next(
            (c for c in node.named_children if c.type == "assignment_statement"), None)
        if statement is None:
            return None
        names = next((c for c in statement.named_children if c.type == "variable_list"), None)
        values = next((c for c in statement.named_children if c.type == "expression_list"), None)
        # `M.run = function(...)` and `M.defaults = { ... }` define; `local util = require("x")` imports.
        if names is None or values is None or not any(
            v.type == "function_definition" or (v.type == "table_constructor" and v.named_child_count)
            for v in values.named_children
        ):
            return None
        name = " ".join(text_of(names).split()).replace(":", ".")
        return Definition((name,)) if name and len(name) <= 120 else None
    return None


_ZIG_CONTAINERS = frozenset({"struct_declaration", "enum_declaration", "union_declaration", "opaque_declaration"})


def zig_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    kind = node.type
    if kind == "variable_declaration":
        name = next((text_of(c) for c in node.named_children if c.type == "identifier"), "")
        container = next((c for c in node.named_children if c.type in _ZIG_CONTAINERS), None)
        if not name or container is None:
            return None
        qualified = lang.qualified(prefix, name)
        return Definition((qualified,), container, qualified)
    if kind == "test_declaration":
        label = next((text_of(c) for c in node.named_children if c.type in ("string", "identifier")), "")
        return Definition((lang.qualified(prefix, f"test {label}".strip()),))
    return None


def haskell_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    if node.type == "instance":
        name = " ".join(f"{name_of(node)} {text_of(node.child_by_field_name('patterns'))}".split())
        return Definition((f"instance {name}",), node.child_by_field_name("declarations"), "")
    if node.type == "class":
        name = name_of(node)
        return Definition((name,), node.child_by_field_name("declarations"), "") if name else None
    return None


def ruby_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    if node.type == "singleton_method":
        name = name_of(node)
        return Definition((lang.qualified(prefix, name, function=True),)) if name else None
    if node.type == "singleton_class":  # class << self
        return Definition((prefix or "self",), node.child_by_field_name("body") or body_of(node, lang), prefix)
    return None


def php_classify(node: Node, prefix: str, lang: Language) -> Definition | None:
    if node.type == "namespace_definition" and node.child_by_field_name("body") is None:
        return NOT_A_DEFINITION  # `namespace A\B;` names the file's namespace; it holds no members itself
    return None


__all__ = [
    "NOT_A_DEFINITION",
    "READ_INSIDE",
    "Classify",
    "Definition",
    "Language",
    "body_of",
    "generic_read",
    "name_of",
    "text_of",
    "without_type_arguments",
    "c_classify",
    "elixir_classify",
    "go_classify",
    "haskell_classify",
    "js_classify",
    "lua_classify",
    "php_classify",
    "ruby_classify",
    "rust_classify",
    "zig_classify",
]
