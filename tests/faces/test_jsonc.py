"""In-place JSONC edits: the value is what json says it should be, and an added member's removal gives the text back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codesearch.faces.jsonc import JsoncError, loads, remove_member, set_member

keys = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
                      max_leaves=8)
documents = st.dictionaries(keys, values, max_size=4)


def _commented(document: dict[str, Any], indent: int | None) -> str:
    """``document`` as JSON with a line comment after every comma and a block comment at the top."""
    text = json.dumps(document, indent=indent, ensure_ascii=False)
    if indent is None:
        return "/* one line */ " + text
    return "/* settings */\n" + text.replace(",\n", ", // note, with a comma\n")


@settings(max_examples=300, deadline=None)
@given(documents, st.lists(keys, min_size=1, max_size=3), values, st.sampled_from([None, 2, 4, "\t"]))
def test_set_then_remove_a_new_member(document: dict[str, Any], path: list[str], value: Any,
                                      indent: int | str | None) -> None:
    text = _commented(document, indent if not isinstance(indent, str) else 1)
    if isinstance(indent, str):
        text = text.replace("\n ", "\n\t")
    assert loads(text) == document
    missing = object()
    node: Any = document
    for key in path[:-1]:
        node = node.get(key, missing)
        if node is missing:
            break
        if not isinstance(node, dict):
            with pytest.raises(JsoncError, match="is not an object"):
                set_member(text, path, value)
            return
    existed = node is not missing and path[-1] in node
    new = set_member(text, path, value)
    expected = json.loads(json.dumps(document))
    target = expected
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
    assert loads(new) == expected
    if not existed:  # (a replaced value takes the comments inside it along)
        assert new.count("// note, with a comma") >= text.count("// note, with a comma")
    if not existed and len(path) == 1:
        assert remove_member(new, path) == text
    if not existed and node is not missing:  # a new member of an existing object: removed, the value is as before
        assert loads(remove_member(new, path)) == document


def test_errors_name_line_and_column() -> None:
    with pytest.raises(JsoncError, match=r"line 3, column 3: expected ',' or '}'"):
        loads('{\n  "a": 1\n  "b": 2\n}')
    with pytest.raises(JsoncError, match="never closed"):
        loads('{"a": 1 /* open')
    with pytest.raises(JsoncError, match="top level is not an object"):
        set_member("[1, 2]", ["a"], 1)


def test_an_empty_or_comment_only_text_gets_a_new_object() -> None:
    assert loads(set_member("", ["servers", "x"], {"command": "c"})) == {"servers": {"x": {"command": "c"}}}
    text = set_member("// nothing yet\n", ["a"], 1)
    assert text.startswith("// nothing yet\n") and loads(text) == {"a": 1}
