"""The line chunker: properties over generated texts, edge cases, and Cython == pure."""

from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys

import pytest
from conftest import PACKAGE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codesearch.chunking import BACKEND, Chunk, ChunkParams, _chunker_py, chunk_lines, chunk_text, split_lines
from codesearch.chunking._chunker_py import LONG_LINE_BUDGETS

try:
    from codesearch.chunking import _chunker as _chunker_c
except ImportError:  # pragma: no cover - only when the extension was not built
    _chunker_c = None

needs_extension = pytest.mark.skipif(
    _chunker_c is None and not os.environ.get("CI"), reason="Cython extension not built"
)

# Lines of varied length (some far over the budget, some over LONG_LINE_BUDGETS budgets of the small ones drawn
# below, so that they are cut), blank and whitespace-only lines, and every line terminator an editor knows.
_line = st.one_of(
    st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=40),
    st.text(alphabet=" \t", max_size=5),
    st.text(alphabet="abc xyz_()", min_size=50, max_size=400),
    st.builds(lambda n, c: c * n, st.integers(0, 2000), st.sampled_from(["x", " ", "\u20ac", "\U0001f600"])),
)
_texts = st.builds(
    lambda lines, seps, tail: "".join(line + sep for line, sep in zip(lines, seps)) + tail,
    st.lists(_line, max_size=60),
    st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=60, max_size=60),
    st.sampled_from(["", "tail", "  "]),
)
_params = st.tuples(st.integers(1, 60), st.integers(0, 30), st.integers(1, 5))


