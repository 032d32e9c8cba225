"""The values the API hands out: one way every store builds a hit."""

from __future__ import annotations

import numpy as np

from codesearch.types import Hit


def test_a_hit_of_a_stores_values_holds_plain_python_values() -> None:
    hit = Hit.of("src/a.py", np.int32(3), np.int64(9), np.float32(0.5), "source", "def a(): ...", ["a", "A.a"],
                 repo="r")
    assert hit == Hit("src/a.py", 3, 9, 0.5, "source", "def a(): ...", ("a", "A.a"), repo="r")
    assert type(hit.start_line) is int and type(hit.end_line) is int and type(hit.score) is float
    assert Hit.of("b.py", 1, 1, 1, "doc", "", None).symbols == ()
    assert str(hit) == "src/a.py:3-9  (0.5000, source)"
