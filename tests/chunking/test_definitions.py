"""Definition-aware chunking: exact chunks per language, splits, fallbacks, properties."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import PACKAGE, TESTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesearch.chunking import Chunk, ChunkParams, chunk_lines, chunk_text, definitions, split_lines, window_heads
from codesearch.chunking._chunker_py import LONG_LINE_BUDGETS
from codesearch.chunking.definitions import SUPPORTED_LANGUAGES, chunk_definitions
from codesearch.chunking.languages import LANGUAGES
from codesearch.chunking.languages import language_for as _language_for


def language_for(path: str) -> str | None:
    found = _language_for(path)
    return None if found is None else found.name

# A budget of 160 characters: small enough that the samples below split.
SMALL = ChunkParams(target_tokens=40, overlap_tokens=4, chars_per_token=4)


def spans(chunks: list[Chunk]) -> list[tuple[int, int, tuple[str, ...]]]:
    return [(c.start_line, c.end_line, c.symbols) for c in chunks]


def check_contract(text: str, chunks: list[Chunk], params: ChunkParams | None = None) -> None:
    """Sorted, in range, text equal to the lines (but where a line too long to take whole is cut: pieces of it),
    every non-blank line covered."""
    lines = split_lines(text)
    params = params or ChunkParams.for_chunking("definitions")
    longest = params.target_tokens * params.chars_per_token * LONG_LINE_BUDGETS
    cut = {number for number, line in enumerate(lines, start=1) if len(line) > longest}
    covered: set[int] = set()
    previous = 0
    for chunk in chunks:
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines), chunk
        assert chunk.start_line > previous or chunk.start_line in cut, "chunks are sorted by start line"
        if cut & {chunk.start_line, chunk.end_line}:  # a window with a piece of a cut line, at either side
            parts = chunk.text.split("\n")
            assert len(parts) == chunk.end_line - chunk.start_line + 1
            for number, part in enumerate(parts, start=chunk.start_line):
                assert part in lines[number - 1] if number in cut else part == lines[number - 1]
                assert len(part) <= longest
        else:
            assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.text.strip(), "no whitespace-only chunks"
        assert all(isinstance(s, str) and s for s in chunk.symbols)
        assert len(set(chunk.symbols)) == len(chunk.symbols)
        covered.update(range(chunk.start_line, chunk.end_line + 1))
        previous = chunk.start_line
    missing = [i for i, line in enumerate(lines, start=1) if line.strip() and i not in covered]
    assert not missing, f"lines {missing[:10]} are in no chunk"


def test_language_for() -> None:
    assert language_for("a/b.py") == "python"
    assert language_for("stubs/x.pyi") == "python"
    assert [language_for(f"x.{e}") for e in ("js", "mjs", "cjs", "jsx")] == ["javascript"] * 4
    assert language_for("x.ts") == "typescript"
    assert language_for("App.TSX") == "tsx"
    assert (language_for("m.go"), language_for("lib.rs"), language_for("A.java")) == ("go", "rust", "java")
    assert language_for("README.md") is None
    assert language_for("Makefile") is None
    assert language_for(".py") is None  # a dotfile, not a Python file
    assert language_for("dir.py/file") is None
    assert set(SUPPORTED_LANGUAGES) >= {"python", "javascript", "typescript", "tsx", "go", "rust", "java"}


def test_every_grammar_loads_and_parsers_are_cached() -> None:
    for language in SUPPORTED_LANGUAGES:
        assert definitions.grammar_available(language), language
        assert definitions._parser(language) is definitions._parser(language)


PYTHON = '''\
"""Helpers for sessions."""

import os
from typing import Any

DEFAULT_TIMEOUT = 30


# Merge two settings dicts.
# Request values win.
@lru_cache(maxsize=None)
def merge_setting(request_setting, session_setting):
    """Merge settings."""
    if session_setting is None:
        return request_setting
    return {**session_setting, **request_setting}


def tiny_a():
    return 1


def tiny_b():
    return 2


class Session:
    """A session."""

    timeout = DEFAULT_TIMEOUT

    def get(self, url):
        return self.request("GET", url)

    @property
    def closed(self):
        return False


if __name__ == "__main__":
    print(merge_setting({}, {}))
'''


def test_python_small_file_is_one_group_at_the_default_budget() -> None:
    chunks = chunk_definitions("pkg/sessions.py", PYTHON)
    assert spans(chunks) == [(1, 41, ("merge_setting", "tiny_a", "tiny_b", "Session", "Session.get", "Session.closed"))]


def test_python_definitions() -> None:
    # Budget 240 characters: merge_setting (217) is its own chunk with the comments
    # and decorator above it; the tiny functions group; the class fits whole.
    params = ChunkParams(target_tokens=60, overlap_tokens=8)
    chunks = chunk_definitions("pkg/sessions.py", PYTHON, params)
    assert spans(chunks) == [
        (1, 6, ()),
        (9, 16, ("merge_setting",)),
        (19, 24, ("tiny_a", "tiny_b")),
        (27, 37, ("Session", "Session.get", "Session.closed")),
        (40, 41, ()),
    ]
    assert chunks[1].text.startswith("# Merge two settings dicts.\n# Request values win.\n@lru_cache")
    check_contract(PYTHON, chunks)


def test_python_oversized_class_is_split_into_members() -> None:
    chunks = chunk_definitions("pkg/sessions.py", PYTHON, SMALL)
    assert spans(chunks) == [
        (1, 6, ()),
        (9, 14, ("merge_setting",)),  # 236 characters > 160: line windows
        (14, 16, ("merge_setting",)),
        (19, 24, ("tiny_a", "tiny_b")),
        (27, 33, ("Session", "Session.get")),  # the header joins the first method
        (35, 37, ("Session.closed",)),  # the decorator belongs to its method
        (40, 41, ()),
    ]
    check_contract(PYTHON, chunks)


def test_oversized_function_is_cut_into_line_windows_with_its_symbol() -> None:
    body = "\n".join(f"    total += compute_value_{i}(argument_{i})" for i in range(100))
    text = f"import os\n\n\ndef long_function(x):\n    total = 0\n{body}\n    return total\n\n\nZ = 1\n"
    chunks = chunk_definitions("m.py", text)
    function_lines = split_lines(text)[3:106]
    windows = chunk_lines("\n".join(function_lines), 400, 80, 4)  # the definition budget
    assert len(windows) > 1
    expected = [(1, 1, ())] + [(s + 3, e + 3, ("long_function",)) for s, e, _ in windows] + [(109, 109, ())]
    assert spans(chunks) == expected
    check_contract(text, chunks)


def test_a_line_too_long_to_take_whole_is_cut_in_the_windows_of_what_holds_it() -> None:
    blob = "".join(f"{i:07d}," for i in range(12_500))  # a 100,000-character line: over 32 budgets of 1,600
    text = f"import os\n\n\ndef table():\n    return [\n        {blob}\n    ]\n\n\nZ = 1\n"
    chunks = chunk_definitions("m.py", text)
    check_contract(text, chunks)
    longest = 400 * 4 * LONG_LINE_BUDGETS
    assert max(len(c.text) for c in chunks) <= 1_600 + longest
    line = f"        {blob}"
    inside = [c for c in chunks if c.symbols == ("table",)]
    assert [(c.start_line, c.end_line) for c in inside] == [(4, 6), (6, 6), (6, 6), (7, 7)]
    assert inside[0].text == "def table():\n    return [\n" + line[:longest]  # ends with the line's first piece
    assert [c.text for c in inside[1:]] == [line[:longest], line[longest - 320 :], "    ]"]
    assert (chunks[0].text, chunks[-1].text) == ("import os", "Z = 1")


def test_window_heads_names_the_first_window_of_each_long_definition() -> None:
    body = "\n".join(f"    total += compute_value_{i}(argument_{i})" for i in range(100))
    text = f"import os\n\n\ndef long_function(x):\n    total = 0\n{body}\n    return total\n\n\nZ = 1\n"
    chunks = chunk_definitions("m.py", text)
    windows = [row for row, chunk in enumerate(chunks) if chunk.symbols == ("long_function",)]
    assert len(windows) > 2
    assert window_heads(chunks) == {row: windows[0] for row in windows[1:]}
    # The split class of the test above: members and the header are definitions of their own, no windows but one.
    split = chunk_definitions("pkg/sessions.py", PYTHON, SMALL)
    assert window_heads(split) == {2: 1}  # merge_setting's second window


def test_window_heads_leaves_alone_what_only_looks_alike() -> None:
    def chunk(path: str, start: int, end: int, *symbols: str) -> Chunk:
        return Chunk(path, start, end, "x", symbols)

    chunks = [
        chunk("a.java", 1, 9, "A.put"),
        chunk("a.java", 10, 19, "A.put"),  # an overload right after: same name, its own lines
        chunk("a.java", 15, 25, "A.get"),  # overlaps, but another definition's symbols
        chunk("b.java", 20, 30, "A.get"),  # same symbols and lines, another file
        chunk("b.txt", 1, 9),
        chunk("b.txt", 5, 12),  # overlapping line windows of a file without definitions
    ]
    assert window_heads(chunks) == {}
    assert window_heads([chunk("a.c", 1, 9, "f"), chunk("a.c", 8, 16, "f"), chunk("a.c", 15, 20, "f")]) == {1: 0, 2: 0}


MISREAD_CPP = """FMT_END_EXPORT

