"""How the faces show names from disk and callers (codesearch/display.py): escaped, exact in JSON, bounded."""

from __future__ import annotations

import json

import pytest

from codesearch.display import clipped, exact_text, printable


@pytest.mark.parametrize(("text", "shown"), [
    ("src/app.py", "src/app.py"),
    ("e.py\nreal.py:99: FORGED", "e.py\\nreal.py:99: FORGED"),
    ("a\rb\tc", "a\\rb\\tc"),
    ("c\x1b[2Jd.py", "c\\x1b[2Jd.py"),
    ("nul\x00del\x7fc1\x85", "nul\\x00del\\x7fc1\\x85"),
    ("bad\udcffname.py", "bad\\xffname.py"),  # a byte os.fsdecode could not decode: shown as that byte
    ("lone\ud800", "lone\\ud800"),
    ("rtl\u202eyp.exe", "rtl\\u202eyp.exe"),
    ("line\u2028sep", "line\\u2028sep"),
    ("ünïcødé 名前.py", "ünïcødé 名前.py"),
])
def test_printable_escapes_what_could_forge_a_line_and_keeps_the_rest(text: str, shown: str) -> None:
    assert printable(text) == shown
    assert printable(shown) == shown  # what it shows needs no further escape
    assert shown.isprintable() or "\t" in shown


def test_printable_can_keep_tabs_for_lines_of_code() -> None:
    assert printable("\tx = 1\x1b", keep_tabs=True) == "\tx = 1\\x1b"


def test_exact_text_writes_lone_surrogates_as_json_escapes_a_parser_reads_back() -> None:
    data = {"path": "bad\udcffname.py", "line": "é\n"}
    text = exact_text(json.dumps(data, ensure_ascii=False))
    text.encode("utf-8")  # strict UTF-8
    assert "\\udcff" in text and "é" in text and json.loads(text) == data
    plain = json.dumps({"a": "é"}, ensure_ascii=False)
    assert exact_text(plain) is plain


def test_clipped_marks_what_it_left_out() -> None:
    assert clipped("abc", 3) == "abc"
    assert clipped("x" * 1234, 10) == "x" * 10 + "…[+1,224 chars]"
