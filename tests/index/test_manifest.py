"""The typed manifest of an index (codesearch/index/manifest.py): the JSON the store has always kept, read back."""

from __future__ import annotations

from typing import Any

import pytest

from codesearch.exceptions import IndexCorruptError
from codesearch.index.manifest import ARRAYS, BM25_PREFIX, IndexManifest, TierFacts


def _manifest(**changes: Any) -> IndexManifest:
    values: dict[str, Any] = dict(
        root="/src/repo", tier="full", full=TierFacts("minilm", "f" * 64, 384, frozenset({"test"})),
        static=TierFacts("minilm-static", "s" * 64, 256), chunker={"kind": "definitions", "target_tokens": 400},
        walk_stats={"/": (0, 10), ".gitignore": (12, -1)}, use_ignore_files=True, n_files=3, n_chunks=9,
        scanned_ns=123, updated="2026-12-04T10:00:00+00:00")
    values.update(changes)
    return IndexManifest(**values)


def test_the_json_keeps_the_keys_of_every_earlier_version_and_reads_back_equal() -> None:
    manifest = _manifest()
    data = manifest.to_json()
    assert set(data) == {"root", "tier", "model", "static", "chunker", "walk_stats", "use_ignore_files", "counts",
                         "scanned_ns", "updated"}
    assert data["model"] == {"name": "minilm", "fingerprint": "f" * 64, "dim": 384, "unread_kinds": ["test"]}
    assert "unread_kinds" not in data["static"]  # a static tier reads every kind: the key is left out
    assert data["counts"] == {"files": 3, "chunks": 9} and data["walk_stats"][".gitignore"] == [12, -1]
    back = IndexManifest.from_json(data)
    assert back == manifest and back.to_json() == data
    assert ARRAYS == {"full": "vectors", "static": "static_vectors"} and BM25_PREFIX == "bm25_"


def test_tiers_models_and_unread_kinds_are_read_from_either_tier() -> None:
    manifest = _manifest()
    assert manifest.of("full") is manifest.full and manifest.of("static") is manifest.static
    assert manifest.of("keyword") is None
    assert manifest.model_name == "minilm" and manifest.unread_kinds == frozenset({"test"})
    static_only = _manifest(tier="static", full=None)
    assert static_only.model_name == "minilm-static" and static_only.unread_kinds is None
    keyword = _manifest(tier="keyword", full=None, static=None)
    assert keyword.model_name is None
    assert manifest.describe()["unread_kinds"] == ["test"] and manifest.describe()["dim"] == 384


def test_an_older_manifest_without_a_tier_or_counts_is_read_as_what_it_holds() -> None:
    old = {"root": "/r", "model": {"name": "m", "fingerprint": "x", "dim": 8}, "chunker": {"kind": "lines"}}
    manifest = IndexManifest.from_json(old)
    assert manifest.tier == "full" and manifest.n_chunks == 0 and manifest.walk_stats is None
    assert manifest.use_ignore_files and manifest.full is not None and manifest.full.unread_kinds is None
    assert IndexManifest.from_json({"root": "/r", "static": {"name": "s", "fingerprint": "y", "dim": 4}}).tier == "static"
    assert IndexManifest.from_json({"root": "/r"}).tier == "keyword"


@pytest.mark.parametrize("damage", [{"walk_stats": {"/": "no"}}, {"counts": {"files": "many"}}, {"model": "minilm"},
                                    {"walk_stats": []}])
def test_a_key_of_the_wrong_shape_is_a_damaged_index(damage: dict[str, Any]) -> None:
    with pytest.raises(IndexCorruptError, match="manifest is damaged.*codesearch index"):
        IndexManifest.from_json({**_manifest().to_json(), **damage})