namespace detail {

template <typename T> struct is_code_unit : std::false_type {};

inline auto count_digits(unsigned n) -> int {
  int count = 1;
  while (n >= 10) {
    n /= 10;
    ++count;
  }
  return count;
}

}  // namespace detail
"""


def test_a_macro_misread_as_a_type_gives_the_definitions_inside_it() -> None:
    # tree-sitter-cpp cannot expand FMT_END_EXPORT: it reads `FMT_END_EXPORT namespace` as a function named
    # `namespace` whose body is the namespace's. fmtlib's headers are full of such macros.
    import tree_sitter as ts
    import tree_sitter_cpp

    tree = ts.Parser(ts.Language(tree_sitter_cpp.language())).parse(MISREAD_CPP.encode())
    misread = tree.root_node.named_children[0]
    assert misread.type == "function_definition"
    assert misread.child_by_field_name("declarator").text == b"namespace"
    chunks = chunk_definitions("fmt/base.h", MISREAD_CPP, ChunkParams(target_tokens=30, overlap_tokens=5))
    symbols = [s for c in chunks for s in c.symbols]
    assert "namespace" not in symbols
    assert set(symbols) == {"is_code_unit", "count_digits"}
    assert [c.symbols for c in chunks if c.start_line == 5] == [("is_code_unit",)]
    check_contract(MISREAD_CPP, chunks)


@pytest.mark.parametrize(
    ("name", "kept"),
    [
        ("count_digits", True), ("fmt::detail::buffer", True), ("~buffer", True), ("buffer::~buffer", True),
        ("operator()", True), ("format_to_result::operator char*", True), ("::global", True),
        ("namespace", False), ("detail::template", False), ("FMT_BEGIN_EXPORT // A generic context", False),
        ("std::system_error vwindows_error", False), ("FMT_BEGIN_EXPORT template", False),
    ],
)  # fmt: skip
def test_a_cpp_name_must_be_a_name(name: str, kept: bool) -> None:
    from codesearch.chunking.grammars import _c_name

    assert (_c_name(name) == name) is kept and (_c_name(name) in ("", name))


def test_comments_attach_only_when_directly_above() -> None:
    text = (
        "# licence header\n"
        "\n"
        "# about f\n"
        "def f():\n"
        "    return 1  # trailing\n"
        "\n"
        "x = 1  # not about g\n"
        "def g():\n"
        "    pass\n"
    )
    tiny = ChunkParams(target_tokens=3, overlap_tokens=0)
    chunks = chunk_definitions("m.py", text, ChunkParams(target_tokens=5, overlap_tokens=0))
    assert [(c.start_line, c.symbols) for c in chunks if c.symbols] == [(3, ("f",)), (8, ("g",))]
    check_contract(text, chunks)
    check_contract(text, chunk_definitions("m.py", text, tiny), tiny)


def test_python_definitions_under_if_and_try_blocks_keep_their_names() -> None:
    # requests' utils.py defines proxy_bypass_registry under `if sys.platform == "win32":`;
    # such functions used to be nameless statements.
    text = (
        "import sys\n\n"
        "if sys.platform == 'win32':\n"
        "    def proxy_bypass(host):\n"
        "        return registry(host)\n"
        "else:\n"
        "    def proxy_bypass(host):\n"
        "        return env(host)\n\n"
        "try:\n"
        "    from fast import dumps\n"
        "except ImportError:\n"
        "    def dumps(obj):\n"
        "        return str(obj)\n\n"
        "class Box:\n"
        "    if sys.version_info >= (3, 12):\n"
        "        def size(self):\n"
        "            return 1\n"
    )
    chunks = chunk_definitions("m.py", text, ChunkParams(target_tokens=10, overlap_tokens=0))
    assert spans(chunks) == [
        (1, 3, ()),
        (4, 5, ("proxy_bypass",)),
        (6, 8, ("proxy_bypass",)),
        (10, 12, ()),
        (13, 14, ("dumps",)),
        (16, 17, ("Box",)),
        (18, 19, ("Box.size",)),
    ]
    check_contract(text, chunks)


def test_python_syntax_error_keeps_the_definitions_that_parsed() -> None:
    text = "def good():\n    return 1\n\n\ndef broken(:\n    ]]]\n\n\nclass Fine:\n    def m(self):\n        pass\n"
    chunks = definitions._chunk_definitions("m.py", text, ChunkParams(target_tokens=6), LANGUAGES["python"])
    assert chunks is not None
    symbols = {s for c in chunks for s in c.symbols}
    assert {"good", "Fine"} <= symbols
    check_contract(text, chunks)


JAVASCRIPT = """\
import { EventEmitter } from "events";

