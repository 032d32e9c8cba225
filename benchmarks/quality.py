"""Ranking quality: the published configuration and the library default, side by side.

Usage:
    python -m benchmarks.quality [--questions benchmarks/data/questions.json]
        [--corpora DIR] [--requests PATH] [--models minilm] [--json OUT]

Two question sets:

- the held-out set in ``benchmarks/data/questions.json`` (62 questions on five
  PyPI sdists, written by reading the code before any system ran on them;
  fetch the corpora with ``benchmarks/data/fetch_corpora.py``);
- the ten published requests v2.32.3 questions plus its two identifiers
  (``--requests PATH``, a checkout at v2.32.3).

Configurations: ``article`` (line chunks, plain RRF k=60 over the top 30 of
each list -- the published pipeline) and ``default`` (the library default:
definition-aware chunks and the staged ranking of ``codesearch.ranking``),
both on the transformer tier (int8 unless ``--fp32``). Each is run in the three
modes (bm25, dense, hybrid) for every model that loads here.

Reported per configuration and mode: Hit@1, Hit@5, Hit@10, MRR (first relevant
hit within the top 100) and NDCG@10 (binary relevance, each answer counted once)
on the held-out set; top 5 / top 10 of the ten requests questions and the rank
of the two identifiers; index seconds and query p50 per configuration. Speed
is measured side by side: for each corpus the configurations are indexed back
to back, and the query p50 is the median of hybrid top-10 searches asked of
each configuration in turn (three rounds of every question).
A hit is relevant when its chunk covers an answer's ``def``/``class`` line.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.seed_requests import QUESTIONS as SEED_QUESTIONS
from benchmarks.seed_requests import definition_pattern
from codesearch import CodeSearch, Hit
from codesearch.exceptions import CodeSearchError

BENCHMARKS = Path(__file__).resolve().parent

CONFIGS: dict[str, dict[str, Any]] = {
    "article": {"chunking": "lines", "ranking": "article"},
    "default": {},
}
MODES = ("bm25", "dense", "hybrid")
DEPTH = 100


@dataclass(frozen=True)
class Answer:
    path: str
    line: int


@dataclass(frozen=True)
class Question:
    id: str
    corpus: str
    kind: str
    query: str
    answers: tuple[Answer, ...]


def load_heldout(path: Path) -> tuple[dict[str, str], list[Question]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    folders = {name: info["folder"] for name, info in data["corpora"].items()}
    questions = [
        Question(q["id"], q["corpus"], q["kind"], q["query"],
                 tuple(Answer(a["path"], int(a["line"])) for a in q["answers"]))
        for q in data["questions"]
    ]
    return folders, questions


def seed_questions(repo: Path) -> list[Question]:
    """The requests questions, answered by the def/class line of their target in ``src/``."""
    out = []
    for n, q in enumerate(SEED_QUESTIONS, start=1):
        pattern = definition_pattern(q.target)
        answers = tuple(
            Answer(str(path.relative_to(repo)), number)
            for path in sorted((repo / "src").rglob("*.py"))
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
            if pattern.match(line)
        )
        if not answers:
            raise SystemExit(f"error: {q.target} is not defined under {repo}/src; is this requests v2.32.3?")
        out.append(Question(f"requests-{n:02d}", "requests", "identifier" if q.identifier else "behaviour",
                            q.query, answers))
    return out


def answer_ranks(hits: Sequence[Hit], answers: Sequence[Answer]) -> list[int]:
    """1-based rank of each answer's first covering hit (answers never found are left out)."""
    ranks = []
    for answer in answers:
        for rank, hit in enumerate(hits, start=1):
            if hit.path == answer.path and hit.start_line <= answer.line <= hit.end_line:
                ranks.append(rank)
                break
    return ranks


def metrics(results: Sequence[tuple[list[int], int]]) -> dict[str, float]:
    """Hit@1/5/10, MRR and NDCG@10 over ``(ranks of found answers, number of answers)`` per question."""
    n = len(results)
    if n == 0:
        return {}
    out: dict[str, float] = {}
    for cut in (1, 5, 10):
        out[f"hit@{cut}"] = sum(1 for ranks, _ in results if ranks and min(ranks) <= cut) / n
    out["mrr"] = sum(1 / min(ranks) for ranks, _ in results if ranks) / n
    ndcg = 0.0
    for ranks, total in results:
        dcg = sum(1 / math.log2(r + 1) for r in set(ranks) if r <= 10)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(total, 10)))
        ndcg += dcg / ideal
    out["ndcg@10"] = ndcg / n
    return {k: round(v, 4) for k, v in out.items()}


