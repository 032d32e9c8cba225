"""Build an index, or bring one up to date: list -> cut -> embed -> keywords -> store, streamed file by file.

Files stream through in path order: a file whose size and modification time
are those the committed index recorded keeps its chunks, their keyword counts
and their vectors without being read; the others are read and cut, on every
core for a large tree (:mod:`codesearch.index.cutting`). Nothing holds a
Python object per chunk for the whole corpus: chunk records go into columns
(:class:`~codesearch.index.columns.ColumnsWriter`), keyword counts into flat
arrays (:class:`~codesearch.keyword.BM25Builder`), static vectors into a
matrix in batches. Every chunk is keyed by the sha256 of the exact text given
to the model, so an unchanged chunk text keeps its vectors in both tiers. Both
tiers' new vectors are checkpointed as they are made, so a run that dies
loses at most one slice; the new state is committed atomically, so a crash
leaves the previous index.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesearch.chunking import DEFINITIONS_VERSION, ChunkParams, chunk_key, document_text
from codesearch.chunking.symbols import SymbolTable
from codesearch.embedding.onnx import available_cores
from codesearch.exceptions import EmptyRepositoryError, IndexCancelledError, ModelNotAvailableError
from codesearch.files.changes import content_sha256, trusted_mtime
from codesearch.files.changes import unchanged as same_stats
from codesearch.files.kinds import UNREAD_BY_DEFAULT, kind_of
from codesearch.files.scan import Listed, list_files
from codesearch.files.walk import MAX_FILE_BYTES
from codesearch.index import vectors as vectors_module
from codesearch.index.columns import KIND_CODES, ChunkColumns, ColumnsWriter
from codesearch.index.cutting import CutFile, FileTask, cut_in_order
from codesearch.index.loaded import LoadedIndex, graph_prefix
from codesearch.index.manifest import ARRAYS, BM25_PREFIX, IndexManifest, TierFacts
from codesearch.index.snapshot import IndexSnapshot
from codesearch.index.store import IndexStore
from codesearch.index.tiers import Tiers
from codesearch.index.vectors import TIER_PARAMS, VectorSearch, reuse_by_key
from codesearch.keyword import BM25, BM25Builder
from codesearch.types import FULL, KEYWORD, STATIC, Chunking, IndexReport, TextEmbedder, Tier

CHECKPOINT_EVERY = 128
"""Chunks the transformer embeds between two checkpoints (also how soon :meth:`IndexBuilder.cancel` acts)."""
STATIC_BATCH = 1024
"""Chunks the static model embeds at a time (one call over every chunk of a large tree took gigabytes)."""
STATIC_CHECKPOINT_EVERY = 8192
"""Static vectors made between two checkpoints of a build."""
_NO_FILE = bytes(32)
"""The hash recorded for a file skipped by its content (binary, unreadable): its stat is kept, it has no chunks."""


@dataclass(frozen=True, slots=True)
class BuildOptions:
    """How a repository is indexed.

    Attributes:
        chunking: ``definitions`` or ``lines``.
        chunk_params: chunk sizes.
        use_ignore_files: honour ``.gitignore`` and ``.codesearchignore``.
        embed_tests: whether the transformer reads test files; ``None`` keeps
            the stored index's choice (tests left out for a new index).
        max_file_bytes: larger files are skipped.
        workers: processes that cut files (default: the cores; a small tree is
            cut in this process whatever this says).
    """

    chunking: Chunking
    chunk_params: ChunkParams
    use_ignore_files: bool = True
    embed_tests: bool | None = None
    max_file_bytes: int = MAX_FILE_BYTES
    workers: int | None = None

    def chunker_facts(self) -> dict[str, Any]:
        """How files are cut; a stored index cut otherwise has its files cut again."""
        facts: dict[str, Any] = {"kind": self.chunking, **asdict(self.chunk_params)}
        if self.chunking == "definitions":
            facts["version"] = DEFINITIONS_VERSION
        return facts


class _Previous:
    """What a build may take from the committed index without reading files: by path, by chunk key."""

    def __init__(self, loaded: LoadedIndex | None, same_cutter: bool) -> None:
        self.loaded = loaded
        columns = loaded.columns if loaded is not None and same_cutter else None
        self.columns = columns
        self._by_path = {path: number for number, path in enumerate(columns.paths.tolist())} if columns else {}
        self._doc_terms: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._remap: np.ndarray | None = None
        # The committed index records each file's stat as it was; one too recent to trust when its scan ran
        # (files.changes.trusted_mtime) may have changed since in the same timestamp tick, and is read again.
        self._scanned_ns = loaded.manifest.scanned_ns if loaded is not None else 0

    def number(self, path: str) -> int | None:
        """The committed file number of ``path`` (``None`` when it was not indexed, or was cut otherwise)."""
        return self._by_path.get(path) if self.columns is not None else None

    def unchanged(self, listed: Listed) -> int | None:
        """The committed file number of a file whose recorded stat still holds, else ``None``."""
        number = self.number(listed.rel)
        if number is None:
            return None
        c = self.columns
        assert c is not None
        if not same_stats((int(c.file_size[number]), self._trusted(int(c.file_mtime[number]))), listed.size,
                         listed.mtime_ns):
            return None
        return number

    def _trusted(self, mtime_ns: int) -> int | None:
        """A recorded mtime, or ``None`` when it was too recent to trust at the committed scan."""
        return trusted_mtime(mtime_ns, self._scanned_ns)

    def all_unchanged(self, listed: Sequence[Listed]) -> bool:
        """Whether ``listed`` is the committed set of files, each with its recorded size and modification time
        (and, for one modified within the racy window before the committed scan, its recorded bytes)."""
        c = self.columns
        if c is None or len(listed) != len(c.paths):
            return False
        for number, f in enumerate(listed):
            if self.number(f.rel) != number or not same_stats((int(c.file_size[number]), int(c.file_mtime[number])),
                                                              f.size, f.mtime_ns):
                return False
            if self._trusted(f.mtime_ns) is None and content_sha256(f.path, f.size) != bytes(c.file_sha256[number]):
                return False
        return True

    def sha256(self, path: str) -> bytes | None:
        """The hash the committed index recorded for ``path``."""
        number = self.number(path)
        return None if number is None or self.columns is None else bytes(self.columns.file_sha256[number])

    def doc_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._doc_terms is None:
            assert self.loaded is not None
            self._doc_terms = self.loaded.bm25.doc_terms()
        return self._doc_terms

    def remap(self) -> np.ndarray:
        if self._remap is None:
            assert self.loaded is not None
            self._remap = np.full(len(self.loaded.bm25.vocabulary_), -1, dtype=np.int64)
        return self._remap


class _Vectors:
    """One embedding tier's vectors for the new chunks, by key from the committed index or a checkpoint, or new."""

    def __init__(self, tier: Tier, embedder: TextEmbedder, previous: LoadedIndex | None, store: IndexStore,
                 shares_windows: bool, checkpoint: bool = True) -> None:
        self.tier, self.embedder, self.store, self.checkpoint = tier, embedder, store, checkpoint
        self.old: np.ndarray | None = None
        self.old_rows: dict[bytes, int] = {}
        stored = previous.manifest.of(tier) if previous is not None else None
        if previous is not None and tier in previous.vectors and stored is not None \
                and stored.fingerprint == embedder.fingerprint:
            self.old = previous.vectors[tier]
            unread = {KIND_CODES[k] for k in stored.unread_kinds or ()}
            copies = set(previous.columns.window_heads()) if shares_windows else set()  # their rows hold another chunk's vector
            kinds, keys = previous.columns.kind, previous.columns.key
            self.old_rows = {bytes(keys[i]): i for i in range(len(previous)) if int(kinds[i]) not in unread
                             and i not in copies}
        self.saved: dict[str, np.ndarray] = store.load_checkpoint(embedder.fingerprint) if checkpoint else {}

    def found(self, key: bytes) -> tuple[int | None, np.ndarray | None]:
        """``(old row, None)`` or ``(None, checkpointed vector)`` for a key, or ``(None, None)``."""
        row = self.old_rows.get(key)
        if row is not None:
            return row, None
        return None, self.saved.get(key.hex())


