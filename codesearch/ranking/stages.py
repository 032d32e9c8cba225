"""The ranking stages after the candidates: fuse -> definitions -> path words -> coherence -> priors -> diversity.

Each stage is a small function over the candidate scores (``{chunk: score}``),
the query's :class:`~codesearch.ranking.query.QueryProfile`, the store's
:class:`~codesearch.ranking.facts.RankingFacts` and the knobs in
:class:`~codesearch.ranking.config.Ranking`. The boosts add a multiple of
``top``, the best fused score, so each stage's strength is the same whatever
the retrievers' scales and no boost compounds another. The candidates
themselves come from :mod:`codesearch.ranking.candidates`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

import numpy as np

from codesearch.ranking.candidates import KEYWORD_LISTS
from codesearch.ranking.config import Ranking
from codesearch.ranking.facts import RankingFacts, gather
from codesearch.ranking.fusion import weighted_votes
from codesearch.ranking.paths import DECLARATION, squash_name
from codesearch.ranking.query import QueryProfile

Scores = dict[int, float]

def list_weights(profile: QueryProfile, present: Sequence[str], ranking: Ranking) -> dict[str, float]:
    """Each list's weight in fusion: the semantic share (by query kind) split among the embedding lists."""
    semantic = [name for name in present if name not in KEYWORD_LISTS]
    keyword = [name for name in present if name in KEYWORD_LISTS]
    share = ranking.semantic_weight_symbol if profile.is_symbol else ranking.semantic_weight
    if not keyword:
        share = 1.0
    elif not semantic:
        share = 0.0
    weights = dict.fromkeys(keyword, (1.0 - share) / max(len(keyword), 1))
    if "dense" in semantic and "static" in semantic:
        weights["static"] = share * ranking.static_share
        weights["dense"] = share * (1.0 - ranking.static_share)
    for name in semantic:
        weights.setdefault(name, share / len(semantic))
    return weights


def fuse(ranked: Mapping[str, Sequence[int]], weights: Mapping[str, float], rrf_k: float,
         depth: int | None = None, scores: Mapping[str, np.ndarray] | None = None, score_share: float = 0.0,
         ranges: Mapping[str, tuple[float, float]] | None = None) -> Scores:
    """Weighted rank fusion of the named lists (:func:`codesearch.ranking.fusion.weighted_votes`).

    Place ``r`` of a list scores ``weight / (rrf_k + r)``, summed over lists;
    with equal weights this orders exactly as reciprocal rank fusion
    (Cormack et al., 2009). With ``score_share``, that share of each vote is
    the list's own score (``scores``, aligned with ``ranked``) min-max scaled
    over ``ranges`` (the pipeline gives the candidates of the whole index, so
    a scope filters without rescaling; by default the voting candidates').
    """
    names = list(ranked)
    fused, _ = weighted_votes(
        [ranked[name] for name in names],
        [weights.get(name, 0.0) for name in names],
        rrf_k,
        depth,
        None if scores is None else [scores.get(name) for name in names],
        score_share,
        None if ranges is None else [ranges.get(name) for name in names],
    )
    return fused


def _stem_matches(stem: str, name: str) -> bool:
    """Whether a file stem names a symbol: ``http_client`` / ``httpclient`` / ``HttpClients`` for ``HttpClient``."""
    stem, name = stem.lower(), name.lower()
    squashed = squash_name(stem)
    return name in (stem, squashed, stem.rstrip("s"), squashed.rstrip("s"))


