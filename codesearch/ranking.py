"""How candidate lists become the final order: fusion settings, symbol matches, source-first.

:class:`Ranking` holds every knob in one frozen value. Two are named:

- :data:`ARTICLE` -- the published pipeline: plain RRF (k=60, top 30 of each
  list), nothing else;
- :data:`DEFAULT` -- the library's default: the same fusion, plus *symbol
  matches* (a query that names an identifier gets that identifier's definition
  first) and *source-first* (tests, docs and config rank as if they were
  further down their list than they are, so source wins among hits of similar
  relevance; they are never dropped).

Both adjustments work on ranks, not scores, so they apply to every mode
(BM25, dense, hybrid) whatever the scale of its scores, and hits keep the
score of their mode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from codesearch.fusion import RRF_DEPTH, RRF_K

# A word that can only be an identifier: snake_case, camelCase/PascalCase with an
# inner capital, or a dotted name (Session.send).
_IDENTIFIER = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+"  # dotted
    r"|[A-Za-z0-9]*_[A-Za-z0-9_]*[A-Za-z0-9][A-Za-z0-9_]*"  # has an underscore
    r"|[A-Za-z][a-z0-9]*[A-Z][A-Za-z0-9]*"  # an inner capital
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")


@dataclass(frozen=True, slots=True)
class Ranking:
    """Settings that turn candidate lists into the final order.

    Attributes:
        rrf_k: RRF smoothing constant.
        rrf_depth: how many hits of each list vote in RRF.
        bm25_weight: weight of the keyword list's votes in RRF.
        dense_weight: weight of the embedding list's votes in RRF.
        symbol_matches: put the definitions of identifiers named in the query first.
        non_source_penalty: a test/doc/config hit at position ``p`` sorts as if
            at ``p * non_source_penalty``; 1.0 turns source-first off.
    """

    rrf_k: float = RRF_K
    rrf_depth: int = RRF_DEPTH
    bm25_weight: float = 1.0
    dense_weight: float = 1.0
    symbol_matches: bool = True
    non_source_penalty: float = 3.0

    def __post_init__(self) -> None:
        if self.rrf_k < 0 or self.rrf_depth < 1:
            raise ValueError(f"rrf_k must be >= 0 and rrf_depth >= 1, got {self.rrf_k} and {self.rrf_depth}")
        if self.non_source_penalty < 1.0:
            raise ValueError(f"non_source_penalty must be >= 1 (1 turns source-first off), got {self.non_source_penalty}")

    @property
    def adjusts(self) -> bool:
        """Whether this ranking changes the order of a mode's list at all."""
        return self.symbol_matches or self.non_source_penalty != 1.0


ARTICLE = Ranking(symbol_matches=False, non_source_penalty=1.0)
"""The published configuration: plain RRF, k=60, top 30 of each list."""

DEFAULT = Ranking()
"""The library's default: RRF plus symbol matches and source-first."""

RANKINGS: Mapping[str, Ranking] = {"default": DEFAULT, "article": ARTICLE}


def resolve_ranking(ranking: str | Ranking) -> Ranking:
    """A :class:`Ranking` from itself or its name (``"default"``, ``"article"``).

    Raises:
        ValueError: an unknown name.
    """
    if isinstance(ranking, Ranking):
        return ranking
    try:
        return RANKINGS[ranking]
    except KeyError:
        raise ValueError(f"unknown ranking {ranking!r}; use one of {', '.join(RANKINGS)} or a Ranking") from None


def query_identifiers(query: str) -> list[str]:
    """Names in ``query`` that can only be identifiers, lowercased, in order.

    A word counts when it is snake_case, has an inner capital (camelCase,
    PascalCase) or is dotted (``Session.send`` gives ``session.send`` and
    ``send``); a query that is a single word counts whatever its shape, since
    someone typing one word is looking for a name. Plain English words in a
    longer question never count, so "send the body" does not jump to a ``send``
    method.
    """
    words = _WORD.findall(query)
    if len(words) == 1 and len(query.split()) == 1:
        candidates = [words[0].strip(".")]
    else:
        candidates = [w.strip(".") for w in words if _IDENTIFIER.fullmatch(w.strip("."))]
    names: list[str] = []
    for word in candidates:
        lowered = word.lower()
        for name in (lowered, lowered.rsplit(".", 1)[-1]):
            if name and name not in names:
                names.append(name)
    return names


def symbol_names(symbol: str) -> tuple[str, ...]:
    """The lowercased names a definition answers to: ``Session.send`` -> (``session.send``, ``send``)."""
    lowered = symbol.lower()
    last = re.split(r"::|\.|\)\.", lowered)[-1].strip("()* ")
    return (lowered, last) if last != lowered else (lowered,)


def rerank(
    ranked: Sequence[tuple[int, float]],
    kinds: Sequence[str],
    ranking: Ranking,
    defining: Sequence[int] = (),
) -> list[tuple[int, float]]:
    """Apply symbol matches and source-first to one mode's ranked list.

    Args:
        ranked: ``(chunk, score)`` best first, as the mode ranked them.
        kinds: kind of every chunk, by chunk number.
        ranking: the settings.
        defining: chunks that define an identifier named in the query, best
            first; they go to the top (those missing from ``ranked`` too, with
            score 0.0).

    Returns:
        The same ``(chunk, score)`` pairs (plus missing definitions), in the new
        order. On equal effective positions source goes first (when
        source-first is on); otherwise the original order is kept.
    """
    if not ranking.adjusts:
        return list(ranked)
    items = list(ranked)
    if ranking.symbol_matches and defining:
        present = {i for i, _ in items}
        items += [(i, 0.0) for i in defining if i not in present]
    first = {i: n for n, i in enumerate(defining)} if ranking.symbol_matches else {}
    penalty = ranking.non_source_penalty

    def key(entry: tuple[int, tuple[int, float]]) -> tuple[int, float, bool, int]:
        position, (chunk, _score) = entry
        if chunk in first:
            return (0, first[chunk], False, position)
        non_source = kinds[chunk] != "source"
        effective = (position + 1) * (penalty if non_source else 1.0)
        return (1, effective, non_source and penalty != 1.0, position)

    return [item for _, item in sorted(enumerate(items), key=key)]


__all__ = [
    "ARTICLE",
    "DEFAULT",
    "RANKINGS",
    "Ranking",
    "query_identifiers",
    "rerank",
    "resolve_ranking",
    "symbol_names",
]