def _check_properties(text: str, target: int, overlap: int, cpt: int) -> None:
    lines = split_lines(text)
    chunks = chunk_lines(text, target, overlap, cpt)
    longest = target * cpt * LONG_LINE_BUDGETS
    cut = {number for number, line in enumerate(lines, start=1) if len(line) > longest}
    previous_start = 0
    covered: set[int] = set()
    pieces: dict[int, list[str]] = {number: [] for number in cut}  # the windows' text of each cut line
    for start, end, body in chunks:
        assert 1 <= start <= end <= len(lines)
        assert start > previous_start or start in cut, "starts increase but on a cut line"
        assert body.strip(), "whitespace-only windows are not emitted"
        whole = "\n".join(lines[start - 1 : end])
        if not cut & {start, end}:
            assert body == whole
            # A window stops adding lines as soon as it reaches the budget.
            assert sum(len(line) + 1 for line in lines[start - 1 : end - 1]) < target * cpt
        else:  # a window holding a piece of a cut line: its last piece, whole lines, its first piece
            parts = body.split("\n")
            assert len(parts) == end - start + 1
            for number, part in enumerate(parts, start=start):
                line = lines[number - 1]
                if number not in cut:
                    assert part == line
                    continue
                assert len(part) <= longest and start <= number <= end
                assert part in line if start == end else line.endswith(part) if number == start else line.startswith(part)
                assert number in (start, end), "a cut line ends the window that takes its first piece"
                pieces[number].append(part)
        covered.update(range(start, end + 1))
        previous_start = start
    for number, line in enumerate(lines, start=1):
        if line.strip():
            assert number in covered, f"line {number} is not in any chunk"
    step = longest - min(overlap * cpt, longest // 2)
    for number, found in pieces.items():
        # A cut line's pieces: `longest` characters every `step`, the last one running to the line's end.
        line = lines[number - 1]
        starts = range(0, len(line) - longest, step)
        expected = [line[at : at + longest] for at in starts] + [line[(len(starts)) * step :]]
        assert set(found) <= set(expected)
        assert {piece for piece in expected if piece.strip()} <= set(found), f"a piece of line {number} is missing"
        assert len(found) <= len(expected) + 1
    for (s1, e1, _), (s2, _e2, _) in itertools.pairwise(chunks):
        if s2 <= e1 and not cut & set(range(s2, e1 + 1)):
            # Overlap covers at most the overlap budget plus the one line that crossed it.
            shared = lines[s2 - 1 : e1]
            assert sum(len(line) + 1 for line in shared[1:]) < max(overlap * cpt, 1)
            assert s2 > s1


@settings(max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, params=_params)
def test_chunk_properties_and_twins_agree(text: str, params: tuple[int, int, int]) -> None:
    target, overlap, cpt = params
    _check_properties(text, target, overlap, cpt)
    expected = _chunker_py.chunk_lines(text, target, overlap, cpt)
    assert chunk_lines(text, target, overlap, cpt) == expected
    if _chunker_c is not None:
        assert _chunker_c.chunk_lines(text, target, overlap, cpt) == expected
        assert _chunker_c.split_lines(text) == _chunker_py.split_lines(text)


@settings(max_examples=500, deadline=None)
@given(text=st.text())
def test_twins_agree_on_any_unicode(text: str) -> None:
    expected = _chunker_py.chunk_lines(text, 3, 1, 2)
    if _chunker_c is not None:
        assert _chunker_c.chunk_lines(text, 3, 1, 2) == expected


def _real_source() -> str:
    """About 300 KB of this package's own source, lines of every length."""
    folder = PACKAGE
    return "".join(path.read_text(encoding="utf-8") for path in sorted(folder.glob("*.py"))) * 2


@pytest.mark.skipif(_chunker_c is None, reason="the Cython chunker is not built")
@pytest.mark.parametrize("widen", ["", "\u00e9", "\u20ac", "\U0001f600"], ids=["ascii", "latin1", "ucs2", "ucs4"])
@pytest.mark.parametrize("line_end", ["\n", "\r\n", "late-cr"])
def test_twins_agree_on_large_real_text(widen: str, line_end: str) -> None:
    # Large inputs take the vectorised paths (blocks of 255 vectors, a carriage
    # return seen only near the end) that short generated texts do not reach.
    text = _real_source() + widen
    if line_end == "\r\n":
        text = text.replace("\n", "\r\n")
    elif line_end == "late-cr":
        text = text + "tail\rline\n"
    assert _chunker_c is not None
    for params in [(700, 80, 4), (50, 10, 4), (2000, 0, 4), (1, 1, 1), (1, 0, 1), (1, 40, 1)]:
        assert _chunker_c.chunk_lines(text, *params) == _chunker_py.chunk_lines(text, *params), params
    assert _chunker_c.split_lines(text) == _chunker_py.split_lines(text)


@pytest.mark.skipif(_chunker_c is None, reason="the Cython chunker is not built")
@pytest.mark.parametrize(
    "text",
    [
        "\n" * 100_000,  # a newline in every byte of every vector
        ("x" * 15 + "\n") * 20_000,  # a newline in the same vector lane, vector after vector
        ("x" * 15 + "\n") * 20_000 + "\r",
        "\u20ac" + ("x" * 7 + "\n") * 40_000,
        "\u20ac" + "\n" * 100_000,  # more newlines than a 16-bit block counter holds
    ],
    ids=["all-newlines", "same-lane", "same-lane-then-cr", "ucs2-same-lane", "ucs2-all-newlines"],
)
def test_twins_agree_when_newline_counters_fill_up(text: str) -> None:
    for params in [(700, 80, 4), (100_000, 0, 4)]:
        assert _chunker_c.chunk_lines(text, *params) == _chunker_py.chunk_lines(text, *params), params  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("", []),
        ("a", ["a"]),
        ("a\n", ["a"]),
        ("a\nb", ["a", "b"]),
        ("a\r\nb\r\n", ["a", "b"]),
        ("a\rb\r", ["a", "b"]),
        ("a\n\nb\n\n", ["a", "", "b", ""]),
        ("a\x0cb\u2028c\x85d", ["a\x0cb\u2028c\x85d"]),  # editors do not break on these
    ],
)
def test_split_lines_like_an_editor(text: str, lines: list[str]) -> None:
    assert split_lines(text) == lines
    assert _chunker_py.split_lines(text) == lines


def test_crlf_gives_same_chunks_as_lf() -> None:
    lf = "".join(f"line {i} {'x' * (i % 70)}\n" for i in range(400))
    crlf = lf.replace("\n", "\r\n")
    assert chunk_lines(crlf) == chunk_lines(lf)
    assert all("\r" not in body for _, _, body in chunk_lines(crlf))


def test_no_final_newline_keeps_last_line() -> None:
    text = "first\nsecond\nlast line without newline"
    assert chunk_lines(text) == [(1, 3, text)]


def test_single_80kb_line_does_not_loop() -> None:
    line = "x" * 80_000  # under LONG_LINE_BUDGETS budgets: a line of its own
    assert chunk_lines(line) == [(1, 1, line)]
    text = f"a\n{line}\nb\n{line}\nc"
    chunks = chunk_lines(text)
    assert [(s, e) for s, e, _ in chunks] == [(1, 2), (2, 2), (3, 4), (4, 4), (5, 5)]


