"""Answers for tools and agents (codesearch/faces/answers.py): the compact form and a token budget never exceeded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SESSIONS, UTILS
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch import CodeSearch, Hit
from codesearch.chunking import ChunkParams
from codesearch.faces.answers import (
    BYTES_PER_TOKEN,
    LINE_CHARS,
    estimate_tokens,
    fit_to_budget,
    hit_data,
    hits_data,
    pretty_json,
)

LONG = "".join(f"def handler_{i}(request):\n    '''Handle request {i} ü.'''\n" + "    x = 1\n" * 30 for i in range(8))


@pytest.fixture(scope="module")
def hits(tmp_path_factory: pytest.TempPathFactory) -> list[Hit]:
    root = tmp_path_factory.mktemp("repo")
    (root / "pkg").mkdir()
    (root / "pkg" / "sessions.py").write_text(SESSIONS)
    (root / "pkg" / "utils.py").write_text(UTILS)
    (root / "pkg" / "handlers.py").write_text(LONG + "def one_very_long_line():\n    return '" + "y" * 900 + "'\n")
    cs = CodeSearch(root, model=None, index_dir=root.parent / f"{root.name}-index",
                    chunk_params=ChunkParams(target_tokens=100, overlap_tokens=10))
    cs.index()
    found = cs.search("handle request session auth length line", k=12, mode="bm25")
    assert len(found) >= 8
    return found


def _answer(hits: list[Hit], compact: bool = False) -> dict[str, object]:
    return {"query": "q", "tier": "keyword", "refreshed": 0, "hits": hits_data(hits, compact=compact)}


def test_the_rule_is_utf8_bytes_over_three_rounded_up() -> None:
    assert BYTES_PER_TOKEN == 3
    assert [estimate_tokens(t) for t in ("", "a", "abc", "abcd", "ü", "üü")] == [0, 1, 1, 2, 1, 2]


def test_an_answer_within_its_budget_is_kept_whole_and_says_so(hits: list[Hit]) -> None:
    answer = _answer(hits)
    fitted = fit_to_budget(answer, 1_000_000)
    assert fitted["hits"] == answer["hits"] and (fitted["trimmed"], fitted["dropped"]) == (0, 0)
    assert fitted["tokens"] == estimate_tokens(pretty_json(fitted)) and fitted["max_tokens"] == 1_000_000
    assert fit_to_budget(answer, None) is answer


@settings(max_examples=60, deadline=None)
@given(budget=st.integers(min_value=60, max_value=4000), compact=st.booleans())
def test_a_fitted_answer_is_never_over_and_cuts_from_the_end(hits: list[Hit], budget: int, compact: bool) -> None:
    answer = _answer(hits, compact)
    original = json.loads(json.dumps(answer))
    try:
        fitted = fit_to_budget(answer, budget)
    except ValueError as err:
        assert "below the smallest answer" in str(err)
        assert estimate_tokens(pretty_json({**answer, "hits": [], "max_tokens": budget, "tokens": budget,
                                            "trimmed": 0, "dropped": 0})) > budget
        return
    assert answer == original  # the answer given is left as it was
    assert estimate_tokens(pretty_json(fitted)) == fitted["tokens"] <= budget
    kept = fitted["hits"]
    assert fitted["dropped"] == len(original["hits"]) - len(kept)  # type: ignore[arg-type]
    key = "line" if compact else "text"
    cut = 0
    for mine, theirs in zip(kept, original["hits"]):  # type: ignore[call-overload]
        assert mine["location"] == theirs["location"]  # same hits, same order: a prefix of the ranking
        assert theirs[key].startswith(mine[key]) or theirs[key].split("\n")[0].startswith(mine[key])
        if mine[key] != theirs[key]:
            cut += 1
            assert mine["truncated"] is True
    assert fitted["trimmed"] == cut
    if fitted["dropped"] and not compact:  # hits are dropped only once every text is down to its first line
        assert all("\n" not in hit["text"] and len(hit["text"]) <= LINE_CHARS for hit in kept)


def test_a_budget_below_the_smallest_answer_or_below_one_is_an_error(hits: list[Hit]) -> None:
    with pytest.raises(ValueError, match=r"max_tokens=10 is below the smallest answer, \d+ tokens with no hit"):
        fit_to_budget(_answer(hits), 10)
    for bad in (0, -5):
        with pytest.raises(ValueError, match="max_tokens must be at least 1"):
            fit_to_budget(_answer(hits), bad)


def test_the_budget_counts_the_text_of_the_face_that_sends_it(hits: list[Hit]) -> None:
    """The MCP SDK writes answers its own way; counted with its writer, its text stays within the budget."""
    from codesearch.faces.mcp_server import sdk_text

    fitted = fit_to_budget(_answer(hits), 700, sdk_text)
    assert estimate_tokens(sdk_text(fitted)) <= 700 and fitted["dropped"] + fitted["trimmed"] > 0


def test_the_compact_form_is_location_symbols_and_one_line() -> None:
    hit = Hit("pkg/a.py", 10, 14, 0.5, "source", "\n  def f(x):\n      return g(x)\n", ("f",))
    assert hit_data(hit, compact=True) == {"location": "pkg/a.py:10-14", "symbols": ["f"], "line": "def f(x):"}
    used = Hit("pkg/a.py", 10, 14, 1.0, "source", "\n  def f(x):\n      return g(x)\n", ("f",), defines="f", lines=(12,))
    assert hit_data(used, compact=True) == {"location": "pkg/a.py:10-14", "symbols": ["f"], "line": "return g(x)",
                                            "defines": "f", "lines": [12]}
    full = hit_data(used, max_lines=1)
    assert full["text"] == "" and full["truncated"] is True and full["lines"] == [12] and full["defines"] == "f"
    assert "lines" not in Hit("a", 1, 1, 0.0, "source", "x").as_dict()  # a search hit's JSON is as it was


def test_requests_answers_at_500_2000_and_8000_tokens_are_never_over(requests_corpus: Path, tmp_path: Path) -> None:
    cs = CodeSearch(requests_corpus, model=None, index_dir=tmp_path / "index")
    cs.index()
    for query in ("why does a POST turn into a GET on redirect", "proxy auth header", "super_len", "Session.send"):
        hits = cs.search(query, k=20, mode="bm25")
        for budget in (500, 2000, 8000):
            for compact in (False, True):
                fitted = fit_to_budget(_answer(hits, compact), budget)
                assert estimate_tokens(pretty_json(fitted)) <= budget, (query, budget, compact)
                assert [h["location"] for h in fitted["hits"]] == [h.location for h in hits][:len(fitted["hits"])]


def test_max_lines_bounds_an_answers_bytes_too() -> None:
    """Issue 38 row 7: max_lines=1 on a 1 MB single-line file gave a 900 KB answer; a line longer than the width is
    cut and marked with what was left out."""
    from codesearch.faces.answers import MAX_LINE_CHARS

    line = "x = '" + "y" * 1_000_000 + "'"
    one = hit_data(Hit("min.js", 1, 1, 1.0, "source", line), max_lines=1)
    assert one["truncated"] is True and len(one["text"]) < MAX_LINE_CHARS + 40
    assert one["text"] == line[:MAX_LINE_CHARS] + f"…[+{len(line) - MAX_LINE_CHARS:,} chars]"
    many = hit_data(Hit("wide.py", 1, 50, 1.0, "source", "\n".join([line[:5000]] * 50)), max_lines=40)
    assert many["truncated"] is True and many["text"].count("\n") == 39
    assert len(pretty_json(many).encode()) < 40 * (MAX_LINE_CHARS + 40) + 1000
    short = hit_data(Hit("a.py", 1, 2, 1.0, "source", "def f():\n    return 1"), max_lines=40)
    assert short["text"] == "def f():\n    return 1" and short["truncated"] is False
    assert hit_data(Hit("min.js", 1, 1, 1.0, "source", line))["text"] == line  # no max_lines: the text is whole


def test_json_answers_keep_a_path_that_is_not_utf8_exact_and_encode_as_strict_utf8() -> None:
    """A file name holding a byte that is not UTF-8 is a surrogate escape in the path (os.fsdecode): the CLI's JSON
    writes it as the JSON escape \\udcff, which a parser reads back exactly; the MCP SDK, which cannot write a lone
    surrogate at all, gets it as that text. Either way the text is strict UTF-8 and within the budget."""
    from codesearch.faces.mcp_server import sdk_text

    hit = Hit("bad\udcffname.py", 1, 1, 1.0, "source", "x = 1")
    for dumps, path in ((pretty_json, "bad\udcffname.py"), (sdk_text, "bad\\udcffname.py")):
        answer = fit_to_budget(_answer([hit]), 1000, dumps)
        text = dumps(answer)
        text.encode("utf-8")  # strict
        assert json.loads(text)["hits"][0]["path"] == path
        assert estimate_tokens(text) == answer["tokens"] <= 1000