const RETRIES = 3;

/**
 * A small HTTP client.
 */
export class Client extends EventEmitter {
  constructor(base) {
    super();
    this.base = base;
  }

  // Send one request, retrying on failure.
  async send(path, options = {}) {
    for (let i = 0; i < RETRIES; i++) {
      try {
        return await fetch(this.base + path, options);
      } catch (err) {
        this.emit("retry", err);
      }
    }
    throw new Error("gave up");
  }

  close() {
    this.emit("close");
  }
}

export const joinPath = (a, b) => `${a.replace(/\\/$/, "")}/${b}`;

function parseHeaders(raw) {
  return Object.fromEntries(raw.split("\\n").map((l) => l.split(": ")));
}

module.exports.legacy = function legacy() {};
"""


def test_javascript() -> None:
    chunks = chunk_definitions("src/client.mjs", JAVASCRIPT, SMALL)
    assert spans(chunks) == [
        (1, 3, ("RETRIES",)),  # a module-level constant is a definition; the import is not
        (5, 12, ("Client", "Client.constructor")),
        (14, 18, ("Client.send",)),  # the comment above belongs to the method
        (18, 24, ("Client.send",)),
        (26, 29, ("Client.close",)),  # the class's closing brace stays with its last member
        (31, 31, ("joinPath",)),
        (33, 35, ("parseHeaders",)),
        (37, 37, ("module.exports.legacy",)),
    ]
    assert chunks[2].text.startswith("  // Send one request")
    check_contract(JAVASCRIPT, chunks)
    whole = chunk_definitions("src/client.js", JAVASCRIPT, ChunkParams())  # 700 tokens: one chunk
    assert spans(whole) == [
        (
            1,
            37,
            (
                "RETRIES",
                "Client",
                "Client.constructor",
                "Client.send",
                "Client.close",
                "joinPath",
                "parseHeaders",
                "module.exports.legacy",
            ),
        )
    ]


TYPESCRIPT = """\
import type { Request } from "./types";

