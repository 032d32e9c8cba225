"""Mine doc -> code training pairs from the sources of a ``sources.json``, split them by repository, write them.

:func:`mine_sources` runs the whole pipeline and returns a :class:`MiningReport`:

1. each source's files at its pinned commit (:mod:`~codesearch.training.trees`),
   minus tests, vendored copies, generated and minified files and files of
   languages the source is not chosen for (:mod:`~codesearch.training.filters`);
2. each file's doc pairs (:mod:`~codesearch.training.extract`), the doc
   summarised into a query and dropped when it is no query
   (:mod:`~codesearch.training.docs`); definitions named as tests are dropped;
3. duplicates dropped, in source order: a pair whose normalised doc and code
   were already kept anywhere, a doc already kept in the same repository
   (overloads that share their doc), code already kept in the same repository;
4. at most ``cap`` pairs per repository, drawn with a fixed seed so no
   repository dominates: module pairs first (up to a fifth of the cap), class
   pairs (up to three tenths), then function pairs, then whatever is left;
5. about a tenth of the repositories (by a seeded hash, one per language at
   most, among languages with two sources or more, each holding between
   :data:`MIN_HELD_OUT_SHARE` and :data:`MAX_HELD_OUT_SHARE` of its language's pairs) held out for
   validation: the split is by repository, never by pair;
6. ``train.jsonl.gz`` and ``validation.jsonl.gz`` (one JSON record a line:
   ``query``, ``code``, ``path``, ``repo``, ``language``, ``kind``, ``symbol``,
   ``line``) and ``manifest.json`` (sources, counts per split, language and
   kind, filter counts, the seed, the codesearch commit).

Run from the command line::

    python -m codesearch.training.mine --sources training/sources.json --mirrors /work/.mirror --out DIR
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codesearch.chunking.languages import language_for
from codesearch.exceptions import TrainingDataError
from codesearch.training.docs import doc_problem, summarise
from codesearch.training.extract import KINDS, Kind, extract_docs
from codesearch.training.filters import content_reason, path_reason
from codesearch.training.sources import Source, check_benchmark_overlap, load_sources
from codesearch.training.trees import iter_files

DEFAULT_CAP = 3000
"""Pairs kept per repository at most."""

VALIDATION_FRACTION = 0.1
"""The share of repositories held out for validation."""

MAX_HELD_OUT_SHARE = 0.3
"""A repository holding more than this share of its language's pairs is never held out."""

MIN_HELD_OUT_SHARE = 0.05
"""Nor one holding less: its language's validation figure would rest on a handful of pairs."""

SPLITS = ("train", "validation")

_TEST_SYMBOL = re.compile(r"(?:^|[.:\\#])(?:test_\w*|Test[A-Z_]\w*|Benchmark[A-Z_]\w*|test .*|it_\w+)$")


@dataclass(frozen=True, slots=True)
class Pair:
    """One training pair: a query (the summarised doc) and the code it documents, with where it comes from."""

    query: str
    code: str
    path: str
    repo: str
    language: str
    kind: str
    symbol: str
    line: int

    def to_json(self) -> dict[str, Any]:
        """The pair as one JSONL record."""
        return {"query": self.query, "code": self.code, "path": self.path, "repo": self.repo,
                "language": self.language, "kind": self.kind, "symbol": self.symbol, "line": self.line}


@dataclass(slots=True)
class RepositoryPairs:
    """What one repository gave before de-duplication and the cap: its pairs and what was filtered."""

    repo: str
    pairs: list[Pair]
    filtered: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0


@dataclass(frozen=True)
class MiningReport:
    """What :func:`mine_sources` wrote.

    Attributes:
        out_dir: the folder holding the splits and ``manifest.json``.
        files: each split's file.
        counts: pairs per split, language and kind (``counts["train"]["go"]["function"]``).
        per_repository: pairs kept per repository.
        validation_repositories: the repositories held out.
        filtered: what was dropped, by reason (files, docs, duplicates, the cap).
        seed: the seed of the cap's draw and of the split.
        seconds: the run's wall time.
    """

    out_dir: Path
    files: dict[str, Path]
    counts: dict[str, dict[str, dict[str, int]]]
    per_repository: dict[str, int]
    validation_repositories: tuple[str, ...]
    filtered: dict[str, int]
    seed: int
    seconds: float

    def total(self, split: str | None = None) -> int:
        """Pairs in ``split``, or in both."""
        splits = [split] if split else list(self.counts)
        return sum(n for s in splits for kinds in self.counts[s].values() for n in kinds.values())

    def table(self) -> str:
        """Pairs per language and kind for each split, as a Markdown table."""
        languages = sorted({lang for split in self.counts.values() for lang in split})
        head = "| language | " + " | ".join(f"{s} {k}" for s in SPLITS for k in KINDS) + " | train | validation |"
        rows = [head, "|---" * (len(SPLITS) * len(KINDS) + 3) + "|"]
        for lang in [*languages, "all"]:
            cells = []
            for split in SPLITS:
                for kind in KINDS:
                    cells.append(sum(self.counts[split].get(x, {}).get(kind, 0)
                                     for x in (languages if lang == "all" else [lang])))
            totals = [sum(cells[i * len(KINDS):(i + 1) * len(KINDS)]) for i in range(len(SPLITS))]
            rows.append(f"| {lang} | " + " | ".join(str(c) for c in cells + totals) + " |")
        return "\n".join(rows)