@pytest.mark.parametrize("chunker", [_chunker_py, _chunker_c] if _chunker_c is not None else [_chunker_py],
                         ids=["python", "cython"][: 1 + (_chunker_c is not None)])
def test_a_line_over_the_long_line_budget_is_cut_into_overlapping_windows(chunker) -> None:  # type: ignore[no-untyped-def]
    longest = 700 * 4 * LONG_LINE_BUDGETS  # 89,600 characters with the default sizes
    step = longest - 80 * 4
    line = "".join(f"{i:07d} " for i in range(125_000))  # a 1,000,000-character line, under the 1 MiB file cap
    chunks = chunker.chunk_lines(line)
    assert [(s, e) for s, e, _ in chunks] == [(1, 1)] * len(chunks) and len(chunks) == 12
    assert [body for _, _, body in chunks] == [line[i * step : i * step + longest] for i in range(12)]
    assert all(len(body) <= longest for _, _, body in chunks)
    # Between ordinary lines: the window before ends with the line's first piece, a window that starts with the
    # last piece goes on while under the budget.
    text = f"a = 1\n{line}\nb = 2\n"
    chunks = chunker.chunk_lines(text)
    assert chunks[:2] == [(1, 2, "a = 1\n" + line[:longest]), (2, 2, line[:longest])]
    assert chunks[-2:] == [(2, 2, line[11 * step :]), (3, 3, "b = 2")]
    short = line[: 2 * longest + 100]
    assert chunker.chunk_lines(f"{short}\nb = 2")[-1] == (1, 2, short[2 * step :] + "\nb = 2")
    assert chunk_text("blob.js", text) == [Chunk("blob.js", s, e, body) for s, e, body in chunks]


@pytest.mark.parametrize("text", ["", "\n", "   \n\t\n", "\r\n\r\n"])
def test_empty_and_whitespace_files_give_no_chunks(text: str) -> None:
    assert chunk_lines(text) == []
    assert chunk_text("a.py", text) == []


def test_published_window_sizes() -> None:
    # 100 lines of 39 chars cost 40 each: a window takes 70 lines (2,800 chars),
    # steps back 8 lines (320 chars of overlap) and starts again at line 63.
    text = "\n".join("y" * 39 for _ in range(100))
    assert [(s, e) for s, e, _ in chunk_lines(text)] == [(1, 70), (63, 100)]


def test_bad_parameters_raise() -> None:
    with pytest.raises(ValueError, match="target_tokens"):
        chunk_lines("a", 0)
    with pytest.raises(ValueError):
        ChunkParams(overlap_tokens=-1)


def test_chunk_reports_path_and_range() -> None:
    (chunk,) = chunk_text("src/app.py", "def f():\n    return 1\n")
    assert chunk == Chunk("src/app.py", 1, 2, "def f():\n    return 1")
    assert str(chunk) == "src/app.py:1-2"


@needs_extension
def test_extension_is_used_unless_pure_python_forced() -> None:
    expected = "python" if os.environ.get("CODESEARCH_PUREPYTHON") == "1" else "cython"
    assert expected == BACKEND


def test_pure_python_can_be_forced() -> None:
    code = "import codesearch.chunking as c; print(c.BACKEND, c.chunk_lines.__module__)"
    env = {**os.environ, "CODESEARCH_PUREPYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["python", "codesearch.chunking._chunker_py"]


def test_missing_extension_falls_back_with_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    import codesearch.chunking
    from codesearch.chunking import chunks as chunking

    original = dict(vars(chunking))
    monkeypatch.delenv("CODESEARCH_PUREPYTHON", raising=False)
    monkeypatch.setitem(sys.modules, "codesearch.chunking._chunker", None)  # makes the import fail
    try:
        with pytest.warns(RuntimeWarning, match="pure-Python twin"):
            reloaded = importlib.reload(chunking)
        assert reloaded.BACKEND == "python"
    finally:
        monkeypatch.undo()
        # The module's own objects back, not a third load: classes made by a reload are other classes, and
        # a ChunkParams of the first load would no longer pickle by name (as a worker pool needs).
        vars(chunking).update(original)
        assert codesearch.chunking.chunks is chunking
