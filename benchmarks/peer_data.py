"""semble's public benchmark, read from paths given on the command line: repositories, tasks, metric.

Nothing here is committed data: ``repos.json`` and ``annotations/NAME.json``
come from a checkout of ``michalfedyna/semble`` (``benchmarks/`` at upstream
commit 8d737ab) and each repository's tree is exported from its own git mirror
at the pinned revision (the newest commit when the pin is missing, which is
recorded). Only the DEV repositories below are ever read; the rest of that
benchmark is kept as an independent check.

The metric is the one of semble's ``benchmarks/``: the targets of a query are
its relevant and secondary entries; a result chunk matches a target when either
path is a ``/``-suffix of the other and, if the target has lines, the ranges
overlap; each target counts at the rank of the first chunk that matches it, and
a chunk that matches several targets counts once (binary gains); the ideal DCG
is over ``min(10, targets that match some indexed chunk)``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEV_REPOSITORIES: tuple[str, ...] = (
    "redux", "chi", "gson", "monolog", "rack", "axum", "trpc", "dapper", "ktor",
    "circe", "snapkit", "fmtlib", "plug", "libuv", "bats-core", "xmonad", "lazy.nvim", "zig-clap",
)  # fmt: skip
"""The 18 repositories (18 languages) this project may run, tune and read results on."""

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
        SystemExit: no mirror holds a repository.
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
            if target.exists():
                subprocess.run(["rm", "-rf", str(target)], check=True)
            target.mkdir(parents=True)
            with tempfile.TemporaryFile() as archive:
                subprocess.run([*git, "archive", revision, *([repo.benchmark_root] if repo.benchmark_root else [])],
                               stdout=archive, check=True)
                archive.seek(0)
                with tarfile.open(fileobj=archive) as tar:
                    tar.extractall(target, filter="data")
            stamp.write_text(revision + "\n")
        repo.exported_revision = revision
        repo.root = target / repo.benchmark_root if repo.benchmark_root else target


def ndcg_at_10(results: Sequence[Location], targets: Sequence[Target], indexed: Sequence[Location]) -> float:
    """NDCG@10 of one ranked list, with binary gains, as semble's benchmark computes it.

    Args:
        results: ``(path, start, end)`` best first.
        targets: the query's relevant and secondary targets.
        indexed: every chunk of the index, to count the targets that can be found at all.
    """
    k = 10
    findable = [t for t in targets if any(t.matches(*loc) for loc in indexed)]
    if not findable:
        return 0.0
    hit_ranks = set()
    for target in targets:
        for rank, location in enumerate(results[:k], start=1):
            if target.matches(*location):
                hit_ranks.add(rank)
                break
    dcg = sum(1.0 / math.log2(rank + 1) for rank in hit_ranks)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(findable))))
    return dcg / ideal


def indexed_locations(searcher: Any) -> list[Location]:
    """``(path, start, end)`` of every chunk in a :class:`codesearch.CodeSearch`'s stored index."""
    return [(c["path"], c["start_line"], c["end_line"]) for c in searcher.store.load().chunks]


def query_ndcgs(searcher: Any, repo: Repo, indexed: Sequence[Location], **search: Any) -> list[float]:
    """NDCG@10 of each of ``repo``'s queries, searched top 10 (``search`` goes on to ``search``, e.g. ``refresh``)."""
    return [
        ndcg_at_10([(h.path, h.start_line, h.end_line) for h in searcher.search(task.query, k=10, **search)],
                   task.targets, indexed)
        for task in repo.tasks
    ]


def macro(values_by_repo: dict[str, float]) -> float:
    """Mean over repositories."""
    return sum(values_by_repo.values()) / len(values_by_repo) if values_by_repo else 0.0
