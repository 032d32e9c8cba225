"""The corpus's parts that need neither Ray nor Lance: planning, work items, the actors' output, views, names.

(``pyarrow`` only, which the driver's rows are; the corpus on real engines is ``tests/corpus/test_corpus.py``.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")


def test_repositories_are_handed_to_the_actors_largest_first() -> None:
    """So that no large repository starts last on one actor while the others idle; unknown sizes lead."""
    from codesearch.corpus.driver import largest_first

    work = [("small", "/s", None), ("far", "/f", None), ("large", "/l", None), ("mid", "/m", None), ("tie", "/t", None)]
    sizes = {"small": 10, "large": 5000, "mid": 300, "tie": 300}
    assert [name for name, _, _ in largest_first(work, sizes)] == ["far", "large", "mid", "tie", "small"]


def test_the_transformer_tier_runs_one_actor_per_gpu_where_ray_has_gpus() -> None:
    """Where Ray sees GPUs the transformer's pool is one actor per GPU (a GPU and a CPU each); the static tier and a
    machine without GPUs keep the CPU actors asked for."""
    from codesearch.corpus.build import actor_pool

    assert actor_pool("full", 2, 4, 1) == (4, {"num_gpus": 1, "num_cpus": 1})
    assert actor_pool("full", 2, 0, 1) == (2, {"num_cpus": 1})
    assert actor_pool("static", 3, 4, 2) == (3, {"num_cpus": 2})


def test_an_actor_given_a_gpu_asks_onnxruntime_for_cuda_only_where_it_has_the_provider(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray sets CUDA_VISIBLE_DEVICES for an actor given a GPU: the session then tries CUDA first, with the CPU
    behind it; a CPU-only onnxruntime or an actor without a GPU keeps the CPU's default (None)."""
    import onnxruntime as ort

    from codesearch.corpus.build import _providers

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert _providers() is None
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    assert _providers() is None
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert _providers() == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _providers() is None


def test_small_repositories_share_a_work_item_up_to_the_bundle_size() -> None:
    """Each work item makes at least one fragment: small neighbours go together, large, unknown or empty ones alone."""
    from codesearch.corpus.build import bundles

    work = [("far", "/f"), ("large", "/l"), ("a", "/a"), ("b", "/b"), ("c", "/c"), ("empty", "/e")]
    sizes = {"large": 5000, "a": 600, "b": 300, "c": 200, "empty": 0}
    assert [item["repos"] for item in bundles(work, sizes, target=1000)] == [["far"], ["large"], ["a", "b"],
                                                                            ["c"], ["empty"]]
    # Repositories with nothing to read (upgraded to the transformer tier) are not lumped onto one actor.
    assert len(bundles([(f"r{i}", f"/r{i}") for i in range(5)], dict.fromkeys([f"r{i}" for i in range(5)], 0))) == 5
    assert bundles(work, sizes, target=1000)[2]["roots"] == ["/a", "/b"]
    assert [item["repos"] for item in bundles([("empty", "/e")], {"empty": 0})] == [["empty"]]


def test_wide_strings_gives_named_string_columns_64_bit_offsets_and_keeps_their_values() -> None:
    from codesearch.corpus.schema import wide_strings

    table = pa.table({"text": pa.chunked_array([["a", "bb"], ["ccc"]]), "path": ["x", "y", "z"], "n": [1, 2, 3]})
    wide = wide_strings(table, ["text", "n", "absent"])
    assert wide.schema.field("text").type == pa.large_string() and wide.schema.field("path").type == pa.string()
    assert wide.schema.field("n").type == pa.int64() and wide["text"].to_pylist() == ["a", "bb", "ccc"]
    assert wide_strings(wide, ["text"]).schema == wide.schema  # already wide: as it is


def _block(*records: tuple[str, str | None, dict[str, Any] | None, int]) -> pa.Table:
    """Output rows as the actors yield them: (record, repo, payload, how many such rows)."""
    rows = [{"repo": repo, "record": record, "payload": json.dumps(payload) if payload is not None else None,
             "chunk_id": n} for record, repo, payload, count in records for n in range(count)]
    return pa.Table.from_pylist(rows, schema=pa.schema([("repo", pa.string()), ("record", pa.string()),
                                                        ("payload", pa.string()), ("chunk_id", pa.int64())]))