# --------------------------------------------------------------------------- one repository


def _allowed(language: str, path: str, chosen: Sequence[str]) -> bool:
    if language in chosen:
        return True
    if language == "tsx" and "typescript" in chosen:
        return True
    return path.endswith(".h") and bool({"c", "cpp"} & set(chosen))


def mine_repository(source: Source, mirrors: str | os.PathLike[str]) -> RepositoryPairs:
    """The doc pairs of one source at its commit, before de-duplication and the cap.

    Raises:
        TrainingDataError: the source's tree cannot be read (see :func:`~codesearch.training.trees.iter_files`).
    """
    started = time.perf_counter()
    filtered: Counter[str] = Counter()
    pairs: list[Pair] = []

    def wanted(path: str, size: int) -> bool:
        reason = path_reason(path, size)
        if reason is not None:
            filtered[f"file: {reason}"] += 1
        return reason is None

    for path, data in iter_files(source, mirrors, wanted):
        if b"\0" in data[:8192]:
            filtered["file: binary"] += 1
            continue
        text = data.decode("utf-8", "replace")
        reason = content_reason(path, text)
        if reason is not None:
            filtered[f"file: {reason}"] += 1
            continue
        lang = language_for(path, text.split("\n", 1)[0] if text.startswith("#!") else None, text)
        if lang is None or not _allowed(lang.name, path, source.languages):
            filtered["file: language not chosen"] += 1
            continue
        filtered["files mined"] += 1
        for found in extract_docs(path, text, lang):
            filtered["docs found"] += 1
            if found.kind != "module" and _TEST_SYMBOL.search(found.symbol):
                filtered["doc: test definition"] += 1
                continue
            query = summarise(found.doc)
            problem = doc_problem(query, found.symbol if found.kind != "module" else "")
            if problem is not None:
                filtered[f"doc: {problem}"] += 1
                continue
            pairs.append(Pair(query, found.code, path, source.repo, lang.name, found.kind, found.symbol, found.line))
    return RepositoryPairs(source.repo, pairs, filtered, time.perf_counter() - started)


def _mine_one(args: tuple[Source, str]) -> RepositoryPairs:
    return mine_repository(*args)


# --------------------------------------------------------------------------- selection