export interface Options {
  timeout: number;
  retries?: number;
}

export type Handler = (req: Request) => Promise<void>;

export enum Method {
  Get = "GET",
  Post = "POST",
}

@Injectable()
export class Router {
  private routes = new Map<string, Handler>();

  add(path: string, handler: Handler): this {
    this.routes.set(path, handler);
    return this;
  }

  @Log()
  async dispatch(req: Request): Promise<void> {
    const handler = this.routes.get(req.path);
    if (!handler) {
      throw new Error(`no route for ${req.path}`);
    }
    await handler(req);
  }
}

export function createRouter(options: Options): Router {
  return new Router();
}
"""


def test_typescript() -> None:
    params = ChunkParams(target_tokens=40, overlap_tokens=4)
    chunks = chunk_definitions("src/router.ts", TYPESCRIPT, params)
    assert spans(chunks) == [
        (1, 1, ()),
        (3, 6, ("Options",)),
        (8, 8, ("Handler",)),
        (10, 13, ("Method",)),
        (15, 17, ("Router",)),
        (19, 22, ("Router.add",)),
        (24, 28, ("Router.dispatch",)),  # the decorator belongs to its method
        (28, 32, ("Router.dispatch",)),
        (34, 36, ("createRouter",)),
    ]
    check_contract(TYPESCRIPT, chunks)


TSX = """\
import React from "react";

