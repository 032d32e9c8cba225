"""The language table: one fixture per language with its exact chunks, recovery from syntax errors,
properties over random text in every language, and the fallbacks' reasons."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesearch.chunking import Chunk, ChunkParams, chunk_text, definitions, split_lines
from codesearch.chunking.definitions import FALLBACK_REASONS, SUPPORTED_LANGUAGES, cut_file
from codesearch.chunking.languages import LANGUAGES, language_for
from codesearch.stats import repo_stats

LANGUAGE_FIXTURES = FIXTURES / "languages"
# A budget of 120 characters: small enough that containers split into their members.
TINY = ChunkParams(target_tokens=30, overlap_tokens=4, chars_per_token=4)

# (fixture, language, exact (start, end, symbols) per chunk at TINY). Each fixture holds a
# definition nested in a container (method in class / impl / module / namespace).
EXPECTED = [
    ("sample.c", "c", [(1, 2, ()), (4, 4, ("point",)), (6, 6, ("node_t", "node")), (8, 10, ("add",)),
                       (12, 12, ("make",))]),
    ("sample.cpp", "cpp", [
        (1, 2, ("fmt",)),
        (3, 6, ("fmt::detail", "fmt::detail::buffer", "fmt::detail::buffer::push_back")),
        (7, 11, ("fmt::detail::buffer::size", "fmt::detail::buffer", "fmt::detail")),
        (12, 12, ("fmt::detail::buffer::size",)),  # the out-of-class definition, template arguments dropped
        (13, 13, ("fmt::format_spec",)),
        (14, 15, ("fmt::count",)),
    ]),
    ("sample.cs", "csharp", [(1, 5, ("Dapper", "Dapper.SqlMapper")), (6, 6, ("Dapper.SqlMapper.Execute",)),
                             (7, 7, ("Dapper.SqlMapper.Helper", "Dapper.SqlMapper.Helper.Run")),
                             (8, 9, ("Dapper.SqlMapper.Count",)), (10, 11, ("Dapper.IWrapper", "Dapper.IWrapper.Wrap"))]),
    ("sample.ex", "elixir", [(1, 4, ("Plug.Conn",)), (5, 7, ("Plug.Conn.put_status",)), (8, 8, ("Plug.Conn.helper",)),
                             (9, 11, ("Plug.Conn.Unfetched",)), (12, 13, ("Plug.Conn.sigil", "Plug.Conn"))]),
    ("sample.hs", "haskell", [(1, 2, ()), (3, 3, ("XState",)), (4, 4, ("X",)), (5, 6, ("LayoutClass", "runLayout")),
                              (7, 7, ("WindowSet",)),
                              (8, 9, ("runX",)),  # the signature and its equation are one definition
                              (10, 11, ("instance Functor X", "fmap"))]),
    ("sample.kt", "kotlin", [(1, 2, ()), (3, 4, ("HttpClient", "HttpClient.close")),
                             (5, 8, ("HttpClient.Companion", "HttpClient.Companion.create")), (9, 9, ("config",)),
                             (10, 12, ("Defaults",)), (13, 15, ("Engine", "Engine.close"))]),
    ("sample.lua", "lua", [(1, 2, ()), (3, 5, ("M.setup",)), (6, 6, ("M.method",)), (7, 7, ("helper",)),
                           (8, 9, ("M.other",))]),
    ("sample.php", "php", [(1, 3, ()), (4, 6, ("StreamHandler",)), (7, 7, ("StreamHandler::__construct",)),
                           (8, 9, ("StreamHandler::write",)), (10, 10, ("helper",)),
                           (11, 11, ("HandlerInterface", "HandlerInterface::handle"))]),
    ("sample.rb", "ruby", [(1, 2, ("Rack",)),
                           (3, 9, ("Rack::Request", "Rack::Request.initialize", "Rack::Request.build")),
                           (10, 11, ("Rack.helper", "Rack"))]),
    ("sample.scala", "scala", [(1, 2, ()), (3, 6, ("Decoder", "Decoder.apply", "Decoder.map")),
                               (7, 8, ("Decoder", "Decoder.Result")), (9, 9, ("Decoder",)), (10, 11, ("Decoder.instance",)),
                               (12, 12, ("DecodingFailure",)), (13, 13, ("Json", "Json.noSpaces"))]),
    ("sample.sh", "bash", [(1, 6, ("bats_run",)), (7, 9, ("bats_test_begin",))]),
    ("sample.swift", "swift", [(1, 4, ("ConstraintMaker", "ConstraintMaker.init")), (5, 6, ("ConstraintMaker.left",)),
                               (7, 9, ("ConstraintMaker", "ConstraintMaker.helper")),  # the extension
                               (10, 10, ("Point",)), (11, 11, ("Relatable", "Relatable.relate")), (12, 12, ("topLevel",))]),
    ("sample.zig", "zig", [(1, 1, ()), (2, 7, ("Param", "Param.init")), (8, 10, ("parse",)), (11, 11, ("Kind",)),
                           (12, 12, ('test "parse"',))]),
]


def spans(chunks: list[Chunk]) -> list[tuple[int, int, tuple[str, ...]]]:
    return [(c.start_line, c.end_line, c.symbols) for c in chunks]


def check_contract(text: str, chunks: list[Chunk], params: ChunkParams) -> None:
    """Sorted, editor-true lines, text equal to its lines, every non-blank line covered, overlap within the budget."""
    lines = split_lines(text)
    covered: set[int] = set()
    previous: Chunk | None = None
    for chunk in chunks:
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines), chunk
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.text.strip()
        if previous is not None:
            assert chunk.start_line > previous.start_line
            shared = range(chunk.start_line, previous.end_line + 1)
            if shared:  # only a long definition's line windows overlap, by the stated overlap
                size = sum(len(lines[i - 1]) + 1 for i in shared)
                assert size - (len(lines[shared[0] - 1]) + 1) < params.overlap_tokens * params.chars_per_token
        covered.update(range(chunk.start_line, chunk.end_line + 1))
        previous = chunk
    missing = [i for i, line in enumerate(lines, start=1) if line.strip() and i not in covered]
    assert not missing, f"lines {missing[:10]} are in no chunk"


def test_every_language_of_the_table_has_a_fixture_or_older_tests() -> None:
    older = {"python", "javascript", "typescript", "tsx", "go", "rust", "java"}  # tests/test_definitions.py
    assert set(SUPPORTED_LANGUAGES) == older | {language for _, language, _ in EXPECTED}
    assert len(SUPPORTED_LANGUAGES) == 20  # 19 languages; TypeScript has its TSX grammar too


@pytest.mark.parametrize(("name", "language", "expected"), EXPECTED, ids=[e[1] for e in EXPECTED])
def test_fixture_gives_exact_chunks(name: str, language: str, expected: list[tuple[int, int, tuple[str, ...]]]) -> None:
    text = (LANGUAGE_FIXTURES / name).read_text(encoding="utf-8")
    cut = cut_file(f"src/{name}", text, TINY)
    assert (cut.language, cut.fallback) == (language, None)
    assert spans(cut.chunks) == expected
    check_contract(text, cut.chunks, TINY)


@pytest.mark.parametrize(("name", "language", "expected"), EXPECTED, ids=[e[1] for e in EXPECTED])
def test_a_syntax_error_still_yields_definition_chunks(name: str, language: str, expected: list) -> None:  # type: ignore[type-arg]
    lines = (LANGUAGE_FIXTURES / name).read_text(encoding="utf-8").split("\n")
    after = next(end for _, end, symbols in expected if symbols)  # right after the first definition
    broken = "\n".join([*lines[:after], "}}} ((( @@@ <<< end", *lines[after:]])
    cut = cut_file(f"src/{name}", broken, TINY)
    assert cut.language == language and cut.fallback is None
    found = {s for c in cut.chunks for s in c.symbols}
    first_symbol = next(symbols[0] for _, _, symbols in expected if symbols)
    assert first_symbol in found  # what comes before the error is still cut along its definitions
    check_contract(broken, cut.chunks, TINY)


@pytest.mark.parametrize(
    ("path", "first_line", "language"),
    [
        ("lib/a.h", None, "c"), ("x.hpp", None, "cpp"), ("A.cs", None, "csharp"), ("a.php", None, "php"),
        ("Rakefile", None, "ruby"), ("build.gradle.kts", None, "kotlin"), ("A.swift", None, "swift"),
        ("a.sc", None, "scala"), ("mix.exs", None, "elixir"), ("Main.hs", None, "haskell"), ("init.lua", None, "lua"),
        ("t.bats", None, "bash"), ("build.zig", None, "zig"),
        ("bin/deploy", "#!/usr/bin/env bash", "bash"), ("bin/tool", "#!/usr/bin/python3.11", "python"),
        ("bin/serve", "#!/usr/bin/env node", "javascript"), ("bin/x", "#!/bin/sh -e", "bash"),
        ("README", None, None), ("bin/tool", "no shebang", None), ("notes.txt", "#!/bin/bash", None),
    ],
)
def test_extensions_names_and_shebangs_pick_the_language(path: str, first_line: str | None, language: str | None) -> None:
    found = language_for(path, first_line)
    assert (found.name if found else None) == language


@pytest.mark.parametrize(
    ("head", "language"),
    [
        ("#pragma once\nnamespace fmt {\ninline int f();\n}\n", "cpp"),
        ("#include <string>\nint count(const char*);\n", "cpp"),
        ("template <typename T>\nT twice(T x) { return x + x; }\n", "cpp"),
        ("class Buffer {\n public:\n  int size() const;\n};\n", "cpp"),
        ("inline std::size_t width(int x);\n", "cpp"),
        # A C header written for C++ callers too stays C; so do words in comments.
        ('#ifdef __cplusplus\nextern "C" {\n#endif\nint uv_run(uv_loop_t*);\n', "c"),
        ("/* the class of errors; see namespace docs */\nstruct uv_buf_t { char* base; };\n", "c"),
    ],
)
def test_a_header_that_reads_as_cpp_is_cpp(head: str, language: str) -> None:
    assert language_for("include/x.h", None, head).name == language  # type: ignore[union-attr]
    cut = cut_file("include/x.h", head, TINY)
    assert cut.language == language and cut.fallback is None


def test_module_level_constants_are_definitions_and_imports_are_not() -> None:
    text = (
        'const fs = require("fs");\n'
        'const plugin = await import("./plugin.js");\n'
        "export const MAX_RETRIES = 3;\n"
        "const v1Processor: Processor<Event> = {\n"
        "  getPath: (e) => e.path,\n"
        "};\n"
        "function f() {\n"
        "  const inner = 2;\n"
        "  return inner;\n"
        "}\n"
    )
    cut = cut_file("src/a.ts", text, ChunkParams(target_tokens=20, overlap_tokens=0))
    assert [(c.start_line, c.end_line, c.symbols) for c in cut.chunks] == [
        (1, 2, ()),
        (3, 3, ("MAX_RETRIES",)),
        (4, 6, ("v1Processor",)),
        (7, 10, ("f",)),  # a function's own constants stay inside it
    ]


def test_a_script_without_extension_is_cut_by_its_shebang() -> None:
    text = "#!/usr/bin/env bash\nset -e\n\ngreet() {\n  echo hi\n}\n"
    cut = cut_file("bin/greet", text, TINY)
    assert cut.language == "bash" and cut.fallback is None
    assert any("greet" in c.symbols for c in cut.chunks)


def test_every_grammar_loads_with_the_pinned_tree_sitter() -> None:
    for name in SUPPORTED_LANGUAGES:
        assert definitions.grammar_available(name), f"{name}: pip install {LANGUAGES[name].package}"


def test_a_missing_grammar_falls_back_to_line_windows_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(definitions._PARSERS, "zig", None)
    text = (LANGUAGE_FIXTURES / "sample.zig").read_text(encoding="utf-8")
    cut = cut_file("src/sample.zig", text, TINY)
    assert cut == (chunk_text("src/sample.zig", text, TINY), "zig", definitions.NO_GRAMMAR)


def test_a_grammar_that_fails_to_load_is_reported_once_and_never_breaks(monkeypatch: pytest.MonkeyPatch,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    from dataclasses import replace

    broken = replace(LANGUAGES["lua"], grammar="tree_sitter_no_such_grammar")
    monkeypatch.setattr(definitions, "LANGUAGES", {**LANGUAGES, "lua": broken})
    monkeypatch.delitem(definitions._PARSERS, "lua", raising=False)
    monkeypatch.setattr(definitions, "_WARNED", set())
    assert not definitions.grammar_available("lua")
    assert not definitions.grammar_available("lua")
    assert sum("no tree-sitter grammar for lua" in r.message for r in caplog.records) == 1
    assert "tree-sitter-no-such-grammar" in caplog.text


def test_too_large_and_unknown_files_fall_back_with_their_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(definitions, "MAX_PARSE_BYTES", 50)
    big = "def f():\n    return 1\n" * 10
    assert cut_file("a.py", big).fallback == definitions.TOO_LARGE
    assert cut_file("notes.md", "# hi\n").fallback == definitions.NO_LANGUAGE
    assert set(FALLBACK_REASONS) == {"unknown extension", "no grammar", "parse error", "too large"}


def test_stats_reports_each_language_and_every_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, _, _ in EXPECTED:
        (tmp_path / name).write_text((LANGUAGE_FIXTURES / name).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "notes.md").write_text("# notes\n\nsome words\n", encoding="utf-8")
    monkeypatch.setitem(definitions._PARSERS, "zig", None)
    report = repo_stats(tmp_path, params=TINY)
    assert set(report.languages) == {language for _, language, _ in EXPECTED} | {"other"}
    for name, language, expected in EXPECTED:
        stats = report.languages[language]
        if language == "zig":
            assert stats.fallbacks == {name: "no grammar"} and stats.chunks_with_symbols == 0
        else:
            assert stats.files == 1 and stats.chunks == len(expected)
            assert stats.chunks_with_symbols == sum(1 for _, _, symbols in expected if symbols)
            assert stats.fallbacks == {}
    assert report.languages["other"].fallbacks == {"notes.md": "unknown extension"}
    assert report.as_dict()["languages"]["rust" if "rust" in report.languages else "bash"]["symbol_share"] == 1.0


# --- properties over random text in every language --------------------------------------------

_TOKENS = {
    "c": ["int ", "void ", "struct ", "typedef ", "#define X 1", "#ifdef A", "#endif", "static "],
    "cpp": ["namespace n ", "class C ", "template <typename T> ", "::", "public:", "};", "auto "],
    "csharp": ["namespace N ", "class C ", "public ", "void M() ", "{ get; set; }", "using System;"],
    "php": ["<?php ", "class C ", "function f() ", "namespace A\\B;", "$x = 1;", "public "],
    "ruby": ["class C", "module M", "def m", "end", "def self.s", "  "],
    "kotlin": ["class C ", "fun f() ", "object O ", "companion object ", "val x = 1", "interface I "],
    "swift": ["class C ", "func f() ", "struct S ", "extension C ", "protocol P ", "init() "],
    "scala": ["object O ", "class C ", "trait T ", "def f = ", "val x = 1", "case class K(x: Int)"],
    "elixir": ["defmodule M do", "def f(x) do", "end", "defp g, do: 1", "@doc \"x\"", "alias A.B"],
    "haskell": ["module M where", "f :: Int", "f x = x", "data D = D", "class C a where", "instance C D where"],
    "lua": ["local M = {}", "function M.f()", "end", "local function g()", "return M", "M.h = function() end"],
    "bash": ["f() {", "}", "function g {", "echo hi", "if [ x ]; then", "fi"],
    "zig": ["const S = struct {", "};", "pub fn f() void {", "}", "test \"t\" {", "const x = 1;"],
}
_EXTENSION = {"c": "c", "cpp": "cpp", "csharp": "cs", "php": "php", "ruby": "rb", "kotlin": "kt", "swift": "swift",
              "scala": "scala", "elixir": "ex", "haskell": "hs", "lua": "lua", "bash": "sh", "zig": "zig"}
_NOISE = st.sampled_from(["\n", "\r\n", "\r", "\t", " ", "{", "}", "(", ")", ";", "é", "日本", "\u2028", "x", "\ufeff"])


@st.composite
def _source(draw: st.DrawFn) -> tuple[str, str]:
    language = draw(st.sampled_from(sorted(_TOKENS)))
    parts = draw(st.lists(st.one_of(st.sampled_from(_TOKENS[language]), _NOISE, st.text(max_size=4)), max_size=60))
    text = "".join(parts)
    if draw(st.booleans()):
        text = "\ufeff" + text  # a byte-order mark, as some editors write it
    return language, text


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=_source(), target=st.integers(8, 80), overlap=st.integers(0, 12))
def test_random_text_in_every_language_keeps_the_contract(source: tuple[str, str], target: int, overlap: int) -> None:
    language, text = source
    params = ChunkParams(target_tokens=target, overlap_tokens=overlap, chars_per_token=4)
    cut = cut_file(f"src/random.{_EXTENSION[language]}", text, params)
    assert cut.language == language
    check_contract(text, cut.chunks, params)


def test_a_bash_file_with_characters_above_the_bmp_does_not_crash_the_parser() -> None:
    # tree-sitter-bash's scanner reads past a table on such code points (likelier the higher they are).
    # The child process cuts texts that crashed it in most runs before the fix, so that a regression
    # fails this test instead of killing the suite.
    child = """
