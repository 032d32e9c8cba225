"""Training pairs: the sources list, doc extraction in every language, the filters, the split and the output."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, missing_reference

from codesearch.chunking.languages import LANGUAGES
from codesearch.exceptions import TrainingDataError
from codesearch.training import (
    Source,
    benchmark_overlap,
    check_benchmark_overlap,
    extract_docs,
    iter_files,
    languages_covered,
    load_sources,
    mine_sources,
    summarise,
)
from codesearch.training.docs import doc_problem, strip_comment, strip_string
from codesearch.training.filters import GENERATED, TEST, VENDORED, content_reason, path_reason
from codesearch.training.mine import Pair, RepositoryPairs, cap_pairs, deduplicate, validation_repositories

SOURCES = ROOT / "training" / "sources.json"


def _benchmark_list() -> Path:
    """``../shared/benchmark-repos.txt`` beside the repository (or beside the main checkout of a git worktree)."""
    here = ROOT / ".." / "shared" / "benchmark-repos.txt"
    if here.is_file():
        return here
    common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                            capture_output=True, text=True)
    main = Path(common.stdout.strip()).parent if common.returncode == 0 and common.stdout.strip() else ROOT
    return main / ".." / "shared" / "benchmark-repos.txt"


BENCHMARK_LIST = _benchmark_list()
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def source(repo: str, languages: tuple[str, ...] = ("python",), licence: str = "MIT") -> Source:
    return Source(repo, COMMIT, licence, languages)


# --------------------------------------------------------------------------- the sources list


def test_benchmark_overlap_by_owner_and_name_and_by_name_alone(tmp_path: Path) -> None:
    listing = tmp_path / "bench.txt"
    listing.write_text("# the benchmark\npsf/requests\nfmtlib/fmt\n\ntypelevel/cats\n")
    sources = [source("PSF/Requests"), source("someone/fmt", ("cpp",)), source("other/cats-effect", ("scala",)),
               source("other/CATS", ("scala",))]
    assert benchmark_overlap(sources, ["psf/requests", "fmtlib/fmt", "typelevel/cats"]) == [
        ("PSF/Requests", "psf/requests"), ("someone/fmt", "fmtlib/fmt"), ("other/CATS", "typelevel/cats")]
    with pytest.raises(TrainingDataError, match="overlap the benchmark: PSF/Requests"):
        check_benchmark_overlap(sources, listing)
    check_benchmark_overlap([source("other/cats-effect", ("scala",))], listing)  # a longer name is another project


def test_the_committed_sources_never_overlap_the_benchmark() -> None:
    if not BENCHMARK_LIST.is_file():
        missing_reference(f"the benchmark list {BENCHMARK_LIST} (../shared/benchmark-repos.txt beside the repository)")
    check_benchmark_overlap(load_sources(SOURCES), BENCHMARK_LIST)


def test_the_committed_sources_avoid_the_held_out_question_corpora() -> None:
    corpora = json.loads((ROOT / "benchmarks" / "data" / "questions.json").read_text())["corpora"]
    names = {s.name.lower() for s in load_sources(SOURCES)}
    assert not names & {name.lower() for name in corpora}


def test_the_committed_sources_cover_every_language_pinned_and_licensed() -> None:
    sources = load_sources(SOURCES)  # validates each: 40-hex commit, allowed licence, known languages, no repeats
    wanted = set(LANGUAGES) - {"tsx"}  # TypeScript's JSX dialect comes with TypeScript's sources
    assert wanted <= languages_covered(sources)
    for lang in wanted:
        assert sum(1 for s in sources if lang in s.languages) >= 2, lang
    raw = json.loads(SOURCES.read_text())
    assert all(set(entry) == {"repo", "commit", "licence", "languages"} for entry in raw)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("licence", "GPL-3.0-only", "licence"),
    ("licence", "MIT OR GPL-2.0", "licence"),
    ("commit", "main", "commit"),
    ("commit", COMMIT.upper(), "commit"),
    ("languages", ("cobol",), "unknown language"),
    ("repo", "no-owner", "owner/name"),
])
def test_a_source_is_refused_with_the_reason(field: str, value: object, message: str) -> None:
    fields = {"repo": "a/b", "commit": COMMIT, "licence": "MIT", "languages": ("python",), field: value}
    with pytest.raises(TrainingDataError, match=message):
        Source(**fields)  # type: ignore[arg-type]


def test_dual_and_combined_licences_are_allowed_when_every_part_is() -> None:
    assert source("a/b", licence="MIT OR Apache-2.0").licence == "MIT OR Apache-2.0"
    assert source("a/b", licence="MIT AND BSD-3-Clause").name == "b"


def test_a_sources_file_that_lists_a_repository_twice_is_refused(tmp_path: Path) -> None:
    entry = {"repo": "a/b", "commit": COMMIT, "licence": "MIT", "languages": ["go"]}
    path = tmp_path / "sources.json"
    path.write_text(json.dumps([entry, {**entry, "repo": "A/B"}]))
    with pytest.raises(TrainingDataError, match="twice"):
        load_sources(path)


# --------------------------------------------------------------------------- doc extraction, language by language

# (path, text, [(kind, symbol, the query, the code's first line)]): every language's doc style.
SNIPPETS: dict[str, tuple[str, str, list[tuple[str, str, str, str]]]] = {
    "python": ("conf.py", '''\
import os


def load(path, *, strict=False):
    """Read the configuration file at path and return its settings.

    Args:
        path: where the file is.
    """
    with open(path) as f:
        return f.read()
''', [("function", "load", "Read the configuration file at path and return its settings.",
       "def load(path, *, strict=False):")]),
    "javascript": ("a.js", '''\
/**
 * Copyright (c) 2020 Someone. Licensed under MIT.
 */
'use strict';

/**
 * Debounce a function so it runs once after calls stop arriving.
 * @param {Function} fn the function
 * @returns {Function} the debounced function
 */
export function debounce(fn, wait) {
  let t;
  return () => { clearTimeout(t); t = setTimeout(fn, wait); };
}
''', [("function", "debounce", "Debounce a function so it runs once after calls stop arriving.",
       "export function debounce(fn, wait) {")]),
    "typescript": ("a.ts", '''\
/**
 * @name parseISO
 * @category Common Helpers
 * @summary Parse an ISO date string into a Date in the local zone.
 *
 * @param value - the ISO string
 */
export function parseISO(value: string): Date {
  return new Date(value);
}
''', [("function", "parseISO", "Parse an ISO date string into a Date in the local zone.",
       "export function parseISO(value: string): Date {")]),
    "go": ("ring.go", '''\
package ring

// Move moves n elements backward or forward in the ring and returns that element.
func (r *Ring) Move(n int) *Ring {
	return r
}
''', [("function", "Ring.Move", "Move moves n elements backward or forward in the ring and returns that element.",
       "func (r *Ring) Move(n int) *Ring {")]),
    "rust": ("group.rs", '''\
/// Split an iterator into runs of equal keys
/// and yield each run.
///
/// # Examples
///
/// ```
/// let g = group_by(v);
/// ```
#[inline]
pub fn group_by<I>(iter: I) -> Groups<I> {
    Groups { iter }
}
''', [("function", "group_by", "Split an iterator into runs of equal keys and yield each run.", "#[inline]")]),
    "java": ("IOUtils.java", '''\
package org.example;

public final class IOUtils {
    /**
     * Reads all bytes of the {@link InputStream} into a new <code>byte</code> array.
     * <p>
     * @param in the stream
     * @return the bytes
     */
    public static byte[] toByteArray(InputStream in) throws IOException {
        return in.readAllBytes();
    }
}
''', [("function", "IOUtils.toByteArray", "Reads all bytes of the InputStream into a new byte array.",
       "public static byte[] toByteArray(InputStream in) throws IOException {")]),
    "c": ("json.h", '''\
/* Copyright (c) 2010 Someone. All rights reserved. */

/**
 * @brief Create a new empty JSON object with no members.
 * @return the object, or NULL on error
 */
json_t *json_object(void);
''', [("function", "json_object", "Create a new empty JSON object with no members.", "json_t *json_object(void);")]),
    "cpp": ("merger.cc", '''\
namespace leveldb {

// Return a new iterator that merges the children
// in sorted order.
Iterator* NewMergingIterator(const Comparator* c, Iterator** list, int n) {
  return nullptr;
}

}  // namespace leveldb
''', [("function", "leveldb::NewMergingIterator", "Return a new iterator that merges the children in sorted order.",
       "Iterator* NewMergingIterator(const Comparator* c, Iterator** list, int n) {")]),
    "csharp": ("Policy.cs", '''\
namespace Polly
{
    public class RetryPolicy
    {
        /// <summary>
        /// Executes the <paramref name="action"/> under the policy and returns its result.
        /// </summary>
        /// <param name="action">the action</param>
        public T Execute<T>(Func<T> action) { return action(); }
    }
}
''', [("function", "Polly.RetryPolicy.Execute", "Executes the action under the policy and returns its result.",
       "public T Execute<T>(Func<T> action) { return action(); }")]),
    "php": ("write.php", '''\
<?php
/**
 * Write the contents to a file, creating directories as needed.
 *
 * @param string $path
 * @throws FilesystemException
 */
function write(string $path, string $contents): void
{
    file_put_contents($path, $contents);
}
''', [("function", "write", "Write the contents to a file, creating directories as needed.",
       "function write(string $path, string $contents): void")]),
    "ruby": ("builder.rb", '''\
class RackBuilder
  # Adds a handler to the end of the stack and returns it.
  #
  # @param klass [Class] the handler
  # @return [Class]
  def use(klass, *args)
    @handlers << klass
  end
end
''', [("function", "RackBuilder.use", "Adds a handler to the end of the stack and returns it.",
       "def use(klass, *args)")]),
    "kotlin": ("Okio.kt", '''\
package okio

/**
 * Returns a new source that buffers reads from this source.
 *
 * @throws IOException if it fails
 */
fun Source.buffer(): BufferedSource = RealBufferedSource(this)
''', [("function", "buffer", "Returns a new source that buffers reads from this source.",
       "fun Source.buffer(): BufferedSource = RealBufferedSource(this)")]),
    "swift": ("Chunks.swift", '''\
/// Returns the elements of the collection in chunks of the given size.
///
/// - Parameter count: the size of each chunk.
public func chunks(ofCount count: Int) -> [[Int]] {
    return []
}
''', [("function", "chunks", "Returns the elements of the collection in chunks of the given size.",
       "public func chunks(ofCount count: Int) -> [[Int]] {")]),
    "scala": ("Stream.scala", '''\
package fs2

final class Stream[F[_], O] {

  /** Emits only the first n elements of this [[Stream]]
    * and then stops.
    */
  def take(n: Long): Stream[F, O] = this
}
''', [("function", "Stream.take", "Emits only the first n elements of this Stream and then stops.",
       "def take(n: Long): Stream[F, O] = this")]),
    "elixir": ("parser.ex", '''\
defmodule MyApp.Parser do
  @doc """
  Parses the given string into a keyword list of options.

  ## Examples

      iex> parse("a=1")
  """
  @spec parse(String.t()) :: keyword()
  def parse(text) do
    text
  end

  @doc false
  def hidden(x), do: x
end
''', [("function", "MyApp.Parser.parse", "Parses the given string into a keyword list of options.",
       "def parse(text) do")]),
    "haskell": ("Map.hs", '''\
module Data.Thing (lookup) where

-- | Look up the value at a key in the map,
-- failing when the key is absent.
lookup :: Ord k => k -> Map k a -> Maybe a
lookup k m = go m
  where go = undefined
''', [("function", "lookup", "Look up the value at a key in the map, failing when the key is absent.",
       "lookup :: Ord k => k -> Map k a -> Maybe a")]),
    "lua": ("attach.lua", '''\
local M = {}

--- Attach gitsigns to the buffer and start watching its file.
---@param bufnr integer the buffer
---@return boolean
function M.attach(bufnr)
  return true
end

return M
''', [("function", "M.attach", "Attach gitsigns to the buffer and start watching its file.",
       "function M.attach(bufnr)")]),
    "bash": ("versions.sh", '''\
#!/usr/bin/env bash
set -e

# Print the installed versions, one per line, newest first.
list_versions() {
  ls -1 "$PYENV_ROOT/versions" | sort -r
}
''', [("function", "list_versions", "Print the installed versions, one per line, newest first.", "list_versions() {")]),
    "zig": ("loop.zig", '''\
const std = @import("std");

/// Run the loop until no more completions are pending.
pub fn run(self: *Loop) !void {
    while (self.active > 0) try self.tick();
}
''', [("function", "run", "Run the loop until no more completions are pending.", "pub fn run(self: *Loop) !void {")]),
}


def test_every_language_has_a_snippet() -> None:
    assert set(SNIPPETS) == set(LANGUAGES) - {"tsx"}


@pytest.mark.parametrize("language", sorted(SNIPPETS))
def test_a_definitions_doc_is_read_and_removed_from_its_code(language: str) -> None:
    path, text, expected = SNIPPETS[language]
    found = [p for p in extract_docs(path, text) if p.kind != "module"]
    assert [(p.kind, p.symbol, summarise(p.doc), p.code.split("\n")[0]) for p in found] == expected
    for pair, (_, _, query, _) in zip(found, expected, strict=True):
        assert " ".join(query.split()[:4]) not in pair.code  # the doc is gone from the code
        assert not any(marker in pair.code for marker in ("/**", "///", "-- |", "---@", "@doc", '"""', "# Print"))
        assert doc_problem(summarise(pair.doc), pair.symbol) is None
        assert text.split("\n")[pair.line - 1].strip() == pair.code.split("\n")[0]