type Props = { name: string };

export function Greeting({ name }: Props) {
  return <div className="greeting">Hello, {name}!</div>;
}

export const Farewell = ({ name }: Props) => <p>Bye, {name}</p>;
"""


def test_tsx_uses_the_tsx_grammar() -> None:
    chunks = chunk_definitions("ui/Greeting.tsx", TSX, ChunkParams(target_tokens=30, overlap_tokens=2))
    # The import line is too small to stand alone: it joins the type below it.
    assert spans(chunks) == [(1, 3, ("Props",)), (5, 7, ("Greeting",)), (9, 9, ("Farewell",))]
    check_contract(TSX, chunks)


GO = """\
package client

import (
	"errors"
	"net/http"
)

// ErrClosed is returned after Close.
var ErrClosed = errors.New("client closed")

// Client sends requests.
type Client struct {
	http   *http.Client
	closed bool
}

// New returns a Client.
func New() *Client {
	return &Client{http: &http.Client{}}
}

// Do sends one request.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	if c.closed {
		return nil, ErrClosed
	}
	return c.http.Do(req)
}

func (c Client) Closed() bool { return c.closed }
"""


def test_go_methods_are_named_by_receiver_type() -> None:
    chunks = chunk_definitions("client/client.go", GO, SMALL)
    assert spans(chunks) == [
        (1, 9, ()),
        (11, 15, ("Client",)),
        (17, 20, ("New",)),
        (22, 28, ("Client.Do",)),  # pointer receiver
        (30, 30, ("Client.Closed",)),  # value receiver
    ]
    check_contract(GO, chunks)


RUST = """\
//! A tiny cache.

use std::collections::HashMap;

/// A cache of strings.
#[derive(Debug, Default)]
pub struct Cache {
    items: HashMap<String, String>,
}

impl Cache {
    /// Creates an empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn get(&self, key: &str) -> Option<&String> {
        self.items.get(key)
    }
}

impl std::fmt::Display for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cache({})", self.items.len())
    }
}

pub trait Store {
    fn put(&mut self, key: String, value: String);
}

fn main() {
    let cache = Cache::new();
    println!("{}", cache);
}
"""


def test_rust_impls_traits_and_attributes() -> None:
    chunks = chunk_definitions("src/cache.rs", RUST, SMALL)
    assert spans(chunks) == [
        (1, 3, ()),  # an inner doc comment stays with the module
        (5, 9, ("Cache",)),  # doc comment and attribute belong to the struct
        (11, 15, ("impl Cache", "Cache::new")),
        (17, 20, ("Cache::get",)),
        (22, 22, ("impl std::fmt::Display for Cache",)),
        (23, 26, ("Cache::fmt",)),
        (28, 30, ("Store", "Store::put")),
        (32, 35, ("main",)),
    ]
    check_contract(RUST, chunks)


JAVA = """\
package org.example;

import java.util.ArrayList;
import java.util.List;

/**
 * A list of tasks.
 */
public class TaskList {
    private final List<String> tasks = new ArrayList<>();

    /** Creates an empty list. */
    public TaskList() {
    }