def evaluate(cs: CodeSearch, questions: Sequence[Question], modes: Sequence[str]) -> dict[str, Any]:
    """Metrics and the ranks of every answer, per mode."""
    per_mode: dict[str, Any] = {}
    for mode in modes:
        results = []
        ranks_by_id = {}
        for q in questions:
            ranks = answer_ranks(cs.search(q.query, k=DEPTH, mode=mode), q.answers)  # type: ignore[arg-type]
            results.append((ranks, len(q.answers)))
            ranks_by_id[q.id] = ranks
        per_mode[mode] = {"metrics": metrics(results), "ranks": ranks_by_id}
    return per_mode


def interleaved_query_seconds(
    corpora: Sequence[tuple[Sequence[Question], dict[str, CodeSearch]]], rounds: int = 3
) -> dict[str, list[float]]:
    """Seconds of each hybrid top-10 search (what a user waits for), per configuration.

    ``corpora`` holds each corpus's questions with its searcher per
    configuration. Every question is asked of each configuration in turn,
    ``rounds`` times, so the configurations are timed under the same load.
    """
    seconds: dict[str, list[float]] = {}
    for _ in range(rounds):
        for questions, searchers in corpora:
            for q in questions:
                for config, cs in searchers.items():
                    started = time.perf_counter()
                    cs.search(q.query, k=10, mode="hybrid")
                    seconds.setdefault(config, []).append(time.perf_counter() - started)
    return seconds


def seed_summary(per_mode: dict[str, Any], questions: Sequence[Question]) -> dict[str, Any]:
    out = {}
    for mode, data in per_mode.items():
        best = {q.id: min(data["ranks"][q.id], default=None) for q in questions}
        prose = [best[q.id] for q in questions if q.kind == "behaviour"]
        idents = [best[q.id] for q in questions if q.kind == "identifier"]
        out[mode] = {
            "top5": sum(1 for r in prose if r is not None and r <= 5),
            "top10": sum(1 for r in prose if r is not None and r <= 10),
            "questions": len(prose),
            "identifier_ranks": idents,
        }
    return out


def heldout_ndcg10(searchers: Mapping[str, CodeSearch], questions: Sequence[Question]) -> float:
    """NDCG@10 of the held-out questions, each asked (hybrid, top ``DEPTH``) of its corpus's searcher."""
    return metrics([(answer_ranks(searchers[q.corpus].search(q.query, k=DEPTH), q.answers), len(q.answers))
                    for q in questions])["ndcg@10"]


def seeds_summary(cs: CodeSearch, questions: Sequence[Question]) -> dict[str, Any]:
    """Top 5 / top 10 of the requests seed questions and the identifiers' ranks, hybrid (see :func:`seed_summary`)."""
    return seed_summary(evaluate(cs, questions, ["hybrid"]), questions)["hybrid"]


REQUESTS_FLOOR = {"top5": 6, "top10": 8}
"""The requests seeds are a reported check with a floor: at least 6 of the 10 in the top 5, 8 in the top 10,
and both identifiers at rank 1 (benchmarks/README.md, "Tuning protocol")."""


