"""semble's public benchmark, read from paths given on the command line: repositories, tasks, metric, folds.

Nothing here is committed data: ``repos.json`` and ``annotations/NAME.json``
come from a checkout of ``michalfedyna/semble`` (``benchmarks/`` at upstream
commit 8d737ab) and each repository's tree is exported from its own git mirror
at the pinned revision (the newest commit when the pin is missing, which is
recorded). Only the DEV repositories below are ever read; the rest of that
benchmark is kept as an independent check.

Two NDCG@10 figures, both with binary gains over a query's relevant and
secondary targets, where a result chunk matches a target when either path is
a ``/``-suffix of the other and, if the target has lines, the ranges overlap;
each target counts at the rank of the first chunk in the top 10 that matches
it, and a chunk that matches several targets counts once. They differ in the
ideal DCG:

- :func:`ndcg_at_10_all_targets` (``ndcg10_all_targets``) is semble's: the
  ideal is over ``min(10, number of annotated targets)``, whether or not the
  system indexed them (``benchmarks/metrics.py`` and ``run_benchmark.py`` at
  8d737ab: ``ndcg_at_k(relevant_ranks, len(task.all_relevant), 10)``).
- :func:`ndcg_at_10` (``ndcg10``, this project's figure since the peer
  benchmark began) takes the ideal over ``min(10, targets that some chunk of
  the system's own index matches)``: a target no chunk can match does not
  count against the system, so a system that leaves a target's file out of its
  index is not penalised for it. It is never below the other.

semble's printed overall figure is the mean of language means; its results
file's ``summary.ndcg10`` is the mean over repositories. On DEV, one
repository per language, the two are equal.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

DEV_REPOSITORIES: tuple[str, ...] = (
    "redux", "chi", "gson", "monolog", "rack", "axum", "trpc", "dapper", "ktor",
    "circe", "snapkit", "fmtlib", "plug", "libuv", "bats-core", "xmonad", "lazy.nvim", "zig-clap", "requests",
)  # fmt: skip
"""The 19 repositories (19 languages) this project may run, tune and read results on. psf/requests joined on
2026-12-04 (issue 39), so Python has a voice in the DEV figures."""

Location = tuple[str, int, int]


@dataclass(frozen=True)
class Target:
    """One annotated answer: a path, with or without a line range."""

    path: str
    start_line: int | None = None
    end_line: int | None = None

    def matches(self, path: str, start_line: int, end_line: int) -> bool:
        """Whether the chunk ``path:start_line-end_line`` covers this target."""
        if not path_matches(path, self.path):
            return False
        if self.start_line is None or self.end_line is None:
            return True
        return not (end_line < self.start_line or start_line > self.end_line)


@dataclass(frozen=True)
class Task:
    """One query of a repository with its targets (relevant + secondary)."""

    repo: str
    language: str
    query: str
    category: str
    targets: tuple[Target, ...]


@dataclass
class Repo:
    """A DEV repository: where its tree is, which revision, its tasks."""

    name: str
    language: str
    url: str
    revision: str
    benchmark_root: str | None
    tasks: list[Task] = field(default_factory=list)
    root: Path | None = None
    exported_revision: str | None = None

    @property
    def pinned(self) -> bool:
        return self.exported_revision == self.revision


def path_matches(file_path: str, target_path: str) -> bool:
    """Whether either path is a ``/``-suffix of the other (or they are equal)."""
    a = file_path.replace("\\", "/")
    b = target_path.replace("\\", "/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a)


def _target(raw: str | dict[str, object]) -> Target:
    if isinstance(raw, str):
        return Target(raw)
    start, end = raw.get("start_line"), raw.get("end_line")
    return Target(str(raw["path"]), None if start is None else int(start), None if end is None else int(end))  # type: ignore[arg-type]


def _category(query: str, given: object) -> str:
    if isinstance(given, str):
        return given
    if " " not in query.strip():
        return "symbol"
    return "architecture" if query.lower().startswith("how ") else "semantic"


def load_repos(benchmark_dir: str | os.PathLike[str], names: Iterable[str] = DEV_REPOSITORIES) -> list[Repo]:
    """Read ``repos.json`` and the annotations of ``names`` from semble's ``benchmarks/`` folder.

    Raises:
        SystemExit: a name is not a DEV repository, or a file is missing.
    """
    folder = Path(benchmark_dir)
    wanted = list(names)
    outside = [n for n in wanted if n not in DEV_REPOSITORIES]
    if outside:
        raise SystemExit(f"not DEV repositories (kept as an independent check): {', '.join(outside)}")
    try:
        specs = {item["name"]: item for item in json.loads((folder / "repos.json").read_text("utf-8"))}
    except FileNotFoundError:
        raise SystemExit(f"{folder}/repos.json not found: pass semble's benchmarks/ folder") from None
    repos = []
    for name in wanted:
        spec = specs[name]
        repo = Repo(name, spec["language"], spec["url"], spec["revision"], spec.get("benchmark_root"))
        annotation = folder / "annotations" / f"{name}.json"
        for item in json.loads(annotation.read_text("utf-8")):
            targets = tuple(_target(t) for t in [*item.get("relevant", []), *item.get("secondary", [])])
            repo.tasks.append(Task(name, repo.language, item["query"], _category(item["query"], item.get("category")),
                                   targets))
        repos.append(repo)
    return repos


def mirror_for(mirrors: Path, url: str) -> Path | None:
    """The git directory of ``url`` under a folder of mirrors (``owner+name/repo`` or ``owner+name``)."""
    owner, name = url.rstrip("/").removesuffix(".git").split("/")[-2:]
    for candidate in (mirrors / f"{owner}+{name}" / "repo", mirrors / f"{owner}+{name}", mirrors / name):
        if (candidate / "HEAD").is_file() or (candidate / ".git").exists():
            return candidate
    return None


def export_trees(repos: Sequence[Repo], mirrors: str | os.PathLike[str], dest: str | os.PathLike[str]) -> None:
    """Export each repository's ``benchmark_root`` at its pinned revision into ``dest/NAME``.

    Where the pin is not in the mirror the newest commit is exported and
    recorded in ``repo.exported_revision``; an existing export of the same
    revision is reused.

    Raises:
        SystemExit: no mirror holds a repository, or its mirror lacks a file of the tree (a blob a snapshot left
            out); the partial tree is removed.
    """
    mirrors, dest = Path(mirrors), Path(dest)
    for repo in repos:
        git_dir = mirror_for(mirrors, repo.url)
        if git_dir is None:
            raise SystemExit(f"no git mirror of {repo.url} under {mirrors} (fetch it first)")
        git = ["git", "--git-dir", str(git_dir / ".git" if (git_dir / ".git").exists() else git_dir)]
        has_pin = subprocess.run([*git, "cat-file", "-e", repo.revision + "^{commit}"], capture_output=True).returncode == 0
        revision = repo.revision if has_pin else subprocess.check_output([*git, "rev-parse", "HEAD"], text=True).strip()
        target = dest / repo.name
        # Beside the tree, not in it: a repository without a benchmark_root is indexed from the top.
        stamp = dest / f"{repo.name}.exported-revision"
        if not (stamp.is_file() and stamp.read_text().strip() == revision):
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            with tempfile.TemporaryFile() as archive:
                # A snapshot mirror may lack its largest blobs: git names those outside the root on stderr and
                # still exits 0 with the tree whole, and fails only when one inside it is missing.
                done = subprocess.run([*git, "archive", revision, *([repo.benchmark_root] if repo.benchmark_root else [])],
                                      stdout=archive, stderr=subprocess.PIPE, text=True)
                if done.returncode != 0:
                    shutil.rmtree(target)
                    said = done.stderr.strip().splitlines()
                    raise SystemExit(f"error: cannot export {repo.name} at {revision[:10]} from {git_dir}: "
                                     f"{said[-1] if said else f'git archive exited {done.returncode}'}")
                archive.seek(0)
                with tarfile.open(fileobj=archive) as tar:
                    tar.extractall(target, filter="data")
            stamp.write_text(revision + "\n")
        repo.exported_revision = revision
        repo.root = target / repo.benchmark_root if repo.benchmark_root else target


K = 10
"""Results scored per query (semble's ``_DIRECT_TOP_K``)."""


def _dcg_of_hits(results: Sequence[Location], targets: Sequence[Target], k: int = K) -> float:
    """DCG of the top ``k``: 1 at each rank whose chunk is the first match of some target (a rank counts once)."""
    hit_ranks = set()
    for target in targets:
        for rank, location in enumerate(results[:k], start=1):
            if target.matches(*location):
                hit_ranks.add(rank)
                break
    return sum(1.0 / math.log2(rank + 1) for rank in hit_ranks)


def _ideal_dcg(relevant: int, k: int = K) -> float:
    return sum(1.0 / math.log2(i + 2) for i in range(min(k, relevant)))


def ndcg_at_10(results: Sequence[Location], targets: Sequence[Target], indexed: Sequence[Location]) -> float:
    """NDCG@10 over the targets the system's own index can find (``ndcg10``); not semble's definition.

    The ideal DCG is over ``min(10, targets that match some chunk of indexed)``;
    0.0 when none does. See :func:`ndcg_at_10_all_targets` for semble's.

    Args:
        results: ``(path, start, end)`` best first.
        targets: the query's relevant and secondary targets.
        indexed: every chunk of the system's index, to count the targets it can find at all.
    """
    findable = sum(1 for t in targets if any(t.matches(*loc) for loc in indexed))
    if not findable:
        return 0.0
    return _dcg_of_hits(results, targets) / _ideal_dcg(findable)


def ndcg_at_10_all_targets(results: Sequence[Location], targets: Sequence[Target]) -> float:
    """NDCG@10 as semble's benchmark computes it (``ndcg10_all_targets``): the ideal is over every annotated target.

    The ideal DCG is over ``min(10, len(targets))`` (duplicates included, as
    semble counts ``len(task.all_relevant)``); 0.0 for a query without targets.

    Args:
        results: ``(path, start, end)`` best first.
        targets: the query's relevant and secondary targets.
    """
    if not targets:
        return 0.0
    return _dcg_of_hits(results, targets) / _ideal_dcg(len(targets))


class QueryScores(NamedTuple):
    """Per query, in the repository's task order, both NDCG@10 figures."""

    ndcg10: list[float]
    ndcg10_all_targets: list[float]

    def means(self) -> dict[str, float]:
        """``{"ndcg10": ..., "ndcg10_all_targets": ...}``: the means over the queries."""
        return {name: sum(values) / len(values) if values else 0.0 for name, values in self._asdict().items()}


def score_results(results: Sequence[Sequence[Location]], tasks: Sequence[Task], indexed: Sequence[Location]) -> QueryScores:
    """Both figures of each task's ranked ``results`` (one list per task, best first)."""
    return QueryScores(
        [ndcg_at_10(found, task.targets, indexed) for found, task in zip(results, tasks)],
        [ndcg_at_10_all_targets(found, task.targets) for found, task in zip(results, tasks)],
    )


def indexed_locations(searcher: Any) -> list[Location]:
    """``(path, start, end)`` of every chunk in a :class:`codesearch.CodeSearch`'s stored index."""
    return list(searcher.locations())


def query_scores(searcher: Any, repo: Repo, indexed: Sequence[Location], **search: Any) -> QueryScores:
    """Both NDCG@10 figures of each of ``repo``'s queries, searched top 10 (``search`` goes on to ``search``)."""
    results = [[(h.path, h.start_line, h.end_line) for h in searcher.search(task.query, k=K, **search)]
               for task in repo.tasks]
    return score_results(results, repo.tasks, indexed)


def query_ndcgs(searcher: Any, repo: Repo, indexed: Sequence[Location], **search: Any) -> list[float]:
    """``ndcg10`` (findable targets) of each of ``repo``'s queries, searched top 10 (``search``, e.g. ``refresh``)."""
    return query_scores(searcher, repo, indexed, **search).ndcg10


def macro(values_by_repo: dict[str, float]) -> float:
    """Mean over repositories."""
    return sum(values_by_repo.values()) / len(values_by_repo) if values_by_repo else 0.0


def language_mean(values_by_repo: Mapping[str, float], language_of: Mapping[str, str]) -> float:
    """Mean over languages of the mean over each language's repositories (semble's printed overall figure)."""
    by_language: dict[str, list[float]] = {}
    for name, value in values_by_repo.items():
        by_language.setdefault(language_of[name], []).append(value)
    means = [sum(values) / len(values) for values in by_language.values()]
    return sum(means) / len(means) if means else 0.0


def category_means(per_query: Mapping[str, Sequence[float]], tasks_by_repo: Mapping[str, Sequence[Task]]) -> dict[str, float]:
    """Per category, the mean over repositories of each repository's mean over its queries of that category.

    semble's ``run_benchmark.py`` averages a category this way (repositories
    weigh alike, whatever their number of queries).
    """
    per_repo: dict[str, list[float]] = {}
    for name, values in per_query.items():
        by_category: dict[str, list[float]] = {}
        for value, task in zip(values, tasks_by_repo[name]):
            by_category.setdefault(task.category, []).append(value)
        for category, found in by_category.items():
            per_repo.setdefault(category, []).append(sum(found) / len(found))
    return {category: sum(v) / len(v) for category, v in sorted(per_repo.items())}


# -- size buckets --------------------------------------------------------------------

SIZE_BUCKETS: tuple[tuple[str, int, int | None], ...] = (("small", 0, 300), ("medium", 300, 500), ("large", 500, None))
"""``(name, lowest, highest + 1)`` of a repository's codesearch chunk count, fixed.

Set once from the DEV chunk counts below (65 to 2193) so the 18 fall 6 / 5 / 7,
with each edge in a gap between neighbours (252 | 345, 442 | 542), not to move
a repository between buckets when the chunker changes a little.
"""


def size_bucket(chunks: int) -> str:
    """The :data:`SIZE_BUCKETS` name of a repository with ``chunks`` chunks."""
    for name, low, high in SIZE_BUCKETS:
        if chunks >= low and (high is None or chunks < high):
            return name
    raise ValueError(f"no size bucket for {chunks} chunks")


# -- the 2-fold tuning protocol ----------------------------------------------------------

DEV_CHUNKS_AT_SPLIT: Mapping[str, int] = {
    "redux": 65, "bats-core": 66, "snapkit": 122, "zig-clap": 141, "xmonad": 179, "circe": 252,
    "rack": 345, "plug": 383, "lazy.nvim": 412, "chi": 414, "trpc": 442, "monolog": 542,
    "dapper": 565, "ktor": 604, "fmtlib": 668, "axum": 858, "libuv": 1705, "gson": 2193,
}  # fmt: skip
"""codesearch's chunks per DEV tree when the folds were drawn (commit 9a45192, trees at their pins; circe and
snapkit at their newest commits). They fix the folds below and the size buckets' edges; a later run's own counts
are what the size buckets read."""


def snake_split(names: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Deal ``names`` (in order) to two folds as A, B, B, A, A, B, B, A, ...: each pair of neighbours is split."""
    folds: tuple[list[str], list[str]] = ([], [])
    for i, name in enumerate(names):
        folds[0 if i % 4 in (0, 3) else 1].append(name)
    return tuple(folds[0]), tuple(folds[1])


DEV_JOINED: Mapping[str, str] = {"requests": "B"}
"""DEV repositories that joined after the split, with the fold each joined (not in :data:`DEV_CHUNKS_AT_SPLIT`)."""


DEV_FOLDS: Mapping[str, tuple[str, ...]] = {
    "A": ("redux", "zig-clap", "xmonad", "plug", "lazy.nvim", "monolog", "dapper", "axum", "libuv"),
    "B": ("bats-core", "snapkit", "circe", "rack", "chi", "trpc", "ktor", "fmtlib", "gson", "requests"),
}
"""The fixed 2-fold split of DEV: :func:`snake_split` of the 18 first DEV names ordered by
:data:`DEV_CHUNKS_AT_SPLIT` (smallest first). Sizes alternate, so each fold held 9 repositories (and 9
languages) from the smallest to the largest. Drawn from chunk counts alone, before any figure was split by it;
never redrawn. psf/requests, the 19th, joined fold B on 2026-12-04 because B had fewer queries (168 against
A's 180; requests brings 20), decided from query counts alone."""


def fold_figures(per_repo: Mapping[str, float], folds: Mapping[str, Sequence[str]] = DEV_FOLDS) -> dict[str, float | None]:
    """The macro over each fold's repositories present in ``per_repo`` (``None`` for a fold with none of them),
    ``dev`` over all of them, and ``held_back_mean``, the mean of the fold figures (``None`` unless every fold has one).
    """
    out: dict[str, float | None] = {}
    for fold, names in folds.items():
        present = {n: per_repo[n] for n in names if n in per_repo}
        out[fold] = macro(present) if present else None
    figures = [out[fold] for fold in folds]
    out["dev"] = macro(dict(per_repo))
    out["held_back_mean"] = None if None in figures else sum(figures) / len(figures)  # type: ignore[arg-type]
    return out


Verdict = Literal["unchanged", "lands", "tie", "loses"]
"""What the 2-fold protocol decides against the default (:attr:`TwoFold.verdict`)."""

MIN_GAIN = 0.0001
"""The least held-back gain that lands a change: the precision every protocol table prints.

One DEV query (of about 19 in a repository, 9 repositories a fold) moving up
one place moves the mean of the held-back halves by 0.001 at the top of its
list (2 -> 1), about this much around its fifth place and 0.00003 at its foot
(10 -> 9); a protocol run over many grids finds such small wins by chance
(``benchmarks/README.md``, "Tuning protocol")."""


@dataclass(frozen=True)
class HeldBackChoice:
    """The variant chosen on one fold, and its figure on the other (the held-back half)."""

    chosen_on: str
    variant: str
    chosen_figure: float
    reported_on: str
    held_back_figure: float


@dataclass(frozen=True)
class TwoFold:
    """What the 2-fold protocol found (see :func:`two_fold`)."""

    folds: dict[str, dict[str, float | None]]
    choices: tuple[HeldBackChoice, ...]
    held_back_mean: float
    dev_choice: str
    dev_figure: float
    baseline: str | None = None

    @property
    def baseline_held_back(self) -> float | None:
        """The baseline's mean of its fold figures: what a choice must not lose against."""
        return None if self.baseline is None else self.folds[self.baseline]["held_back_mean"]

    @property
    def verdict(self) -> Verdict | None:
        """What the protocol decides against the baseline (``None`` without one).

        ``"unchanged"``: both halves choose the baseline. ``"lands"``: the
        held-back mean beats the baseline's by at least :data:`MIN_GAIN`.
        ``"tie"``: it is within :data:`MIN_GAIN` either way, and a tie keeps
        the baseline. ``"loses"``: it falls short by more.
        """
        base = self.baseline_held_back
        if base is None:
            return None
        if all(c.variant == self.baseline for c in self.choices):
            return "unchanged"
        gain = self.held_back_mean - base
        return "lands" if gain >= MIN_GAIN else "loses" if gain <= -MIN_GAIN else "tie"

    @property
    def lands(self) -> bool | None:
        """Whether a change lands: :attr:`verdict` is ``"lands"`` (``None`` without a baseline)."""
        return None if self.baseline is None else self.verdict == "lands"

    def as_dict(self) -> dict[str, Any]:
        return {"folds": self.folds, "choices": [c.__dict__ for c in self.choices], "held_back_mean": self.held_back_mean,
                "dev_choice": self.dev_choice, "dev_figure": self.dev_figure, "baseline": self.baseline,
                "baseline_held_back": self.baseline_held_back, "verdict": self.verdict, "lands": self.lands}


def two_fold(per_repo_by_variant: Mapping[str, Mapping[str, float]], folds: Mapping[str, Sequence[str]] = DEV_FOLDS,
             baseline: str | None = None) -> TwoFold:
    """Choose the best variant on each fold and report it on the other; the mean of those held-back figures.

    Args:
        per_repo_by_variant: variant name -> repository -> figure (higher is
            better), every variant over the same repositories. A tie goes to
            the variant named first, so list the current default first.
        folds: fold name -> its repositories (two folds: each choice is
            reported on the other one).
        baseline: the variant a choice must not lose against on the held-back halves.

    Returns:
        Each variant's figure per fold and on all repositories, the choice made
        on each fold with its figure on the other, their mean, and the
        in-sample choice on all repositories next to it.

    Raises:
        ValueError: not two folds, a fold without a repository among the figures, or an unknown baseline.
    """
    if len(folds) != 2:
        raise ValueError(f"the protocol needs two folds, got {list(folds)}")
    if not per_repo_by_variant:
        raise ValueError("no variants to choose from")
    if baseline is not None and baseline not in per_repo_by_variant:
        raise ValueError(f"unknown baseline {baseline!r}; variants are {', '.join(per_repo_by_variant)}")
    figures = {name: fold_figures(per_repo, folds) for name, per_repo in per_repo_by_variant.items()}
    empty = [fold for fold in folds if any(f[fold] is None for f in figures.values())]
    if empty:
        raise ValueError(f"fold {empty[0]} has no repository among the figures: run all of DEV for the protocol")

    def best(key: str) -> str:
        return max(figures, key=lambda name: figures[name][key])  # type: ignore[arg-type,return-value]  # first on ties

    first, second = folds
    choices = []
    for on, other in ((first, second), (second, first)):
        chosen = best(on)
        choices.append(HeldBackChoice(on, chosen, figures[chosen][on], other, figures[chosen][other]))  # type: ignore[arg-type]
    dev_choice = best("dev")
    return TwoFold(figures, tuple(choices), sum(c.held_back_figure for c in choices) / len(choices), dev_choice,
                   figures[dev_choice]["dev"], baseline)  # type: ignore[arg-type]


# -- semble's published figures ----------------------------------------------------------


@dataclass(frozen=True)
class Published:
    """semble's own published figures for some DEV repositories (``results/semble-hybrid-*.json``)."""

    path: str
    model: str | None
    sha: str | None
    repos: dict[str, dict[str, Any]]

    @property
    def ndcg10(self) -> dict[str, float]:
        """NDCG@10 per repository, by semble's definition (all annotated targets) on semble's own run."""
        return {name: float(entry["ndcg10"]) for name, entry in self.repos.items()}


def load_published(path: str | os.PathLike[str], names: Iterable[str] = DEV_REPOSITORIES) -> Published:
    """Read the entries of ``names`` (DEV only) from a semble results file, leaving every other entry unread.

    The file holds ``repos``, a list of ``{repo, language, chunks, ndcg5,
    ndcg10, ..., by_category}``; its overall figures (``summary``,
    ``by_language``, ``avg_ndcg10``) mix in the held-out repositories and are
    not read.

    Raises:
        SystemExit: a name is not a DEV repository, the file has no ``repos``
            list, or a name is missing from it.
    """
    wanted = list(names)
    outside = [n for n in wanted if n not in DEV_REPOSITORIES]
    if outside:
        raise SystemExit(f"not DEV repositories (kept as an independent check): {', '.join(outside)}")
    data = json.loads(Path(path).read_text("utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("repos"), list):
        raise SystemExit(f"{path}: not a semble results file (no 'repos' list); pass results/semble-hybrid-*.json")
    # Filter by name first: no figure of any other repository is looked at.
    entries = {item["repo"]: item for item in data["repos"] if isinstance(item, dict) and item.get("repo") in wanted}
    missing = [n for n in wanted if n not in entries]
    if missing:
        raise SystemExit(f"{path} has no entry for {', '.join(missing)}")
    keep = ("language", "chunks", "ndcg5", "ndcg10", "by_category")
    return Published(str(path), data.get("model"), data.get("sha"),
                     {n: {k: entries[n][k] for k in keep if k in entries[n]} for n in wanted})