    @Override
    public String toString() {
        return String.join(", ", tasks);
    }

    public void add(String task) {
        if (task == null || task.isEmpty()) {
            throw new IllegalArgumentException("empty task");
        }
        tasks.add(task);
    }

    interface Listener {
        void changed(TaskList list);
    }
}
"""


def test_java() -> None:
    chunks = chunk_definitions("src/main/java/org/example/TaskList.java", JAVA, SMALL)
    assert spans(chunks) == [
        (1, 4, ()),
        (6, 10, ("TaskList",)),
        (12, 14, ("TaskList.TaskList",)),
        (16, 19, ("TaskList.toString",)),
        (21, 25, ("TaskList.add",)),
        (25, 26, ("TaskList.add",)),
        (28, 31, ("TaskList.Listener", "TaskList.Listener.changed")),
    ]
    check_contract(JAVA, chunks)


SAMPLES = {
    "m.py": PYTHON,
    "m.js": JAVASCRIPT,
    "m.ts": TYPESCRIPT,
    "m.tsx": TSX,
    "m.go": GO,
    "m.rs": RUST,
    "M.java": JAVA,
}


@pytest.mark.parametrize("path", sorted(SAMPLES))
@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_cr_give_the_same_ranges_as_lf(path: str, newline: str) -> None:
    text = SAMPLES[path]
    for params in (SMALL, ChunkParams()):
        lf = chunk_definitions(path, text, params)
        other = chunk_definitions(path, text.replace("\n", newline), params)
        assert spans(other) == spans(lf)
        assert [c.text for c in other] == [c.text for c in lf]


@pytest.mark.parametrize("path", ["README.md", "Makefile", "x.c", "notes.txt"])
def test_unknown_extension_is_the_line_chunker(path: str) -> None:
    assert chunk_definitions(path, PYTHON, SMALL) == chunk_text(path, PYTHON, SMALL)
    assert chunk_definitions(path, PYTHON) == chunk_text(path, PYTHON)


def test_missing_grammar_falls_back_to_the_line_chunker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(definitions._PARSERS, "rust", None)
    assert chunk_definitions("src/cache.rs", RUST, SMALL) == chunk_text("src/cache.rs", RUST, SMALL)


def test_a_failure_inside_falls_back_to_the_line_chunker(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: object, root: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(definitions._Cutter, "cut", boom)
    assert chunk_definitions("m.py", PYTHON, SMALL) == chunk_text("m.py", PYTHON, SMALL)


def test_empty_and_blank_files() -> None:
    for path in SAMPLES:
        assert chunk_definitions(path, "") == []
        assert chunk_definitions(path, "\n \n\t\n") == []


# --------------------------------------------------------------------------- properties

_name = st.sampled_from(["f", "get", "send", "_private", "rebuild_method", "x1", "__init__"])
_statement = st.sampled_from(
    ["import os", "x = 1", "CONSTANT = {'a': 1}", "# a comment", "", "   ", "if x:\n    y = 2", "print(x)"]
)
_body_line = st.one_of(
    st.sampled_from(["return 1", "x += 1", "# inner", "", "pass", '"""Doc."""', "for i in y:\n    z(i)"]),
    st.text(alphabet="abc xyz_()=+", min_size=10, max_size=120),
)


@st.composite
def _function(draw: st.DrawFn, indent: str = "") -> str:
    head = [f"{indent}@{draw(_name)}" for _ in range(draw(st.integers(0, 2)))]
    if draw(st.booleans()):
        head.insert(0, f"{indent}# about it")
    body = [
        indent + "    " + line.replace("\n", "\n" + indent + "    ")
        for line in draw(st.lists(_body_line, min_size=1, max_size=12))
    ]
    return "\n".join([*head, f"{indent}def {draw(_name)}(a, b):", *body])


@st.composite
def _class(draw: st.DrawFn) -> str:
    members = draw(st.lists(st.one_of(_function("    "), st.just("    attr = 1"), st.just("")), max_size=6))
    doc = ['    """Doc."""'] if draw(st.booleans()) else []
    return "\n".join([f"class {draw(_name).title()}(Base):", *doc, *members, "    pass"])


_python_files = st.builds(
    lambda parts, newline, tail: newline.join(parts) + tail,
    st.lists(st.one_of(_statement, _function(), _class(), st.text(max_size=30)), max_size=12),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.sampled_from(["", "\n"]),
)
_params = st.builds(
    ChunkParams,
    target_tokens=st.integers(1, 120),
    overlap_tokens=st.integers(0, 30),
    chars_per_token=st.integers(1, 5),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_python_files, params=_params)
def test_generated_python_satisfies_the_contract(text: str, params: ChunkParams) -> None:
    chunks = definitions._chunk_definitions("gen.py", text, params, LANGUAGES["python"])
    cut = definitions.cut_file("gen.py", text, params)
    if chunks is None:  # a tree with errors and no definition: line windows, and the reason
        assert cut == (chunk_text("gen.py", text, params), "python", definitions.PARSE_ERROR)
    else:
        assert cut == (chunks, "python", None)
    check_contract(text, cut.chunks, params)


_code_text = st.lists(
    st.one_of(
        st.sampled_from(list("\n\r\t {}()[];:=,.#/*@\"'`<>!&|\\")),
        st.sampled_from(["def ", "class ", "fn ", "impl ", "func ", "function ", "=> ", "//", "/*", "*/", '"""']),
        st.text(max_size=3),
    ),
    max_size=80,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_code_text, language=st.sampled_from(SUPPORTED_LANGUAGES), params=_params)