def boost_definitions(scores: Scores, profile: QueryProfile, facts: RankingFacts, ranking: Ranking, top: float) -> None:
    """Raise the chunks that define a name the query asks for, in place.

    Definitions come from the index's symbol table, so a definition the
    retrievers missed joins the candidates. For each name the most specific
    form that has definitions wins (``Session.send`` before ``send``), and a
    definition written in the query's case wins over other cases. A symbol
    query's definitions gain ``definition_boost * top`` (times
    ``definition_stem_bonus`` when the file is named after the symbol), other
    cases counting when none is spelled as asked; names embedded in a sentence
    gain ``embedded_definition_scale`` of that, and only as spelled.
    """
    if not profile.symbols:
        return
    unit = ranking.definition_boost * top * (1.0 if profile.is_symbol else ranking.embedded_definition_scale)
    boosted: dict[int, float] = {}
    for forms in profile.symbols:
        for name in forms:
            found = facts.defining([name])  # in scope: the facts of a scoped search see only its chunks
            exact = [chunk for chunk, written in found.items() if written == name]
            # A symbol query also takes other cases; in a sentence only the spelling as defined counts.
            chosen = exact or (list(found) if profile.is_symbol else [])
            if not chosen:
                continue
            # Where one file has several chunks naming it (a split class's header and its members),
            # the first is where the definition starts.
            first: dict[int, int] = {}
            for chunk in sorted(chosen):
                first.setdefault(int(facts.file_of[chunk]), chunk)
            for chunk in first.values():
                stem = facts.stems[facts.file_of[chunk]]
                gain = unit * (ranking.definition_stem_bonus if _stem_matches(stem, name) else 1.0)
                boosted[chunk] = max(boosted.get(chunk, 0.0), gain)
            break
    for chunk, gain in boosted.items():
        scores[chunk] = scores.get(chunk, 0.0) + gain


def boost_path_words(scores: Scores, profile: QueryProfile, facts: RankingFacts, ranking: Ranking, top: float) -> None:
    """For a natural-language query, raise candidates whose file stem or folder shares its words, in place.

    Each query word weighs its inverse file frequency over the repository's
    path words (``middleware`` in a folder of forty middlewares says little),
    and a file gains ``path_boost * top`` times the weighted share of the
    query's words its path holds (below ``path_min_share`` nothing). A file
    the query calls by its whole name gains ``path_name_boost * top`` more, on
    its best candidate.
    """
    if profile.is_symbol or not profile.words:
        return
    # In one order (the words are a set, whose order changes from one process to the next): the sums below, and with
    # them a score's last bit, are the same in every process.
    words = sorted(profile.words)
    n_files = len(facts.files)
    matches = {word: facts.files_matching(word) for word in words}
    weights = {word: math.log((n_files + 1) / (len(files) + 1)) for word, files in matches.items()}
    total = sum(weights.values())
    shares: dict[int, float] = {}
    chunks = list(scores) if total > 0 else []
    for chunk, number in zip(chunks, facts.files_of(chunks)):
        share = shares.get(number)
        if share is None:
            share = shares[number] = sum(w for word, w in weights.items() if number in matches[word]) / total
        if share >= ranking.path_min_share:
            scores[chunk] += ranking.path_boost * top * share
    _boost_named_files(scores, profile, facts, ranking.path_name_boost * top)


def _boost_named_files(scores: Scores, profile: QueryProfile, facts: RankingFacts, gain: float) -> None:
    """Raise the best candidate of each file the query calls by its whole stem, in place."""
    if gain <= 0:
        return
    named = {number for name in profile.file_names for number in facts.files_named(name)}
    if not named:
        return
    best: dict[int, int] = {}
    chunks = list(scores)
    for chunk, number in zip(chunks, facts.files_of(chunks)):
        score = scores[chunk]
        if number in named and (number not in best or (score, -chunk) > (scores[best[number]], -best[number])):
            best[number] = chunk
    for chunk in best.values():
        scores[chunk] += gain


def boost_coherence(scores: Scores, facts: RankingFacts, ranking: Ranking, top: float) -> None:
    """Raise each file's best candidate in proportion to the summed scores of the file's candidates, in place.

    A file that holds many candidates is likelier the file asked about; its
    best chunk gains ``coherence_boost * top`` times its file's sum over the
    largest file sum.
    """
    if not scores:
        return
    sums: dict[int, float] = {}
    best: dict[int, int] = {}
    chunks = list(scores)
    for chunk, number in zip(chunks, facts.files_of(chunks)):
        score = scores[chunk]
        sums[number] = sums.get(number, 0.0) + score
        if number not in best or score > scores[best[number]] or (score == scores[best[number]] and chunk < best[number]):
            best[number] = chunk
    largest = max(sums.values())
    if largest <= 0:
        return
    for number, chunk in best.items():
        scores[chunk] += ranking.coherence_boost * top * sums[number] / largest