class _StaticStream:
    """The static tier's vectors, made while the chunks stream: kept rows noted, new ones embedded in batches."""

    def __init__(self, vectors: _Vectors, builder: IndexBuilder, progress: bool) -> None:
        self.vectors = vectors
        self._builder = builder
        self._kept_rows, self._kept_from = array("q"), array("q")
        self._made: list[tuple[np.ndarray, np.ndarray]] = []  # (rows, vectors), in batches
        self._pending: list[tuple[int, str]] = []
        self._unsaved: list[tuple[list[str], np.ndarray]] = []
        self.embedded = 0

    def add(self, row: int, key: bytes, path: str, text: str, made: np.ndarray | None = None) -> None:
        """Note chunk ``row``'s vector: kept from the committed index or a checkpoint, ``made`` by the cutter, or
        embedded here in a batch."""
        old, saved = self.vectors.found(key)
        if old is not None:
            self._kept_rows.append(row)
            self._kept_from.append(old)
        elif saved is not None:
            self._made.append((np.array([row]), saved[None, :]))
        elif made is not None:
            self._made.append((np.array([row]), made[None, :]))
            self.embedded += 1
        else:
            self._pending.append((row, document_text(path, text)))
            if len(self._pending) >= STATIC_BATCH:
                self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        made = self.vectors.embedder.embed_documents([document for _, document in self._pending])
        self._made.append((np.array([row for row, _ in self._pending], dtype=np.int64), made))
        self._unsaved.append(([chunk_key(document).hex() for _, document in self._pending], made))
        self.embedded += len(self._pending)
        self._pending = []
        if not self.vectors.checkpoint:
            self._unsaved = []
        elif sum(len(keys) for keys, _ in self._unsaved) >= STATIC_CHECKPOINT_EVERY:
            self._builder.store.save_checkpoint(self.vectors.embedder.fingerprint,
                                                [k for keys, _ in self._unsaved for k in keys],
                                                np.concatenate([v for _, v in self._unsaved]))
            self._unsaved = []

    def finish(self, n: int) -> np.ndarray:
        """The ``(n, dim)`` matrix, every row filled."""
        self._flush()
        out = np.zeros((n, self.vectors.embedder.dim), dtype=np.float32)
        if self._kept_rows:
            assert self.vectors.old is not None
            rows = np.frombuffer(self._kept_rows, dtype=np.int64)
            out[rows] = self.vectors.old[np.frombuffer(self._kept_from, dtype=np.int64)]
        while self._made:
            rows, made = self._made.pop()
            out[rows] = made
        return out