def test_arbitrary_text_never_raises_and_is_covered(text: str, language: str, params: ChunkParams) -> None:
    chunks = definitions._chunk_definitions("any", text, params, LANGUAGES[language])
    check_contract(text, chunks if chunks is not None else chunk_text("any", text, params), params)


@settings(max_examples=100, deadline=None)
@given(text=st.text(), path=st.sampled_from(sorted(SAMPLES)))
def test_public_function_never_raises(text: str, path: str) -> None:
    check_contract(text, chunk_definitions(path, text))


@pytest.mark.parametrize("params", [ChunkParams(), SMALL, ChunkParams(target_tokens=1, overlap_tokens=0)])
def test_real_files_satisfy_the_contract(params: ChunkParams) -> None:
    sources = sorted(PACKAGE.rglob("*.py")) + sorted(TESTS.rglob("*.py"))
    assert sources
    for source in sources:
        text = source.read_text(encoding="utf-8")
        chunks = definitions._chunk_definitions(source.name, text, params, LANGUAGES["python"])
        assert chunks is not None
        check_contract(text, chunks, params)


def test_requests_corpus(requests_corpus: Path) -> None:
    from codesearch.files import scan

    files = scan(requests_corpus).files
    started = time.perf_counter()
    chunks = {f.path: chunk_definitions(f.path, f.text) for f in files}
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    line_chunks = sum(len(chunk_text(f.path, f.text)) for f in files)
    line_seconds = time.perf_counter() - started
    total = sum(len(c) for c in chunks.values())
    print(
        f"\nrequests: {len(files)} files, {total} definition chunks in {seconds * 1000:.0f} ms; "
        f"line chunker {line_chunks} chunks in {line_seconds * 1000:.0f} ms"
    )
    for f in files:
        check_contract(f.text, chunks[f.path])
    wanted = {
        "src/requests/sessions.py": [
            # rebuild_method is defined on the mixin that Session inherits it from
            ("SessionRedirectMixin.rebuild_method", "def rebuild_method"),
            ("SessionRedirectMixin.should_strip_auth", "def should_strip_auth"),
            ("Session.send", "def send"),
        ],
        "src/requests/utils.py": [("super_len", "def super_len")],
    }
    for path, symbols in wanted.items():
        text_lines = split_lines(next(f.text for f in files if f.path == path))
        for symbol, needle in symbols:
            line = next(i for i, text in enumerate(text_lines, start=1) if text.lstrip().startswith(needle))
            assert any(symbol in c.symbols and c.start_line <= line <= c.end_line for c in chunks[path]), (
                f"no chunk of {path} holds {symbol} at line {line}"
            )
