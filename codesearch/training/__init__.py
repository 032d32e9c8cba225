"""Training data for a code-trained embedding model: doc -> code pairs mined from named public repositories.

Modules, one job each:

- :mod:`~codesearch.training.sources`: ``training/sources.json`` loaded and checked (pinned commits, allowed
  licences, no overlap with the retrieval benchmark);
- :mod:`~codesearch.training.trees`: a source's files at its pinned commit, from git mirrors or checkouts;
- :mod:`~codesearch.training.filters`: which files are mined (no tests, vendored, generated or minified files);
- :mod:`~codesearch.training.extract`: a file's doc comments and the code they document, by the library's grammars;
- :mod:`~codesearch.training.docs`: doc comments into short queries, and which are no query;
- :mod:`~codesearch.training.mine`: the pipeline (de-duplication, the per-repository cap, the split by repository,
  the JSONL splits and their manifest) and its command line.
"""

from __future__ import annotations

from typing import Any

from codesearch.training.docs import doc_problem, strip_comment, summarise
from codesearch.training.extract import KINDS, DocPair, extract_docs
from codesearch.training.sources import (
    ALLOWED_LICENCES,
    Source,
    benchmark_overlap,
    check_benchmark_overlap,
    languages_covered,
    load_sources,
)
from codesearch.training.trees import export_tree, find_tree, iter_files

_MINE_NAMES = frozenset({"MiningReport", "Pair", "mine_repository", "mine_sources", "validation_repositories"})


def __getattr__(name: str) -> Any:
    # Imported on first use, so `python -m codesearch.training.mine` does not find its module already loaded.
    if name in _MINE_NAMES:
        from codesearch.training import mine

        return getattr(mine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ALLOWED_LICENCES",
    "KINDS",
    "DocPair",
    "MiningReport",
    "Pair",
    "Source",
    "benchmark_overlap",
    "check_benchmark_overlap",
    "doc_problem",
    "export_tree",
    "extract_docs",
    "find_tree",
    "iter_files",
    "languages_covered",
    "load_sources",
    "mine_repository",
    "mine_sources",
    "strip_comment",
    "summarise",
    "validation_repositories",
]
