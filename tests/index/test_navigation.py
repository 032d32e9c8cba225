"""Symbol navigation (codesearch/index/navigation.py): definitions from the symbol table, references from the
keyword postings, checked against a plain whole-word scan of the files (grep -w's rule)."""

from __future__ import annotations

import random
import re
from functools import cache
from pathlib import Path

import pytest
from conftest import PACKAGE, SESSIONS, UTILS
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch import CodeSearch
from codesearch.chunking import ChunkParams
from codesearch.chunking.symbols import definition_names
from codesearch.index.columns import ChunkColumns
from codesearch.index.navigation import edit_distance

TESTS = '''\
from pkg.sessions import Session


class Session:
    """A fake session for the tests."""


def test_rebuild_method_redirect_get():
    assert Session().rebuild_method("POST") == "GET"


def test_strip_auth():
    assert should_strip_auth("http://a", "http://b")
'''

MODELS = '''\
class Send:
    """What was sent."""
'''

SEND = '''\
from pkg.models import Send


def send(request):
    """Send a request; a send_all sends many (not the same word), SEND is not either."""
    return Send()


def resend(request):
    return send(request) or send(request)
'''

RUST = '''\
pub struct Client { n: u32 }

impl Client {
    pub fn send(&self) -> u32 {
        self.n
    }
}
'''

KOTLIN = '''\
package io.ktor.client.plugins

private val LOGGER = KtorSimpleLogger("io.ktor.client.plugins.HttpTimeout")

public val HttpTimeout: ClientPlugin<HttpTimeoutConfig> = createClientPlugin("HttpTimeout") {
    onRequest { request, _ -> request.timeout() }
}
'''

HEADER = '''\
#define BUFFER_SIZE 500

int fill(const Buffer& buffer, int BUFFER_SIZE_USED);
'''

LONG = "def long_function(argument):\n" + "".join(f"    value_{i} = argument + {i}\n" for i in range(120)) + \
    "    return value_0\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "src" / "pkg" / "sessions.py").write_text(SESSIONS)
    (root / "src" / "pkg" / "utils.py").write_text(UTILS)
    (root / "src" / "pkg" / "send.py").write_text(SEND)
    (root / "src" / "pkg" / "models.py").write_text(MODELS)
    (root / "src" / "pkg" / "long.py").write_text(LONG)
    (root / "src" / "client.rs").write_text(RUST)
    (root / "src" / "HttpTimeout.kt").write_text(KOTLIN)
    (root / "src" / "buffer.h").write_text(HEADER)
    (root / "tests" / "test_sessions.py").write_text(TESTS)
    return root


@pytest.fixture
def cs(repo: Path, tmp_path: Path) -> CodeSearch:
    searcher = CodeSearch(repo, model=None, index_dir=tmp_path / "index",
                          chunk_params=ChunkParams(target_tokens=200, overlap_tokens=20))
    searcher.index()
    return searcher


# -- definitions ---------------------------------------------------------------------------------------


def test_a_bare_name_finds_every_definition_whose_last_part_it_is(cs: CodeSearch) -> None:
    found = cs.definitions("should_strip_auth")
    assert [(h.path, h.defines) for h in found] == [("src/pkg/sessions.py", "Session.should_strip_auth")]
    assert found[0].start_line <= 11 <= found[0].end_line and found.note is None and not found.capped
    assert not found.textual and len(found) == 1 and list(found) == list(found.hits)


def test_a_qualified_name_matches_in_any_qualifier_syntax(cs: CodeSearch) -> None:
    assert [h.defines for h in cs.definitions("Client::send")] == ["Client::send"]
    assert [h.defines for h in cs.definitions("Client.send")] == ["Client::send"]
    assert [h.defines for h in cs.definitions("Session.rebuild_method")] == ["Session.rebuild_method"]
    assert [h.path for h in cs.definitions("Client.rebuild_method")] == []


def test_the_same_case_comes_first_then_the_other_case(cs: CodeSearch) -> None:
    lower = cs.definitions("send")
    assert [(h.defines, h.score) for h in lower] == [("send", 1.0), ("Client::send", 1.0), ("Send", 0.5)]
    upper = cs.definitions("Send")
    assert (upper[0].defines, upper[0].score) == ("Send", 1.0)
    assert {h.defines for h in upper[1:]} == {"send", "Client::send"}


def test_source_comes_before_tests_and_a_file_named_after_the_symbol_first(cs: CodeSearch) -> None:
    found = cs.definitions("Session")
    assert [h.path for h in found] == ["src/pkg/sessions.py", "tests/test_sessions.py"]
    assert [h.kind for h in found] == ["source", "test"]
    # Two source definitions of `send`: the one in send.py (named after it) before client.rs.
    assert [h.path for h in cs.definitions("send")][:2] == ["src/pkg/send.py", "src/client.rs"]


def test_a_long_definition_is_given_once_by_its_first_window(cs: CodeSearch) -> None:
    found = cs.definitions("long_function")
    assert len(found) == 1 and found[0].start_line == 1 and found[0].end_line < 122


def test_an_unknown_name_answers_nothing_and_the_closest_names(cs: CodeSearch) -> None:
    found = cs.definitions("should_strip_aut")
    assert list(found) == [] and not found.capped
    assert found.note is not None and "no symbol named 'should_strip_aut'" in found.note
    assert "closest names: should_strip_auth" in found.note
    far = cs.definitions("zzzzzzzzzz")
    assert far.note is not None and "closest" not in far.note