def _norm_doc(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _norm_code(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _digest(*parts: str) -> bytes:
    return hashlib.blake2b("\0".join(parts).encode("utf-8"), digest_size=16).digest()


def deduplicate(repositories: Iterable[RepositoryPairs], filtered: Counter[str]) -> list[RepositoryPairs]:
    """The repositories' pairs without duplicates, in order (the first one met is kept); counts go to ``filtered``."""
    seen: set[bytes] = set()
    out = []
    for repo in repositories:
        docs: set[bytes] = set()
        codes: set[bytes] = set()
        kept = []
        for pair in repo.pairs:
            doc, code = _norm_doc(pair.query), _norm_code(pair.code)
            key, doc_key, code_key = _digest(doc, code), _digest(doc), _digest(code)
            if key in seen:
                filtered["duplicate: pair"] += 1
            elif doc_key in docs:
                filtered["duplicate: doc in repository"] += 1
            elif code_key in codes:
                filtered["duplicate: code in repository"] += 1
            else:
                seen.add(key)
                docs.add(doc_key)
                codes.add(code_key)
                kept.append(pair)
        out.append(RepositoryPairs(repo.repo, kept, repo.filtered, repo.seconds))
    return out


def cap_pairs(pairs: Sequence[Pair], cap: int, seed: int, repo: str) -> list[Pair]:
    """At most ``cap`` of ``pairs``, drawn with a seed of ``seed`` and ``repo``; file order kept.

    Module pairs are drawn first (up to a fifth of the cap), then class pairs
    (up to three tenths), then function pairs; places left are filled from
    what remains of each, in that order.
    """
    if len(pairs) <= cap:
        return list(pairs)
    rng = random.Random(f"{seed}:{repo}")
    pools = {kind: [p for p in pairs if p.kind == kind] for kind in KINDS}
    for pool in pools.values():
        rng.shuffle(pool)
    quotas = {"module": cap // 5, "class": cap * 3 // 10, "function": cap}
    order_of_kinds: tuple[Kind, ...] = ("module", "class", "function")
    chosen: list[Pair] = []
    for kind in order_of_kinds:
        take = min(quotas[kind], cap - len(chosen))
        chosen.extend(pools[kind][:take])
        pools[kind] = pools[kind][take:]
    for kind in order_of_kinds:
        take = cap - len(chosen)
        chosen.extend(pools[kind][:take])
        pools[kind] = pools[kind][take:]
    order = {id(p): i for i, p in enumerate(pairs)}
    return sorted(chosen, key=lambda p: order[id(p)])


def validation_repositories(
    sources: Sequence[Source],
    seed: int,
    fraction: float = VALIDATION_FRACTION,
    pairs: Mapping[str, int] | None = None,
) -> list[str]:
    """The repositories held out: about ``fraction`` of them, ranked by a seeded hash, one per language at most.

    Only languages with two sources or more give one, so every language keeps
    training repositories. With ``pairs`` (pairs per repository) a repository
    holding more than :data:`MAX_HELD_OUT_SHARE` of its language's pairs is
    passed over (holding out a language's main source would leave it little to
    train on), and so is one holding less than :data:`MIN_HELD_OUT_SHARE`.
    """
    wanted = max(1, round(len(sources) * fraction))
    primary = Counter(s.languages[0] for s in sources)
    language_pairs: Counter[str] = Counter()
    for source in sources:
        language_pairs[source.languages[0]] += pairs.get(source.repo, 0) if pairs is not None else 0
    ranked = sorted(sources, key=lambda s: hashlib.sha256(f"{seed}:{s.repo.lower()}".encode()).hexdigest())
    chosen: list[str] = []
    languages: set[str] = set()
    for source in ranked:
        lang = source.languages[0]
        if lang in languages or primary[lang] < 2:
            continue
        if pairs is not None:
            mine = pairs.get(source.repo, 0)
            if not MIN_HELD_OUT_SHARE * language_pairs[lang] <= mine <= MAX_HELD_OUT_SHARE * language_pairs[lang] or not mine:
                continue
        chosen.append(source.repo)
        languages.add(lang)
        if len(chosen) == wanted:
            break
    return chosen


# --------------------------------------------------------------------------- writing


def _write_jsonl(path: Path, pairs: Iterable[Pair]) -> None:
    with (path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz,
          io.TextIOWrapper(gz, encoding="utf-8", newline="\n") as out):
        for pair in pairs:
            out.write(json.dumps(pair.to_json(), ensure_ascii=False) + "\n")


def codesearch_commit() -> str | None:
    """The commit of the codesearch checkout this module runs from, or ``None`` outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _counts(pairs: Iterable[Pair]) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for pair in pairs:
        kinds = counts.setdefault(pair.language, {})
        kinds[pair.kind] = kinds.get(pair.kind, 0) + 1
    return {lang: dict(sorted(kinds.items())) for lang, kinds in sorted(counts.items())}


def mine_sources(
    sources: Sequence[Source],
    mirrors_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    seed: int = 0,
    cap: int = DEFAULT_CAP,
    workers: int = 2,
    progress: bool = True,
) -> MiningReport:
    """Mine, de-duplicate, cap, split and write the pairs of ``sources``: see the module's steps.

    Args:
        sources: the repositories (see :func:`~codesearch.training.sources.load_sources`).
        mirrors_dir: the folder of their git mirrors or checkouts.
        out_dir: where ``train.jsonl.gz``, ``validation.jsonl.gz`` and ``manifest.json`` go (created).
        seed: the seed of the cap's draw and of the split.
        cap: pairs kept per repository at most.
        workers: processes mining repositories side by side (1: in this process).
        progress: show a progress bar over the repositories.

    Returns:
        The report of what was written.

    Raises:
        TrainingDataError: a source's tree cannot be read.
    """
    from tqdm.auto import tqdm

    started = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mined: dict[str, RepositoryPairs] = {}
    jobs = [(source, str(mirrors_dir)) for source in sources]
    with tqdm(total=len(jobs), desc="mining", unit="repo", disable=not progress, file=sys.stderr) as bar:
        if workers <= 1:
            results: Iterable[RepositoryPairs] = map(_mine_one, jobs)
            for result in results:
                mined[result.repo] = result
                bar.set_postfix_str(f"{result.repo} {len(result.pairs)}")
                bar.update()
        else:
            with ProcessPoolExecutor(max_workers=workers) as pool:
                futures = [pool.submit(_mine_one, job) for job in jobs]
                for future in as_completed(futures):
                    result = future.result()
                    mined[result.repo] = result
                    bar.set_postfix_str(f"{result.repo} {len(result.pairs)}")
                    bar.update()
    filtered: Counter[str] = Counter()
    for result in mined.values():
        filtered.update(result.filtered)
    unique = deduplicate([mined[s.repo] for s in sources], filtered)
    kept: dict[str, list[Pair]] = {}
    for repo in unique:
        capped = cap_pairs(repo.pairs, cap, seed, repo.repo)
        filtered["cap"] += len(repo.pairs) - len(capped)
        kept[repo.repo] = capped
    held_out = validation_repositories(sources, seed, pairs={repo: len(p) for repo, p in kept.items()})
    split_pairs = {
        "train": [p for s in sources if s.repo not in held_out for p in kept[s.repo]],
        "validation": [p for s in sources if s.repo in held_out for p in kept[s.repo]],
    }
    files = {split: out / f"{split}.jsonl.gz" for split in SPLITS}
    for split in SPLITS:
        _write_jsonl(files[split], split_pairs[split])
    seconds = time.perf_counter() - started
    report = MiningReport(
        out_dir=out,
        files=files,
        counts={split: _counts(split_pairs[split]) for split in SPLITS},
        per_repository={s.repo: len(kept[s.repo]) for s in sources},
        validation_repositories=tuple(held_out),
        filtered=dict(sorted(filtered.items())),
        seed=seed,
        seconds=seconds,
    )
    manifest = {
        "sources": [{**s.to_json(), "pairs": len(kept[s.repo]), "split": "validation" if s.repo in held_out else "train",
                     "seconds": round(mined[s.repo].seconds, 2)} for s in sources],
        "seed": seed,
        "cap_per_repository": cap,
        "codesearch_commit": codesearch_commit(),
        "files": {split: files[split].name for split in SPLITS},
        "pairs": {split: report.total(split) for split in SPLITS},
        "counts": report.counts,
        "kinds": {split: dict(Counter(p.kind for p in split_pairs[split])) for split in SPLITS},
        "validation_repositories": list(held_out),
        "filtered": report.filtered,
        "seconds": round(seconds, 1),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return report


# --------------------------------------------------------------------------- command line

_DEFAULT_BENCHMARK_LIST = Path(__file__).resolve().parents[2] / ".." / "shared" / "benchmark-repos.txt"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m codesearch.training.mine``: mine the pairs of a sources list and print the counts."""
    parser = argparse.ArgumentParser(prog="python -m codesearch.training.mine", description=__doc__.split("\n")[0])
    parser.add_argument("--sources", required=True, help="the sources list (training/sources.json)")
    parser.add_argument("--mirrors", required=True, help="the folder of git mirrors or checkouts of the sources")
    parser.add_argument("--out", required=True, help="the folder the splits and manifest.json are written to")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cap", type=int, default=DEFAULT_CAP, help="pairs per repository at most")
    parser.add_argument("--workers", type=int, default=2, help="processes mining side by side")
    parser.add_argument("--benchmark-list", default=None,
                        help="refuse sources overlapping this list of owner/name lines "
                             "(default: ../shared/benchmark-repos.txt beside the repository, when it exists)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        sources = load_sources(args.sources)
        benchmark = args.benchmark_list or (_DEFAULT_BENCHMARK_LIST if _DEFAULT_BENCHMARK_LIST.is_file() else None)
        if benchmark is not None:
            check_benchmark_overlap(sources, benchmark)
        report = mine_sources(sources, args.mirrors, args.out, seed=args.seed, cap=args.cap, workers=args.workers,
                              progress=not args.no_progress)
    except TrainingDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report.table())
    print(f"\ntrain {report.total('train')} pairs, validation {report.total('validation')} pairs "
          f"({', '.join(report.validation_repositories)}); {report.seconds:.0f} s; written to {report.out_dir}")
    print("filtered: " + ", ".join(f"{k} {v}" for k, v in report.filtered.items()))
    return 0


__all__ = [
    "DEFAULT_CAP",
    "MAX_HELD_OUT_SHARE",
    "MIN_HELD_OUT_SHARE",
    "SPLITS",
    "VALIDATION_FRACTION",
    "MiningReport",
    "Pair",
    "RepositoryPairs",
    "cap_pairs",
    "codesearch_commit",
    "deduplicate",
    "main",
    "mine_repository",
    "mine_sources",
    "validation_repositories",
]


if __name__ == "__main__":
    raise SystemExit(main())

