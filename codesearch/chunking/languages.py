"""The languages codesearch cuts along their definitions: one table entry each.

A :class:`Language` names its tree-sitter grammar wheel, the file extensions,
file names and ``#!`` interpreters that select it, and the grammar's node kinds:
``functions`` (named definitions without members: functions, methods, type
aliases, macros) and ``containers`` (definitions whose body holds more
definitions: classes, modules, namespaces, impls). Most grammars name a
definition in a ``name`` field and hold its members in a ``body`` field, so
the generic reader does the rest; the few whose names live elsewhere (C and
C++ declarators, Go receivers, Rust impls, JavaScript assignments, Elixir's
``def`` calls, Lua's dotted names, Zig's ``const X = struct``) add a small
``classify`` function.

Adding a language is one entry in :data:`LANGUAGES` plus a fixture test in
``tests/test_languages.py``; the README says how.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from codesearch.chunking.grammars import (
    NOT_A_DEFINITION,
    READ_INSIDE,
    Definition,
    Language,
    c_classify,
    elixir_classify,
    go_classify,
    haskell_classify,
    js_classify,
    lua_classify,
    php_classify,
    ruby_classify,
    rust_classify,
    zig_classify,
)

_C_COMMENTS = frozenset({"comment"})
_PREPROCESSOR = frozenset({"ERROR", "preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif", "preproc_elifdef",
                           "linkage_specification", "declaration_list"})
_JS_FUNCTIONS = frozenset(
    {"function_declaration", "generator_function_declaration", "function_signature", "method_definition",
     "method_signature", "abstract_method_signature", "type_alias_declaration", "enum_declaration"}
)  # fmt: skip
_JS_CONTAINERS = frozenset({"class_declaration", "abstract_class_declaration", "class", "interface_declaration"})
_JS_COMMON = {
    "functions": _JS_FUNCTIONS,
    "containers": _JS_CONTAINERS,
    "attach": frozenset({"comment", "decorator"}),
    "classify": js_classify,
}

_ENTRIES: tuple[Language, ...] = (
    Language(
        "python", "tree_sitter_python", extensions=(".py", ".pyi", ".pyw"), shebangs=("python", "python3"),
        functions=frozenset({"function_definition"}), containers=frozenset({"class_definition"}),
        wrappers=frozenset({"decorated_definition"}),
        # Definitions under `if sys.platform == ...:`, `if TYPE_CHECKING:` or `try: ... except ImportError:`.
        transparent=frozenset({"ERROR", "if_statement", "elif_clause", "else_clause", "try_statement",
                               "except_clause", "finally_clause", "block"}),
    ),
    Language("javascript", "tree_sitter_javascript", extensions=(".js", ".mjs", ".cjs", ".jsx"),
             shebangs=("node",), **_JS_COMMON),  # type: ignore[arg-type]
    Language("typescript", "tree_sitter_typescript", "language_typescript", extensions=(".ts", ".mts", ".cts"),
             shebangs=("ts-node", "deno", "bun"), **_JS_COMMON),  # type: ignore[arg-type]
    Language("tsx", "tree_sitter_typescript", "language_tsx", extensions=(".tsx",), **_JS_COMMON),  # type: ignore[arg-type]
    Language(
        "go", "tree_sitter_go", extensions=(".go",),
        functions=frozenset({"function_declaration"}), classify=go_classify,
    ),
    Language(
        "rust", "tree_sitter_rust", extensions=(".rs",), separator="::",
        functions=frozenset({"function_item", "function_signature_item", "struct_item", "enum_item", "union_item",
                             "type_item", "macro_definition"}),
        containers=frozenset({"trait_item", "mod_item"}),
        attach=frozenset({"line_comment", "block_comment", "attribute_item"}), classify=rust_classify,
    ),
    Language(
        "java", "tree_sitter_java", extensions=(".java",),
        functions=frozenset({"method_declaration", "constructor_declaration", "compact_constructor_declaration",
                             "annotation_type_element_declaration"}),
        containers=frozenset({"class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
                              "annotation_type_declaration"}),
        attach=frozenset({"line_comment", "block_comment"}), transparent=frozenset({"ERROR", "enum_body_declarations"}),
    ),
    Language(
        "c", "tree_sitter_c", extensions=(".c", ".h"), attach=_C_COMMENTS, transparent=_PREPROCESSOR,
        functions=frozenset({"preproc_function_def"}), classify=c_classify,
    ),
    Language(
        "cpp", "tree_sitter_cpp", extensions=(".cc", ".cpp", ".cxx", ".c++", ".hh", ".hpp", ".hxx", ".h++", ".ipp", ".inl"),
        separator="::", attach=_C_COMMENTS, transparent=_PREPROCESSOR,
        functions=frozenset({"preproc_function_def", "alias_declaration", "concept_definition"}),
        wrappers=frozenset({"template_declaration"}), classify=c_classify,
    ),
    Language(
        "csharp", "tree_sitter_c_sharp", extensions=(".cs",),
        functions=frozenset({"method_declaration", "constructor_declaration", "destructor_declaration",
                             "property_declaration", "delegate_declaration", "operator_declaration",
                             "indexer_declaration", "event_declaration", "local_function_statement"}),
        containers=frozenset({"namespace_declaration", "class_declaration", "struct_declaration",
                              "interface_declaration", "record_declaration", "enum_declaration"}),
        default_names={"operator_declaration": "operator", "indexer_declaration": "this"},
    ),
    Language(
        "php", "tree_sitter_php", "language_php", extensions=(".php", ".phtml"), shebangs=("php",),
        separator="\\", function_separator="::",
        functions=frozenset({"function_definition", "method_declaration"}),
        containers=frozenset({"namespace_definition", "class_declaration", "interface_declaration",
                              "trait_declaration", "enum_declaration"}),
        classify=php_classify,
    ),
    Language(
        "ruby", "tree_sitter_ruby", extensions=(".rb", ".rake", ".gemspec", ".ru"),
        filenames=("Rakefile", "Gemfile", "Guardfile", "Vagrantfile"), shebangs=("ruby",),
        separator="::", function_separator=".",
        functions=frozenset({"method"}), containers=frozenset({"class", "module"}), classify=ruby_classify,
    ),
    Language(
        "kotlin", "tree_sitter_kotlin", extensions=(".kt", ".kts"),
        functions=frozenset({"function_declaration", "secondary_constructor", "type_alias"}),
        containers=frozenset({"class_declaration", "object_declaration", "companion_object"}),
        attach=frozenset({"line_comment", "block_comment", "multiline_comment"}),
        body_kinds=frozenset({"class_body", "enum_class_body"}),
        default_names={"companion_object": "Companion", "secondary_constructor": "constructor"},
    ),
    Language(
        "swift", "tree_sitter_swift", extensions=(".swift",),
        functions=frozenset({"function_declaration", "init_declaration", "deinit_declaration",
                             "protocol_function_declaration", "typealias_declaration", "subscript_declaration"}),
        containers=frozenset({"class_declaration", "protocol_declaration"}),
        attach=frozenset({"comment", "multiline_comment"}),
        default_names={"init_declaration": "init", "deinit_declaration": "deinit", "subscript_declaration": "subscript"},
    ),
    Language(
        "scala", "tree_sitter_scala", extensions=(".scala", ".sc", ".sbt"),
        functions=frozenset({"function_definition", "function_declaration", "type_definition", "given_definition"}),
        containers=frozenset({"class_definition", "object_definition", "trait_definition", "enum_definition"}),
        attach=frozenset({"comment", "block_comment", "annotation"}),
    ),
    Language(
        "elixir", "tree_sitter_elixir", extensions=(".ex", ".exs"), shebangs=("elixir",),
        attach=frozenset({"comment"}), classify=elixir_classify,
    ),
    Language(
        "haskell", "tree_sitter_haskell", extensions=(".hs", ".lhs"), shebangs=("runhaskell", "runghc"),
        functions=frozenset({"function", "signature", "bind", "data_type", "newtype", "type_synonym", "type_family",
                             "data_family", "foreign_import", "pattern_synonym"}),
        transparent=frozenset({"ERROR", "declarations", "class_declarations", "instance_declarations"}),
        attach=frozenset({"comment", "haddock", "pragma"}), qualify=False, classify=haskell_classify,
    ),
    Language(
        "lua", "tree_sitter_lua", extensions=(".lua",), shebangs=("lua", "luajit"), classify=lua_classify,
    ),
    Language(
        "bash", "tree_sitter_bash", extensions=(".sh", ".bash", ".bats", ".zsh", ".ksh"),
        filenames=(".bashrc", ".bash_profile", ".zshrc", ".profile"), shebangs=("bash", "sh", "zsh", "ksh", "dash", "bats"),
        functions=frozenset({"function_definition"}),
    ),
    Language(
        "zig", "tree_sitter_zig", extensions=(".zig",),
        functions=frozenset({"function_declaration"}), classify=zig_classify,
    ),
)

LANGUAGES: Mapping[str, Language] = MappingProxyType({lang.name: lang for lang in _ENTRIES})
"""Every language with definition-aware chunking, by name."""

_BY_EXTENSION = {ext: lang for lang in _ENTRIES for ext in lang.extensions}
_BY_FILENAME = {name: lang for lang in _ENTRIES for name in lang.filenames}
_BY_INTERPRETER = {interpreter: lang for lang in _ENTRIES for interpreter in lang.shebangs}
_SHEBANG = re.compile(r"#!\s*(\S+)(?:\s+(\S+))?")


def _extension(name: str) -> str:
    dot = name.rfind(".")
    return name[dot:].lower() if dot > 0 else ""


# A `.h` file is C++ when it reads as C++: a namespace, a template, a class, access labels or the
# standard library. C headers meant for C++ callers (`extern "C"`) have none of these.
_CPP_HEADER = re.compile(
    r"^[ \t]*(?:namespace\b[^;]*$|template\s*<|class\s+\w+[^;]*$|(?:public|private|protected)\s*:|using\s+namespace\b"
    r"|#\s*include\s*<(?:string|string_view|vector|memory|iostream|ostream|type_traits|utility|cstddef|cstdint"
    r"|cstdio|cstdlib|cstring|map|functional|algorithm|limits|iterator|array|chrono|atomic|thread|mutex)>)"
    r"|\bstd::\w",
    re.MULTILINE,
)
HEAD_BYTES = 16384
"""How much of a ``.h`` file's start :func:`language_for` reads to tell a C++ header from a C one."""