def test_the_code_keeps_decorators_attributes_and_the_body() -> None:
    (pair,) = extract_docs("g.rs", SNIPPETS["rust"][1])
    assert pair.code == "#[inline]\npub fn group_by<I>(iter: I) -> Groups<I> {\n    Groups { iter }\n}"
    (pair,) = [p for p in extract_docs("conf.py", SNIPPETS["python"][1]) if p.kind == "function"]
    assert pair.code == "def load(path, *, strict=False):\n    with open(path) as f:\n        return f.read()"


def test_an_elixir_doc_false_documents_nothing() -> None:
    assert [p.symbol for p in extract_docs("parser.ex", SNIPPETS["elixir"][1])] == ["MyApp.Parser.parse"]


# --------------------------------------------------------------------------- class and module pairs


def test_python_class_and_module_docstrings_pair_with_the_class_and_the_file() -> None:
    text = '''"""Helpers that read configuration files into dictionaries."""
import os


class Settings:
    """Holds the parsed settings of one project."""

    def get(self, key):
        return None
'''
    pairs = {p.kind: p for p in extract_docs("pkg/settings.py", text)}
    assert pairs["class"].symbol == "Settings" and pairs["class"].doc == "Holds the parsed settings of one project."
    assert pairs["class"].code == "class Settings:\n    def get(self, key):\n        return None"
    assert pairs["module"].symbol == "pkg/settings.py"
    assert pairs["module"].doc == "Helpers that read configuration files into dictionaries."
    assert pairs["module"].code.startswith("import os\nclass Settings:") and "Helpers that" not in pairs["module"].code


