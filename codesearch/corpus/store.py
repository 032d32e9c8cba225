"""The corpus on disk (or in a bucket): its manifest, its Lance datasets at pinned versions, and its one writer.

:class:`CorpusStore` alone touches Lance and the store's files. Readers open
each dataset at the version ``corpus.json`` names (:meth:`CorpusStore.open`);
the writer (:meth:`CorpusStore.writer`) takes a lock, rolls back whatever a
killed run committed after the manifest (Lance keeps every version, so the
pinned one is restored), commits the fragments the actors wrote
(:func:`write_fragments`, :meth:`Writer.append`), deletes removed chunks, merges
file rows and upgraded chunk rows with ``merge_insert`` and, once everything is
committed, replaces the manifest. Concurrent ``merge_insert`` calls can
duplicate rows in current Lance (lance#4585), so there is one writer: a lock
file for a local store (:mod:`codesearch._lock`), a lease in an S3 bucket
(:mod:`codesearch.corpus.lease`, on S3's conditional writes, which it checks
the store has); for ``gs://`` and ``az://`` the caller runs one writer at a time.

Once the manifest names the new versions the writer removes the versions
neither it nor the previous manifest names (:meth:`Writer.cleanup`), and data
files a failed or killed run wrote but never committed.

``CODESEARCH_CORPUS_KILL_AT`` makes the writer kill its own process with SIGKILL
right after the commit it names (``chunks-append``, ``chunks-delete``,
``chunks-merge``, ``files-merge``, ``files-delete``, ``keywords-delete``, ``keywords-compact``,
``keywords-append``, ``checksums`` (the sidecar of the files' sha256 written, the manifest not yet) or
``manifest``): how the tests kill a build or refresh at a chosen point; ``CODESEARCH_CORPUS_STOP_AT`` stops it
there instead (SIGSTOP), and a worker at the start of each repository (``repository``), for a test to act on the
store or the cluster meanwhile.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from codesearch._lock import FileLock, LockHeld
from codesearch.corpus.indexes import VECTOR_INDEX, indexes_to_make, make_indexes, within_share
from codesearch.corpus.lease import Lease
from codesearch.corpus.schema import (
    CHUNKS,
    DATASETS,
    FILE_SCHEMA,
    FILES,
    MANIFEST_FILE,
    CorpusManifest,
    ManifestDamaged,
)
from codesearch.exceptions import CorpusCorruptError, CorpusNotFoundError, IndexLockedError

if TYPE_CHECKING:
    import lance

KILL_ENV = "CODESEARCH_CORPUS_KILL_AT"
STOP_ENV = "CODESEARCH_CORPUS_STOP_AT"
REBUILD_CORPUS = "build the corpus again into a new store (`codesearch corpus build NEW_STORE PATH...`)"
"""How a damaged corpus's message ends: a refresh rewrites only what changed on disk, never a damaged file."""
SIDECAR_PREFIX = "checksums-"
"""The sidecars that record the sha256 of a corpus's files (:mod:`codesearch.corpus.integrity`) are named so."""
MANIFEST_READS = 4
"""Reads of a bucket's manifest before one that fails its own sha256 (or is not JSON) is called damaged: a read
racing a writer's replacement can come back torn."""
KEEP_VERSIONS_S = 3600.0
"""A finished build or refresh removes the dataset versions neither its manifest nor the previous one names once
they are this old (:meth:`Writer.cleanup`). Lance keeps every version otherwise, and each compaction rewrites the
table (a 1M-chunk store would grow by its size at every optimize)."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class CorpusStore:
    """A corpus's folder or bucket prefix.

    Args:
        uri: a local folder, or an ``s3://``, ``gs://`` or ``az://`` URI.
        storage_options: passed to Lance for object stores (credentials, region, endpoint).
    """

    def __init__(self, uri: str | os.PathLike[str], storage_options: dict[str, str] | None = None) -> None:
        text = os.fspath(uri)
        self.remote = "://" in text and not text.startswith("file://")
        self.uri = text.rstrip("/") if self.remote else str(Path(text.removeprefix("file://")).expanduser().absolute())
        self.storage_options = storage_options or {}
        self._opened: dict[tuple[str, int], lance.LanceDataset] = {}
        self._manifest: tuple[tuple[int, int, int], CorpusManifest] | None = None
        self._lease: Lease | None = None  # the writer's, while one writes a bucket
        if self.remote:
            from pyarrow import fs

            self._fs, self._root = fs.FileSystem.from_uri(self.uri)
        else:
            self._fs, self._root = None, self.uri

    def __repr__(self) -> str:
        return f"CorpusStore({self.uri!r})"

    def table_uri(self, name: str) -> str:
        return f"{self.uri}/{name}"

    # -- the manifest ----------------------------------------------------------------

    def read_bytes(self, name: str) -> bytes | None:
        """The bytes of file ``name`` at the store's root; ``None`` when there is none."""
        if self._fs is None:
            try:
                return (Path(self._root) / name).read_bytes()
            except FileNotFoundError:
                return None
        try:
            with self._fs.open_input_stream(f"{self._root}/{name}") as stream:
                return bytes(stream.read())
        except FileNotFoundError:  # any other error (throttling, the network) is not "no corpus here"
            return None

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write ``name`` whole: a temporary file moved over it (a rename locally, one PUT in a bucket)."""
        if self._fs is None:
            folder = Path(self._root)
            folder.mkdir(parents=True, exist_ok=True)
            temporary = folder / f".{name}.{os.getpid()}.tmp"
            with open(temporary, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, folder / name)
            return
        with self._fs.open_output_stream(f"{self._root}/{name}") as stream:
            stream.write(data)

    def exists(self) -> bool:
        """Whether a corpus manifest is there."""
        return self.read_bytes(MANIFEST_FILE) is not None

    def check_creatable(self) -> None:
        """Raise unless the URI holds a corpus, nothing, or an empty folder (a build never writes into something else).

        Raises:
            CorpusNotFoundError: the folder holds other files and no corpus manifest.
        """
        if self.exists() or self._fs is not None:
            return
        folder = Path(self._root)
        # What a first build that failed or was killed before its manifest leaves: the writer removes it.
        ours = {".writer.lock", *DATASETS}
        temporary = (f".{MANIFEST_FILE}.", f".{SIDECAR_PREFIX}")
        if folder.exists() and (not folder.is_dir() or any(
                p.name not in ours and not p.name.startswith(SIDECAR_PREFIX)
                and not (p.name.startswith(temporary) and p.name.endswith(".tmp"))
                for p in folder.iterdir())):
            raise CorpusNotFoundError(f"{self.uri} is not a codesearch corpus (it holds other files and no "
                                      f"{MANIFEST_FILE}); give a new or empty folder")

    def manifest(self, fresh: bool = False) -> CorpusManifest:
        """The corpus's manifest: read again only when the file changed (a local store), shared between calls, so
        not to be changed; ``fresh`` reads a copy the caller may change.

        Raises:
            CorpusNotFoundError: there is no corpus at the URI, or the file there is not a corpus manifest.
        """
        stamp = None if fresh else self._stamp()
        if stamp is not None and self._manifest is not None and self._manifest[0] == stamp:
            return self._manifest[1]
        reads = MANIFEST_READS if self.remote else 1
        for attempt in range(reads):
            data = self.read_bytes(MANIFEST_FILE)
            if data is None:
                raise CorpusNotFoundError(f"{self.uri} is not a codesearch corpus (no {MANIFEST_FILE}); "
                                          f"build one with `codesearch corpus build {self.uri} PATH...`")
            try:
                manifest = CorpusManifest.from_json(data.decode("utf-8"))
                break
            except (ManifestDamaged, ValueError, KeyError, TypeError) as exc:
                # A bucket's read of the manifest while a writer replaces it can come back torn (the object's size
                # read, then its bytes: ranged reads of two objects); read whole again before calling it damaged.
                if attempt + 1 < reads:
                    time.sleep(0.05 * (attempt + 1))
                    continue
                if isinstance(exc, ManifestDamaged):
                    raise CorpusCorruptError(f"corpus file {self.uri}/{MANIFEST_FILE} is damaged ({exc}); "
                                             f"{REBUILD_CORPUS}") from None
                raise CorpusNotFoundError(f"{self.uri} is not a codesearch corpus this version reads ({exc})") \
                    from None
        if stamp is not None:
            self._manifest = (stamp, manifest)
        return manifest

    def _stamp(self) -> tuple[int, int, int] | None:
        """The local manifest file's identity and time (a search re-reads it only when it changed); None in a bucket."""
        if self._fs is not None:
            return None
        try:
            info = os.stat(Path(self._root) / MANIFEST_FILE)
        except OSError:
            return None
        return (info.st_ino, info.st_mtime_ns, info.st_size)

    def write_manifest(self, manifest: CorpusManifest) -> None:
        """Make ``manifest`` the corpus (the commit point of a build or refresh).

        Raises:
            IndexLockedError: this writer lost its lease of a bucket (another writer may have begun).
        """
        if self._lease is not None:
            self._lease.check()
        manifest.updated = now()
        self.write_bytes(MANIFEST_FILE, manifest.to_json().encode("utf-8"))
        checkpoint("manifest")

    # -- files -------------------------------------------------------------------------

    def file_sum(self, path: str) -> tuple[int, str]:
        """The size and sha256 (hex) of file ``path`` under the store, read in blocks.

        Raises:
            FileNotFoundError: there is no such file.
            OSError: it cannot be read.
        """
        digest, size = hashlib.sha256(), 0
        with self._open_input(path) as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
        return size, digest.hexdigest()

    def _open_input(self, path: str) -> Any:
        return open(Path(self._root) / path, "rb") if self._fs is None else \
            self._fs.open_input_stream(f"{self._root}/{path}")

    def names(self, prefix: str) -> list[str]:
        """The files at the store's root whose names start with ``prefix``."""
        if self._fs is None:
            folder = Path(self._root)
            return sorted(p.name for p in folder.glob(f"{prefix}*") if p.is_file()) if folder.is_dir() else []
        from pyarrow import fs

        found = self._fs.get_file_info(fs.FileSelector(self._root, allow_not_found=True))
        return sorted(info.base_name for info in found
                      if info.type == fs.FileType.File and info.base_name.startswith(prefix))

    def remove(self, name: str) -> None:
        """Remove file ``name`` at the store's root (nothing when it is not there)."""
        if self._fs is None:
            Path(self._root, name).unlink(missing_ok=True)
            return
        with suppress(FileNotFoundError):
            self._fs.delete_file(f"{self._root}/{name}")

    # -- datasets ----------------------------------------------------------------------

    def version_files(self, name: str, version: int) -> list[str]:
        """The files dataset ``name`` at ``version`` reads, as paths under the store: its manifest, data files,
        deletion files and index files (Lance writes each once and never changes it; transaction files, which no
        reader reads, are left out)."""
        ds = self.open(name, version, cached=False)
        assert ds is not None
        table = ds.tracked_files(min_version=version).read_all()
        return sorted(f"{name}/{path}" for at, path, kind in zip(table["version"].to_pylist(), table["path"].to_pylist(),
                                                                 table["type"].to_pylist())
                      if at == version and kind != "transaction file")


    def open(self, name: str, version: int | None, cached: bool = True) -> lance.LanceDataset | None:
        """Dataset ``name`` at ``version`` (``None``: there is none yet), opened once per version (``cached``; a
        writer changing it opens its own handle, which Lance moves to the version it commits).

        A version never changes, and the handle keeps Lance's caches (index
        partitions, metadata) warm: opened anew per query, the 1M-row corpus's
        vector index was read again every time.
        """
        import lance

        if version is None:
            return None
        if not cached:
            return lance.dataset(self.table_uri(name), version=version, storage_options=self.storage_options or None)
        key = (name, version)
        found = self._opened.get(key)
        if found is None:
            if len(self._opened) >= 8:
                self._opened.clear()
            found = self._opened[key] = lance.dataset(self.table_uri(name), version=version,
                                                      storage_options=self.storage_options or None)
        return found

    def latest(self, name: str) -> lance.LanceDataset | None:
        """Dataset ``name`` at its newest version, or ``None`` when it does not exist."""
        import lance

        try:
            return lance.dataset(self.table_uri(name), storage_options=self.storage_options or None)
        except (ValueError, FileNotFoundError, OSError):
            return None

    @contextmanager
    def writer(self, timeout: float = 10.0) -> Iterator[Writer]:
        """The one writer: the lock, and every dataset rolled back to the version the manifest names.

        Raises:
            IndexLockedError: another process is writing this corpus.
        """
        lock: FileLock | Lease | None = None
        if not self.remote:
            Path(self._root).mkdir(parents=True, exist_ok=True)
            lock = FileLock(Path(self._root) / ".writer.lock")
            try:
                lock.acquire(timeout)
            except LockHeld as held:
                raise IndexLockedError(f"another process ({held.holder}) is writing the corpus at {self.uri}; "
                                       "wait for it to finish") from None
        elif self.uri.startswith("s3://"):
            lock = self._lease = Lease(self.uri, self.storage_options)
            lock.acquire(timeout)
        try:
            pinned = self.manifest(fresh=True).versions if self.exists() else {}
            current = {}
            for name in DATASETS:
                self._roll_back(name, pinned.get(name))
                if name == FILES and name in pinned:
                    self._add_file_columns()
                ds = self.latest(name) if name in pinned else None
                if ds is not None:
                    current[name] = ds.version  # the pinned contents, restored as the newest version
            yield Writer(self, current, pinned)
        finally:
            self._lease = None
            if lock is not None:
                lock.release()

    def _roll_back(self, name: str, version: int | None) -> None:
        """Make the pinned version the newest again (a killed run may have committed after it)."""
        if version is None:
            # Written by a run that failed or was killed before its first manifest (committed or not): nothing
            # reads it.
            if not self.remote:
                import shutil

                shutil.rmtree(self.table_uri(name), ignore_errors=True)
                return
            with suppress(FileNotFoundError):
                self._fs.delete_dir(f"{self._root}/{name}")  # type: ignore[union-attr]
            return
        ds = self.latest(name)
        if ds is not None and ds.version != version:
            ds.checkout_version(version).restore()

    def _add_file_columns(self) -> None:
        """Give a files table written before a column of :data:`FILE_SCHEMA` (``mtime_ns``) that column, null in
        every row (unknown: those files are hashed once, then recorded). A new version: rolled back with the rest
        by a run killed before its manifest."""
        ds = self.latest(FILES)
        assert ds is not None
        missing = [f for f in FILE_SCHEMA if f.name not in ds.schema.names]
        if missing:
            ds.add_columns({f.name: f"CAST(NULL AS {_SQL_TYPES[f.type]})" for f in missing})

    def size_bytes(self) -> int:
        """Bytes under the store (local stores; 0 for a bucket)."""
        if self.remote:
            return 0
        return sum(f.stat().st_size for f in Path(self._root).rglob("*") if f.is_file())


