"""Reproduce the published psf/requests v2.32.3 measurement, side by side with its numbers.

Usage:
    python -m benchmarks.seed_requests --repo PATH [--models minilm,bge-small,bge-m3]
        [--mode best|article] [--int8] [--json OUT] [--markdown OUT] [--plot OUT.png]

PATH is a checkout of psf/requests at tag v2.32.3. When PATH does not exist and
the network allows, it is cloned (``git clone --depth 1 --branch v2.32.3``).

Four tables, each beside the published numbers:

1. corpus: files in the tree, indexed, skipped per reason, bytes, chunks -- facts
   that must match exactly;
2. per model: vector size, max input, chunks truncated, median/max tokens per
   chunk by the model's own tokenizer, embedding time, peak memory, vectors on
   disk, one query's embedding time;
3. per question: grep counts (phrase and one word, case-insensitive, matching
   lines over the indexed files) and the rank of the answer under BM25, dense
   and hybrid per model;
4. summary: answers in the top 5 / top 10 of the ten questions, whole repo and
   ``src/`` only.

A model that cannot be loaded here is reported as "not available", never faked.
``--mode article`` runs the published configuration (line chunks, BM25 with
identifier splitting, RRF k=60 over the top 30 of each list); the default
``best`` runs the library's default configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._harness import PeakMemory
from benchmarks._harness import table as harness_table
from codesearch.chunking import document_text, split_lines
from codesearch.exceptions import CodeSearchError
from codesearch.files import scan
from codesearch.index.columns import stored_records
from codesearch.search import CodeSearch
from codesearch.stats import repo_stats

CLONE_URL = "https://github.com/psf/requests"
TAG = "v2.32.3"


@dataclass(frozen=True)
class Question:
    query: str
    target: str
    phrase: str | None
    word: str | None
    published: dict[str, int | None]  # column -> published rank ("none" is None)
    published_grep: tuple[int, int | None]
    identifier: bool = False


def _q(query: str, target: str, phrase: str | None, word: str | None, grep: tuple[int, int | None],
       bm25: int, m3: int, hybrid_m3: int | None, small: int, identifier: bool = False) -> Question:
    return Question(query, target, phrase, word,
                    {"bm25": bm25, "dense:bge-m3": m3, "hybrid:bge-m3": hybrid_m3, "dense:bge-small": small},
                    grep, identifier)


# The published questions, verbatim, with the write-up's grep counts and ranks.
QUESTIONS: tuple[Question, ...] = (
    _q("don't send the password to another site after a redirect", "should_strip_auth",
       "another site", "password", (0, 47), 9, 1, 1, 1),
    _q("why does a POST turn into a GET after a redirect", "rebuild_method",
       "turn into", "GET", (0, 625), 65, 10, 19, 6),
    _q("stop following redirects that go round in a loop", "resolve_redirects",
       "redirect loop", "loop", (0, 6), 5, 28, 5, 14),
    _q("move the upload back to the start so it can be sent again", "rewind_body",
       "back to the start", "start", (0, 54), 1, 4, 2, 20),
    _q("how big is the body we are about to send", "super_len",
       "how big", "big", (0, 8), 54, 65, None, 233),
    _q("skip the proxy for machines on the local network", "should_bypass_proxies",
       "local network", "local", (0, 94), 2, 20, 6, 10),
    _q("make sure a file is never left half-written if the process dies", "atomic_open",
       "half-written", "half", (0, 4), 58, 16, 29, 1),
    _q("tell UTF-16 from UTF-32 from the first bytes of the JSON", "guess_json_utf",
       "first bytes", "bytes", (0, 98), 4, 4, 5, 111),
    _q("read saved logins from a file in the home folder", "get_netrc_auth",
       "home folder", "login", (0, 4), 1, 112, 7, 17),
    _q("answer a 401 from the server with a hashed password", "handle_401",
       "hashed password", "hash", (0, 17), 1, 2, 1, 1),
    _q("raise_for_status", "raise_for_status", "raise_for_status", None, (15, None), 2, 70, 12, 244, True),
    _q("UnrewindableBodyError", "UnrewindableBodyError", "UnrewindableBodyError", None, (9, None), 1, 2, 2, 6, True),
)

PUBLISHED_CORPUS = {"files_in_tree": 129, "files_indexed": 117, "binary": 10, "too_large": 1,
                    "excluded_extension": 1, "bytes": 625_261, "chunks": 318}
PUBLISHED_MODELS: dict[str, dict[str, Any]] = {
    "bge-m3": {"dim": 1024, "max_input": 2048, "truncated": 1, "median_tokens": 771, "max_tokens": 2050,
               "embed_s": 631.0, "peak_mb": 1600.0, "vectors_mb": 1.3, "query_ms": 682.0},
    "bge-small": {"dim": 384, "max_input": 512, "truncated": 235, "embed_s": 20.5, "vectors_mb": 0.49,
                  "query_ms": 21.0},
}
# Published summary: (top 5, top 10) of the ten questions, whole repo and src/ only.
PUBLISHED_SUMMARY = {
    "whole": {"bm25": (6, 7), "dense:bge-m3": (4, 5), "hybrid:bge-m3": (5, 7),
              "dense:bge-small": (3, 5), "hybrid:bge-small": (7, 7)},
    "src": {"bm25": (7, 7), "dense:bge-m3": (5, 7), "hybrid:bge-m3": (7, 9),
            "dense:bge-small": (5, 7), "hybrid:bge-small": (8, 8)},
}


# -- corpus ----------------------------------------------------------------------


def ensure_repo(path: Path) -> Path:
    """Return ``path``, cloning requests at the tag into it when it is missing."""
    if path.is_dir():
        return path
    print(f"{path} does not exist; cloning {CLONE_URL} at {TAG} ...", file=sys.stderr)
    proc = subprocess.run(["git", "clone", "-q", "--depth", "1", "--branch", TAG, CLONE_URL, str(path)],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"error: cannot clone {CLONE_URL} ({proc.stderr.strip() or 'no network'}); "
                         f"pass --repo with a checkout of psf/requests at {TAG}")
    return path


def files_in_tree(root: Path) -> int:
    """Regular files under ``root`` (``find -type f``), leaving out a ``.git`` folder."""
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        count += sum(1 for name in files if os.path.isfile(os.path.join(folder, name))
                     and not os.path.islink(os.path.join(folder, name)))
    return count


def grep_count(texts: Sequence[str], needle: str) -> int:
    """Lines containing ``needle``, case-insensitive, like ``grep -ric`` summed over files."""
    needle = needle.lower()
    return sum(1 for text in texts for line in split_lines(text) if needle in line.lower())


def corpus_table(repo: Path) -> dict[str, Any]:
    stats = repo_stats(repo)
    return {
        "files_in_tree": files_in_tree(repo),
        "files_indexed": stats.files_indexed,
        "binary": stats.skipped.get("binary", 0),
        "too_large": stats.skipped.get("too_large", 0),
        "excluded_extension": stats.skipped.get("excluded_extension", 0),
        "bytes": stats.bytes,
        "chunks": stats.chunks,
    }


# -- models ----------------------------------------------------------------------


def load_embedder(name: str, int8: bool) -> Any:
    from codesearch.embedding import Embedder

    return Embedder(name, int8=int8)


@dataclass
class ModelRun:
    name: str
    available: bool
    reason: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    searcher: CodeSearch | None = None


def run_model(name: str, repo: Path, index_dir: Path, mode: str, int8: bool) -> ModelRun:
    try:
        embedder = load_embedder(name, int8)
    except CodeSearchError as exc:
        return ModelRun(name, False, reason=str(exc).splitlines()[0])
    cs = _searcher(repo, embedder, index_dir / name, mode)
    with PeakMemory() as memory:
        cs.index()
    chunks = stored_records(cs.store.load().arrays)
    documents = [document_text(c["path"], c["text"]) for c in chunks]
    tokens = [int(t) for t in embedder.token_counts(documents)]
    max_input = int(embedder.spec.max_length)
    embed_report = embedder.last_report
    embedder.embed_query("warm up")
    query_times = []
    for question in QUESTIONS:
        started = time.perf_counter()
        embedder.embed_query(question.query)
        query_times.append(time.perf_counter() - started)
    facts = {
        "dim": int(embedder.dim),
        "max_input": max_input,
        "truncated": sum(1 for t in tokens if t > max_input),
        "median_tokens": float(statistics.median(tokens)),
        "max_tokens": max(tokens),
        "embed_s": round(float(embed_report.seconds), 2),
        "peak_mb": round(memory.mb, 1),
        "vectors_mb": round(len(chunks) * embedder.dim * 4 / 1e6, 2),
        "query_ms": round(statistics.median(query_times) * 1000, 1),
        "chunks": len(chunks),
        "fingerprint": embedder.fingerprint[:12],
    }
    return ModelRun(name, True, facts=facts, searcher=cs)


def _searcher(repo: Path, embedder: Any, index_dir: Path, mode: str) -> CodeSearch:
    if mode == "article":
        return CodeSearch(repo, model=embedder, index_dir=index_dir, **ARTICLE_OPTIONS)
    return CodeSearch(repo, model=embedder, index_dir=index_dir)


# The published configuration, as CodeSearch options.
ARTICLE_OPTIONS: dict[str, Any] = {"chunking": "lines", "ranking": "article"}


# -- ranks -----------------------------------------------------------------------


def definition_pattern(target: str) -> re.Pattern[str]:
    """A line that defines ``target``: its ``def``, ``async def`` or ``class`` line."""
    return re.compile(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(target)}\b")


def target_positions(chunks: Sequence[dict[str, Any]], target: str) -> set[tuple[str, int, int]]:
    """Chunks holding the ``def``/``class`` line of ``target`` (both, where overlap repeats it)."""
    pattern = definition_pattern(target)
    found = {(c["path"], c["start_line"], c["end_line"]) for c in chunks
             if any(pattern.match(line) for line in c["text"].split("\n"))}
    if not found:
        raise SystemExit(f"error: no chunk defines {target}; is this psf/requests {TAG}?")
    return found


def answer_rank(cs: CodeSearch, question: Question, mode: str, targets: set[tuple[str, int, int]],
                scope: str | None, depth: int) -> int | None:
    hits = cs.search(question.query, k=depth, mode=mode, scope=scope)  # type: ignore[arg-type]
    for rank, hit in enumerate(hits, start=1):
        if (hit.path, hit.start_line, hit.end_line) in targets:
            return rank
    return None


def rank_table(runs: Sequence[ModelRun], bm25_searcher: CodeSearch, scope: str | None) -> list[dict[str, Any]]:
    chunks = stored_records(bm25_searcher.store.load().arrays)
    total = len(chunks)
    # Load each model's index once, not once per question.
    stored = {run.name: stored_records(run.searcher.store.load().arrays) for run in runs if run.searcher is not None}
    rows = []
    for question in QUESTIONS:
        targets = target_positions(chunks, question.target)
        row: dict[str, Any] = {"query": question.query, "target": question.target,
                               "bm25": answer_rank(bm25_searcher, question, "bm25", targets, scope, total)}
        for run in runs:
            if run.searcher is None:
                row[f"dense:{run.name}"] = row[f"hybrid:{run.name}"] = "n/a"
                continue
            run_targets = target_positions(stored[run.name], question.target)
            row[f"dense:{run.name}"] = answer_rank(run.searcher, question, "dense", run_targets, scope, total)
            row[f"hybrid:{run.name}"] = answer_rank(run.searcher, question, "hybrid", run_targets, scope, total)
        rows.append(row)
    return rows


def summary(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> dict[str, tuple[int, int] | str]:
    prose = rows[:10]  # the ten questions grep cannot answer
    out: dict[str, tuple[int, int] | str] = {}
    for column in columns:
        ranks = [row[column] for row in prose]
        if any(r == "n/a" for r in ranks):
            out[column] = "n/a"
            continue
        out[column] = (sum(1 for r in ranks if r is not None and r <= 5),
                       sum(1 for r in ranks if r is not None and r <= 10))
    return out


# -- output ----------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return f"{value[0]}/{value[1]}"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A titled table of the report's cells (:func:`benchmarks._harness.table`)."""
    return harness_table(header, [[_cell(v) for v in row] for row in rows], title=title)


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def plot(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str], total: int) -> None:
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("error: --plot needs matplotlib: pip install 'codesearch-hybrid[plot]'") from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = [c for c in columns if all(row[c] != "n/a" for row in rows)]  # models that did not load
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / max(len(columns), 1)
    for j, column in enumerate(columns):
        ranks = [row[column] for row in rows]
        heights = [total + 1 if r is None or r == "n/a" else r for r in ranks]
        ax.bar([i + j * width for i in range(len(rows))], heights, width, label=column)
    ax.set_yscale("log")
    ax.axhline(5, color="grey", linestyle=":", linewidth=1)
    ax.axhline(10, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks([i + width * (len(columns) - 1) / 2 for i in range(len(rows))])
    ax.set_xticklabels([row["target"] for row in rows], rotation=35, ha="right", fontsize=8)
    ax.set_ylabel(f"rank of the answer (log; {total + 1} = not found)")
    ax.set_title(f"psf/requests {TAG}: rank of the answer per question (lower is better)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help=f"checkout of psf/requests at {TAG}")
    parser.add_argument("--models", default="minilm,bge-small,bge-m3", help="comma-separated model names")
    parser.add_argument("--mode", choices=["best", "article"], default="best")
    parser.add_argument("--int8", action="store_true", help="use int8 exports (when they pass their gate)")
    parser.add_argument("--json", dest="json_out", type=Path, help="write all tables as JSON here")
    parser.add_argument("--markdown", type=Path, help="write a markdown report here")
    parser.add_argument("--plot", type=Path, help="write a PNG of ranks per question (needs matplotlib)")
    parser.add_argument("--index-dir", type=Path, help="where to keep the indexes (default: a temp dir)")
    args = parser.parse_args(argv)

    repo = ensure_repo(args.repo)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    with tempfile.TemporaryDirectory(prefix="codesearch-seed-") as tmp:
        index_dir = args.index_dir or Path(tmp)
        corpus = corpus_table(repo)
        texts = [f.text for f in scan(repo).files]
        greps = [(grep_count(texts, q.phrase) if q.phrase else None, grep_count(texts, q.word) if q.word else None)
                 for q in QUESTIONS]

        runs = [run_model(name, repo, index_dir, args.mode, args.int8) for name in models]
        bm25_searcher = next((r.searcher for r in runs if r.searcher is not None), None)
        if bm25_searcher is None:  # no model at all: keyword ranks still count
            bm25_searcher = _searcher(repo, None, index_dir / "bm25", args.mode)
            bm25_searcher.index()
        columns = ["bm25"] + [f"{kind}:{r.name}" for r in runs for kind in ("dense", "hybrid")]
        whole = rank_table(runs, bm25_searcher, None)
        src = rank_table(runs, bm25_searcher, "src/")
        stored = stored_records(bm25_searcher.store.load().arrays)
        total_chunks = len(stored)
        src_chunks = sum(1 for c in stored if c["path"].startswith("src/"))

    result: dict[str, Any] = {
        "repo": str(repo), "mode": args.mode, "int8": args.int8,
        "corpus": corpus, "corpus_published": PUBLISHED_CORPUS,
        "corpus_matches": all(corpus[k] == v for k, v in PUBLISHED_CORPUS.items()),
        "grep": [{"query": q.query, "phrase": q.phrase, "phrase_count": g[0], "word": q.word, "word_count": g[1],
                  "published": list(q.published_grep)} for q, g in zip(QUESTIONS, greps)],
        "grep_matches": all(g == q.published_grep for q, g in zip(QUESTIONS, greps)),
        "models": {r.name: ({"available": True, **r.facts} if r.available
                            else {"available": False, "reason": r.reason}) for r in runs},
        "models_published": PUBLISHED_MODELS,
        "ranks": {"whole": whole, "src": src},
        "chunks_ranked": total_chunks,
        "src_chunks": src_chunks,
        "summary": {"whole": summary(whole, columns), "src": summary(src, columns)},
        "summary_published": PUBLISHED_SUMMARY,
        "published_ranks": [{"target": q.target, **q.published} for q in QUESTIONS],
    }

    out = [table("1. Corpus (must match exactly)", ["", "ours", "published", "match"],
                 [[k, corpus[k], v, "yes" if corpus[k] == v else "NO"] for k, v in PUBLISHED_CORPUS.items()])]
    model_rows = []
    for r in runs:
        pub = PUBLISHED_MODELS.get(r.name, {})
        for key in ("dim", "max_input", "truncated", "median_tokens", "max_tokens", "embed_s", "peak_mb",
                    "vectors_mb", "query_ms"):
            model_rows.append([r.name, key, r.facts.get(key) if r.available else "not available", pub.get(key, "")])
    out.append(table("2. Per model (published: 8 GB M1, CPU)", ["model", "measure", "ours", "published"], model_rows))
    for r in runs:
        if not r.available:
            out.append(f"   {r.name}: not available here: {r.reason}")
    q_rows = []
    for q, g, row in zip(QUESTIONS, greps, whole):
        q_rows.append([q.target, f"{g[0]} ({q.published_grep[0]})",
                       "" if g[1] is None else f"{g[1]} ({q.published_grep[1]})"]
                      + [row[c] for c in columns]
                      + [", ".join(_cell(q.published[c]) for c in ("bm25", "dense:bge-m3", "hybrid:bge-m3",
                                                                      "dense:bge-small"))])
    out.append(table(f"3. Rank of the answer, whole repo, out of {total_chunks} chunks (mode: {args.mode})",
                     ["target", "grep phrase (pub)", "grep word (pub)", *columns,
                      "published bm25, m3, hybrid(m3), small"], q_rows))
    s_rows = []
    for column in sorted(set(columns) | set(PUBLISHED_SUMMARY["whole"])):
        s_rows.append([column, result["summary"]["whole"].get(column, "-"), PUBLISHED_SUMMARY["whole"].get(column, "-"),
                       result["summary"]["src"].get(column, "-"), PUBLISHED_SUMMARY["src"].get(column, "-")])
    out.append(table(f"4. Ten questions in top 5 / top 10 (src/ only: {src_chunks} chunks)",
                     ["column", "whole", "whole (pub)", "src/", "src/ (pub)"], s_rows))
    report = "\n\n".join(out)
    print(report)

    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2, default=list))
    if args.markdown:
        md = [f"# psf/requests {TAG}: codesearch vs the published measurement (mode: {args.mode})", "",
              "## Corpus", markdown_table(["", "ours", "published"],
                                          [[k, corpus[k], v] for k, v in PUBLISHED_CORPUS.items()]),
              "", "## Per model", markdown_table(["model", "measure", "ours", "published"], model_rows),
              "", "## Rank of the answer (whole repo)",
              markdown_table(["target", "grep phrase (pub)", "grep word (pub)", *columns, "published"], q_rows),
              "", "## Top 5 / top 10", markdown_table(["column", "whole", "whole (pub)", "src/", "src/ (pub)"], s_rows)]
        args.markdown.write_text("\n".join(md) + "\n")
    if args.plot:
        plot(args.plot, whole, columns, total_chunks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