def test_a_name_the_symbol_table_lacks_answers_the_lines_that_declare_it_marked_textual(cs: CodeSearch) -> None:
    val = cs.definitions("HttpTimeout")  # a Kotlin top-level property: the chunker records no symbol for it
    assert [(h.path, h.lines) for h in val] == [("src/HttpTimeout.kt", (5,))] and val.textual
    assert val.note is not None and "no symbol named 'HttpTimeout' in the symbol table" in val.note
    assert [(h.path, h.lines) for h in cs.definitions("BUFFER_SIZE")] == [("src/buffer.h", (1,))]
    assert list(cs.definitions("Buffer")) == []  # `const Buffer&` uses a type, it declares nothing


def test_k_caps_the_definitions_and_says_so(cs: CodeSearch) -> None:
    found = cs.definitions("send", k=1)
    assert [h.defines for h in found] == ["send"] and found.capped
    assert found.note == "the first 1 of 3 definitions; raise k for the rest"


def test_bad_names_and_k(cs: CodeSearch) -> None:
    for call in (cs.definitions, cs.references):
        with pytest.raises(ValueError, match="name is empty"):
            call("  ")
        with pytest.raises(ValueError, match="at least 1"):
            call("send", k=0)
    with pytest.raises(ValueError, match="identifier"):
        cs.references("+=")


# -- references ----------------------------------------------------------------------------------------


def test_references_are_whole_words_with_their_case_by_file_and_line(cs: CodeSearch) -> None:
    found = cs.references("send")
    uses = [(h.path, line) for h in found for line in h.lines]
    # Not send_all, SEND or Send; the docstring of super_len says "send".
    assert uses == [("src/client.rs", 4), ("src/pkg/send.py", 4), ("src/pkg/send.py", 10), ("src/pkg/utils.py", 2)]
    assert found.textual and not found.capped and "textual" in (found.note or "")
    assert [h.defines for h in found] == ["Client::send", "send", None]  # the chunks that define it are labelled


def test_references_of_a_qualified_name_look_for_its_last_part(cs: CodeSearch) -> None:
    found = cs.references("Session.should_strip_auth")
    assert [(h.path, h.lines) for h in found] == [("src/pkg/sessions.py", (11,)), ("tests/test_sessions.py", (13,))]
    assert found.note is not None and "the last part of 'Session.should_strip_auth'" in found.note


def test_references_capped_and_unknown(cs: CodeSearch) -> None:
    found = cs.references("send", k=1)
    assert len(found) == 1 and found.capped and "the first 1 chunks of more" in (found.note or "")
    none = cs.references("should_strip_aut")
    assert list(none) == [] and none.textual and "closest symbol names: should_strip_auth" in (none.note or "")


def test_a_line_in_two_overlapping_windows_is_reported_once(cs: CodeSearch) -> None:
    found = cs.references("argument")
    lines = [line for h in found if h.path == "src/pkg/long.py" for line in h.lines]
    assert lines == sorted(set(lines)) == list(range(1, 122))


def test_navigation_reads_chunks_only_through_the_loaded_index_seam() -> None:
    """The chunk records are about to change shape: navigation and notes read them through LoadedIndex.hit,
    facts and bm25 only."""
    package = PACKAGE / "index"
    for name in ("navigation.py", "notes.py"):
        assert ".records" not in (package / name).read_text(), name


# -- against a reference: a whole-word scan of every indexed file (grep -w) -----------------------------------


def _grep_w(root: Path, files: list[str], name: str) -> set[tuple[str, int]]:
    """``grep -wn name`` over ``files``: lines where ``name`` stands with no word character either side."""
    word = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")
    found = set()
    for path in files:
        text = (root / path).read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.split("\n"), start=1):
            if word.search(line):
                found.add((path, number))
    return found


def test_references_find_every_grep_w_line_of_the_requests_corpus(requests_corpus: Path, tmp_path: Path) -> None:
    cs = CodeSearch(requests_corpus, model=None, index_dir=tmp_path / "index")
    cs.index()
    snapshot = cs.store.load()
    columns = ChunkColumns.from_arrays(snapshot.arrays)
    files = sorted(columns.text_files())
    symbols = sorted({definition_names(s)[-1] for s in columns.symbols.tolist()})
    picked = ["Session", "send", "super_len", "request", "get", "r", "self", "__init__",
              *random.Random(3).sample(symbols, 40)]
    for name in picked:
        found = cs.references(name, k=100_000)
        assert not found.capped
        ours = {(h.path, line) for h in found for line in h.lines}
        assert ours == _grep_w(requests_corpus, files, name), name


# -- the edit distance of the "closest names" hint, against its recursive definition --------------------------


@cache
def _levenshtein(a: str, b: str) -> int:
    if not a or not b:
        return len(a) + len(b)
    return min(_levenshtein(a[1:], b) + 1, _levenshtein(a, b[1:]) + 1, _levenshtein(a[1:], b[1:]) + (a[0] != b[0]))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abc_", max_size=7), st.text(alphabet="abc_", max_size=7))
def test_edit_distance_is_levenshtein(a: str, b: str) -> None:
    assert edit_distance(a, b) == _levenshtein(a, b) == edit_distance(b, a)
