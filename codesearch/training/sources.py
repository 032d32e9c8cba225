"""The public repositories training pairs are mined from: ``training/sources.json``, loaded and checked.

Each source names a GitHub repository, the commit its pairs were mined at and
the licence read at that commit (an SPDX id, or an ``OR``/``AND`` expression
of them, every id in :data:`ALLOWED_LICENCES`). A source list must never
overlap the repositories of the retrieval benchmark the model is measured on:
:func:`check_benchmark_overlap` refuses one that does, by ``owner/name`` and by
repository name alone (another fork named ``requests`` is the same code).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from codesearch.chunking.languages import LANGUAGES
from codesearch.exceptions import TrainingDataError

ALLOWED_LICENCES = frozenset({"MIT", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "ISC", "MPL-2.0"})
"""SPDX ids of the licences a source may have: permissive ones (and MPL's file-level copyleft)."""

_COMMIT = re.compile(r"[0-9a-f]{40}")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+")
_LICENCE_SPLIT = re.compile(r"\s+(?:OR|AND)\s+")


@dataclass(frozen=True)
class Source:
    """One repository pairs are mined from.

    Attributes:
        repo: ``owner/name`` on GitHub.
        commit: the 40-hex commit mined.
        licence: the SPDX id (or ``OR``/``AND`` expression) read at that commit.
        languages: the languages (keys of :data:`codesearch.chunking.languages.LANGUAGES`) it is chosen for.
        own: a user's own checkout (``codesearch train PATH``): read as it stands, its licence is the user's
            business; it is read as it stands on disk, and its commit is its ``HEAD`` when it has one (a record).
    """

    repo: str
    commit: str
    licence: str
    languages: tuple[str, ...]
    own: bool = False

    def __post_init__(self) -> None:
        if not _REPO.fullmatch(self.repo):
            raise TrainingDataError(f"source {self.repo!r}: not an owner/name repository")
        if self.own:
            return  # a user's own checkout: trained on where it is, never redistributed
        if not _COMMIT.fullmatch(self.commit):
            raise TrainingDataError(f"source {self.repo}: commit {self.commit!r} is not 40 lower-case hex digits")
        ids = _LICENCE_SPLIT.split(self.licence.strip().strip("()"))
        if not all(i in ALLOWED_LICENCES for i in ids):
            raise TrainingDataError(
                f"source {self.repo}: licence {self.licence!r} is not one of {', '.join(sorted(ALLOWED_LICENCES))}")
        if not self.languages:
            raise TrainingDataError(f"source {self.repo}: no languages named")
        unknown = [lang for lang in self.languages if lang not in LANGUAGES]
        if unknown:
            raise TrainingDataError(f"source {self.repo}: unknown language(s) {unknown}; known: {', '.join(LANGUAGES)}")

    @property
    def name(self) -> str:
        """The repository's name without its owner."""
        return self.repo.split("/", 1)[1]

    def to_json(self) -> dict[str, object]:
        """The source as it is written in ``sources.json``."""
        found: dict[str, object] = {"repo": self.repo, "commit": self.commit, "licence": self.licence,
                                    "languages": list(self.languages)}
        if self.own:
            found["own"] = True
        return found


def load_sources(path: str | os.PathLike[str]) -> list[Source]:
    """The sources of a ``sources.json`` file (a JSON list of objects), in file order.

    Raises:
        TrainingDataError: the file is missing or not JSON, an entry lacks a
            field or fails :class:`Source`'s checks, or a repository is listed twice.
    """
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TrainingDataError(f"cannot read the sources list {path}: {exc}") from exc
    if not isinstance(raw, list):
        raise TrainingDataError(f"{path}: expected a JSON list of sources")
    sources: list[Source] = []
    for entry in raw:
        try:
            sources.append(Source(entry["repo"], entry["commit"], entry["licence"], tuple(entry["languages"])))
        except (KeyError, TypeError) as exc:
            raise TrainingDataError(f"{path}: a source needs repo, commit, licence and languages: {entry!r}") from exc
    seen: set[str] = set()
    for source in sources:
        if source.repo.lower() in seen:
            raise TrainingDataError(f"{path}: {source.repo} is listed twice")
        seen.add(source.repo.lower())
    return sources


def read_benchmark_list(path: str | os.PathLike[str]) -> list[str]:
    """The ``owner/name`` lines of a benchmark list (``#`` comments and blank lines skipped).

    Raises:
        TrainingDataError: the file cannot be read.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TrainingDataError(f"cannot read the benchmark list {path}: {exc}") from exc
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def benchmark_overlap(sources: Iterable[Source], benchmark: Iterable[str]) -> list[tuple[str, str]]:
    """``(source, benchmark repository)`` for every source that is a benchmark repository or shares its name.

    Both comparisons ignore case: ``someone/Requests`` overlaps ``psf/requests``.
    """
    bench = [b.strip().rstrip("/").removesuffix(".git") for b in benchmark]
    by_repo = {b.lower(): b for b in bench}
    by_name = {b.rsplit("/", 1)[-1].lower(): b for b in bench}
    found = []
    for source in sources:
        hit = by_repo.get(source.repo.lower()) or by_name.get(source.name.lower())
        if hit is not None:
            found.append((source.repo, hit))
    return found


def check_benchmark_overlap(sources: Sequence[Source], benchmark_list: str | os.PathLike[str]) -> None:
    """Refuse a source list that overlaps the benchmark list at ``benchmark_list``.

    Raises:
        TrainingDataError: the list cannot be read, or a source is a benchmark
            repository or shares a benchmark repository's name.
    """
    overlap = benchmark_overlap(sources, read_benchmark_list(benchmark_list))
    if overlap:
        said = ", ".join(f"{s} (benchmark: {b})" for s, b in overlap)
        raise TrainingDataError(f"training sources overlap the benchmark: {said}; remove them from the sources list")


def languages_covered(sources: Iterable[Source]) -> set[str]:
    """Every language some source is chosen for."""
    return {lang for source in sources for lang in source.languages}


__all__ = [
    "ALLOWED_LICENCES",
    "Source",
    "benchmark_overlap",
    "check_benchmark_overlap",
    "languages_covered",
    "load_sources",
    "read_benchmark_list",
]