from codesearch.chunking.definitions import cut_file
for template in ("{%s", "echo {%s}\\n", ")echo hi }x}f() {\\t if [ x ]; then)echo hifif() {%s"):
    for code in range(0x10000, 0x110000, 0x1000):
        text = template % chr(code + 0x708)
        for _ in range(10):
            cut = cut_file("run.sh", text)
        assert cut.language == "bash" and "\\n".join(c.text for c in cut.chunks) == text.rstrip("\\n"), cut
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", (proc.returncode, proc.stderr[-500:])


def test_the_bash_parser_gets_a_replacement_for_characters_above_the_bmp(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bytes] = []

    def recording(language: str) -> None:
        parser = definitions._parser(language)
        assert parser is not None

        class Recording:
            def parse(self, source: bytes):  # type: ignore[no-untyped-def]
                seen.append(source)
                return parser.parse(source)

        monkeypatch.setitem(definitions._PARSERS, language, Recording())

    recording("bash")
    text = "deploy() {\n  echo '\U0001F680 \U000E0067'\n}\n"
    cut = cut_file("deploy.sh", text)
    assert seen == ["deploy() {\n  echo '\ufffd \ufffd'\n}".encode()]  # same rows, no code point above U+FFFF
    assert [(c.start_line, c.end_line, c.text, c.symbols) for c in cut.chunks] == [(1, 3, text.rstrip("\n"), ("deploy",))]
    # Other grammars read such characters as they are (a Swift name may be an emoji).
    recording("python")
    cut_file("deploy.py", "def deploy():\n    return '\U0001F680'\n")
    assert seen[-1] == "def deploy():\n    return '\U0001F680'".encode()
