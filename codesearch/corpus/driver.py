"""The build and refresh driver: which repositories run, where (Ray, or this process), and their commits.

:class:`Driver` plans a run (a refresh's stat pass first: :mod:`codesearch.corpus.changes`),
starts the actors on Ray (:mod:`codesearch.corpus.build`; or, for a refresh
too small to pay for Ray, the same worker in this process), commits each
repository as it finishes (:class:`~codesearch.corpus.store.Writer`), then
compacts and indexes the table (:mod:`codesearch.corpus.indexes`), fits the
changed repositories' BM25 (:func:`~codesearch.corpus.keywords.fit_keywords`),
records the sha256 of the files its commits wrote (:mod:`codesearch.corpus.integrity`)
and writes the manifest. :class:`CorpusReport` says what it did.
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
from codesearch.corpus.integrity import read_checksums, record, remove_sidecars, write_checksums
from codesearch.corpus.keywords import fit_keywords
from codesearch.corpus.lease import store_unavailable
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
from codesearch.corpus.store import CorpusStore, Writer, checkpoint, now, optimize_store
from codesearch.exceptions import CodeSearchError, RootNotFoundError
from codesearch.files.scan import Listing
from codesearch.files.walk import MAX_FILE_BYTES
from codesearch.index.tiers import Tiers
from codesearch.types import FULL, STATIC, Tier

logger = logging.getLogger(__name__)

WorkItem = tuple[str, str, Listing | None]
"""A repository to run: its name, its folder, and its walk when the driver made one."""

FLUSH_ROWS = 20_000
"""Rows of finished repositories (written by the workers as fragments) the driver commits at a time: a commit per
repository would make a version each, and rewrite a manifest that lists every fragment."""
KEYWORD_FRAGMENTS = 16
"""The keywords table is compacted once it has more fragments than this (each refresh adds one, and deletes rows
from others; the first scoped query of a process reads every fragment's names)."""
CORPUS_TIERS = (STATIC, FULL)
IN_PROCESS_BYTES = {STATIC: 8 << 20, FULL: 1 << 20}
"""Bytes of files to read (changed, added, or with unknown stats) up to which a refresh runs in this process instead
of on Ray. Starting a local Ray and its actors costs 5-8 s; this process cut and embedded (static tier) 2 MB of
edited Java, every chunk's text new, in 0.9 s, where Ray took 8.8 s (2 cores, measured): 8 MiB is about the
start's price. The transformer embeds several times slower, so the full tier stays here for less."""


@dataclass
class CorpusReport:
    """What one :meth:`Corpus.build` or :meth:`Corpus.refresh` did (``as_dict`` for JSON); each figure says its own."""

    repos: int = 0
    """Repositories built or refreshed."""
    files: int = 0
    """Their text files now."""
    changed_files: int = 0
    """Of them, those read and cut again."""
    chunks: int = 0
    """Their chunks now."""
    inserted: int = 0
    """Chunk rows written."""
    updated: int = 0
    """Rows given the transformer's vectors in place (a static repository refreshed with ``tier="full"``)."""
    deleted: int = 0
    """Chunk rows removed."""
    embedded_static: int = 0
    embedded_full: int = 0
    """Chunk texts each tier's model embedded (the rest kept their vectors)."""
    file_rows: int = 0
    """Rows written to the files table."""
    hashed_files: int = 0
    """Files read because their stats changed or were unknown (the rest were left unread)."""
    unchanged_repos: int = 0
    """Repositories a refresh skipped: no file added, removed or with other stats."""
    seconds: float = 0.0
    """Wall time."""
    pipeline_s: float = 0.0
    """Of it, the actors' run (their start included) and the commits."""
    ray_start_s: float = 0.0
    """Of that, starting (or joining) Ray."""
    stream_s: float = 0.0
    """The rest, from the first repository handed out to the last one committed (the actors' start and model load
    included)."""
    work_s: float = 0.0
    """Of that, from the first repository an actor began to the last one the driver received (the actors' start left
    out: the steady pace a long build runs at)."""
    optimize_s: float = 0.0
    optimized: bool = False
    """Compaction and indexes (a Ray task when Ray ran), and whether they ran (a small refresh leaves its rows to the
    indexes' flat scan, :meth:`~codesearch.corpus.store.Writer.optimize`)."""
    keywords_s: float = 0.0
    """Fitting and storing the BM25 of the repositories whose chunks changed."""
    checksums_s: float = 0.0
    checksummed_files: int = 0
    checksummed_bytes: int = 0
    """Recording the sha256 of the files the new versions read (:func:`~codesearch.corpus.integrity.record`), and
    the files and bytes hashed for it: those this run's commits wrote (the others' sums are carried over)."""
    cleanup_s: float = 0.0
    cleaned_bytes: int = 0
    """Removing old versions and a failed run's uncommitted files, and their bytes
    (:meth:`~codesearch.corpus.store.Writer.cleanup`; only after a run that committed something)."""
    ray: bool = False
    """Whether Ray ran the work (false: done in this process, or nothing to do)."""
    actors: int = 0
    """The actor pool's size."""
    tier: str = STATIC
    """The tier the repositories now have."""
    driver_peak_rss_mb: float = 0.0
    """This process's peak memory."""
    driver_cpu_s: float = 0.0
    """Its CPU seconds in this call (Lance's index builds included)."""
    driver_pipeline_cpu_s: float = 0.0
    """Of them, while the actors ran (Ray's start included)."""
    driver_stream_cpu_s: float = 0.0
    """Of those, during ``stream_s``."""
    driver_pipeline_peak_mb: float = 0.0
    """Its peak memory before the indexes were built."""
    workers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per actor process (this one when in process): its repositories, chunks written, peak memory (MB) and CPU
    seconds spent on its repositories (``cpu_s``)."""

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


def check_models(tiers: Tiers, manifest: CorpusManifest, which: Sequence[Tier]) -> None:
    """Refuse another model than the corpus's: by name before anything is loaded, then by fingerprint per tier of
    ``which`` (:meth:`~codesearch.index.tiers.Tiers.check`).

    Raises:
        ModelMismatchError: the corpus was built by another model (or export of it).
    """
    tiers.check_name(manifest.model)
    for tier in which:
        if tier == STATIC:
            tiers.check(manifest.static, STATIC, tiers.static_embedder)
        else:
            tiers.check(manifest.full, FULL, tiers.embedder)


class Driver:
    """One build or refresh of a corpus's repositories.

    Args:
        store: the corpus's store.
        tiers: its models (loaded when the run needs them; the actors load their own from ``tiers.model``, or are
            handed the embedders given).
        progress: show progress bars.
    """

    def __init__(self, store: CorpusStore, tiers: Tiers, progress: bool) -> None:
        self.store, self.tiers, self.progress = store, tiers, progress

    def run(self, items: list[tuple[str, str]], ray_address: str | None, tier: Tier, actors: int | None,
            refresh: bool) -> CorpusReport:
        """Build (``refresh`` false: every repository of ``items`` is run) or refresh (those whose files' stats
        changed) the repositories ``items`` (name, root) at ``tier``; what it did.

        Raises:
            ValueError: an unknown tier.
            ModelMismatchError: the corpus was built by another model.
            ClusterUnavailableError: the Ray address cannot be reached.
            RootNotFoundError: a repository's folder is gone (a refresh with a local Ray).
            CorpusStoreError: the object store of a corpus in a bucket did not answer (nothing past the last
                manifest was made current).
        """
        try:
            return self._run(items, ray_address, tier, actors, refresh)
        except CodeSearchError:
            raise
        except (OSError, ValueError) as exc:  # Lance's I/O errors are either (opening a dataset: ValueError)
            if not self.store.remote or (isinstance(exc, ValueError) and "LanceError(IO)" not in str(exc)):
                raise
            raise store_unavailable(self.store.uri, exc) from None

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
            check_models(self.tiers, manifest, [STATIC, FULL] if tier == FULL else [STATIC])
        # The sums the new ones carry over (a damaged or missing sidecar stops the run before it writes anything).
        previous_sums = read_checksums(self.store, manifest) if manifest is not None else None
        previous_sidecar = manifest.checksums if manifest is not None else None
        static = self.tiers.static_embedder
        full = self.tiers.embedder if tier == FULL else None
        full_dim = full.dim if full is not None else (manifest.full.dim if manifest and manifest.full else
                                                      self.tiers.transformer_dim())
        if manifest is None:
            manifest = CorpusManifest(
                model=str(self.tiers.model_name), static=TierFacts(str(static.spec.name), static.fingerprint, static.dim),
                full=None, chunker={"kind": "definitions", **asdict(ChunkParams.for_chunking("definitions"))})
        if full is not None and manifest.full is None:
            manifest.full = TierFacts(str(full.spec.name), full.fingerprint, full.dim)
        report = CorpusReport(repos=len(items), tier=tier)
        with self.store.writer() as writer:
            spec = WorkerSpec(
                model=self.tiers.model, static=None if _distilled(self.tiers.given_static) else self.tiers.given_static,
                int8=self.tiers.int8,
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
            summing = time.perf_counter()
            sums, report.checksummed_files, report.checksummed_bytes = record(self.store, writer.versions,
                                                                              previous_sums)
            manifest.checksums = write_checksums(self.store, sums)
            checkpoint("checksums")
            report.checksums_s = round(time.perf_counter() - summing, 3)
            self.store.write_manifest(manifest)
            if writer.versions != writer.pinned:
                cleaning = time.perf_counter()
                try:
                    report.cleaned_bytes = writer.cleanup()
                    remove_sidecars(self.store, [manifest.checksums, previous_sidecar])
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
        for name in names:
            facts = manifest.repos[name]
            facts.files, facts.chunks = counts.get(name, (0, 0))
            facts.tier = tier if tier == FULL or facts.tier != FULL else FULL
            facts.updated = now()


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


def _distilled(static: Any) -> bool:
    return static is None or not hasattr(static, "embed_documents") or type(static).__name__ == "StaticEmbedder"


def _model_fp(manifest: CorpusManifest) -> str:
    return manifest.static.fingerprint[:16] + (":" + manifest.full.fingerprint[:16] if manifest.full else "")


__all__ = ["CORPUS_TIERS", "FLUSH_ROWS", "IN_PROCESS_BYTES", "KEYWORD_FRAGMENTS", "CorpusReport", "Driver",
           "WorkItem", "check_models", "largest_first", "parse_paths", "text_bytes"]