def _done(repo: str, inserted: int, updated: int = 0) -> tuple[str, str, dict[str, Any], int]:
    return ("done", repo, {"repo": repo, "inserted": inserted, "updated": updated}, 1)


def test_the_driver_hands_out_each_repository_once_its_rows_arrived_from_interleaved_actors() -> None:
    """Two actors' outputs interleaved (as Ray Data streams them): a repository is handed out when its done row has
    come and the fragments and update rows hold exactly the rows it reported; every fragment goes out with some
    repository before the end; a lost block or an output cut short is an error, never a partial commit."""
    from codesearch.corpus.build import results

    one = [_block(("fragments", None, {"fragments": ["f1"], "rows": {"a": 3, "b": 2}}, 1)),
           _block(_done("a", 3), _done("b", 2)),
           _block(("fragments", None, {"fragments": ["f3"], "rows": {"d": 4}}, 1), _done("d", 4))]
    two = [_block(("update", "c", None, 2)),
           _block(("fragments", None, {"fragments": ["f2"], "rows": {"c": 1}}, 1)),
           _block(_done("c", 1, updated=2))]
    interleaved = [one[0], two[0], one[1], two[1], one[2], two[2]]
    out = list(results(interleaved))
    assert [r.repo for r in out] == ["a", "b", "d", "c"]
    assert [r.fragments for r in out] == [["f1"], [], ["f2", "f3"], []]
    assert [sum(t.num_rows for t in r.updates) for r in out] == [0, 0, 0, 2]
    # c's done row before its update rows came would be short of rows: not handed out, an error.
    with pytest.raises(RuntimeError, match="lost rows of c"):
        list(results([two[1], two[2]]))
    # An output that stops after a fragment (an actor died after writing it) leaves it unclaimed: an error.
    with pytest.raises(RuntimeError, match="ended before"):
        list(results([one[0], one[1], two[1]]))


def test_the_view_cache_drops_the_least_recently_used_views_past_its_budget() -> None:
    """Sizes are measured when a view is put and again when its search says it grew; the newest view stays."""
    from codesearch.corpus.views import ViewCache

    class Sized:
        def __init__(self, nbytes: int) -> None:
            self.nbytes = nbytes

    cache = ViewCache(budget=100)
    views = {name: Sized(40) for name in "abc"}
    for name in "ab":
        cache.put((name, 1), views[name])  # type: ignore[arg-type]
    assert cache.get(("a", 1)) is views["a"]  # now the most recent
    cache.put(("c", 1), views["c"])  # type: ignore[arg-type]
    assert cache.get(("b", 1)) is None and len(cache) == 2 and cache.nbytes == 80
    views["c"].nbytes = 90  # its texts were read
    cache.resized(("c", 1))
    assert cache.get(("a", 1)) is None and cache.get(("c", 1)) is views["c"] and cache.nbytes == 90
    views["c"].nbytes = 150  # past the budget alone: kept, as the one in use
    cache.resized(("c", 1))
    assert len(cache) == 1 and cache.nbytes == 150
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0


def test_a_file_whose_name_is_not_utf8_is_left_out_with_its_reason(tmp_path: Path) -> None:
    # The store's paths are Arrow strings (UTF-8 only): such a name broke the whole build with a UnicodeEncodeError.
    from codesearch.chunking import ChunkParams
    from codesearch.corpus.build import WorkerSpec
    from codesearch.files import SkipReason

    root = tmp_path / "repo"
    root.mkdir()
    (root / "ok.py").write_text("x = 1\n")
    (root / os.fsdecode(b"bad\xffname.py")).write_text("y = 2\n")
    spec = WorkerSpec(model=None, static=None, int8=False, tier="static", chunking="definitions",
                      chunk_params=ChunkParams(), max_file_bytes=1 << 20, static_dim=32, full_dim=64, model_fp="",
                      store_uri=str(tmp_path / "store"))
    listing = spec.list(str(root))
    assert [f.rel for f in listing.files] == ["ok.py"]
    assert (os.fsdecode(b"bad\xffname.py"), SkipReason.NAME_NOT_UTF8) in listing.skipped_paths
    assert listing.skipped[SkipReason.NAME_NOT_UTF8] == 1