def requests_floor_met(summary: Mapping[str, Any]) -> bool:
    """Whether a :func:`seeds_summary` meets :data:`REQUESTS_FLOOR` with every identifier at rank 1."""
    return (summary["top5"] >= REQUESTS_FLOOR["top5"] and summary["top10"] >= REQUESTS_FLOOR["top10"]
            and all(rank == 1 for rank in summary["identifier_ranks"]))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, default=BENCHMARKS / "data" / "questions.json")
    parser.add_argument("--corpora", type=Path, default=Path("~/.cache/codesearch/corpora").expanduser(),
                        help="folder holding the extracted sdists (see benchmarks/data/fetch_corpora.py)")
    parser.add_argument("--requests", type=Path, help="checkout of psf/requests at v2.32.3")
    parser.add_argument("--models", default="minilm", help="comma-separated models")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated: article,default")
    parser.add_argument("--fp32", action="store_true", help="embed with the fp32 export (the library default is int8)")
    parser.add_argument("--json", dest="json_out", type=Path)
    parser.add_argument("--index-dir", type=Path,
                        help="keep indexes here between runs (unchanged chunks are not embedded again)")
    args = parser.parse_args(argv)

    folders, heldout = load_heldout(args.questions)
    missing = [f for f in folders.values() if not (args.corpora / f).is_dir()]
    if missing:
        print(f"error: corpora missing under {args.corpora}: {', '.join(missing)}; run "
              f"python -m benchmarks.data.fetch_corpora --dest {args.corpora}", file=sys.stderr)
        return 2
    sets: dict[str, tuple[Path, list[Question]]] = {
        name: (args.corpora / folder, [q for q in heldout if q.corpus == name]) for name, folder in folders.items()
    }
    if args.requests:
        sets["requests"] = (args.requests, seed_questions(args.requests))

    from codesearch.embedding import Embedder

    result: dict[str, Any] = {"models": {}}
    with tempfile.TemporaryDirectory(prefix="codesearch-quality-") as scratch:
        tmp = args.index_dir or Path(scratch)
        for model in [m.strip() for m in args.models.split(",") if m.strip()]:
            try:
                embedder = Embedder(model, int8=not args.fp32)
            except CodeSearchError as exc:
                result["models"][model] = {"available": False, "reason": str(exc)}
                print(f"{model}: not available here: {exc}")
                continue
            model_result: dict[str, Any] = {"available": True, "configs": {}}
            configs = [c.strip() for c in args.configs.split(",") if c.strip()]
            index_s = dict.fromkeys(configs, 0.0)
            chunks = dict.fromkeys(configs, 0)
            per_set: dict[str, dict[str, Any]] = {config: {} for config in configs}
            searched: list[tuple[Sequence[Question], dict[str, CodeSearch]]] = []
            # Corpora outside, configurations inside: each pair of index times is
            # measured back to back, so a noisy neighbour hits both alike.
            for name, (root, questions) in sets.items():
                searchers: dict[str, CodeSearch] = {}
                for config in configs:
                    cs = CodeSearch(root, model=embedder, index_dir=Path(tmp) / model / config / name,
                                    **CONFIGS[config])
                    report = cs.index()
                    index_s[config] += report.seconds
                    chunks[config] += report.chunks
                    per_set[config][name] = evaluate(cs, questions, MODES)
                    searchers[config] = cs
                searched.append((questions, searchers))
            query_s = interleaved_query_seconds(searched)
            for config in configs:
                found = per_set[config]
                heldout_results = {
                    mode: metrics([(found[name][mode]["ranks"][q.id], len(q.answers))
                                   for name, (_, questions) in sets.items() if name != "requests"
                                   for q in questions])
                    for mode in MODES
                }
                model_result["configs"][config] = {
                    "heldout": heldout_results,
                    "heldout_by_corpus": {n: {m: found[n][m]["metrics"] for m in MODES}
                                          for n in found if n != "requests"},
                    "requests": seed_summary(found["requests"], sets["requests"][1]) if "requests" in found else None,
                    "ranks": {n: {m: found[n][m]["ranks"] for m in MODES} for n in found},
                    "index_s": round(index_s[config], 2),
                    "chunks": chunks[config],
                    "query_p50_ms": round(statistics.median(query_s[config]) * 1000, 2) if query_s.get(config) else None,
                }
            result["models"][model] = model_result

    for model, data in result["models"].items():
        if not data["available"]:
            continue
        print(f"\nmodel {model}: held-out set ({len(heldout)} questions, {len(folders)} repositories)")
        print(f"{'config':<9}{'mode':<8}{'Hit@1':>7}{'Hit@5':>7}{'Hit@10':>7}{'MRR':>7}{'NDCG@10':>9}")
        for config, c in data["configs"].items():
            for mode in MODES:
                m = c["heldout"][mode]
                print(f"{config:<9}{mode:<8}{m['hit@1']:>7.3f}{m['hit@5']:>7.3f}{m['hit@10']:>7.3f}"
                      f"{m['mrr']:>7.3f}{m['ndcg@10']:>9.3f}")
        if "requests" in sets:
            print(f"\nmodel {model}: requests v2.32.3 seed questions (whole repo)")
            print(f"{'config':<9}{'mode':<8}{'top5':>6}{'top10':>7}  identifier ranks")
            for config, c in data["configs"].items():
                for mode, s in c["requests"].items():
                    print(f"{config:<9}{mode:<8}{s['top5']:>4}/{s['questions']}{s['top10']:>5}/{s['questions']}  "
                          f"{s['identifier_ranks']}")
        print(f"\n{'config':<9}{'chunks':>8}{'index s':>9}{'query p50 ms':>14}")
        for config, c in data["configs"].items():
            print(f"{config:<9}{c['chunks']:>8}{c['index_s']:>9.1f}{c['query_p50_ms']:>14.2f}")
        if {"article", "default"} <= set(data["configs"]):
            gain = (data["configs"]["default"]["heldout"]["hybrid"]["ndcg@10"]
                    - data["configs"]["article"]["heldout"]["hybrid"]["ndcg@10"])
            data["ndcg10_gain_hybrid"] = round(gain, 4)
            print(f"\nNDCG@10 gain of default over article (hybrid): {gain:+.3f}")
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