_SQL_TYPES = {pa.int64(): "BIGINT", pa.int32(): "INT", pa.string(): "STRING"}


def checkpoint(name: str, operation: str | None = None) -> None:
    """Kill this process with SIGKILL when ``CODESEARCH_CORPUS_KILL_AT`` names this point, or stop it with SIGSTOP
    (until a SIGCONT) when ``CODESEARCH_CORPUS_STOP_AT`` does (tests only): the manifest's commit (or the
    sidecar's write before it, ``checksums``), ``operation``'s commit to dataset ``name`` (``chunks-append``), or a
    worker's start on a repository (``repository``)."""
    point = name if operation is None else f"{name.split('.', maxsplit=1)[0]}-{operation}"
    if os.environ.get(KILL_ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(STOP_ENV) == point:
        os.kill(os.getpid(), signal.SIGSTOP)


class Writer:
    """The changes of one build or refresh, committed dataset by dataset; the manifest last (by the caller)."""

    def __init__(self, store: CorpusStore, pinned: dict[str, int], previous: dict[str, int] | None = None) -> None:
        self.store = store
        self.pinned = dict(pinned)
        self.versions = dict(pinned)
        # The versions the manifest names as this run starts: what its readers read until the next manifest (a
        # roll back restores their contents as newer versions, ``pinned``; cleanup keeps both).
        self.previous = dict(pinned if previous is None else previous)
        self.rows_written = dict.fromkeys(DATASETS, 0)
        self.rows_deleted = dict.fromkeys(DATASETS, 0)

    def _dataset(self, name: str, cached: bool = True) -> lance.LanceDataset | None:
        return self.store.open(name, self.versions.get(name), cached)

    def read(self, name: str, columns: list[str], where: str) -> pa.Table:
        """Rows of dataset ``name`` as this run has it so far (empty when it does not exist yet)."""
        ds = self._dataset(name)
        if ds is None:
            return pa.table({c: [] for c in columns})
        return ds.to_table(columns=columns, filter=where)

    def merge(self, name: str, on: str | list[str], rows: pa.Table, delete_where: str | None) -> None:
        """Insert ``rows`` (replacing rows with the same key) and delete the rows ``delete_where`` selects
        that ``rows`` does not replace: one commit, one new version.

        (New chunk rows do not come this way: the actors write them as fragments, committed by :meth:`append`;
        ``merge_insert`` would hold them in a hash join, +300-450 MB in the driver for a 20k-row merge into a
        100k-row table, measured.)
        """
        import lance

        if not rows.num_rows:
            self.delete(name, delete_where)
            return
        ds = self._dataset(name, cached=False)
        if ds is None:
            ds = lance.write_dataset(rows, self.store.table_uri(name), schema=rows.schema, mode="create",
                                     storage_options=self.store.storage_options or None)
            deleted = 0
        else:
            merge = ds.merge_insert(on).when_matched_update_all().when_not_matched_insert_all()
            if delete_where:
                merge = merge.when_not_matched_by_source_delete(delete_where)
            deleted = int(merge.execute(rows)["num_deleted_rows"])
            ds = self.store.latest(name)
        assert ds is not None
        self.versions[name] = ds.version
        self.rows_written[name] += rows.num_rows
        self.rows_deleted[name] += deleted
        checkpoint(name, "merge")

    def append(self, name: str, fragments: list[str], schema: pa.Schema) -> None:
        """Commit ``fragments`` (:func:`write_fragments`' JSON, written by the actors) to dataset ``name``: one
        commit, one new version; the dataset is created by the first."""
        import lance
        from lance.fragment import FragmentMetadata

        if not fragments:
            return
        made = [FragmentMetadata.from_json(text) for text in fragments]
        ds = self._dataset(name)
        operation = lance.LanceOperation.Append(made) if ds is not None else \
            lance.LanceOperation.Overwrite(schema, made)
        ds = lance.LanceDataset.commit(self.store.table_uri(name), operation,
                                       read_version=ds.version if ds is not None else None,
                                       storage_options=self.store.storage_options or None)
        self.versions[name] = ds.version
        self.rows_written[name] += sum(f.num_rows for f in made)
        checkpoint(name, "append")

    def delete(self, name: str, where: str | None) -> None:
        """Delete the rows of dataset ``name`` that ``where`` selects: one commit, when there are any."""
        ds = self._dataset(name, cached=False)
        if ds is None or not where:
            return
        before = ds.count_rows()
        ds.delete(where)
        ds = self.store.latest(name)
        assert ds is not None
        self.versions[name] = ds.version
        self.rows_deleted[name] += before - ds.count_rows()
        checkpoint(name, "delete")

    def compact(self, name: str, fragments: int) -> None:
        """Compact dataset ``name`` when it has more than ``fragments`` fragments: one commit.

        Only what needs it is rewritten: fragments of fewer rows than half an
        even share of the table (``rows / 2 fragments``, at least 2: a
        refresh's few rows) are merged, and those with a tenth of their rows
        deleted are rewritten (Lance's own threshold). A plain compaction merged every fragment
        smaller than a million rows, so each one past the count rewrote the
        whole keywords table (1.3 GB at 1M chunks).
        """
        ds = self._dataset(name, cached=False)
        if ds is None or len(ds.get_fragments()) <= fragments:
            return
        ds.optimize.compact_files(target_rows_per_fragment=max(2, ds.count_rows() // (2 * fragments)))
        ds = self.store.latest(name)
        assert ds is not None
        self.versions[name] = ds.version
        checkpoint(name, "compact")

    def optimize(self, has_full: bool, always: bool = True) -> bool:
        """Compact the chunks' fragments, create the indexes a query needs and fold new rows into them.

        With ``always`` false (a refresh) nothing is done while every index a
        query needs exists and the rows outside them stay within
        :data:`UNINDEXED_SHARE` of the table and :data:`UNINDEXED_FRAGMENTS`
        fragments: Lance scans those rows beside the indexes, so searches
        still find them.

        Returns whether it compacted and indexed.
        """
        ds = self._dataset(CHUNKS, cached=False)
        if ds is None:
            return False
        if not always and within_share(ds) and not indexes_to_make(ds, has_full, outgrown=False):
            return False
        # A vector index is trained on fragments without deletion files: Lance's IVF training over a fragment with
        # one (a refresh's deleted rows) ran single-threaded for over 11 minutes on 1M rows with 0.25% deleted,
        # against 35 s once the deletions were written out (8 s more of compaction; lance 14.0.2).
        # (Decided before the compaction, which changes neither the rows nor the indexes a query needs.)
        missing = indexes_to_make(ds, has_full)
        if any(kind == VECTOR_INDEX for _, kind in missing):
            ds.optimize.compact_files(materialize_deletions_threshold=0.0)
        else:
            ds.optimize.compact_files()
        ds = self.store.latest(CHUNKS)
        assert ds is not None
        make_indexes(ds, missing)
        if missing:
            ds = self.store.latest(CHUNKS)
            assert ds is not None
        # New rows are folded into the indexes made before this call; those just made cover every row (folding them
        # too re-cut a fresh 1M-row vector index from 998 to 899 partitions, 5.5 s for nothing).
        made = {f"{column}_idx" for column, _ in missing}
        older = [index["name"] for index in ds.list_indices() if index["name"] not in made]
        if older:
            ds.optimize.optimize_indices(index_names=older)
        ds = self.store.latest(CHUNKS)
        assert ds is not None
        self.versions[CHUNKS] = ds.version
        return True

    def cleanup(self, keep_s: float | None = None) -> int:
        """Remove the versions no reader needs, and the data files no version names: what a failed or killed run
        wrote and never committed, which Lance otherwise keeps for a week in case another writer is still at work
        (there is one writer: the lock). Call it once the manifest names this run's versions.

        Kept: the versions the manifest names now and those the previous manifest named (a reader that opened it
        reads them until the next run), and any committed in the last ``keep_s`` seconds (default
        :data:`KEEP_VERSIONS_S`). Lance's own ``older_than`` counts from a version's commit, so it would remove
        the previous manifest's versions at once when the corpus had been idle for longer.

        Returns the bytes removed.
        """
        from datetime import datetime, timedelta, timezone

        grace = timedelta(seconds=KEEP_VERSIONS_S if keep_s is None else keep_s)
        now, local_now = datetime.now(timezone.utc), datetime.now()
        removed = 0
        for name in DATASETS:
            ds = self.store.latest(name)
            if ds is None:
                continue
            keep = {self.versions.get(name), self.pinned.get(name), self.previous.get(name), ds.version}
            old = []
            for version in ds.versions():
                when = version["timestamp"]
                assert isinstance(when, datetime)
                if version["version"] not in keep and (now if when.tzinfo else local_now) - when >= grace:
                    old.append(int(version["version"]))
            # With no version to remove, a cleanup of versions older than ten years removes the uncommitted files.
            stats = ds.cleanup_old_versions(versions=old, delete_unverified=True) if old else \
                ds.cleanup_old_versions(older_than=timedelta(days=3650), delete_unverified=True)
            removed += int(stats.bytes_removed)
        return removed


def write_fragments(uri: str, name: str, rows: pa.Table, storage_options: dict[str, str] | None = None) -> list[str]:
    """Write ``rows`` as new data files of dataset ``name`` of the store at ``uri`` without committing them (an
    actor's share of a build: the one writer commits them with :meth:`Writer.append`); their metadata as JSON.

    Until committed nothing reads them; a run killed before the commit leaves
    files no version names, removed by the next run's :meth:`Writer.cleanup`."""
    import json

    from lance.fragment import write_fragments as write

    fragments = write(rows, f"{uri.rstrip('/')}/{name}", schema=rows.schema, storage_options=storage_options or None)
    return [json.dumps(f.to_json()) for f in fragments]


def optimize_store(uri: str, storage_options: dict[str, str], versions: dict[str, int], has_full: bool,
                   always: bool) -> tuple[bool, dict[str, int]]:
    """:meth:`Writer.optimize` of a writer at ``versions``, wherever it is called (a Ray task: the driver keeps the
    lock and commits the manifest); whether it ran, and the versions after it."""
    writer = Writer(CorpusStore(uri, storage_options), versions)
    return writer.optimize(has_full=has_full, always=always), writer.versions




__all__ = ["KEEP_VERSIONS_S", "KILL_ENV", "REBUILD_CORPUS", "SIDECAR_PREFIX", "STOP_ENV", "CorpusStore", "Writer", "checkpoint",
           "optimize_store", "write_fragments"]
