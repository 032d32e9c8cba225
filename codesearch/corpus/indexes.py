"""The Lance index policy of a corpus: which indexes the chunks table gets, when they are trained again, and how a
search probes them.

The chunks table gets a bitmap index over ``repo``, a B-tree over
``chunk_id``, a label list over ``def_names``, the full-text index over
``keyword_text`` (:data:`FTS_OPTIONS`) and, once it has
:data:`VECTOR_INDEX_MIN_ROWS` rows, an IVF vector index per vector column
(:data:`VECTOR_INDEX`, :func:`ivf_partitions`). The writer
(:meth:`codesearch.corpus.store.Writer.optimize`) asks :func:`indexes_to_make`
and :func:`within_share` what to do, and :func:`make_indexes` does it; a
search asks :func:`nearest_options` how to probe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import lance

VECTOR_INDEX = "IVF_FLAT"
"""The vector indexes' kind: IVF partitions holding the vectors as they are (float32), so a search's distances are
exact and need no refine step. Measured on the 1M-row replica's static vectors (1,000 partitions, probing 30-60, 50
DEV queries): IVF_FLAT 9-12 ms a search; IVF_SQ 18-23 ms, 25-28 with the refine its quantised distances need, at the
same recall@100 against exact search (the misses are partitions left unprobed, not distances); IVF_HNSW_SQ 14 ms at
recall 0.74 (0.80 refined: its graphs lose the replica's duplicate vectors). The price is size: 4 bytes a dimension
instead of 1 (976 MB for 1M static vectors against 308 MB), in the index cache of a process searching across
repositories too. A corpus whose index is of another kind gets this one at its next optimize."""
VECTOR_INDEX_MIN_ROWS = 4096
"""Below this many rows a vector column gets no ANN index: exact search is as fast and exact."""
ROWS_PER_PARTITION = 256
"""The fewest rows an IVF partition is trained with (:func:`ivf_partitions`)."""
RETRAIN_BELOW = 0.5
"""A vector index whose partitions number less than this share of :func:`ivf_partitions` for the table's rows now
is trained again: its rows grew 4-fold since (new rows only join the nearest old partitions, which grow, and a
search probing a fixed number of them reads more rows each time), or it was cut coarser than asked (an index of
221 partitions of 4,500 rows on the 1M-row corpus: 75 ms a search, against 16-25 ms with 1,000)."""
FTS_OPTIONS: dict[str, Any] = dict(base_tokenizer="whitespace", lower_case=False, stem=False, remove_stop_words=False,
                                   ascii_folding=False, max_token_length=None)
"""The full-text index keeps codesearch's own terms as they are (already split and lowercased)."""
UNINDEXED_SHARE = 0.05
"""A refresh leaves its new rows outside the indexes (Lance searches them by a flat scan beside each index: the
same answers, a cost that grows with them) until the rows outside some index pass this share of the table; then
it compacts and folds them in. Compaction and the indexes' update cost seconds whatever the change (2.5-6 s at
10k-100k rows, measured), most of a small refresh."""
UNINDEXED_FRAGMENTS = 32
"""Nor more than this many fragments outside an index (each refresh adds one or two; a query opens each)."""
MINIMUM_NPROBES = 40
"""IVF partitions searched at least (never ``nprobes`` alone, which also caps them and loses rows under a prefilter)."""
MAXIMUM_NPROBES = 80
"""IVF partitions searched at most on a first try; a search that finds fewer rows than it asked for (a selective
prefilter) is run again without the cap. Uncapped, Lance probed far more partitions than needed on the 1M-row
corpus of repeated chunks (154 ms a search; capped at 40 of 228: 34 ms). Static vectors' recall@100 there with
IVF_SQ: 0.94 at 20-40 partitions, 0.96 at 30-60 (ANN p50 51 and 53 ms), 0.96 at 40-80 (77 ms); 1.000 at 10k and
100k. With IVF_FLAT on 50 DEV queries: 0.94 at 30-60 (12 ms), 0.96 at 50-100 (17 ms), 0.98 at 80-160 (21 ms), and
1.00 at 30-60 on 50 other queries. With twice the partitions (:func:`~codesearch.corpus.store.ivf_partitions`,
2,000 at 1M rows), 40-80: 0.98 in 8.2 ms, against 0.96 in 6.0 ms at 30-60 (the sample of 50 DEV queries)."""
REFINE_FACTOR = 2
"""A quantised vector index's distances (IVF_SQ, as corpora made before IVF_FLAT have until their next optimize)
re-ranked exactly over this many times ``k`` rows."""


def nearest_options(ds: lance.LanceDataset, column: str, exact: bool = False) -> dict[str, Any]:
    """Lance's ``nearest`` options for a search of ``column`` (without ``q`` and ``k``): the index probed at least
    :data:`MINIMUM_NPROBES` partitions and at most :data:`MAXIMUM_NPROBES`, refined where it quantises; or, with
    ``exact``, every row scored."""
    options: dict[str, Any] = {"column": column, "metric": "dot", "use_index": not exact}
    if not exact:
        options.update(minimum_nprobes=MINIMUM_NPROBES, maximum_nprobes=MAXIMUM_NPROBES)
        if index_kind(ds, column) not in (None, "IVF_FLAT"):  # quantised distances (IVF_SQ): refined exactly
            options["refine_factor"] = REFINE_FACTOR
    return options


def indexes_to_make(ds: lance.LanceDataset, has_full: bool, outgrown: bool = True) -> list[tuple[str, str]]:
    """``(column, kind)`` of the indexes a query needs that the chunks table lacks, or (with ``outgrown``) has
    outgrown (vector indexes only once there are :data:`VECTOR_INDEX_MIN_ROWS` rows to index; see
    :data:`RETRAIN_BELOW`: reading an index's partitions took 250 ms at 1M rows, so a refresh that leaves its rows
    to the flat scan does not ask)."""
    indexes = ds.list_indices()
    have = {index["fields"][0] if "fields" in index else index["name"] for index in indexes}
    have |= {index["name"].removesuffix("_idx") for index in indexes}
    missing = [(column, kind) for column, kind in (("repo", "BITMAP"), ("chunk_id", "BTREE"),
                                                   ("def_names", "LABEL_LIST"), ("keyword_text", "INVERTED"))
               if column not in have]
    rows = ds.count_rows()
    for column in ("static_vector", "vector") if has_full else ("static_vector",):
        if rows < VECTOR_INDEX_MIN_ROWS:
            continue
        if column in have and index_kind(ds, column) not in (None, VECTOR_INDEX):
            pass  # an index of another kind (a corpus written before): made again as this kind
        elif column in have:
            if not outgrown:
                continue
            trained = partitions(ds, f"{column}_idx")
            if trained is None or trained >= RETRAIN_BELOW * ivf_partitions(rows):
                continue
        if column == "vector" and ds.count_rows("read = true") < VECTOR_INDEX_MIN_ROWS:
            continue
        missing.append((column, VECTOR_INDEX))
    return missing


def index_kind(ds: lance.LanceDataset, column: str) -> str | None:
    """The kind of ``column``'s index at this version of the table (``IVF_FLAT``, ``IVF_SQ``, ...; ``None``: none,
    or Lance does not say). Lance keeps the list with the dataset: 0.03-0.08 ms."""
    return next((index.get("type") for index in ds.list_indices() if index["name"] == f"{column}_idx"), None)


def ivf_partitions(rows: int) -> int:
    """The IVF partitions a vector index of ``rows`` rows is trained with: about 2·√rows (2,000 at 1M rows), so a
    search probing :data:`MINIMUM_NPROBES` of them reads a few thousand rows per million;
    but never under :data:`ROWS_PER_PARTITION` rows a partition (Lance's k-means samples that many a partition), so
    below 262k rows there are rows / 256 (39 at 10k rows, which a search probes all of: exact).

    Measured on the 1M-row corpus (static vectors, probing 10-60): 221 partitions 75 ms a search, 500 24-39 ms,
    1,000 16-25 ms, 2,000 13-19 ms (training 13 / 22 / 44 s), recall@100 against exact 0.975 throughout. Measured
    again on its static vectors alone (100 DEV queries, recall on 50, one run): 1,000 partitions probing 30-60
    11.3 ms at recall 0.94, 40-80 16.9 ms at 0.98; 2,000 probing 30-60 6.0 ms at 0.96, 40-80 8.2 ms at 0.98
    (training 52 s against 87 s). Twice √rows, probed 40-80: faster and closer to exact at once. At 10k rows,
    2·√rows alone (203 partitions of 49 rows) cut the org-wide transformer NDCG@10 from 0.8219 to 0.8187 (recall
    0.994 -> 0.987), hence the floor. A corpus indexed by an earlier rule keeps its index until its rows grow past
    :data:`RETRAIN_BELOW` or it is built again."""
    return max(8, min(round(2 * rows ** 0.5), rows // ROWS_PER_PARTITION))


def partitions(ds: lance.LanceDataset, name: str) -> int | None:
    """The IVF partitions the vector index ``name`` was trained with (``None`` when Lance does not say)."""
    try:
        found = ds.stats.index_stats(name)["indices"][0].get("num_partitions")
    except (KeyError, IndexError, ValueError, TypeError):
        return None
    return int(found) if found else None


def within_share(ds: lance.LanceDataset) -> bool:
    """Whether the rows and fragments outside each index stay within :data:`UNINDEXED_SHARE` and
    :data:`UNINDEXED_FRAGMENTS` (counted from the fragments' metadata: nothing is read)."""
    fragments = {f.fragment_id: f.metadata.physical_rows for f in ds.get_fragments()}
    total = sum(fragments.values())
    covered: dict[str, set[int]] = {}
    for index in ds.list_indices():
        covered.setdefault(index["name"], set()).update(index["fragment_ids"])
    for ids in covered.values():
        outside = [rows for fragment, rows in fragments.items() if fragment not in ids]
        if len(outside) > UNINDEXED_FRAGMENTS or sum(outside) > UNINDEXED_SHARE * total:
            return False
    return True


def make_indexes(ds: lance.LanceDataset, missing: list[tuple[str, str]]) -> None:
    """Create the indexes ``missing`` (:func:`indexes_to_make`) on ``ds``."""
    rows = ds.count_rows()
    for column, kind in missing:
        if kind == "INVERTED":
            ds.create_scalar_index(column, "INVERTED", **FTS_OPTIONS)
        elif kind == VECTOR_INDEX:
            # Sized by rows per partition: a later optimize_indices() re-cuts an index made with num_partitions to Lance's
            # own default size (49 partitions became 1 at 10k rows, 498 became 221 at 1M) and keeps this one.
            ds.create_index(column, kind, metric="dot", target_partition_size=max(1, rows // ivf_partitions(rows)),
                            replace=True)
        else:
            ds.create_scalar_index(column, kind)  # type: ignore[arg-type]


__all__ = ["FTS_OPTIONS", "MAXIMUM_NPROBES", "MINIMUM_NPROBES", "REFINE_FACTOR", "RETRAIN_BELOW", "ROWS_PER_PARTITION",
           "UNINDEXED_FRAGMENTS", "UNINDEXED_SHARE", "VECTOR_INDEX", "VECTOR_INDEX_MIN_ROWS", "index_kind",
           "indexes_to_make", "ivf_partitions", "make_indexes", "nearest_options", "partitions", "within_share"]