def apply_priors(scores: Scores, facts: RankingFacts, ranking: Ranking, profile: QueryProfile) -> None:
    """Multiply each candidate by its file's path-class priors (tests, compat, examples, ...), in place.

    The ``declaration`` prior weighs only a question about behaviour: a
    symbol query, or a sentence asking about types (``profile.asks_types``),
    takes declaration files as they are.
    """
    multipliers = ranking.prior_multipliers
    if DECLARATION in multipliers and (profile.is_symbol or profile.asks_types):
        multipliers = {name: m for name, m in multipliers.items() if name != DECLARATION}
    priors = facts.chunk_priors(multipliers)
    chunks = list(scores)
    for chunk, prior in zip(chunks, gather(priors, chunks)):
        scores[chunk] *= prior


def ordered(scores: Scores) -> list[tuple[int, float]]:
    """Candidates best first; equal scores in chunk order."""
    return _best_first(scores.items())


def _best_first(pairs: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    """``(chunk, score)`` pairs of distinct chunks best first, equal scores in chunk order."""
    out = sorted(pairs)  # chunk order: the chunks are distinct, so no score is compared
    out.sort(key=itemgetter(1), reverse=True)  # a stable sort, reversed or not: equal scores keep chunk order
    return out


def diversify(scores: Scores, facts: RankingFacts, ranking: Ranking, evidence: Scores | None = None,
              vectors: np.ndarray | Mapping[int, np.ndarray] | None = None, k: int | None = None,
              ) -> list[tuple[int, float]]:
    """Order candidates so one file does not fill the list, keeping its other answers.

    Walking the candidates best first, the ``n``-th chunk of a file already
    listed beyond its first ``diversity_free`` is multiplied by
    ``diversity_decay ** (n * r)``, where ``r`` says how far it repeats the
    file's chunks above it: the cosine of ``vectors`` to the closest of them,
    scaled from 0 at ``diversity_similar[0]`` to 1 at ``diversity_similar[1]``
    (1 without vectors, or for a chunk whose row is all zeros: one the
    transformer did not read). A second function of a file is another answer; the
    next window of the same class is more of one. A chunk whose fused score
    (``evidence``, before any boost) is at least ``diversity_hold`` of the best
    is not decayed either. A file's best chunk is never decayed.

    Decay only lowers a score, so with ``k`` the walk stops once ``k`` chunks
    score above the next candidate's undecayed score: the first ``k`` places
    are those of the whole walk, and the cosines of the rest are never computed.
    """
    low, high = ranking.diversity_similar
    top = max(evidence.values(), default=0.0) if evidence else 0.0
    above: dict[int, list[int]] = {}  # file -> its chunks walked so far
    best: list[float] = []  # the k best scores so far, a min-heap
    out: list[tuple[int, float]] = []
    for chunk, fused in ordered(scores):
        if k is not None and len(best) == k and best[0] > fused:
            break
        mates = above.setdefault(int(facts.file_of[chunk]), [])
        n = len(mates)
        strong = evidence is not None and top > 0 and evidence.get(chunk, 0.0) >= ranking.diversity_hold * top
        score = fused
        if n >= ranking.diversity_free and not strong:
            repeats = 1.0  # without a vector, no evidence it is another answer
            if vectors is not None and vectors[chunk].any():
                nearest = float((_rows(vectors, mates) @ vectors[chunk]).max())
                repeats = min(1.0, max(0.0, (nearest - low) / (high - low)))
            score *= ranking.diversity_decay ** ((n - ranking.diversity_free + 1) * repeats)
        mates.append(chunk)
        out.append((chunk, score))
        if k is not None:
            (heapq.heappush if len(best) < k else heapq.heappushpop)(best, score)
    out = _best_first(out)
    return out if k is None else out[:k]


def _rows(vectors: np.ndarray | Mapping[int, np.ndarray], chunks: list[int]) -> np.ndarray:
    """The vectors of ``chunks`` as one matrix, from a whole-index array or a mapping of candidates' rows."""
    if isinstance(vectors, np.ndarray):
        return vectors[chunks]
    return np.stack([vectors[chunk] for chunk in chunks])


__all__ = [
    "Scores",
    "apply_priors",
    "boost_coherence",
    "boost_definitions",
    "boost_path_words",
    "diversify",
    "fuse",
    "list_weights",
    "ordered",
]