@pytest.mark.parametrize(("path", "text", "doc", "code_start"), [
    ("ring.go", "// Copyright 2009 The Go Authors. All rights reserved.\n\n// Package ring implements circular lists.\n"
     "package ring\n\nfunc New(n int) *Ring { return nil }\n", "Package ring implements circular lists.", "package ring"),
    ("lib.rs", "//! Iterator adaptors that group elements by key.\n\npub fn group() -> u32 { 1 }\n",
     "Iterator adaptors that group elements by key.", "pub fn group() -> u32 { 1 }"),
    ("loop.zig", "//! An event loop built on io_uring.\nconst std = @import(\"std\");\n",
     "An event loop built on io_uring.", "const std = @import(\"std\");"),
    ("Map.hs", "{-|\nModule      : Data.Thing\nCopyright   : (c) Someone, 2014\nLicense     : BSD-3\n\n"
     "Finite maps from keys to values.\n-}\nmodule Data.Thing (lookup) where\n\nlookup = undefined\n",
     "Finite maps from keys to values.", "module Data.Thing (lookup) where"),
    ("install.sh", "#!/usr/bin/env bash\n# Install a Python version from source into the versions folder.\n\nset -e\nmake\n",
     "Install a Python version from source into the versions folder.", "#!/usr/bin/env bash"),
    ("parser.ex", '# SPDX-FileCopyrightText: 2019 the contributors\n#\n# SPDX-License-Identifier: MIT\n\n'
     'defmodule Parser do\n  @moduledoc """\n  Parses configuration files into keyword lists.\n  """\n'
     "  def parse(t), do: t\nend\n", "Parses configuration files into keyword lists.", "defmodule Parser do"),
])
def test_a_files_own_doc_pairs_with_the_file(path: str, text: str, doc: str, code_start: str) -> None:
    modules = [p for p in extract_docs(path, text) if p.kind == "module"]
    assert len(modules) == 1
    assert summarise(modules[0].doc) == doc
    assert modules[0].code.startswith(code_start)
    assert doc not in modules[0].code and "Copyright" not in modules[0].code and "SPDX" not in modules[0].code


