"""The build on Ray Data: repositories in, each scanned, cut, embedded and written by an actor; commits out.

``from_items`` of the work items (bundles of repositories, :func:`bundles`)
-> ``map_batches(RepoWorker)`` on an actor pool
(``compute=ActorPoolStrategy(size=N)``, one CPU each; one GPU each where Ray
sees GPUs, with onnxruntime's CUDA provider) -> the driver streams the output
with ``iter_batches`` and commits it (:mod:`codesearch.corpus.store`).

The actors write the new chunk rows themselves, as uncommitted Lance
fragments (:func:`~codesearch.corpus.store.write_fragments`), and hand the
driver only their metadata, each repository's file rows and its deletions:
the rows never pass through the object store or the driver, whose work (one
commit per :data:`~codesearch.corpus.driver.FLUSH_ROWS` rows) and memory stay
the same whatever the corpus's size. Rows a repository upgraded to the
transformer tier replaces in place still go through the driver's
``merge_insert``.

Each actor loads the static model (and the transformer, for the full tier)
once, with onnxruntime's threads set to its CPUs. Per repository it reads what
the corpus already holds of it (file hashes and stats, chunk ids, model-input
keys), walks the repository, leaves unread the files whose size and mtime are
those recorded (:mod:`codesearch.files.changes`), hashes the rest and cuts
those whose sha256 changed with the library's own definition chunker
(:func:`codesearch.index.cutting.cut_files`), embeds
only chunk texts the corpus has no vector for (the others' vectors are read
back from the corpus), writes the rows to insert, and yields a ``fragments``
row with their metadata, then one ``done`` row per repository with the chunk
ids to delete and its file manifest (never before the fragment holding its
rows).

Scanning and cutting happen inside the actor rather than in an upstream
``flat_map``: a task stage feeding an actor pool that holds every CPU hangs
in Ray 2.60 (ray#44687, reproduced here), and a repository's cut and
embedding then stay on one machine.

A refresh too small to pay for starting Ray runs the same worker in the
driver (:func:`run_in_process`), with the driver's models: one code path for
rows either way.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from codesearch.chunking import Chunk, ChunkParams, document_text, window_heads
from codesearch.chunking.symbols import definition_names
from codesearch.corpus.schema import CHUNKS, FILES, chunk_id, chunk_schema, sql_in, sql_string
from codesearch.corpus.store import checkpoint, write_fragments
from codesearch.files.changes import trusted_mtime, unchanged
from codesearch.files.kinds import UNREAD_BY_DEFAULT, kind_of
from codesearch.files.scan import Listing, list_files
from codesearch.files.walk import SkipReason
from codesearch.index.cutting import FileTask, cut_files

BLOCK_ROWS = 256
"""Rows embedded at a time (blocks end at file boundaries)."""
FRAGMENT_ROWS = 16_384
"""Rows an actor holds before writing them as a fragment (and at each work item's end)."""
BUNDLE_BYTES = 1 << 20
"""Repositories smaller than this (bytes of text files) are handed to the actors together, up to this size a work
item, so that each does not make a fragment of its own (the corpus of 10,000 repositories)."""
CUT_BATCH = 64
"""Files cut at a time."""


@dataclass(frozen=True)
class WorkerSpec:
    """What every actor needs to know: models, chunking, where the corpus is and at which versions.

    ``model`` and ``static`` are model names (loaded in the actor) or embedder
    objects (stand-ins, pickled to the actors).
    """

    model: Any
    static: Any
    int8: bool
    tier: str
    chunking: str
    chunk_params: ChunkParams
    max_file_bytes: int
    static_dim: int
    full_dim: int
    model_fp: str
    store_uri: str
    storage_options: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    threads: int = 1
    exclude_dirs: tuple[str, ...] = ()

    def output_schema(self) -> pa.Schema:
        """The chunk rows plus ``record`` (``chunk``, ``update``, ``fragments`` or ``done``) and ``payload`` (the
        JSON of a fragments or done row); every column nullable, since those fill only ``repo``, ``record`` and
        ``payload``."""
        schema = chunk_schema(self.static_dim, self.full_dim)
        fields = [f.with_nullable(True).with_metadata(None) for f in schema]
        return pa.schema([*fields, pa.field("record", pa.string()), pa.field("payload", pa.string())])

    def list(self, root: str) -> Listing:
        """The files of the repository at ``root`` as every worker walks it (the driver's stat pass too).

        A file whose name is not UTF-8 is skipped (``name_not_utf8``): the store's paths are Arrow strings, which
        hold UTF-8 only (a single repository's index keeps such a name as it is).
        """
        listing = list_files(root, max_file_bytes=self.max_file_bytes, exclude_dirs=self.exclude_dirs)
        named = [f for f in listing.files if _utf8(f.rel)]
        if len(named) < len(listing.files):
            for f in listing.files:
                if not _utf8(f.rel):
                    listing.skip(f.rel, SkipReason.NAME_NOT_UTF8)
            listing.files = named
        return listing


def _utf8(text: str) -> bool:
    """Whether ``text`` holds no surrogate escape (a byte of a file name that was not UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


STORED_FILE_COLUMNS = ["path", "sha256", "size", "mtime_ns", "chunks"]
"""What a worker reads of a repository's stored file rows."""
STORED_CHUNK_COLUMNS = {"chunk_id": "chunk_id", "path": "path", "content_key": "content_key", "vector_key": "vector_key",
                        "read": "read", "has_vector": "vector IS NOT NULL"}
"""What a worker reads of a repository's stored chunk rows (column or SQL expression)."""
STORED_READ_REPOS = 32
"""Repositories of a work item whose stored rows are read in one query: few enough that a work item of large
repositories with a changed file each does not hold all their rows at once."""


def _providers() -> list[str] | None:
    """CUDA first when this actor was given a GPU and onnxruntime has the provider; else the CPU's (None)."""
    if not os.environ.get("CUDA_VISIBLE_DEVICES"):
        return None
    import onnxruntime as ort

    return ["CUDAExecutionProvider", "CPUExecutionProvider"] if "CUDAExecutionProvider" in ort.get_available_providers() \
        else None


class RepoWorker:
    """A Ray actor (or, for a small refresh, an object in the driver): the models loaded once (or handed over in
    the spec), then each repository of its batches scanned, cut and embedded."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.schema = spec.output_schema()
        if not hasattr(spec.static, "embed_documents") or (spec.tier == "full" and
                                                           not hasattr(spec.model, "embed_documents")):
            # The tokenizers' thread pool, sized before a model is loaded here (never the driver's: it hands its own).
            os.environ.setdefault("RAYON_NUM_THREADS", str(spec.threads))
        if hasattr(spec.static, "embed_documents"):
            self.static = spec.static
        else:
            from codesearch.embedding.static import StaticEmbedder

            self.static = StaticEmbedder(spec.model, export_progress=False)
        self.full = None
        if spec.tier == "full":
            if hasattr(spec.model, "embed_documents"):
                self.full = spec.model
            else:
                from codesearch.embedding.transformer import Embedder

                self.full = Embedder(spec.model, int8=spec.int8, threads=spec.threads, providers=_providers(),
                                     export_progress=False)

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        for item in batch.to_pylist():
            yield from self.bundle([(repo, root, None) for repo, root in zip(item["repos"], item["roots"])])

    def bundle(self, items: Sequence[tuple[str, str, Listing | None]]) -> Iterator[pa.Table]:
        """One work item's repositories (name, root, and the walk of the root when the caller made it): their new
        rows written as fragments of :data:`FRAGMENT_ROWS` rows or fewer (a ``fragments`` row says which, and how
        many rows of each repository they hold), their update rows, and each one's ``done`` row after the
        fragment holding its rows."""
        held: list[pa.Table] = []
        rows: list[pa.Table] = []
        stored: dict[str, tuple[pa.Table | None, pa.Table | None]] = {}
        for position, (repo, root, listing) in enumerate(items):
            if len(items) > 1 and position % STORED_READ_REPOS == 0:  # the next repositories' stored rows, together
                stored = self._stored([name for name, _, _ in items[position:position + STORED_READ_REPOS]])
            buffered = False  # whether rows of this repository wait to be written
            for table in self.repository(repo, root, listing, stored.get(repo)):
                record = table["record"][0].as_py()
                if record == "chunk":
                    rows.append(table)
                    buffered = True
                    if sum(t.num_rows for t in rows) >= FRAGMENT_ROWS:  # a large repository: written as it goes
                        yield self._written(rows)
                        yield from held
                        held, rows, buffered = [], [], False
                elif record == "done" and buffered:
                    held.append(table)
                else:
                    yield table  # update rows, and the done row of a repository with no row waiting
            if rows and (position == len(items) - 1 or sum(t.num_rows for t in rows) >= FRAGMENT_ROWS):
                yield self._written(rows)
                yield from held
                held, rows = [], []

    def _written(self, tables: list[pa.Table]) -> pa.Table:
        """``tables``' chunk rows written as fragments of the chunks table; the ``fragments`` row naming them."""
        import pyarrow.compute as pc

        spec = self.spec
        rows = pa.concat_tables(tables)
        schema = chunk_schema(spec.static_dim, spec.full_dim)
        fragments = write_fragments(spec.store_uri, CHUNKS, rows.select(schema.names).cast(schema),
                                    spec.storage_options)
        counts = pc.value_counts(rows["repo"]).to_pylist()
        payload = {"fragments": fragments, "rows": {c["values"]: c["counts"] for c in counts}}
        record = dict.fromkeys(self.schema.names)
        record.update(record="fragments", payload=json.dumps(payload))
        return pa.Table.from_pylist([record], schema=self.schema)

    # -- one repository ---------------------------------------------------------------

    def _read(self, name: str, columns: list[str] | dict[str, str], where: str) -> pa.Table | None:
        import lance

        version = self.spec.versions.get(name)
        if version is None:
            return None
        ds = lance.dataset(f"{self.spec.store_uri}/{name}", version=version,
                           storage_options=self.spec.storage_options or None)
        return ds.to_table(columns=columns, filter=where)

    def _stored(self, repos: Sequence[str]) -> dict[str, tuple[pa.Table | None, pa.Table | None]]:
        """The file rows and chunk rows (:data:`STORED_FILE_COLUMNS`, :data:`STORED_CHUNK_COLUMNS`) the corpus holds
        of each of ``repos``, read in one query per table: a refresh's work item holds many repositories with a
        changed file or two, and a query per repository cost 28 ms each at 1M rows, most of an actor's time
        (:data:`STORED_READ_REPOS` at a time)."""
        import pyarrow.compute as pc

        where = sql_in("repo", list(repos))
        files = self._read(FILES, ["repo", *STORED_FILE_COLUMNS], where)
        chunks = self._read(CHUNKS, {"repo": "repo", **STORED_CHUNK_COLUMNS}, where)

        def of(table: pa.Table | None, repo: str) -> pa.Table | None:
            return None if table is None else table.filter(pc.equal(table["repo"], repo)).drop_columns(["repo"])

        return {repo: (of(files, repo), of(chunks, repo)) for repo in repos}

    def repository(self, repo: str, root: str, listing: Listing | None = None,
                   stored: tuple[pa.Table | None, pa.Table | None] | None = None) -> Iterator[pa.Table]:
        """The rows to insert for ``repo``, in blocks, then its ``done`` row (``listing``: the walk of ``root``,
        when the caller has made it; ``stored``: its file and chunk rows in the corpus, when read already).

        The done row's ``files`` are the file rows to write: files cut again,
        binary ones (``chunks`` null), and unchanged ones whose recorded stats
        were out of date (hashed, found the same: recorded anew so that the
        next refresh leaves them unread).
        """
        checkpoint("repository")
        started, cpu_before, began_at = time.perf_counter(), cpu_seconds(), time.time()
        spec = self.spec
        in_repo = f"repo = {sql_string(repo)}"
        known, existing = stored if stored is not None else (self._read(FILES, STORED_FILE_COLUMNS, in_repo),
                                                              self._read(CHUNKS, STORED_CHUNK_COLUMNS, in_repo))
        known_files: dict[str, tuple[str, int | None, int | None, int | None]] = {}
        if known is not None:
            known_files = {path: (sha256, size, mtime_ns, chunks) for path, sha256, size, mtime_ns, chunks in zip(
                *(known[c].to_pylist() for c in ("path", "sha256", "size", "mtime_ns", "chunks")))}
        old_ids: dict[int, str] = {}
        static_keys: set[str] = set()
        full_keys: set[str] = set()
        unembedded: set[int] = set()  # rows the transformer should read and has not (a static repository upgraded)
        if existing is not None:
            old_ids = dict(zip(existing["chunk_id"].to_pylist(), existing["path"].to_pylist()))
            static_keys = set(existing["content_key"].to_pylist())
            full_keys = {key for key, has in zip(existing["vector_key"].to_pylist(), existing["has_vector"].to_pylist())
                         if has}
            if self.full is not None:
                unembedded = {i for i, read, has in zip(existing["chunk_id"].to_pylist(), existing["read"].to_pylist(),
                                                        existing["has_vector"].to_pylist()) if read and not has}
        listing = listing if listing is not None else spec.list(root)
        current: set[str] = set()  # the files the table keeps or gets
        tasks = []
        for f in sorted(listing.files, key=lambda f: f.rel):
            old = known_files.get(f.rel)
            if old is not None and unchanged(old[1:3], f.size, f.mtime_ns):
                current.add(f.rel)  # unchanged by its stats: not read
                continue
            tasks.append(FileTask(f.rel, f.path, f.size, f.mtime_ns, bytes.fromhex(old[0]) if old else None))
        now = time.time_ns()  # before any file is read: an mtime this recent is not recorded
        files: list[tuple[str, str, int, int | None, int | None]] = []  # rows to write: path, sha256, size, chunks, mtime
        changed: set[str] = set()
        new_ids: set[int] = set()
        rows: list[dict[str, Any]] = []
        counts = Counter[str]()
        for start in range(0, len(tasks), CUT_BATCH):
            for cut in cut_files(tasks[start:start + CUT_BATCH], spec.chunking, spec.chunk_params, spec.max_file_bytes):
                rel = cut.task.rel
                mtime_ns = trusted_mtime(cut.task.mtime_ns, now) if cut.size == cut.task.size else None
                if cut.skipped == SkipReason.BINARY:  # recorded, so that it is not read again while unchanged
                    current.add(rel)
                    files.append((rel, "", cut.size, None, mtime_ns))
                    if known_files.get(rel, ("", None, None, None))[3]:
                        changed.add(rel)  # a text file turned binary: its chunks go
                if cut.skipped:
                    continue
                current.add(rel)
                if cut.same:
                    old = known_files[rel]
                    if old[1:3] != (cut.size, mtime_ns):
                        files.append((rel, cut.sha256.hex(), cut.size, old[3], mtime_ns))
                    continue
                changed.add(rel)
                files.append((rel, cut.sha256.hex(), cut.size, len(cut.chunks), mtime_ns))
                for row in self._rows(repo, rel, cut.chunks):
                    new_ids.add(row["chunk_id"])
                    if row["chunk_id"] not in old_ids:
                        rows.append(row)
            if len(rows) >= BLOCK_ROWS:
                yield self._embedded(repo, rows, static_keys, full_keys, counts)
                rows = []
        if rows:
            yield self._embedded(repo, rows, static_keys, full_keys, counts)
        removed = sorted(set(known_files) - current)
        gone = set(removed) | changed
        delete_ids = [i for i, path in old_ids.items() if path in gone and i not in new_ids]
        kept = sorted(unembedded - set(delete_ids))
        for start in range(0, len(kept), BLOCK_ROWS):
            yield self._upgraded(repo, kept[start:start + BLOCK_ROWS], full_keys, counts)
        payload = {
            "repo": repo, "root": root, "files": files, "removed_files": removed, "delete_ids": delete_ids,
            "inserted": counts["inserted"], "updated": counts["updated"], "embedded_static": counts["static"],
            "embedded_full": counts["full"],
            "reused": counts["reused"], "cut_files": len(changed), "hashed_files": len(tasks),
            "files_seen": listing.files_seen,
            "seconds": round(time.perf_counter() - started, 3), "began_at": round(began_at, 3),
            "ended_at": round(time.time(), 3), "pid": os.getpid(), "peak_rss_mb": peak_rss_mb(),
            "cpu_s": round(cpu_seconds() - cpu_before, 3), "process_cpu_s": round(cpu_seconds(), 3),
        }
        done = dict.fromkeys(self.schema.names)
        done.update(repo=repo, record="done", payload=json.dumps(payload))
        yield pa.Table.from_pylist([done], schema=self.schema)

    def _rows(self, repo: str, rel: str, chunks: Sequence[Any]) -> Iterator[dict[str, Any]]:
        """One file's chunk rows (vectors not yet filled)."""
        kind = kind_of(rel)
        read = kind not in UNREAD_BY_DEFAULT
        heads = window_heads([Chunk(rel, c.start, c.end, c.text, c.symbols) for c in chunks]) if read else {}
        keys = [c.key.hex() for c in chunks]
        for ordinal, c in enumerate(chunks):
            names = sorted({n.lower() for symbol in c.symbols for n in definition_names(symbol)})
            yield {
                "chunk_id": chunk_id(repo, rel, c.start, c.end, keys[ordinal]), "repo": repo, "path": rel,
                "start_line": c.start, "end_line": c.end, "ordinal": ordinal, "kind": kind, "symbols": list(c.symbols),
                "def_names": names, "text": c.text,
                "keyword_text": " ".join(" ".join([t] * n) for t, n in zip(c.terms, c.counts)),
                "content_key": keys[ordinal], "vector_key": keys[heads.get(ordinal, ordinal)], "read": read,
                "model_fp": self.spec.model_fp, "_document": document_text(rel, c.text),
            }

    def _embedded(self, repo: str, rows: list[dict[str, Any]], static_keys: set[str], full_keys: set[str],
                  counts: Counter[str]) -> pa.Table:
        """``rows`` with both tiers' vectors: embedded where the corpus has none for the key, else read back."""
        spec = self.spec
        documents = {row["content_key"]: row.pop("_document") for row in rows}
        static = self._vectors(repo, "static_vector", "content_key", [r["content_key"] for r in rows], static_keys,
                               documents, self.static, spec.static_dim, counts, "static")
        for row, vector in zip(rows, static):
            row["static_vector"] = vector
        if self.full is not None:
            wanted = [r["vector_key"] for r in rows if r["read"]]
            made = iter(self._vectors(repo, "vector", "vector_key", wanted, full_keys, documents, self.full,
                                      spec.full_dim, counts, "full"))
            for row in rows:
                row["vector"] = next(made) if row["read"] else None
        else:
            for row in rows:
                row["vector"] = None
        counts["inserted"] += len(rows)
        for row in rows:
            row["record"] = "chunk"
            row["payload"] = None
        return pa.Table.from_pylist(rows, schema=self.schema)

    def _upgraded(self, repo: str, ids: list[int], full_keys: set[str], counts: Counter[str]) -> pa.Table:
        """Rows the corpus holds without the transformer's vectors, read back and given them (``update`` rows)."""
        table = self._read(CHUNKS, self.schema.names[:-2], f"repo = {sql_string(repo)} AND {sql_in('chunk_id', ids)}")
        assert table is not None
        rows = table.to_pylist()
        documents = {row["content_key"]: document_text(row["path"], row["text"]) for row in rows}
        vectors = self._vectors(repo, "vector", "vector_key", [r["vector_key"] for r in rows], full_keys, documents,
                                self.full, self.spec.full_dim, counts, "full")
        for row, vector in zip(rows, vectors):
            row.update(vector=vector, model_fp=self.spec.model_fp, record="update", payload=None)
        counts["updated"] += len(rows)
        return pa.Table.from_pylist(rows, schema=self.schema)

    def _vectors(self, repo: str, column: str, key_column: str, keys: list[str], known: set[str],
                 documents: dict[str, str], embedder: Any, dim: int, counts: Counter[str], tier: str) -> list[Any]:
        """One vector per key: read from the corpus when it has the key, else embedded (once per distinct key)."""
        found: dict[str, Any] = {}
        old = sorted({k for k in keys if k in known})
        if old:
            table = self._read(CHUNKS, [key_column, column],
                               f"repo = {sql_string(repo)} AND {sql_in(key_column, old)} AND {column} IS NOT NULL")
            if table is not None:
                found.update(zip(table[key_column].to_pylist(), table[column].to_numpy(zero_copy_only=False)))
            counts["reused"] += len(old)
        new = sorted({k for k in keys if k not in found})
        if new:
            missing = [k for k in new if k not in documents]
            if missing:  # a later window whose first window was not cut again: read its text
                table = self._read(CHUNKS, ["content_key", "path", "text"],
                                   f"repo = {sql_string(repo)} AND {sql_in('content_key', missing)}")
                if table is not None:
                    for key, path, text in zip(*(table[c].to_pylist() for c in ("content_key", "path", "text"))):
                        documents.setdefault(key, document_text(path, text))
            made = np.asarray(embedder.embed_documents([documents[k] for k in new]), dtype=np.float32)
            if made.shape[1] != dim:
                raise ValueError(f"the {tier} model gives {made.shape[1]}-dim vectors, the corpus holds {dim}")
            found.update(zip(new, made))
            counts[tier] += len(new)
        return [np.asarray(found[k], dtype=np.float32) for k in keys]


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB (VmHWM: ``ru_maxrss`` would count the parent's at ``exec``)."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu_seconds() -> float:
    """CPU seconds (user + system) this process has used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class RepoResult:
    """One repository's outcome, from its ``done`` row: its payload, its update rows, and the fragments written
    since the last result was handed out (of this repository's rows and perhaps of others': the writer commits
    them all before the run's manifest)."""

    repo: str
    payload: dict[str, Any]
    updates: list[pa.Table]
    fragments: list[str] = field(default_factory=list)


def bundles(work: Sequence[tuple[str, str]], sizes: dict[str, int], target: int = BUNDLE_BYTES) -> list[dict[str, list[str]]]:
    """The work items of ``work`` (repository, root), in its order: a repository of ``target`` bytes or more, of
    unknown size or with nothing to read (a refresh upgrading its tier), alone; smaller neighbours together up to
    ``target``."""
    items: list[dict[str, list[str]]] = []
    room = 0  # bytes the last item may still take
    for repo, root in work:
        known = sizes.get(repo)
        if not items or known is None or known > room or not known:
            items.append({"repos": [], "roots": []})
            room = target if known else -1  # unknown or nothing to read (an upgrade): alone
        items[-1]["repos"].append(repo)
        items[-1]["roots"].append(root)
        room -= known or 0
    return items


def results(blocks: Iterable[pa.Table]) -> Iterator[RepoResult]:
    """Each repository of a worker's output (``blocks``, from any number of actors, each actor's in order) as soon
    as it is complete: its ``done`` row arrived, and the rows the fragments and update rows hold of it are the
    rows it reported.

    Raises:
        RuntimeError: a repository's rows fell short of its count (the output lost a block).
    """
    import pyarrow.compute as pc

    updates: dict[str, list[pa.Table]] = {}
    received: Counter[str] = Counter()
    fragments: list[str] = []
    for block in blocks:
        for record in ("fragments", "update", "done"):
            rows = block.filter(pc.equal(block["record"], record))
            if not rows.num_rows:
                continue
            if record == "update":
                for repo in pc.unique(rows["repo"]).to_pylist():
                    mine = rows.filter(pc.equal(rows["repo"], repo))
                    updates.setdefault(repo, []).append(mine)
                    received[repo] += mine.num_rows
                continue
            for text in rows["payload"].to_pylist():
                payload = json.loads(text)
                if record == "fragments":
                    fragments.extend(payload["fragments"])
                    received.update(payload["rows"])
                    continue
                repo = payload["repo"]
                if received.pop(repo, 0) != payload["inserted"] + payload["updated"]:
                    raise RuntimeError(f"the build lost rows of {repo}; run it again")
                yield RepoResult(repo, payload, updates.pop(repo, []), fragments)
                fragments = []
    if fragments or updates or any(received.values()):
        raise RuntimeError("the build's output ended before every repository's done row; run it again")


def run_pipeline(ray: Any, items: Sequence[dict[str, list[str]]], spec: WorkerSpec, actors: int) -> Iterator[RepoResult]:
    """Run the actors over ``items`` (:func:`bundles`) and yield each repository as soon as it is complete.

    The driver holds fragments' metadata and update rows (a repository upgraded
    to the transformer tier) until the caller commits them, never chunk rows.
    """
    import ray.data
    from ray.data import ActorPoolStrategy

    size, resources = actor_pool(spec.tier, actors, _resources(ray)[1], spec.threads)
    ds = ray.data.from_items(list(items), override_num_blocks=len(items)).map_batches(
        RepoWorker, fn_constructor_kwargs={"spec": spec}, batch_size=1, batch_format="pyarrow",
        compute=ActorPoolStrategy(size=size), **resources)
    yield from results(ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=1))


def actor_pool(tier: str, actors: int, gpus: int, threads: int) -> tuple[int, dict[str, int]]:
    """The actor pool's size and each actor's resources: for the transformer tier where Ray has GPUs, one actor
    per GPU (one GPU and one CPU each; onnxruntime's CUDA provider, :func:`_providers`); otherwise ``actors``
    actors of ``threads`` CPUs each (the static tier always: its vectors are a lookup, not a GPU's work)."""
    if gpus and tier == "full":
        return gpus, {"num_gpus": 1, "num_cpus": 1}
    return actors, {"num_cpus": threads}


def run_in_process(items: Sequence[tuple[str, str, Listing | None]], spec: WorkerSpec) -> Iterator[RepoResult]:
    """The actors' work done in this process, as one work item (``items``: repository, root and its walk, when
    made): for a refresh too small to pay for starting Ray. ``spec`` should carry the driver's loaded models, so
    that none is loaded again."""
    yield from results(RepoWorker(spec).bundle(items))


def _resources(ray: Any) -> tuple[int, int]:
    resources = ray.cluster_resources()
    return int(resources.get("CPU", 1)), int(resources.get("GPU", 0))


__all__ = ["BLOCK_ROWS", "BUNDLE_BYTES", "FRAGMENT_ROWS", "RepoResult", "RepoWorker", "WorkerSpec",
           "actor_pool", "bundles", "cpu_seconds", "peak_rss_mb", "results", "run_in_process", "run_pipeline"]