@dataclass
class _Parts:
    """What a build has before the transformer's tier: the columns, the fitted keywords, the symbol table, the
    static vectors (``vectors[STATIC]`` where there are) and the counts its report gives."""

    columns: ChunkColumns
    bm25: BM25
    symbols: SymbolTable
    vectors: dict[Tier, np.ndarray]
    static_facts: TierFacts | None
    static_embedded: int
    text_files: int
    cut: int
    kept_all: bool = False

    @classmethod
    def of(cls, previous: LoadedIndex) -> _Parts:
        """The committed index's parts, as they are (memory-mapped: a commit links their files)."""
        vectors = {STATIC: previous.vectors[STATIC]} if STATIC in previous.vectors else {}
        return cls(previous.columns, previous.bm25, previous.symbols, vectors, previous.manifest.of(STATIC), 0,
                   previous.manifest.n_files, 0, kept_all=True)


class IndexBuilder:
    """Build or update the index of one repository in its store.

    Args:
        root: the repository folder.
        store: where the index is committed.
        tiers: the models that embed it.
        options: chunking, ignore files, which kinds the transformer reads.
    """

    def __init__(self, root: Path, store: IndexStore, tiers: Tiers, options: BuildOptions) -> None:
        self.root = root
        self.store = store
        self.tiers = tiers
        self.options = options
        self._cancel = threading.Event()

    def cancel(self) -> None:
        """Ask a build running in another thread to stop at its next checkpoint (it commits nothing)."""
        self._cancel.set()

    def build(self, tier: Tier, previous: LoadedIndex | None, *, progress: bool = False,
              first_answer: bool = False, commit: bool = True) -> tuple[LoadedIndex, IndexReport]:
        """Index the repository as it is on disk now and commit it; call under the store's write lock.

        With ``commit=False`` nothing is written (no checkpoint, no generation,
        no lock needed): the new index lives in memory only, keeping the token
        of ``previous`` (the generation it was built on). That is how a
        read-only index sees the files changed since it was built.

        Args:
            tier: ``full`` (transformer vectors, plus the static tier when
                there is one), ``static`` (keywords and static vectors) or
                ``keyword``.
            previous: the committed index, whose unchanged files, chunk texts
                and vectors are kept; ``None`` builds from nothing.
            progress: show progress bars.
            first_answer: building for a search's first answer: the static
                tier where its model can be had, else the transformer's.
            commit: commit the new index to the store (``False``: in memory only).

        Returns:
            The new index in memory and what the run did.

        Raises:
            EmptyRepositoryError: nothing under the root can be indexed.
            ModelNotAvailableError: a tier's model cannot be had here.
            IndexCancelledError: :meth:`cancel` was called; nothing is committed.
        """
        self._cancel.clear()
        started, scanned_ns = time.perf_counter(), time.time_ns()
        listing = list_files(self.root, use_ignore_files=self.options.use_ignore_files,
                             max_file_bytes=self.options.max_file_bytes, exclude_dirs=[self.store.directory])
        listed = sorted(listing.files, key=lambda f: f.rel)
        old = _Previous(previous, previous is not None and previous.manifest.chunker == self.options.chunker_facts())
        if previous is not None and tier != KEYWORD and self._keeps_all(previous, old, listed):
            parts = _Parts.of(previous)  # nothing to cut: columns, keywords and static vectors stay as committed
        else:
            parts = self._cut(tier, previous, old, listed, listing.files_seen, progress, commit)
        return self._finish(tier, parts, previous, listing.walk_stats, scanned_ns, started, progress=progress,
                            first_answer=first_answer, commit=commit)

    def _keeps_all(self, previous: LoadedIndex, old: _Previous, listed: Sequence[Listed]) -> bool:
        """Whether the committed index holds every file as it is now, and static vectors of this static model
        where it loads: then a build only adds what a tier lacks (the transformer's vectors, a graph)."""
        if not old.all_unchanged(listed):
            return False
        stored = previous.manifest.of(STATIC)
        if not self.tiers.static_loads(self.root):
            return STATIC not in previous.vectors
        return STATIC in previous.vectors and stored is not None \
            and stored.fingerprint == self.tiers.static_embedder.fingerprint

    def _cut(self, tier: Tier, previous: LoadedIndex | None, old: _Previous, listed: Sequence[Listed],
             files_seen: int, progress: bool, commit: bool) -> _Parts:
        """Stream every file: unchanged ones taken from the committed index, the others cut; static vectors kept,
        taken from the cutters or embedded; keyword counts gathered and fitted."""
        static: _StaticStream | None = None
        static_checked = False
        writer, keywords = ColumnsWriter(), BM25Builder()
        text_files = cut = 0

        def static_stream() -> _StaticStream | None:
            # The static model loads when there is something to cut or keep: an empty folder fails in milliseconds.
            nonlocal static, static_checked
            if not static_checked:
                static_checked = True
                if tier != KEYWORD and self.tiers.static_loads(self.root):
                    static = _StaticStream(_Vectors(STATIC, self.tiers.static_embedder, previous, self.store, False,
                                                    commit), self, progress)
            return static

        def add_static(row: int, key: bytes, path: str, text: str, made: np.ndarray | None = None) -> None:
            stream = static_stream()
            if stream is not None:
                stream.add(row, key, path, text, made)

        stream = static_stream() if listed else None
        for listed_file, kept, cut_file in self._stream(listed, old, progress,
                                                        stream.vectors.embedder if stream is not None else None):
            # Read again (its stat changed, or was too recent to trust) with the same bytes: kept as unchanged.
            same = cut_file is not None and cut_file.same
            number = old.number(listed_file.rel) if same else kept
            result = None if same else cut_file
            if number is not None:  # unchanged: its chunks, counts and vectors come from the committed index
                assert old.columns is not None and previous is not None
                c = old.columns
                skipped = bytes(c.file_sha256[number]) == _NO_FILE and not len(c.rows_of_file(number))
                file = writer.add_file(listed_file.rel, bytes(c.file_sha256[number]), int(c.file_size[number]),
                                       listed_file.mtime_ns)
                text_files += not skipped
                offsets, terms, counts = old.doc_terms()
                kind = kind_of(listed_file.rel)  # as this codesearch classes it (a stored kind may be an older rule's)
                for i in c.rows_of_file(number):
                    row = writer.add_chunk(file, int(c.start[i]), int(c.end[i]), kind, bytes(c.key[i]),
                                           c.symbols_of(i), c.text(i))
                    keywords.add_document(terms[offsets[i]:offsets[i + 1]], counts[offsets[i]:offsets[i + 1]],
                                          previous.bm25.vocabulary_, old.remap())
                    add_static(row, bytes(c.key[i]), listed_file.rel, c.text(i))
                continue
            assert result is not None
            cut += 1  # read and cut again
            file = writer.add_file(listed_file.rel, result.sha256 if result.skipped is None else _NO_FILE, result.size,
                                   listed_file.mtime_ns)
            text_files += result.skipped is None
            kind = kind_of(listed_file.rel)
            for chunk in result.chunks:
                row = writer.add_chunk(file, chunk.start, chunk.end, kind, chunk.key, chunk.symbols, chunk.text)
                keywords.add_counts(chunk.terms, chunk.counts)
                add_static(row, chunk.key, listed_file.rel, chunk.text, chunk.static)
            if self._cancel.is_set():
                raise IndexCancelledError(f"indexing {self.root} was cancelled; nothing was committed")
        columns = writer.finish()
        if not len(columns):
            raise EmptyRepositoryError(
                f"nothing to index under {self.root}: {files_seen} files seen, "
                f"{text_files} readable text files, 0 chunks (see `codesearch stats`)"
            )
        if not keywords.vocabulary:  # every chunk, and its path, is punctuation and symbols alone
            raise EmptyRepositoryError(
                f"nothing to index under {self.root}: its {len(columns)} chunks and their paths hold no word "
                "(letters, digits or _)"
            )
        parts = _Parts(columns, keywords.fit(), SymbolTable.build(_chunk_symbols(columns)), {}, None, 0,
                       text_files, cut)
        if static is not None:
            parts.vectors[STATIC], parts.static_embedded = static.finish(len(columns)), static.embedded
            embedder_ = static.vectors.embedder
            parts.static_facts = TierFacts(embedder_.spec.name, embedder_.fingerprint, embedder_.dim)
        return parts

    def _finish(self, tier: Tier, parts: _Parts, previous: LoadedIndex | None, walk_stats: dict[str, Any],
                scanned_ns: int, started: float, *, progress: bool, first_answer: bool,
                commit: bool) -> tuple[LoadedIndex, IndexReport]:
        """Add the transformer's vectors where the tier asks for them, the vector searches, and commit."""
        columns, vectors, static_facts = parts.columns, parts.vectors, parts.static_facts
        if tier == STATIC and STATIC not in vectors:
            if not first_answer:
                raise ModelNotAvailableError(f"there is no static tier for {self.root} here; index the full tier instead")
            tier = FULL
        full_facts = None
        embedded = 0
        unread_kinds = self._unread_kinds(previous)
        unread_codes = {KIND_CODES[k] for k in unread_kinds}
        read = np.flatnonzero(~np.isin(columns.kind, list(unread_codes))) if unread_codes else np.arange(len(columns))
        heads = {row: head for row, head in columns.window_heads().items() if int(columns.kind[row]) not in unread_codes}
        keeps_full = tier == STATIC and previous is not None and FULL in previous.vectors
        if tier == FULL or keeps_full:
            # A static refresh of a full index keeps the transformer tier in step: its new chunks are embedded too.
            embedder = self.tiers.embedder
            if keeps_full:
                assert previous is not None
                self.tiers.check(previous.manifest.of(FULL), FULL, embedder)
            full = _Vectors(FULL, embedder, previous, self.store, True, commit)
            vectors[FULL], embedded = self._full_vectors(full, columns, read, heads, progress)
            full_facts = TierFacts(embedder.spec.name, embedder.fingerprint, embedder.dim, unread_kinds)
            tier = FULL
        searches = self._graphs(vectors, columns, read, previous, graphs=tier == FULL)
        manifest = IndexManifest(
            root=str(self.root), tier=tier, full=full_facts, static=static_facts,
            chunker=self.options.chunker_facts(), walk_stats=dict(walk_stats),
            use_ignore_files=self.options.use_ignore_files, n_files=parts.text_files, n_chunks=len(columns),
            scanned_ns=scanned_ns,
        )
        arrays = {ARRAYS[t]: v for t, v in vectors.items()}
        for t, search in searches.items():
            arrays.update(search.to_arrays(graph_prefix(t)))
        arrays.update(columns.to_arrays())
        arrays.update(parts.symbols.to_arrays())
        arrays.update({BM25_PREFIX + name: array for name, array in parts.bm25.to_arrays(copy=False).items()})
        if parts.kept_all:
            removed = 0
        else:
            old_keys = {bytes(k) for k in previous.columns.key} if previous is not None else set()
            removed = len(old_keys - {bytes(k) for k in columns.key})
        counts: dict[str, Any] = dict(
            files=parts.text_files,
            chunks=len(columns),
            embedded=embedded,
            reused=(len(read) - len(heads) - embedded) if tier == FULL else (
                len(columns) - parts.static_embedded if static_facts is not None else 0),
            removed=removed,
            tier=tier,
            static_embedded=parts.static_embedded,
            changed_files=parts.cut,
            unread=len(columns) - len(read) if tier == FULL else 0,
            shared=len(heads) if tier == FULL else 0,
        )
        if commit:
            self.store.save(IndexSnapshot(manifest.to_json(), [], arrays))
            self.store.clear_checkpoint()
            del arrays, vectors, searches, parts, columns
            # What was just written, memory-mapped: the arrays built in memory are freed, a searcher holds only the
            # pages its queries touch, and the next commit links the files it keeps unchanged.
            token = self.store.current_token()
            loaded = LoadedIndex.from_snapshot(self.store.load(mmap=True, written_here=True), token)
        else:
            loaded = LoadedIndex(manifest, columns, vectors, parts.bm25, parts.symbols,
                                 previous.token if previous is not None else None)
            loaded.searches.update(searches)
        report = IndexReport(seconds=round(time.perf_counter() - started, 3), **counts)
        return loaded, report

    def _stream(self, listed: Sequence[Listed], old: _Previous, progress: bool,
                static: TextEmbedder | None) -> Iterator[tuple[Listed, int | None, CutFile | None]]:
        """Each file in path order, with its committed file number when unchanged, else the result of cutting it."""
        from tqdm.auto import tqdm

        keep = [old.unchanged(f) for f in listed]
        tasks = [FileTask(f.rel, f.path, f.size, f.mtime_ns, old.sha256(f.rel)) for f, number in zip(listed, keep)
                 if number is None]
        results = cut_in_order(tasks, self.options.chunking, self.options.chunk_params, self.options.max_file_bytes,
                               self.options.workers or available_cores(), static)
        with tqdm(total=len(listed), desc="indexing", unit="file", disable=not progress or len(tasks) < 64) as bar:
            for f, number in zip(listed, keep):
                yield f, number, None if number is not None else next(results)
                bar.update(1)

    def _full_vectors(self, full: _Vectors, columns: ChunkColumns, read: np.ndarray, heads: dict[int, int],
                      progress: bool) -> tuple[np.ndarray, int]:
        """The transformer's matrix: ``read`` rows kept by key or embedded in checkpointed slices; window heads copied."""
        from tqdm.auto import tqdm

        out = np.zeros((len(columns), full.embedder.dim), dtype=np.float32)
        missing: list[int] = []
        for row in read.tolist():
            if row in heads:
                continue
            old, saved = full.found(bytes(columns.key[row]))
            if old is not None:
                assert full.old is not None
                out[row] = full.old[old]
            elif saved is not None:
                out[row] = saved
            else:
                missing.append(row)
        with tqdm(total=len(missing), desc="embedding", unit="chunk", disable=not progress or not missing) as bar:
            for start in range(0, len(missing), CHECKPOINT_EVERY):
                if self._cancel.is_set():
                    raise IndexCancelledError(f"indexing {self.root} was cancelled; {start} chunks kept for next time")
                part = missing[start:start + CHECKPOINT_EVERY]
                made = full.embedder.embed_documents([document_text(columns.path(i), columns.text(i)) for i in part])
                if full.checkpoint:
                    self.store.save_checkpoint(full.embedder.fingerprint, [columns.key_hex(i) for i in part], made)
                out[part] = made
                bar.update(len(part))
        for row, head in heads.items():
            out[row] = out[head]
        return out, len(missing)

    def _graphs(self, vectors: dict[Tier, np.ndarray], columns: ChunkColumns, read: np.ndarray,
                previous: LoadedIndex | None, *, graphs: bool) -> dict[Tier, VectorSearch]:
        """Each tier's vector search: exact below :data:`~codesearch.index.vectors.EXACT_BELOW` chunks, else a graph.

        A graph is made when the transformer tier is built (seconds, beside its minutes), not for a first
        answer, which the exact product serves; once made, a refresh keeps it and searches the changed rows
        exactly (:meth:`VectorSearch.refresh`) until they pass a share of it.
        """
        searches: dict[Tier, VectorSearch] = {}
        for tier, rows in vectors.items():
            covered = None
            if tier == FULL and len(read) < len(columns):
                covered = np.zeros(len(columns), dtype=bool)
                covered[read] = True
            before = previous.searches.get(tier) if previous is not None else None
            stored = previous.manifest.of(tier) if previous is not None else None
            same = before is not None and not before.exact and stored is not None and stored.fingerprint == (
                self.tiers.embedder if tier == FULL else self.tiers.static_embedder).fingerprint
            if same and previous is not None and before is not None:
                reuse = reuse_by_key(previous.columns.key_hexes(), columns.key_hexes())
                searches[tier] = before.refresh(rows, covered, reuse, exact_below=vectors_module.EXACT_BELOW)
            elif graphs:
                searches[tier] = VectorSearch.build(rows, covered, params=TIER_PARAMS[tier],
                                                    exact_below=vectors_module.EXACT_BELOW)
            else:
                searches[tier] = VectorSearch(rows, covered, params=TIER_PARAMS[tier])
        return searches

    def _unread_kinds(self, previous: LoadedIndex | None) -> frozenset[str]:
        """The chunk kinds the transformer leaves to keywords and the static tier: as asked, else as stored."""
        if self.options.embed_tests is not None:
            return frozenset() if self.options.embed_tests else UNREAD_BY_DEFAULT
        stored = previous.manifest.unread_kinds if previous is not None else None
        return UNREAD_BY_DEFAULT if stored is None else stored


def _chunk_symbols(columns: ChunkColumns) -> Iterator[tuple[int, list[str]]]:
    symbols = columns.symbols.tolist()
    bounds = columns.symbol_start.tolist()
    for i in range(len(columns)):
        if bounds[i] != bounds[i + 1]:
            yield i, symbols[bounds[i]:bounds[i + 1]]


__all__ = ["CHECKPOINT_EVERY", "STATIC_BATCH", "BuildOptions", "IndexBuilder"]