def test_a_licence_header_or_the_first_definitions_doc_is_no_module_doc() -> None:
    path, text, _ = SNIPPETS["javascript"]
    assert [p.kind for p in extract_docs(path, text)] == ["function"]
    assert [p.kind for p in extract_docs("z.zig", SNIPPETS["zig"][1])] == ["function"]


def test_java_class_docs_are_class_pairs() -> None:
    text = "package a;\n\n/**\n * Utilities for reading whole streams into strings.\n */\npublic class IOUtils {\n" \
           "    int x;\n}\n"
    (pair,) = extract_docs("IOUtils.java", text)
    assert (pair.kind, pair.symbol, summarise(pair.doc)) == ("class", "IOUtils",
                                                             "Utilities for reading whole streams into strings.")
    assert pair.code == "public class IOUtils {\n    int x;\n}"


# --------------------------------------------------------------------------- docs into queries


@pytest.mark.parametrize(("raw", "query"), [
    ("/**\n * Sets the value.\n *\n * @param value The value.\n */", "Sets the value."),
    ("/// <summary>Gets the <see cref=\"T:System.String\"/> name.</summary>\n/// <returns>x</returns>", "Gets the String name."),
    ("-- | Look up a 'Key' in the @Map@.", "Look up a Key in the Map."),
    ("# Adds a handler.\n#\n# @param klass [Class]", "Adds a handler."),
    ("/** Converts a [[monix.eval.Task Task]] into a future. */", "Converts a Task into a future."),
    ("/**\n * Like [`doWhilst`]{@link module:ControlFlow.doWhilst}, inverted.\n */", "Like doWhilst, inverted."),
])
def test_markup_and_tag_blocks_are_dropped(raw: str, query: str) -> None:
    assert summarise(strip_comment(raw)) == query


