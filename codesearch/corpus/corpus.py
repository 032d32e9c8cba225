"""The :class:`Corpus` facade: build, refresh and search thousands of repositories on Ray Data and Lance.

It validates arguments and wires the roles of the package together
(:mod:`~codesearch.corpus.store`, :mod:`~codesearch.corpus.cluster`,
:mod:`~codesearch.corpus.build`, :mod:`~codesearch.corpus.source`); it holds
no ranking logic: every search goes through :mod:`codesearch.ranking`.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from codesearch.chunking import ChunkParams
from codesearch.corpus.build import (
    RepoResult,
    WorkerSpec,
    bundles,
    cpu_seconds,
    peak_rss_mb,
    run_in_process,
    run_pipeline,
)
from codesearch.corpus.changes import known_stats, stat_pass
from codesearch.corpus.cluster import preflight, ray_session
from codesearch.corpus.keywords import StoredFits, fit_keywords
from codesearch.corpus.schema import (
    CHUNKS,
    FILE_SCHEMA,
    FILES,
    KEYWORD_SCHEMA,
    KEYWORDS,
    CorpusManifest,
    RepoFacts,
    TierFacts,
    check_repo_name,
    chunk_schema,
    sql_in,
    sql_string,
)
from codesearch.corpus.source import CorpusSource, FileSet, RepoView, RowKeys, StaleKeywords, ViewCache, read_pool
from codesearch.corpus.store import CorpusStore, Writer, optimize_store
from codesearch.embedding.catalogue import DEFAULT_MODEL, ModelSpec, resolve_model
from codesearch.exceptions import ModelMismatchError, RepositoryNotInCorpusError, RootNotFoundError
from codesearch.files.scan import Listing
from codesearch.files.walk import MAX_FILE_BYTES
from codesearch.ranking import Ranking, resolve_ranking
from codesearch.scope import Scope, as_strings
from codesearch.types import FULL, STATIC, Hit, Mode, TextEmbedder, Tier, check_search

logger = logging.getLogger(__name__)

WorkItem = tuple[str, str, Listing | None]
"""A repository to run: its name, its folder, and its walk when the driver made one."""

FLUSH_ROWS = 20_000
"""Rows of finished repositories (written by the workers as fragments) the driver commits at a time: a commit per
repository would make a version each, and rewrite a manifest that lists every fragment."""
KEYWORD_FRAGMENTS = 16
"""The keywords table is compacted once it has more fragments than this (each refresh adds one, and deletes rows
from others; the first scoped query of a process reads every fragment's names)."""
VIEW_CACHE_BYTES = 512 * 1024**2
"""Memory the repository views of scoped searches may keep (least recently used dropped first)."""
CORPUS_TIERS = (STATIC, FULL)
IN_PROCESS_BYTES = {STATIC: 8 << 20, FULL: 1 << 20}
"""Bytes of files to read (changed, added, or with unknown stats) up to which a refresh runs in this process instead
of on Ray. Starting a local Ray and its actors costs 5-8 s; this process cut and embedded (static tier) 2 MB of
edited Java, every chunk's text new, in 0.9 s, where Ray took 8.8 s (2 cores, measured): 8 MiB is about the
start's price. The transformer embeds several times slower, so the full tier stays here for less."""


@dataclass
class CorpusReport:
    """What one :meth:`Corpus.build` or :meth:`Corpus.refresh` did.

    Attributes:
        repos: repositories built or refreshed.
        files: their text files now; ``changed_files``: those read and cut again.
        chunks: their chunks now.
        inserted: chunk rows written; ``deleted``: chunk rows removed; ``updated``: rows given the transformer's
            vectors in place (a static repository refreshed with ``tier="full"``).
        embedded_static, embedded_full: chunk texts each tier's model embedded (the rest kept their vectors).
        file_rows: rows written to the files table.
        hashed_files: files read because their stats changed or were unknown (the rest were left unread).
        unchanged_repos: repositories a refresh skipped: no file added, removed or with other stats.
        seconds: wall time; ``pipeline_s``: of it, the actors' run (their start included) and the commits;
            ``ray_start_s``: of that, starting (or joining) Ray; ``stream_s``: the rest, from the first repository
            handed out to the last one committed (the actors' start and model load included); ``work_s``: of that,
            from the first repository an actor began to the last one the driver received (the actors' start left
            out: the steady pace a long build runs at); ``optimize_s``:
            compaction and indexes (a Ray task when Ray ran); ``optimized``: whether they ran (a small refresh
            leaves its rows to the indexes' flat scan, :meth:`~codesearch.corpus.store.Writer.optimize`);
            ``keywords_s``: fitting and storing the BM25 of the repositories whose chunks changed;
            ``cleanup_s``: removing old versions and a failed run's uncommitted files, ``cleaned_bytes`` of them
            (:meth:`~codesearch.corpus.store.Writer.cleanup`; only after a run that committed something).
        ray: whether Ray ran the work (false: done in this process, or nothing to do).
        actors: the actor pool's size; ``workers``: per actor process (this one when in process), its
            repositories, chunks written, peak memory (MB) and CPU seconds spent on its repositories (``cpu_s``).
        driver_peak_rss_mb: this process's peak memory; ``driver_cpu_s``: its CPU seconds in this call
            (Lance's index builds included), ``driver_pipeline_cpu_s``: of them, while the actors ran (Ray's start
            included), ``driver_stream_cpu_s``: of those, during ``stream_s``;
            ``driver_pipeline_peak_mb``: its peak memory before the indexes were built.
        tier: the tier the repositories now have.
    """

    repos: int = 0
    files: int = 0
    changed_files: int = 0
    chunks: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    embedded_static: int = 0
    embedded_full: int = 0
    file_rows: int = 0
    hashed_files: int = 0
    unchanged_repos: int = 0
    seconds: float = 0.0
    pipeline_s: float = 0.0
    ray_start_s: float = 0.0
    stream_s: float = 0.0
    work_s: float = 0.0
    optimize_s: float = 0.0
    optimized: bool = False
    keywords_s: float = 0.0
    cleanup_s: float = 0.0
    cleaned_bytes: int = 0
    ray: bool = False
    actors: int = 0
    tier: str = STATIC
    driver_peak_rss_mb: float = 0.0
    driver_cpu_s: float = 0.0
    driver_pipeline_cpu_s: float = 0.0
    driver_stream_cpu_s: float = 0.0
    driver_pipeline_peak_mb: float = 0.0
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pipeline_done(report: CorpusReport, began: float, cpu_began: float) -> None:
    """The pipeline's figures, once the repositories are merged (before the indexes)."""
    report.pipeline_s = round(time.perf_counter() - began, 3)
    report.ray_start_s = round(report.pipeline_s - report.stream_s, 3) if report.ray else 0.0
    report.driver_pipeline_cpu_s = round(cpu_seconds() - cpu_began, 3)
    report.driver_pipeline_peak_mb = peak_rss_mb()


def text_bytes(items: Sequence[tuple[str, str]], spec: WorkerSpec) -> dict[str, int]:
    """Each repository's bytes of files to read, by the walk its actor will make (a folder this machine lacks:
    none known)."""
    return {name: sum(f.size for f in spec.list(root).files) for name, root in items if Path(root).is_dir()}


def largest_first(work: list[WorkItem], sizes: Mapping[str, int]) -> list[WorkItem]:
    """``work`` with the repositories of unknown size first, then the others largest first.

    Actors take repositories in this order as they free up, so the largest
    starts early and the last to start is small: with repositories in any
    other order, one large one could run on one actor while the others idle
    (the 10k corpus's two actors spent 1.9 and 3.2 CPU seconds).
    """
    return sorted(work, key=lambda item: -sizes[item[0]] if item[0] in sizes else -math.inf)


def parse_paths(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[str, str]]:
    """``[(name, absolute root)]`` of ``PATH`` or ``NAME=PATH`` arguments (a repository's name is its folder's).

    Raises:
        RootNotFoundError: a path is missing or not a folder.
        ValueError: no path, a name that cannot name a repository, or one name twice.
    """
    out: list[tuple[str, str]] = []
    for given in paths:
        text = os.fspath(given)
        name, sep, path = text.partition("=")
        if not sep or "/" in name or not name:
            name, path = "", text
        root = Path(path).expanduser().absolute()
        if not root.is_dir():
            raise RootNotFoundError(f"{'not a directory' if root.exists() else 'path does not exist'}: {path}")
        out.append((check_repo_name(name or root.resolve().name), str(root)))
    if not out:
        raise ValueError("give at least one repository folder (PATH or NAME=PATH)")
    names = [n for n, _ in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two repositories named {twice[0]!r}; name them apart as NAME=PATH")
    return out


class Corpus:
    """Many repositories in one store, searched with the same ranking as a single repository.

    Args:
        store_uri: a local folder, or an ``s3://`` / ``gs://`` URI (Lance writes to both).
        model: the transformer's catalogue name, hub id, folder or spec (the static tier is distilled from it),
            or an embedder object (with ``static`` another, for tests and custom models).
        int8: the transformer's int8 export (where it passed its quality gate).
        static: the static tier's embedder; ``None`` distils it from ``model``.
        ranking: ``"default"``, ``"article"`` or a :class:`~codesearch.ranking.Ranking`.
        storage_options: Lance's options for an object store (credentials, region, endpoint).
        progress: show progress bars while building.

    Example:
        >>> corpus = Corpus("/data/corpus")                           # doctest: +SKIP
        >>> corpus.build(["/src/requests", "flask=/src/flask-main"])  # doctest: +SKIP
        >>> corpus.search("why does a POST turn into a GET", repos=["requests"])  # doctest: +SKIP
    """

    def __init__(self, store_uri: str | os.PathLike[str], model: str | ModelSpec | TextEmbedder = DEFAULT_MODEL, *,
                 int8: bool = True, static: TextEmbedder | None = None, ranking: str | Ranking = "default",
                 storage_options: dict[str, str] | None = None, progress: bool = False) -> None:
        self.store = CorpusStore(store_uri, storage_options)
        self.model = model
        self.int8 = int8
        self.ranking = resolve_ranking(ranking)
        self.progress = progress
        self._static = static
        self._full: TextEmbedder | None = model if hasattr(model, "embed_query") else None  # type: ignore[assignment]
        self._views = ViewCache(VIEW_CACHE_BYTES)
        self._files: dict[tuple[int, tuple[str, ...] | None], FileSet] = {}
        self._keys: RowKeys | None = None  # the chunks table's at the version last searched across repositories
        self._fits: StoredFits | None = None  # the keywords table at the manifest's version
        self.last_report: CorpusReport | None = None

    # -- models -----------------------------------------------------------------------------

    @property
    def model_name(self) -> str:
        """The transformer's name, known without loading it."""
        if hasattr(self.model, "embed_query"):
            return str(self.model.spec.name)  # type: ignore[union-attr]
        return resolve_model(self.model).name  # type: ignore[arg-type]

    @property
    def static_embedder(self) -> TextEmbedder:
        """The static tier's model, loaded on first use."""
        if self._static is None:
            from codesearch.embedding.static import StaticEmbedder

            self._static = StaticEmbedder(self.model)  # type: ignore[arg-type]
        return self._static

    @property
    def embedder(self) -> TextEmbedder:
        """The transformer, loaded on first use."""
        if self._full is None:
            from codesearch.embedding.transformer import Embedder

            self._full = Embedder(self.model, int8=self.int8)  # type: ignore[arg-type]
        return self._full

    def _check_model(self, manifest: CorpusManifest, tiers: Sequence[Tier]) -> None:
        """Refuse another model than the corpus's: by name before anything is loaded, then by fingerprint.

        Raises:
            ModelMismatchError: the corpus was built by another model (or export of it).
        """
        if manifest.model != self.model_name:
            raise ModelMismatchError(
                f"the corpus at {self.store.uri} was built with model {manifest.model!r}, not {self.model_name!r}; "
                f"use --model {manifest.model}, or build another corpus for {self.model_name!r}")
        for tier in tiers:
            stored = manifest.static if tier == STATIC else manifest.full
            embedder = self.static_embedder if tier == STATIC else self.embedder
            if stored is not None and stored.fingerprint != embedder.fingerprint:
                raise ModelMismatchError(
                    f"the corpus at {self.store.uri} holds {tier} vectors of another export of {manifest.model!r} "
                    f"(fingerprint {stored.fingerprint[:12]}, this one is {embedder.fingerprint[:12]}: other export "
                    "options such as --fp32, or other library versions); use the corpus's, or build another corpus")

    # -- building ---------------------------------------------------------------------------

    def build(self, paths: Iterable[str | os.PathLike[str]], ray_address: str | None = None, *,
              tier: Tier = STATIC, actors: int | None = None) -> CorpusReport:
        """Add repositories to the corpus (creating it), or bring those already in it up to date.

        Args:
            paths: repository folders, ``PATH`` (named by its folder) or ``NAME=PATH``.
            ray_address: a Ray cluster's ``HOST:PORT`` (or ``auto``); ``None`` starts a local Ray for the call.
            tier: ``static`` (keywords and static vectors: what semble's index costs) or ``full`` (the
                transformer's vectors too, about five times the compute; on GPUs where Ray has them).
            actors: the actor pool's size (default: the cluster's CPUs; its GPUs for the full tier where there are).

        Raises:
            RootNotFoundError: a path is missing.
            ValueError: a bad name or tier.
            CorpusNotFoundError: the URI holds something that is not a corpus.
            ModelMismatchError: the corpus was built by another model.
            ClusterUnavailableError: the Ray address cannot be reached.
        """
        return self._run(parse_paths(paths), ray_address, tier, actors, refresh=False)

    def refresh(self, paths: Iterable[str | os.PathLike[str]] | None = None, ray_address: str | None = None, *,
                tier: Tier | None = None, actors: int | None = None) -> CorpusReport:
        """Bring repositories of the corpus up to date with their folders: only files whose stats changed are read,
        only those whose sha256 changed are cut, only chunk texts without vectors are embedded, and only changed rows
        are written. Repositories whose files' stats are all unchanged are skipped, and a small refresh
        (:data:`IN_PROCESS_BYTES`) runs in this process without Ray.

        Args:
            paths: repositories of the corpus (``PATH``, ``NAME=PATH``, or a ``NAME`` of the corpus, refreshed
                from the folder it was built from); ``None`` refreshes every one.
            tier: ``full`` adds the transformer's vectors to rows without them; default: each repository's tier.
            ray_address, actors: as for :meth:`build`.

        Raises:
            RepositoryNotInCorpusError: a repository is not in the corpus.
            CorpusNotFoundError: there is no corpus at the URI.
            (and as :meth:`build`)
        """
        manifest = self.store.manifest()
        if paths is None:
            items = [(name, facts.root) for name, facts in sorted(manifest.repos.items())]
        else:
            given = [os.fspath(p) for p in paths]
            # A repository of the corpus may be named alone: it is refreshed from the folder it was built from.
            items = [(p, manifest.repos[p].root) for p in given if p in manifest.repos and not Path(p).is_dir()]
            items += parse_paths([p for p in given if not (p in manifest.repos and not Path(p).is_dir())]) \
                if len(items) < len(given) else []
            unknown = [name for name, _ in items if name not in manifest.repos]
            if unknown:
                raise RepositoryNotInCorpusError(f"{unknown[0]!r} is not in the corpus at {self.store.uri} "
                                                 f"(it holds {_some(manifest.repos)}); add it with `corpus build`")
        if tier is None:
            tier = FULL if any(manifest.repos[name].tier == FULL for name, _ in items) else STATIC
        return self._run(items, ray_address, tier, actors, refresh=True)

    def _run(self, items: list[tuple[str, str]], ray_address: str | None, tier: Tier, actors: int | None,
             refresh: bool) -> CorpusReport:
        started, cpu_before = time.perf_counter(), cpu_seconds()
        if tier not in CORPUS_TIERS:
            raise ValueError(f"unknown tier {tier!r}; a corpus has {' or '.join(CORPUS_TIERS)}")
        if ray_address is not None:
            preflight(ray_address)  # before any model is loaded or byte written
        self.store.check_creatable()
        manifest = self.store.manifest(fresh=True) if self.store.exists() else None
        if manifest is not None:
            self._check_model(manifest, [STATIC, FULL] if tier == FULL else [STATIC])
        static = self.static_embedder
        full = self.embedder if tier == FULL else None
        full_dim = full.dim if full is not None else (manifest.full.dim if manifest and manifest.full else
                                                      _catalogue_dim(self.model))
        if manifest is None:
            manifest = CorpusManifest(
                model=self.model_name, static=TierFacts(str(static.spec.name), static.fingerprint, static.dim),
                full=None, chunker={"kind": "definitions", **asdict(ChunkParams.for_chunking("definitions"))})
        if full is not None and manifest.full is None:
            manifest.full = TierFacts(str(full.spec.name), full.fingerprint, full.dim)
        report = CorpusReport(repos=len(items), tier=tier)
        with self.store.writer() as writer:
            spec = WorkerSpec(
                model=self.model, static=self._static if not _distilled(self._static) else None, int8=self.int8,
                tier=tier, chunking="definitions", chunk_params=ChunkParams.for_chunking("definitions"),
                max_file_bytes=MAX_FILE_BYTES, static_dim=static.dim, full_dim=full_dim,
                model_fp=_model_fp(manifest), store_uri=self.store.uri,
                storage_options=self.store.storage_options, versions=dict(writer.versions),
                exclude_dirs=() if self.store.remote else (self.store.uri,))
            work: list[WorkItem] = [(name, root, None) for name, root in items]
            sizes: dict[str, int] = {}
            here = False
            if refresh:
                work, sizes, here = self._plan(items, spec, writer, manifest, tier, ray_address, report)
            began, cpu_began = time.perf_counter(), cpu_seconds()
            schema = chunk_schema(spec.static_dim, spec.full_dim)
            has_full, always = manifest.full is not None, not refresh
            touched: list[str] = []
            if work and here:
                local = replace(spec, static=static, model=full if full is not None else spec.model)
                touched = self._stream(run_in_process(work, local), len(work), report, writer, schema)
            elif work:
                with ThreadPoolExecutor(1) as pool:
                    # A build's repositories are walked for their sizes while Ray starts (a refresh's are known).
                    sizing = None if refresh else pool.submit(text_bytes, [(n, r) for n, r, _ in work], spec)
                    with ray_session(ray_address) as ray:
                        if sizing is not None:
                            sizes = sizing.result()
                            work = largest_first(work, sizes)
                        report.ray = True
                        report.actors = actors or int(ray.cluster_resources().get("CPU", 1))
                        touched = self._stream(run_pipeline(ray, bundles([(n, r) for n, r, _ in work], sizes), spec,
                                                            report.actors), len(work), report, writer, schema)
                        _pipeline_done(report, began, cpu_began)
                        self._optimize(report, writer, has_full, always, ray)
                        self._fit_keywords(report, writer, touched, ray)
            if not report.ray:
                _pipeline_done(report, began, cpu_began)
                self._optimize(report, writer, has_full, always, None)
                self._fit_keywords(report, writer, touched, None)
            for name, root in items:
                manifest.repos.setdefault(name, RepoFacts(root=root)).root = root
            self._record(writer, manifest, items, tier)
            manifest.versions = dict(writer.versions)
            self.store.write_manifest(manifest)
            if writer.versions != writer.pinned:
                cleaning = time.perf_counter()
                try:
                    report.cleaned_bytes = writer.cleanup()
                except OSError as exc:  # the run is committed; the next one cleans up
                    logger.warning("codesearch: the corpus at %s is committed, but removing old versions failed: %s",
                                   self.store.uri, exc)
                report.cleanup_s = round(time.perf_counter() - cleaning, 3)
        report.file_rows = writer.rows_written[FILES] + writer.rows_deleted[FILES]
        report.files = sum(manifest.repos[name].files for name, _ in items)
        report.chunks = sum(manifest.repos[name].chunks for name, _ in items)
        report.seconds = round(time.perf_counter() - started, 3)
        report.driver_peak_rss_mb = peak_rss_mb()
        report.driver_cpu_s = round(cpu_seconds() - cpu_before, 3)
        self.last_report = report
        self._views.clear()
        self._keys = None  # the table's keys of the version before (read again by the next org-wide search)
        return report

    def _optimize(self, report: CorpusReport, writer: Writer, has_full: bool, always: bool, ray: Any) -> None:
        """Compaction and the indexes (:meth:`~codesearch.corpus.store.Writer.optimize`): in a Ray task when Ray
        runs, since an index build's memory grows with the table (2.1 GB at 1M rows) and the driver's should not;
        here otherwise (a refresh small enough to run here rarely optimizes)."""
        began = time.perf_counter()
        if ray is None:
            report.optimized = writer.optimize(has_full=has_full, always=always)
        else:
            task = ray.remote(num_cpus=1)(optimize_store)
            report.optimized, versions = ray.get(task.remote(self.store.uri, self.store.storage_options,
                                                             dict(writer.versions), has_full, always))
            writer.versions.update(versions)
        report.optimize_s = round(time.perf_counter() - began, 3)

    def _fit_keywords(self, report: CorpusReport, writer: Writer, repos: list[str], ray: Any) -> None:
        """Fit the BM25 of each repository whose chunks changed on its rows as committed, and commit the fits to the
        keywords table (:func:`~codesearch.corpus.keywords.fit_keywords`), replacing their old ones: in Ray tasks,
        a share of the repositories per actor, when Ray runs (each fit reads its repository's terms again)."""
        if not repos:
            return
        began = time.perf_counter()
        store, version = self.store, writer.versions[CHUNKS]
        if ray is None:
            fragments = fit_keywords(store.uri, store.storage_options, version, repos)
        else:
            task = ray.remote(num_cpus=1)(fit_keywords)
            shares = [repos[i::max(1, report.actors)] for i in range(min(max(1, report.actors), len(repos)))]
            fragments = [f for part in ray.get([task.remote(store.uri, store.storage_options, version, share)
                                                for share in shares]) for f in part]
        writer.delete(KEYWORDS, sql_in("repo", repos))
        writer.append(KEYWORDS, fragments, KEYWORD_SCHEMA)
        writer.compact(KEYWORDS, KEYWORD_FRAGMENTS)
        report.keywords_s = round(time.perf_counter() - began, 3)

    def _plan(self, items: list[tuple[str, str]], spec: WorkerSpec, writer: Writer, manifest: CorpusManifest,
              tier: Tier, ray_address: str | None, report: CorpusReport) -> tuple[list[WorkItem], dict[str, int], bool]:
        """The repositories a refresh must run, each with its walk, their bytes to read, and whether they are small
        enough to run in this process (:data:`IN_PROCESS_BYTES`); the others are unchanged by their files' stats
        and skipped.

        A repository being given the transformer's vectors always runs (on Ray:
        it embeds every chunk), and so does one whose folder this machine does not
        have while a cluster is named (its actors walk it there).

        Raises:
            RootNotFoundError: a repository's folder is gone (with a local Ray).
        """
        names = [name for name, _ in items]
        known = known_stats(writer.read(FILES, ["repo", "path", "size", "mtime_ns"], sql_in("repo", names)))
        elsewhere = [(n, r) for n, r in items if ray_address is not None and not Path(r).is_dir()]
        changes = stat_pass([(n, r, spec.list(r)) for n, r in items if (n, r) not in elsewhere], known)
        upgrading = {n for n in names if tier == FULL and manifest.repos[n].tier != FULL}
        run = [c for c in changes if c.changed or c.repo in upgrading]
        report.unchanged_repos = len(changes) - len(run)
        here = not upgrading and not elsewhere and sum(c.read_bytes for c in run) <= IN_PROCESS_BYTES[tier]
        # Largest first, so no large repository is left to one actor at the end (the unknown ones lead).
        sizes = {c.repo: c.read_bytes for c in run}
        work = largest_first([(c.repo, c.root, c.listing) for c in run] + [(n, r, None) for n, r in elsewhere], sizes)
        return work, sizes, here

    def _stream(self, results: Iterable[RepoResult], total: int, report: CorpusReport, writer: Writer,
                schema: pa.Schema) -> list[str]:
        """Commit each repository of ``results`` to the tables as it is finished, ``FLUSH_ROWS`` rows at a time;
        the repositories whose chunks changed."""
        from tqdm.auto import tqdm

        touched: list[str] = []
        done: list[RepoResult] = []
        buffered = 0
        bar = tqdm(total=total, desc="repositories", unit="repo", disable=not self.progress)
        began, cpu_began = time.perf_counter(), cpu_seconds()
        first_begun = math.inf
        try:
            for result in results:
                done.append(result)
                payload = result.payload
                first_begun = min(first_begun, payload.get("began_at", math.inf))
                report.work_s = round(max(time.time() - first_begun, 0.0), 3) if first_begun < math.inf else 0.0
                if payload["inserted"] or payload["delete_ids"]:
                    touched.append(result.repo)
                buffered += payload["inserted"] + payload["updated"]
                report.inserted += payload["inserted"]
                report.updated += payload["updated"]
                report.deleted += len(payload["delete_ids"])
                report.embedded_static += payload["embedded_static"]
                report.embedded_full += payload["embedded_full"]
                report.changed_files += payload["cut_files"]
                report.hashed_files += payload["hashed_files"]
                worker = report.workers.setdefault(str(payload["pid"]), {"repos": 0, "chunks": 0, "cpu_s": 0.0,
                                                                         "peak_rss_mb": 0.0})
                worker["repos"] += 1
                worker["chunks"] += payload["inserted"]
                worker["cpu_s"] = round(worker["cpu_s"] + payload["cpu_s"], 3)
                worker["process_cpu_s"] = payload["process_cpu_s"]  # model loading included
                worker["peak_rss_mb"] = max(worker["peak_rss_mb"], payload["peak_rss_mb"])
                bar.update(1)
                bar.set_postfix(chunks=report.inserted)
                if buffered >= FLUSH_ROWS:
                    _flush(writer, done, schema)
                    done, buffered = [], 0
            _flush(writer, done, schema)
            report.stream_s = round(time.perf_counter() - began, 3)
            report.driver_stream_cpu_s = round(cpu_seconds() - cpu_began, 3)
        finally:
            bar.close()
        return touched

    def _record(self, writer: Writer, manifest: CorpusManifest, items: list[tuple[str, str]], tier: Tier) -> None:
        """Each repository's counts of text files and chunks, from the files table as this run left it (binary
        files, recorded with null ``chunks``, are not counted: ``count`` counts values, not nulls)."""
        names = [name for name, _ in items]
        table = writer.read(FILES, ["repo", "chunks"], sql_in("repo", names))
        grouped = table.group_by("repo").aggregate([("chunks", "sum"), ("chunks", "count")]) if table.num_rows else None
        counts = {}
        if grouped is not None:
            counts = {r: (int(n), int(c or 0)) for r, c, n in zip(grouped["repo"].to_pylist(), grouped["chunks_sum"].to_pylist(),
                                                          grouped["chunks_count"].to_pylist())}
        from codesearch.corpus.store import _now

        for name in names:
            facts = manifest.repos[name]
            facts.files, facts.chunks = counts.get(name, (0, 0))
            facts.tier = tier if tier == FULL or facts.tier != FULL else FULL
            facts.updated = _now()

    # -- searching ----------------------------------------------------------------------------

    @property
    def repos(self) -> list[str]:
        """The repositories in the corpus, by name."""
        return sorted(self.store.manifest().repos)

    def search(self, query: str, k: int = 10, repos: str | Iterable[str] | None = None, mode: Mode = "hybrid", *,
               scope: str | None = None, include: str | Iterable[str] = (), exclude: str | Iterable[str] = (),
               kinds: str | Iterable[str] | None = None, exclude_kinds: str | Iterable[str] = (),
               tier: Tier | None = None, exact: bool = False) -> list[Hit]:
        """The ``k`` chunks of the corpus that best answer ``query``, each hit with its ``repo``.

        Args:
            query: words, a question, or an identifier.
            k: how many hits.
            repos: the repositories to search (a name or several); ``None`` searches them all.
            mode: ``bm25``, ``dense`` or ``hybrid``.
            scope, include, exclude, kinds, exclude_kinds: as :meth:`codesearch.CodeSearch.search`, applied in
                every repository searched, before the cut.
            tier: ``static`` answers from the static tier even where the transformer's vectors are there;
                ``None`` uses the transformer's where every repository searched has them.
            exact: across repositories, score vectors exactly instead of through the vector index.

        A search of one repository ranks exactly as a single index of it would
        (its own BM25 statistics, every chunk scored); across repositories the
        candidates come from the vector and full-text indexes, and the same
        ranking stages order them.

        Raises:
            ValueError: an unknown mode or kind, an empty query, or ``k`` below 1.
            RepositoryNotInCorpusError: a repository that is not in the corpus.
            CorpusNotFoundError: there is no corpus at the URI.
            ModelMismatchError: the corpus was built by another model.
        """
        check_search(query, k, mode)
        where = Scope.of(scope, include, exclude, kinds, exclude_kinds)
        manifest = self.store.manifest()
        names = self._names(manifest, repos)
        version = manifest.versions[CHUNKS]
        if tier not in (None, *CORPUS_TIERS):
            raise ValueError(f"unknown tier {tier!r}; a corpus has {' or '.join(CORPUS_TIERS)}")
        if len(names) == 1:
            return self._search_one(manifest, names[0], version, query, k, mode, where, tier)
        if mode == "bm25":
            tier = None
        elif tier is None:
            full = manifest.full is not None and all(manifest.repos[n].tier == FULL for n in names) and \
                where.allows_kind("source") | where.allows_kind("doc") | where.allows_kind("config")
            tier = FULL if full else STATIC
        if tier is not None:
            self._check_model(manifest, [tier])
        vector = self._query_vector(tier, query) if tier is not None else None
        chunks = self.store.open(CHUNKS, version)
        assert chunks is not None
        scoped = None if repos is None else names
        source = CorpusSource(chunks, self._file_set(manifest, scoped), scoped, exact=exact, keys=self._keys)
        self._keys = source.keys
        found = source.rank(query, mode, tier, vector, self.ranking, k, where)
        return [_hit(found.rows[i], score, found.rows[i]["text"]) for i, score in found.ranked]

    def _names(self, manifest: CorpusManifest, repos: str | Iterable[str] | None) -> list[str]:
        if repos is None:
            return sorted(manifest.repos)
        names = list(dict.fromkeys(as_strings(repos)))
        unknown = [n for n in names if n not in manifest.repos]
        if unknown:
            raise RepositoryNotInCorpusError(f"{unknown[0]!r} is not in the corpus at {self.store.uri}; "
                                             f"it holds {_some(manifest.repos)}")
        if not names:
            raise ValueError("repos is empty; name a repository of the corpus, or pass None for all")
        return names

    def _query_vector(self, tier: Tier, query: str) -> np.ndarray | None:
        embedder = self.embedder if tier == FULL else self.static_embedder
        vector = np.asarray(embedder.embed_query(query), dtype=np.float32)
        return vector if np.any(vector) else None

    def view(self, repo: str, version: int | None = None, *, vectors: bool = False,
             manifest: CorpusManifest | None = None) -> RepoView:
        """The repository ``repo`` as a single index would hold it (read once per corpus version, then cached).

        ``vectors``: read the transformer's vectors with the rest (the query
        that opens the view will rank on that tier); otherwise they are read
        when a query of that tier first comes. One scan instead of two: 4-6 ms
        less on a repository's first transformer query at 1M rows. ``manifest``: the one the caller read (a
        bucket's is read again otherwise).
        """
        manifest = self.store.manifest() if manifest is None else manifest
        version = manifest.versions[CHUNKS] if version is None else version
        key = (repo, version)
        found = self._views.get(key)
        if found is not None:
            return found
        chunks = self.store.open(CHUNKS, version)
        assert chunks is not None
        in_repo = f"repo = {sql_string(repo)}"
        fits = None
        if version == manifest.versions[CHUNKS] and KEYWORDS in manifest.versions:
            if self._fits is None or self._fits.ds.version != manifest.versions[KEYWORDS]:
                table = self.store.open(KEYWORDS, manifest.versions[KEYWORDS])
                assert table is not None
                self._fits = StoredFits(table)
            fits = self._fits
        has_full = manifest.repos[repo].tier == FULL
        columns = ["chunk_id", "path", "start_line", "end_line", "ordinal", "kind", "symbols", "read", "static_vector"]
        if vectors and has_full:
            columns.append("vector")
        full_dim = manifest.full.dim if manifest.full else _catalogue_dim(self.model)

        def read(with_terms: bool) -> pa.Table:
            return chunks.to_table(columns=[*columns, "keyword_text"] if with_terms else columns, filter=in_repo,
                                   with_row_id=True)

        # The stored fit (written by the writer) is read beside the rows, so the rows' terms are not read; a corpus
        # written before it, or a fit that is not the rows', is fitted here from a second read with the terms.
        # Side by side, a cold view of one repository at 1M rows costs 4-5 ms less.
        pending = read_pool().submit(fits.get, repo) if fits is not None else None
        rows = read(with_terms=pending is None)
        keywords = pending.result() if pending is not None else None
        try:
            view = RepoView(repo, rows, manifest.static.dim, full_dim, keywords, chunks, has_full)
        except StaleKeywords:
            view = RepoView(repo, read(with_terms=True), manifest.static.dim, full_dim, None, chunks, has_full)
        self._views.put(key, view)
        return view

    def _search_one(self, manifest: CorpusManifest, repo: str, version: int, query: str, k: int, mode: Mode,
                    where: Scope, tier: Tier | None) -> list[Hit]:
        if not manifest.repos[repo].chunks:
            return []  # nothing to rank (a repository of binary files alone, or emptied)
        wants_full = mode != "bm25" and tier != STATIC
        view = self.view(repo, version, vectors=wants_full, manifest=manifest)
        mask = view.scope_mask(where)
        vector = None
        if mode == "bm25":
            tier = None
        else:
            tier = STATIC if tier == STATIC else view.tier_for(mask)
            self._check_model(manifest, [tier])
            vector = self._query_vector(tier, query)
        ranked = view.rank(query, mode, tier, vector, self.ranking, k, mask)
        texts = view.text_of([i for i, _ in ranked])
        self._views.resized((repo, version))
        return [Hit(view.paths[int(view.file_of[i])], int(view.start[i]), int(view.end[i]), float(score),
                    view.kinds[i], text, tuple(view.symbols[i] or ()), repo=repo)
                for (i, score), text in zip(ranked, texts)]

    def _file_set(self, manifest: CorpusManifest, repos: list[str] | None) -> FileSet:
        """The files (with chunks) of ``repos`` (``None``: all), numbered; cached per files-table version."""
        version = manifest.versions[FILES]
        key = (version, None if repos is None else tuple(sorted(repos)))
        found = self._files.get(key)
        if found is None:
            files = self.store.open(FILES, version)
            assert files is not None
            table = files.to_table(columns=["repo", "path"], filter=_and_repos(repos, "chunks > 0"))
            if len(self._files) > 8:
                self._files.clear()
            found = self._files[key] = FileSet(table["repo"].to_pylist(), table["path"].to_pylist())
        return found

    # -- facts ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The corpus: its URI, models and fingerprints, tier, counts, versions, and every repository's facts.

        Raises:
            CorpusNotFoundError: there is no corpus at the URI.
        """
        manifest = self.store.manifest()
        repos = {name: asdict(facts) for name, facts in sorted(manifest.repos.items())}
        tiers = {facts.tier for facts in manifest.repos.values()}
        return {
            "store": self.store.uri, "model": manifest.model,
            "static": asdict(manifest.static), "full": asdict(manifest.full) if manifest.full else None,
            "tier": FULL if tiers == {FULL} else STATIC,
            "repos": len(repos), "files": sum(r["files"] for r in repos.values()),
            "chunks": sum(r["chunks"] for r in repos.values()), "versions": manifest.versions,
            "updated": manifest.updated, "repositories": repos,
        }


def _and_repos(repos: list[str] | None, extra: str) -> str:
    return extra if repos is None else f"({sql_in('repo', repos)}) AND ({extra})"


def _flush(writer: Writer, results: list[RepoResult], schema: pa.Schema) -> None:
    """Commit finished repositories: the fragments their workers wrote, their deletions, the rows given the
    transformer's vectors (replaced in place), then their file rows."""
    if not results:
        return
    # New rows have ids the corpus does not hold (an id names its repository, path, lines and text): appended.
    writer.append(CHUNKS, [f for r in results for f in r.fragments], schema)
    deleted = [i for r in results for i in r.payload["delete_ids"]]
    writer.delete(CHUNKS, sql_in("chunk_id", deleted) if deleted else None)
    updates = [t for r in results for t in r.updates]
    if updates:
        writer.merge(CHUNKS, "chunk_id", pa.concat_tables(updates).select(schema.names).cast(schema), None)
    files: dict[str, list[Any]] = {name: [] for name in FILE_SCHEMA.names}
    removed = []
    for result in results:
        for path, sha256, size, chunks, mtime_ns in result.payload["files"]:
            for name, value in zip(FILE_SCHEMA.names, (result.repo, path, sha256, size, chunks, mtime_ns)):
                files[name].append(value)
        if result.payload["removed_files"]:
            removed.append(f"(repo = {sql_string(result.repo)} AND {sql_in('path', result.payload['removed_files'])})")
    writer.merge(FILES, ["repo", "path"], pa.table(files, schema=FILE_SCHEMA), " OR ".join(removed) or None)


def _hit(row: dict[str, Any], score: float, text: str) -> Hit:
    return Hit(row["path"], int(row["start_line"]), int(row["end_line"]), float(score), row["kind"], text,
               tuple(row["symbols"] or ()), repo=row["repo"])


def _some(repos: Iterable[str]) -> str:
    names = sorted(repos)
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "") if names else "none"


def _catalogue_dim(model: Any) -> int:
    """The transformer's vector size before it is loaded: the catalogue's, else the embedder's."""
    if hasattr(model, "dim"):
        return int(model.dim)
    dim = resolve_model(model).dim
    return int(dim) if dim else 384


def _distilled(static: Any) -> bool:
    return static is None or not hasattr(static, "embed_documents") or type(static).__name__ == "StaticEmbedder"


def _model_fp(manifest: CorpusManifest) -> str:
    return manifest.static.fingerprint[:16] + (":" + manifest.full.fingerprint[:16] if manifest.full else "")


__all__ = ["CORPUS_TIERS", "FLUSH_ROWS", "Corpus", "CorpusReport", "parse_paths"]
