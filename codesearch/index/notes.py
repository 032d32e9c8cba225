"""Why a search found nothing, in one line: an empty answer should say what to change.

Only an empty answer pays for this: when no indexed file is in scope, the
folder is walked again to say which files there were skipped, and why.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from codesearch.files.walk import MAX_FILE_BYTES, SkipReason, file_reason, walk
from codesearch.index.loaded import LoadedIndex
from codesearch.keyword.tokens import MAX_TOKEN_CHARS, code_tokens
from codesearch.scope import Scope
from codesearch.types import Mode

IGNORED = "ignored by .gitignore or .codesearchignore"


def why_empty(loaded: LoadedIndex, where: Scope, mask: np.ndarray | None, query: str, mode: Mode,
              root: Path, use_ignore_files: bool, exclude_dirs: Iterable[Path] = ()) -> str:
    """One line saying why a search of ``query`` within ``where`` found nothing.

    Args:
        loaded: the index searched.
        where: the search's scope; ``mask`` its chunks (``None``: all).
        query, mode: as searched (a search finds nothing in scope only when no
            keyword matches and the query has no embedding to rank by).
        root, use_ignore_files, exclude_dirs: the walk that built the index,
            to say which files in scope were skipped and why.
    """
    if mask is not None and not mask.any():
        return _empty_scope(loaded, where, root, use_ignore_files, exclude_dirs)
    if mode == "dense":
        return "the query's embedding is empty (the model knows none of its tokens); try other words or mode bm25"
    words = list(dict.fromkeys(code_tokens(query)))
    known = [w for w in words if w in loaded.bm25.vocabulary_]
    empty = " and its embedding is empty (the model knows none of its tokens)" if mode == "hybrid" else ""
    if not words:
        if any(len(run) > MAX_TOKEN_CHARS for run in re.findall(r"\w+", query)):
            return (f"every word of the query is longer than {MAX_TOKEN_CHARS} characters, and the keyword index "
                    f"keeps no word that long (hashes, blobs){empty}; search for a shorter part, or a description")
        return f"the query holds no word to look up (letters, digits or _){empty}; describe what the code does"
    if not known:
        return f"no word of the query ({', '.join(words[:8])}) occurs in the indexed files{empty}"
    return f"no chunk in scope holds a word of the query ({', '.join(known[:8])}){empty}; they occur only outside the scope"


def _scope_words(where: Scope) -> str:
    parts = []
    if where.prefix:
        parts.append(f"under {where.prefix!r}")
    if where.include:
        parts.append(f"matching {', '.join(repr(p) for p in where.include)}")
    if where.exclude:
        parts.append(f"outside {', '.join(repr(p) for p in where.exclude)}")
    return " ".join(parts) or "in the repository"


def _empty_scope(loaded: LoadedIndex, where: Scope, root: Path, use_ignore_files: bool,
                 exclude_dirs: Iterable[Path]) -> str:
    files = loaded.facts.files
    kinds = _file_kinds(loaded)
    placed = [i for i, path in enumerate(files) if where.allows_path(path)]
    if placed:  # files in the place asked for, none of the kind asked for
        counts = Counter(kinds[i] for i in placed)
        have = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        if where.kinds is not None:
            head = f"no {' or '.join(sorted(where.kinds - where.exclude_kinds))} file is indexed {_scope_words(where)}"
        else:
            head = f"every indexed file {_scope_words(where)} is of a kind left out ({', '.join(sorted(where.exclude_kinds))})"
        return f"{head}: the {len(placed)} indexed files there are {have}"
    skipped = _skipped_on_disk(where, root, use_ignore_files, exclude_dirs, set(files))
    line = f"no indexed file {_scope_words(where)}"
    if not skipped:
        return line + " (no file there on disk either)"
    reasons = ", ".join(f"{n} {reason.replace('_', ' ')}" for reason, n in sorted(skipped.items(), key=lambda r: (-r[1], r[0])))
    total = sum(skipped.values())
    every = "the" if total == 1 else f"all {total}"
    return f"{line}: {every} files there were skipped ({reasons})"


def _file_kinds(loaded: LoadedIndex) -> list[str]:
    """Each indexed file's kind (that of its first chunk)."""
    kinds = [""] * len(loaded.facts.files)
    for number, chunks in enumerate(loaded.facts.chunks_of):
        kinds[number] = loaded.hit(chunks[0], 0.0).kind if chunks else ""
    return kinds


def _skipped_on_disk(where: Scope, root: Path, use_ignore_files: bool, exclude_dirs: Iterable[Path],
                     indexed: set[str]) -> Counter[str]:
    """Files on disk in ``where``'s place that are not indexed, counted by why (as the scan decides)."""
    reasons: Counter[str] = Counter()
    real_root = root.resolve()
    met: set[str] = set()
    for found in walk(real_root, use_ignore_files=use_ignore_files, exclude_dirs=exclude_dirs):
        met.add(found.rel)
        if found.rel in indexed or not where.allows_path(found.rel):
            continue
        reason, _ = file_reason(found.entry, found.rel, found.rules, MAX_FILE_BYTES)
        reasons[reason or "binary or empty"] += 1
    if use_ignore_files:  # files the walk never met: in ignored folders
        for found in walk(real_root, use_ignore_files=False, exclude_dirs=exclude_dirs):
            if found.rel not in met and where.allows_path(found.rel):
                reasons[IGNORED] += 1
    reasons[IGNORED] += reasons.pop(SkipReason.IGNORED, 0)
    if not reasons[IGNORED]:
        del reasons[IGNORED]
    return reasons


__all__ = ["why_empty"]