def test_restructured_text_directives_and_fields_are_dropped_from_docstrings() -> None:
    docstring = '""".. dialect:: postgresql+psycopg2\n    :name: psycopg2\n\nThe psycopg2 driver for PostgreSQL."""'
    assert summarise(strip_string(docstring)) == "The psycopg2 driver for PostgreSQL."


def test_a_long_doc_is_cut_at_a_sentence_within_the_word_budget() -> None:
    first = "This sentence has exactly ten words in it for sure. "
    query = summarise(first * 8)
    assert query.endswith("sure.") and len(query.split()) <= 48 and len(query.split()) % 10 == 0


@pytest.mark.parametrize(("doc", "symbol", "problem"), [
    ("", "f", "tags-only"),
    ("Copyright (c) 2020 Someone, licensed under the MIT licence.", "", "licence"),
    ("eslint-disable-next-line no-console", "f", "directive"),
    ("TODO: make this faster one day", "f", "directive"),
    ("Getter.", "getName", "short"),
    ("Returns the current term.", "Raft.CurrentTerm", "restates-name"),
    ("Constructs a new instance.", "Foo.Foo", "restates-name"),
    ("if (x) { return y; }", "f", "code-like"),
    ("Returns the number of tasks in the queue.", "Injector.len", None),
])
def test_docs_that_are_no_query_are_named(doc: str, symbol: str, problem: str | None) -> None:
    assert doc_problem(doc, symbol) == problem


# --------------------------------------------------------------------------- file filters


@pytest.mark.parametrize(("path", "reason"), [
    ("tests/test_api.py", TEST), ("pkg/api_test.go", TEST), ("src/test/java/FooTest.java", TEST),
    ("spec/models/user_spec.rb", TEST), ("src/util.test.ts", TEST), ("Serilog.Tests/Core.cs", TEST),
    ("vendor/github.com/x/y.go", VENDORED), ("third_party/eigen/a.h", VENDORED), ("3rd-party/tbb/b.h", VENDORED),
    ("node_modules/a/index.js", VENDORED), ("api/v1/service.pb.go", GENERATED), ("proto/msg_pb2.py", GENERATED),
    ("dist/app.min.js", VENDORED), ("web/app.min.js", GENERATED),
    ("src/lib.rs", None), ("bin/pyenv-install", None),
])
def test_paths_that_are_not_mined(path: str, reason: str | None) -> None:
    assert path_reason(path, 1000) == reason


