"""Answers for tools and agents: hits as JSON-able data, a compact form, and a token budget the whole answer keeps.

Both faces (the CLI's ``--json`` and the MCP tools) shape hits here, so an
answer reads the same from either.

The budget rule: an answer of ``b`` bytes of JSON text (UTF-8, as the face
prints or sends it) counts as ``ceil(b / 3)`` tokens (:func:`estimate_tokens`).
Tokenizers differ from model to model and none is at hand for the model that
reads the answer, so the budget is counted by this stated rule instead, and
:func:`fit_to_budget` keeps the whole answer, JSON syntax and all, within it
by that count. To fit, it cuts hit texts from their end (whole lines, the last
hits first, down to their first line) and then drops hits from the end of the
list; the answer says how many of each (``trimmed``, ``dropped``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from codesearch.display import clipped, exact_text
from codesearch.types import Hit, SearchInfo, SymbolHits

BYTES_PER_TOKEN = 3
"""The budget's rule: every 3 bytes of an answer's JSON text (UTF-8) count as one token, rounded up."""
LINE_CHARS = 160
"""The longest line a compact hit (or a hit cut to its first line) keeps."""
MAX_LINE_CHARS = 500
"""With ``max_lines``, the longest line a hit's text keeps: a longer one is cut and marked ``…[+N chars]``, so
``max_lines`` bounds an answer's bytes as well as its lines (a minified file can be one line of a megabyte)."""

Dumps = Callable[[Any], str]
"""How a face writes an answer as text (the budget counts that text)."""


