"""Keywords in a corpus: one repository's exact BM25, and the full-text index's candidates across repositories.

A search scoped to one repository ranks its keywords with that repository's
own statistics: :func:`repo_bm25` fits :class:`~codesearch.keyword.BM25` on
the repository's chunks, in the order a single index holds them, from the
terms the chunks table keeps (``keyword_text``: codesearch's identifier-split
terms, each as often as it occurs), so its scores are those of a single
index of the repository, bit for bit. No term is tokenized again.

Across repositories the keyword list comes from Lance's full-text index over
the same terms (whitespace tokens, no lowercasing, stemming or stop words),
queried through ``MatchQuery`` so a query's quotes are text, not syntax. Its
statistics are the whole corpus's (or, with a filter, still the corpus's), and
its BM25 has Lance's constants (k1 = 1.2, b = 0.75, idf ``ln(1 + ...)``), not
the library's (k1 = 1.5, rank_bm25's idf); ``benchmarks/corpus_scale.py``
measures what that costs against an exact BM25 over the same chunks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from codesearch.keyword import BM25, BM25Builder, code_tokens
from codesearch.ranking.config import Ranking
from codesearch.ranking.facts import path_classes

if TYPE_CHECKING:
    import lance
    import pyarrow as pa


def repo_bm25(keyword_texts: Iterable[str]) -> BM25:
    """BM25 fitted on chunks given by their ``keyword_text``, in chunk order (a single index's fit of them)."""
    builder = BM25Builder()
    for text in keyword_texts:
        counts = Counter(text.split())
        builder.add_counts(counts.keys(), counts.values())
    return builder.fit()


def query_terms(query: str) -> str:
    """The query as the full-text index reads it: its terms, split as the chunks' were, joined by spaces."""
    return " ".join(code_tokens(query))


def full_text(ds: lance.LanceDataset, query: str, where: str | None, limit: int, columns: list[str]) -> pa.Table:
    """The ``limit`` best chunks for ``query`` by the full-text index within ``where``, with ``_score``."""
    from lance.query import FullTextOperator, MatchQuery

    terms = query_terms(query)
    if not terms:
        import pyarrow as pa

        return pa.table({c: [] for c in [*columns, "_score"]})
    return ds.to_table(full_text_query=MatchQuery(terms, "keyword_text", operator=FullTextOperator.OR),
                       columns=[*columns, "_score"], filter=where, prefilter=where is not None, limit=limit,
                       disable_scoring_autoprojection=True)


def keyword_prior(path: str, ranking: Ranking, cache: dict[str, float] | None = None) -> float:
    """The multiplier the keyword list takes for a file before its candidates are cut (``ranking.keyword_priors``),
    as :func:`codesearch.ranking.stages.weigh_keyword_lists` applies it; 1 when priors are off."""
    if not ranking.priors:
        return 1.0
    if cache is not None and path in cache:
        return cache[path]
    multipliers: Mapping[str, float] = ranking.prior_multipliers
    value = 1.0
    for name in path_classes(path):
        if name in ranking.keyword_priors:
            value *= multipliers.get(name, 1.0)
    if cache is not None:
        cache[path] = value
    return value


__all__ = ["full_text", "keyword_prior", "query_terms", "repo_bm25"]