def test_generated_and_minified_files_are_skipped_by_their_text() -> None:
    assert content_reason("a.go", "// Code generated by protoc-gen-go. DO NOT EDIT.\npackage a\n") == GENERATED
    assert content_reason("a.cs", "// <auto-generated/>\nclass A {}\n") == GENERATED
    assert content_reason("a.js", "var a=1;" * 2000) == "minified"
    assert content_reason("a.go", "// Package a does things.\npackage a\n") is None
    assert content_reason("README", "just words\n") == "no language"


# --------------------------------------------------------------------------- de-duplication, cap, split


def pair(query: str, code: str, repo: str = "a/b", kind: str = "function", path: str = "x.py") -> Pair:
    return Pair(query, code, path, repo, "python", kind, "f", 1)


def test_duplicates_are_dropped_across_and_within_repositories() -> None:
    first = RepositoryPairs("a/b", [pair("Adds two numbers.", "def add(a, b): return a+b"),
                                    pair("adds TWO numbers", "def add2(a, b): return a+b"),  # same doc, normalised
                                    pair("Subtracts one number.", "def add(a, b):  return a+b"),  # same code
                                    pair("Multiplies two numbers.", "def mul(a, b): return a*b")])
    second = RepositoryPairs("c/d", [pair("Adds two numbers.", "def add(a, b): return a+b", "c/d"),
                                     pair("Adds two numbers.", "def plus(a, b): return a+b", "c/d")])
    filtered: dict[str, int] = {}
    from collections import Counter

    counts: Counter[str] = Counter(filtered)
    kept = deduplicate([first, second], counts)
    assert [p.code for p in kept[0].pairs] == ["def add(a, b): return a+b", "def mul(a, b): return a*b"]
    assert [p.code for p in kept[1].pairs] == ["def plus(a, b): return a+b"]
    assert counts == {"duplicate: doc in repository": 1, "duplicate: code in repository": 1, "duplicate: pair": 1}


def test_the_cap_draws_the_same_pairs_for_the_same_seed_and_keeps_module_pairs() -> None:
    pairs = [pair(f"doc {i} words here", f"code {i}", kind="module" if i % 50 == 0 else "function") for i in range(500)]
    drawn = cap_pairs(pairs, 100, seed=0, repo="a/b")
    assert len(drawn) == 100 and drawn == cap_pairs(pairs, 100, seed=0, repo="a/b")
    assert drawn != cap_pairs(pairs, 100, seed=1, repo="a/b")
    assert sum(p.kind == "module" for p in drawn) == 10  # all of them: under a fifth of the cap
    assert drawn == sorted(drawn, key=pairs.index)


def test_validation_repositories_are_a_seeded_tenth_one_per_language() -> None:
    sources = [source(f"o/{lang}{i}", (lang,)) for lang in ("go", "rust", "zig") for i in range(4)] + [
        source("o/lonely", ("lua",))]
    held = validation_repositories(sources, seed=0, fraction=0.25)
    assert len(held) == 3 and len({h.rstrip("0123") for h in held}) == 3 and "o/lonely" not in held
    assert held == validation_repositories(sources, seed=0, fraction=0.25)
    big = {s.repo: (100 if s.repo in held else 1) for s in sources}  # a language's main source stays in training
    assert not set(validation_repositories(sources, seed=0, fraction=0.25, pairs=big)) & set(held)


# --------------------------------------------------------------------------- trees and the whole run


def test_a_mirror_is_read_at_the_pinned_commit(tmp_path: Path) -> None:
    repo = tmp_path / "mirrors" / "me+lib"
    repo.mkdir(parents=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                              env=env).stdout.strip()

    git("init", "-q")
    (repo / "a.py").write_text("def f():\n    '''First version of the function here.'''\n")
    git("add", ".")
    git("commit", "-qm", "one")
    pinned = git("rev-parse", "HEAD")
    (repo / "a.py").write_text("changed\n")
    (repo / "b.py").write_text("new\n")
    git("add", ".")
    git("commit", "-qm", "two")
    files = dict(iter_files(Source("me/lib", pinned, "MIT", ("python",)), tmp_path / "mirrors", lambda p, n: True))
    assert files == {"a.py": b"def f():\n    '''First version of the function here.'''\n"}
    with pytest.raises(TrainingDataError, match="lacks the pinned commit"):
        list(iter_files(Source("me/lib", COMMIT, "MIT", ("python",)), tmp_path / "mirrors", lambda p, n: True))
    with pytest.raises(TrainingDataError, match="no mirror or checkout of me/other"):
        list(iter_files(Source("me/other", COMMIT, "MIT", ("python",)), tmp_path / "mirrors", lambda p, n: True))


WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")


def _checkout(root: Path, name: str, functions: int, language: str = "python") -> None:
    (root / name / "src").mkdir(parents=True)
    (root / name / "tests").mkdir()
    (root / name / "tests" / "test_x.py").write_text('def test_x():\n    """Checks that x works as it should."""\n')
    (root / name / "src" / "gen_pb2.py").write_text('def g():\n    """Generated code that is never mined."""\n')
    if language == "python":
        body = "".join(f'def {name}_f{i}(x):\n    """Compute the {WORDS[i]} value of {name} for x."""\n    return x + {i}\n\n'
                       for i in range(functions))
        (root / name / "src" / "m.py").write_text('"""The module of ' + name + ' that computes values."""\n\n' + body)
    else:
        body = "".join(f"// Compute the {WORDS[i]} value of {name} for x.\nfunc F{i}(x int) int {{ return x + {i} }}\n\n"
                       for i in range(functions))
        (root / name / "m.go").write_text("package m\n\n" + body)


def test_mine_sources_writes_splits_by_repository_and_a_manifest(tmp_path: Path) -> None:
    checkouts = tmp_path / "checkouts"
    sources = [source(f"o/py{i}", ("python",)) for i in range(4)] + [source(f"o/go{i}", ("go",)) for i in range(3)]
    for s in sources:
        _checkout(checkouts, s.name, 5, "python" if s.name.startswith("py") else "go")
    report = mine_sources(sources, checkouts, tmp_path / "out", seed=3, cap=4, workers=1, progress=False)
    records = {}
    for split in ("train", "validation"):
        with gzip.open(report.files[split], "rt", encoding="utf-8") as lines:
            records[split] = [json.loads(line) for line in lines]
    assert set(records["train"][0]) == {"query", "code", "path", "repo", "language", "kind", "symbol", "line"}
    train_repos = {r["repo"] for r in records["train"]}
    validation_repos = {r["repo"] for r in records["validation"]}
    assert validation_repos == set(report.validation_repositories) and not train_repos & validation_repos
    assert train_repos | validation_repos == {s.repo for s in sources}
    assert all(n == 4 for n in report.per_repository.values())
    assert not any(r["path"].startswith("tests/") or "pb2" in r["path"] for rs in records.values() for r in rs)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["seed"] == 3 and manifest["pairs"] == {"train": report.total("train"),
                                                           "validation": report.total("validation")}
    assert [s["commit"] for s in manifest["sources"]] == [COMMIT] * len(sources)
    # Python: 5 functions + the module's docstring, Go: 5 functions (no package comment); 4 kept of each
    assert manifest["filtered"]["file: test file"] == len(sources) and manifest["filtered"]["cap"] == 4 * 2 + 3 * 1
    assert report.counts["train"]["go"]["function"] + report.counts["validation"].get("go", {}).get("function", 0) \
        == 3 * 4
    assert "| go |" in report.table()
    again = mine_sources(sources, checkouts, tmp_path / "again", seed=3, cap=4, workers=1, progress=False)
    assert report.files["train"].read_bytes() == again.files["train"].read_bytes()  # reproducible to the byte


def test_the_command_line_refuses_an_overlapping_list_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from codesearch.training.mine import main

    listing = tmp_path / "bench.txt"
    listing.write_text("psf/requests\n")
    sources = tmp_path / "sources.json"
    sources.write_text(json.dumps([{"repo": "me/requests", "commit": COMMIT, "licence": "MIT", "languages": ["python"]}]))
    code = main(["--sources", str(sources), "--mirrors", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--benchmark-list", str(listing), "--no-progress"])
    assert code == 2 and capsys.readouterr().err.startswith("error: training sources overlap the benchmark")