def pretty_json(data: Any) -> str:
    """An answer's JSON as both faces write it: indented by 2, non-ASCII kept as it is, exact.

    A path holding a byte that is not UTF-8 (a surrogate escape) is written as
    the JSON escape ``\\udcNN``, so the text is strict UTF-8 and a parser reads
    the exact path back (:func:`codesearch.display.exact_text`).
    """
    return exact_text(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` by the budget's rule: ``ceil(UTF-8 bytes / BYTES_PER_TOKEN)``."""
    return -(-len(text.encode("utf-8")) // BYTES_PER_TOKEN)


def _one_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped and cut to :data:`LINE_CHARS`."""
    for line in text.split("\n"):
        if line.strip():
            return line.strip()[:LINE_CHARS]
    return ""


def hit_data(hit: Hit, *, max_lines: int | None = None, compact: bool = False) -> dict[str, Any]:
    """One hit as JSON-able data.

    Args:
        hit: the hit.
        max_lines: keep this many lines of its text, each cut to
            :data:`MAX_LINE_CHARS` (``truncated`` says whether it had more, or
            longer lines); ``None`` keeps all and adds no ``truncated``.
        compact: the compact form for agents that read files themselves:
            ``location``, ``symbols`` and ``line`` (its first line, or for a
            reference the first line that uses the name), plus ``root``,
            ``repo``, ``defines`` and ``lines`` when set.
    """
    if compact:
        line = _one_line(hit.text)
        if hit.lines:
            offset = hit.lines[0] - hit.start_line
            used = hit.text.split("\n")[offset:offset + 1]
            line = used[0].strip()[:LINE_CHARS] if used else line
        data: dict[str, Any] = {"location": hit.location, "symbols": list(hit.symbols), "line": line}
        for name in ("root", "repo", "defines"):
            if getattr(hit, name) is not None:
                data[name] = getattr(hit, name)
        if hit.lines:
            data["lines"] = list(hit.lines)
        return data
    data = hit.as_dict()
    if max_lines is not None:
        lines = hit.text.split("\n")
        kept = [clipped(line, MAX_LINE_CHARS) for line in lines[:max_lines]]
        data["text"] = "\n".join(kept)
        data["truncated"] = len(lines) > max_lines or any(len(line) > MAX_LINE_CHARS for line in lines[:max_lines])
    return data


def hits_data(hits: Sequence[Hit], *, max_lines: int | None = None, compact: bool = False) -> list[dict[str, Any]]:
    """:func:`hit_data` of each hit."""
    return [hit_data(hit, max_lines=max_lines, compact=compact) for hit in hits]


def symbol_answer(found: SymbolHits, *, max_lines: int | None = None, compact: bool = False) -> dict[str, Any]:
    """What :meth:`CodeSearch.definitions` or :meth:`CodeSearch.references` found, as JSON-able data:
    ``name``, ``textual``, ``capped``, ``note`` (when set) and the hits shaped by :func:`hit_data`."""
    data = found.as_dict()
    data["hits"] = hits_data(found.hits, max_lines=max_lines, compact=compact)
    return data


def search_answer(query: str, searches: Sequence[tuple[str, SearchInfo | None]], hits: Sequence[Hit], *,
                  compact: bool = False) -> dict[str, Any]:
    """What ``codesearch search --json`` answers (and ``codesearch serve``'s ``/api/search``).

    Args:
        query: the query.
        searches: each root searched, with how its search was answered (``last_search``).
        hits: the hits, fused across the roots when there are several.
        compact: the compact form of each hit.

    Returns:
        ``query``; ``tier`` (one root's tier, or a tier per root); ``refreshed`` (files re-indexed first, all roots);
        ``refreshed_in_memory`` (changed files read into memory only, the stored index left as it was: another
        process held its write lock, or it is read-only); ``note`` when there is no hit and a search said why (each
        root's note, named, when there are several); ``hits``.
    """
    tiers = {root: info.tier if info else None for root, info in searches}
    answer: dict[str, Any] = {"query": query, "tier": next(iter(tiers.values())) if len(tiers) == 1 else tiers,
                              "refreshed": sum(info.refreshed for _, info in searches if info),
                              "refreshed_in_memory": sum(info.refreshed_in_memory for _, info in searches if info)}
    notes = [(root, info.note) for root, info in searches if info and info.note]
    if not hits and notes:
        answer["note"] = notes[0][1] if len(searches) == 1 else "; ".join(f"{root}: {text}" for root, text in notes)
    answer["hits"] = hits_data(hits, compact=compact)
    return answer


def corpus_answer(query: str, repos: Sequence[str] | None, hits: Sequence[Hit], *, compact: bool = False,
                  versions: dict[str, int] | None = None) -> dict[str, Any]:
    """What ``codesearch corpus search --json`` answers: ``query``, ``repos`` (``None``: every one), ``versions``
    (the corpus version that answered, :attr:`Corpus.last_versions <codesearch.corpus.Corpus.last_versions>`, when
    given) and ``hits``."""
    answer: dict[str, Any] = {"query": query, "repos": list(repos) if repos else None}
    if versions is not None:
        answer["versions"] = dict(versions)
    answer["hits"] = hits_data(hits, compact=compact)
    return answer


def check_max_tokens(max_tokens: int | None) -> None:
    """Raise ``ValueError`` for a budget below 1 (``None`` is no budget)."""
    if max_tokens is not None and max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")


def fit_to_budget(answer: dict[str, Any], max_tokens: int | None, dumps: Dumps = pretty_json) -> dict[str, Any]:
    """``answer`` cut to stay within ``max_tokens`` as :func:`estimate_tokens` counts ``dumps(answer)``.

    ``answer["hits"]`` holds :func:`hit_data` dicts. The hits' texts are cut
    from their end first, whole lines at a time, starting with the last hit
    and going no shorter than a hit's first line (itself cut to
    :data:`LINE_CHARS`); cut hits say ``truncated``. Only when every text is
    that short are hits dropped, from the end. The answer gains
    ``max_tokens``, ``tokens`` (its own size by the rule), ``trimmed`` (hits
    whose text was cut to fit) and ``dropped`` (hits left out).

    Returns:
        A new answer (the one given is not changed); it is returned as it is
        when ``max_tokens`` is ``None``.

    Raises:
        ValueError: ``max_tokens`` below 1, or below what the answer takes
            with no hit at all (the message says how much that is).
    """
    if max_tokens is None:
        return answer
    check_max_tokens(max_tokens)
    hits = [dict(hit) for hit in answer["hits"]]
    fitted = {**answer, "hits": hits, "max_tokens": max_tokens, "tokens": 0, "trimmed": 0, "dropped": 0}

    def size() -> int:
        fitted["tokens"] = estimate_tokens(dumps(fitted))
        fitted["tokens"] = estimate_tokens(dumps(fitted))  # its own digits count too
        return int(fitted["tokens"])

    if size() <= max_tokens:
        return fitted
    cut: set[int] = set()

    def mark(i: int) -> None:
        cut.add(i)
        fitted["trimmed"] = len(cut)
        fitted["tokens"] = max_tokens  # as many digits as it can have once it fits

    for i in reversed(range(len(hits))):
        if _shorten(fitted, hits[i], max_tokens, dumps, on_cut=functools.partial(mark, i)) and size() <= max_tokens:
            return fitted
    while hits and size() > max_tokens:
        hits.pop()
        cut.discard(len(hits))
        fitted["trimmed"] = len(cut)
        fitted["dropped"] += 1
    if size() > max_tokens:
        raise ValueError(f"max_tokens={max_tokens} is below the smallest answer, {fitted['tokens']} tokens with no "
                         f"hit (counted as UTF-8 bytes / {BYTES_PER_TOKEN} of its JSON); give at least {fitted['tokens']}")
    return fitted


def _shorten(answer: dict[str, Any], hit: dict[str, Any], max_tokens: int, dumps: Dumps,
             on_cut: Callable[[], None]) -> bool:
    """Cut ``hit``'s text to the most whole lines with which ``answer`` fits, keeping at least its first line.

    Returns:
        Whether the answer fits now; when it does not, the text is left at its
        first line (cut to :data:`LINE_CHARS`).
    """
    key = "text" if "text" in hit else "line"
    text: str = hit[key]
    lines = text.split("\n")
    shortest = lines[0][:LINE_CHARS]
    if text == shortest:
        return False
    on_cut()
    if key == "text":
        hit["truncated"] = True
    # The text's share of the answer is its JSON string: the rest stays as it is while the text is cut.
    hit[key] = ""
    rest = len(dumps(answer).encode("utf-8")) - len(dumps("").encode("utf-8"))
    budget = max_tokens * BYTES_PER_TOKEN - rest

    def fits(candidate: str) -> bool:
        return len(dumps(candidate).encode("utf-8")) <= budget

    low, high = 0, len(lines)  # the most whole lines that fit (0: none, not even the first whole)
    while low < high:
        middle = (low + high + 1) // 2
        if fits("\n".join(lines[:middle])):
            low = middle
        else:
            high = middle - 1
    hit[key] = "\n".join(lines[:low]) if low else shortest
    return low > 0 or fits(shortest)


__all__ = ["BYTES_PER_TOKEN", "LINE_CHARS", "MAX_LINE_CHARS", "Dumps", "check_max_tokens", "corpus_answer",
           "estimate_tokens", "fit_to_budget", "hit_data", "hits_data", "pretty_json", "search_answer", "symbol_answer"]