def language_for(path: str, first_line: str | None = None, text: str | None = None) -> Language | None:
    """The language of a file by its extension, its name, or (when it has neither) its ``#!`` line.

    Args:
        path: the file's path (``/`` or ``\\`` separated).
        first_line: the file's first line, consulted for a ``#!`` interpreter
            when the file has no extension (``notes.txt`` stays text).
        text: the file's text, of which only the first :data:`HEAD_BYTES`
            characters are read, and only for the extension C and C++ share:
            a ``.h`` that reads as C++ is C++.
    """
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    extension = _extension(name)
    if extension == ".h" and text is not None and _CPP_HEADER.search(text, 0, HEAD_BYTES):
        return LANGUAGES["cpp"]
    found = _BY_EXTENSION.get(extension) or _BY_FILENAME.get(name)
    if found is None and not extension and first_line and first_line.startswith("#!"):
        match = _SHEBANG.match(first_line)
        if match:
            program = match.group(1).rsplit("/", 1)[-1]
            if program == "env" and match.group(2):
                program = match.group(2)
            found = _BY_INTERPRETER.get(re.sub(r"[\d.]+$", "", program)) or _BY_INTERPRETER.get(program)
    return found


def extensions() -> Iterable[str]:
    """Every extension that selects a language."""
    return _BY_EXTENSION.keys()


__all__ = [
    "HEAD_BYTES",
    "LANGUAGES",
    "NOT_A_DEFINITION",
    "READ_INSIDE",
    "Definition",
    "Language",
    "extensions",
    "language_for",
]
