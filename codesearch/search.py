"""The :class:`CodeSearch` facade: index a repository, keep it fresh, query it.

Data flows scan -> chunk -> embed -> index (store) -> search -> rank -> filter.

An index has up to two embedding tiers beside its BM25 keywords:

- ``static``: vectors from a static model distilled from the transformer
  (:mod:`codesearch.static`) -- a whole repository in about a second;
- ``full``: the transformer's own vectors (:mod:`codesearch.embed`).

A search on a repository never indexed builds the static tier first and
answers from it; :meth:`CodeSearch.index` adds the transformer tier. Every
search uses what is there and says which tier answered
(:attr:`CodeSearch.last_search`). Indexing is incremental in both tiers:
every chunk is keyed by the sha256 of the exact text given to the model, so
a chunk whose text is unchanged keeps its stored vectors, and a file whose
bytes are unchanged is not chunked again. Before answering, a search stats
the files (size and modification time, no reading) and re-indexes the ones
that changed. A query is refused (``ModelMismatchError``) when the index was
built by a different model than the one asked for -- by name before anything
is loaded, and by fingerprint per tier.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from codesearch.chunking import (
    DEFINITIONS_VERSION,
    Chunk,
    ChunkParams,
    chunk_text,
    document_text,
    keyword_text,
    window_heads,
)
from codesearch.exceptions import (
    EmptyRepositoryError,
    ExportError,
    IndexCancelledError,
    IndexCorruptError,
    IndexLockedError,
    ModelMismatchError,
    ModelNotAvailableError,
    RootNotFoundError,
)
from codesearch.keyword import BM25
from codesearch.ranking import DEFAULT_PRIORS, IndexFacts, Ranking, rank, resolve_ranking
from codesearch.scan import Changes, changed_files, scan
from codesearch.scope import Scope, kind_of
from codesearch.store import IndexSnapshot, IndexStore, default_index_dir

if TYPE_CHECKING:
    from codesearch.models import ModelSpec

Mode = Literal["bm25", "dense", "hybrid"]
MODES: tuple[Mode, ...] = ("bm25", "dense", "hybrid")
Chunking = Literal["definitions", "lines"]
CHUNKINGS: tuple[Chunking, ...] = ("definitions", "lines")
Tier = Literal["keyword", "static", "full"]
TIERS: tuple[Tier, ...] = ("keyword", "static", "full")
DEFAULT_MODEL = "minilm"
CHECKPOINT_EVERY = 128
"""Chunks embedded between two checkpoints of an index run (also how soon :meth:`CodeSearch.cancel_indexing` acts)."""
UNREAD_BY_DEFAULT = frozenset({"test"})
"""Chunk kinds the transformer leaves to keywords and the static tier unless ``embed_tests``."""
_BM25_PREFIX = "bm25_"
_DENSE = "vectors"
_STATIC = "static_vectors"
_KEYWORD_ONLY = "this searcher is keyword-only (model=None); pass a model to embed, or search with mode='bm25'"


@lru_cache(maxsize=1)
def _blas_controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_blas_thread() -> Any:
    """A context in which numpy's BLAS runs on one thread.

    A query's products are small, and OpenBLAS's threads keep spinning after
    one: on a loaded machine they took the cores from onnxruntime's query
    embedding (gson p50 15-32 ms against 6-7 ms on one BLAS thread, same run).
    """
    return _blas_controller().limit(limits=1, user_api="blas")


class TextEmbedder(Protocol):
    """What :class:`CodeSearch` needs from an embedding model (:class:`codesearch.embed.Embedder`)."""

    @property
    def fingerprint(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def spec(self) -> ModelSpec: ...

    def embed_documents(self, texts: Sequence[str], progress: bool = False) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: a chunk of a file, its score and its kind.

    ``str(hit)`` reads ``path:start-end  (score, kind)``; :attr:`location` is
    the bare ``path:start-end`` an editor opens. ``root`` is set when several
    repositories are searched together (:class:`codesearch.multi.MultiSearch`).
    """

    path: str
    start_line: int
    end_line: int
    score: float
    kind: str
    text: str
    symbols: tuple[str, ...] = ()
    root: str | None = None

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"

    def __str__(self) -> str:
        return f"{self.location}  ({self.score:.4f}, {self.kind})"

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["symbols"] = list(self.symbols)
        data["location"] = self.location
        if self.root is None:
            data.pop("root")
        return data


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What one :meth:`CodeSearch.index` run did.

    Attributes:
        files: files indexed.
        chunks: chunks in the index.
        embedded: chunks the transformer embedded (0 for a static-tier build).
        reused: chunks whose vectors were kept.
        unread: chunks the transformer does not read (test files, unless
            ``embed_tests``); keywords and the static tier still find them.
        shared: later line windows of a long definition, which share the
            vector of its first window (:func:`~codesearch.chunking.window_heads`).
        removed: chunks of the previous index that are gone.
        seconds: wall time.
        tier: the tier the index now has (``keyword``, ``static`` or ``full``).
        static_embedded: chunks the static model embedded.
        changed_files: files read and chunked again (all of them on a first build).
    """

    files: int
    chunks: int
    embedded: int
    reused: int
    removed: int
    seconds: float
    tier: str = "full"
    static_embedded: int = 0
    changed_files: int = 0
    unread: int = 0
    shared: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _previous_heads(previous: IndexSnapshot) -> dict[int, int]:
    """:func:`~codesearch.chunking.window_heads` of a stored index's chunk records."""
    return window_heads([Chunk(r["path"], r["start_line"], r["end_line"], "", tuple(r.get("symbols", ())))
                         for r in previous.chunks])


@dataclass(frozen=True, slots=True)
class SearchInfo:
    """How the last :meth:`CodeSearch.search` was answered.

    Attributes:
        tier: which tier answered (``keyword``, ``static`` or ``full``).
        refreshed: files re-indexed before answering because they had changed.
        built: whether the index had to be built first.
        seconds: wall time of the search, refresh included.
    """

    tier: str
    refreshed: int
    built: bool
    seconds: float


def chunk_key(document: str) -> str:
    """Identity of a chunk's model input: sha256 of its exact text."""
    return hashlib.sha256(document.encode("utf-8", "surrogatepass")).hexdigest()


class CodeSearch:
    """Search one repository by keyword (BM25), by meaning (embeddings), or both fused.

    Args:
        root: the repository folder.
        model: a catalogue name (``"minilm"``, ``"bge-small"``, ``"bge-m3"``),
            a hub id or local model folder, a :class:`~codesearch.models.ModelSpec`,
            or an already loaded embedder. Loaded lazily: keyword search never
            loads it. ``None`` builds a keyword-only index (no vectors).
        index_dir: where the index lives; by default a folder in the user cache
            keyed by the absolute root.
        int8: use the int8-quantised export (the default; kept only where it
            passed its quality gate against fp32); ``False`` for fp32.
        static: the static tier's embedder: ``None`` (default) distils one from
            ``model`` when that is a name, folder or spec; ``False`` for none;
            or an object with ``embed_documents``/``embed_query``.
        fast_start: when a search finds no index, build the static tier first
            and answer from it (the transformer tier follows with
            :meth:`index`); ``False`` builds the full index before answering.
        refresh: before each search, stat the files and re-index the ones that
            changed (``search(refresh=...)`` overrides it per call).
        use_ignore_files: honour ``.gitignore`` and ``.codesearchignore``.
        chunking: ``"definitions"`` (default) cuts code along functions,
            classes and methods and records the symbols each chunk defines;
            ``"lines"`` is the published line-window chunker.
        ranking: ``"default"``, ``"article"`` (the published plain RRF) or a
            :class:`~codesearch.ranking.Ranking`.
        chunk_params: chunk sizes; by default a 400-token budget for definition
            chunks and 700-token line windows (:meth:`ChunkParams.for_chunking`).
        embed_tests: whether the transformer reads test files too. ``None``
            (default) keeps the stored index's choice, and for a new index
            leaves them to keywords and the static tier: tests are a fifth of
            a typical repository's chunks and rank below source anyway, and
            leaving them out made the index 18% faster for 0.001 NDCG@10 on
            the peer benchmark (``benchmarks/README.md``).
        lock_timeout: seconds to wait for another writer of the same index.
        progress: show a progress bar when :meth:`search` has to build the
            index first (``index(progress=...)`` decides for itself).

    Example:
        >>> cs = CodeSearch("path/to/repo")                       # doctest: +SKIP
        >>> cs.search("why does a POST turn into a GET", k=5)     # doctest: +SKIP
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        model: str | ModelSpec | TextEmbedder | None = DEFAULT_MODEL,
        *,
        index_dir: str | os.PathLike[str] | None = None,
        int8: bool = True,
        static: TextEmbedder | bool | None = None,
        fast_start: bool = True,
        refresh: bool = True,
        use_ignore_files: bool = True,
        chunking: Chunking = "definitions",
        ranking: str | Ranking = "default",
        chunk_params: ChunkParams | None = None,
        embed_tests: bool | None = None,
        lock_timeout: float = 30.0,
        progress: bool = False,
    ) -> None:
        if chunking not in CHUNKINGS:
            raise ValueError(f"unknown chunking {chunking!r}; use one of {', '.join(CHUNKINGS)}")
        self.root = Path(root).expanduser().absolute()
        if not self.root.is_dir():
            what = "not a directory" if self.root.exists() else "path does not exist"
            raise RootNotFoundError(f"{what}: {root}")
        self.store = IndexStore(index_dir if index_dir is not None else default_index_dir(self.root))
        self.use_ignore_files = use_ignore_files
        self.chunking = chunking
        self.ranking = resolve_ranking(ranking)
        self.chunk_params = chunk_params if chunk_params is not None else ChunkParams.for_chunking(chunking)
        self.embed_tests = embed_tests
        self.lock_timeout = lock_timeout
        self.progress = progress
        self.fast_start = fast_start
        self.refresh = refresh
        self.last_search: SearchInfo | None = None
        self._model = model
        self._int8 = int8
        # An object that can embed is used as it is; a name, path or spec is loaded on first use.
        self._embedder: TextEmbedder | None = model if hasattr(model, "embed_query") else None  # type: ignore[assignment]
        self._static_choice = static
        self._static: TextEmbedder | None = static if hasattr(static, "embed_query") else None  # type: ignore[assignment]
        self._loaded: _LoadedIndex | None = None
        self._loaded_token: bytes | None = None
        self._cancel = threading.Event()
        self._query_worker = ThreadPoolExecutor(1, thread_name_prefix="codesearch-query")

    # -- models ----------------------------------------------------------------

    @property
    def model_name(self) -> str | None:
        """The name of the model asked for, known without loading it (``None`` for keyword-only)."""
        if self._model is None:
            return None
        if self._embedder is not None:
            return str(self._embedder.spec.name)
        from codesearch.models import resolve_model

        return resolve_model(self._model).name  # type: ignore[arg-type]

    @property
    def embedder(self) -> TextEmbedder:
        """The transformer, loaded (and exported if needed) on first use.

        Raises:
            ModelNotAvailableError: the model cannot be loaded, or this is a
                keyword-only searcher (``model=None``).
        """
        if self._model is None:
            raise ModelNotAvailableError(_KEYWORD_ONLY)
        if self._embedder is None:
            from codesearch.embed import Embedder

            self._embedder = Embedder(self._model, int8=self._int8)  # type: ignore[arg-type]
        return self._embedder

    @property
    def has_static(self) -> bool:
        """Whether this searcher has a static tier (it needs a model given by name, folder or spec)."""
        if self._static is not None:
            return True
        return self._static_choice is None and self._model is not None and not hasattr(self._model, "embed_query")

    @property
    def static_embedder(self) -> TextEmbedder:
        """The static tier's embedder, loaded (and distilled if needed) on first use.

        Raises:
            ModelNotAvailableError: this searcher has no static tier.
        """
        if self._static is None:
            if not self.has_static:
                raise ModelNotAvailableError("this searcher has no static tier (static=False, or the model is an object)")
            from codesearch.static import StaticEmbedder

            self._static = StaticEmbedder(self._model)  # type: ignore[arg-type]
        return self._static

    # -- indexing --------------------------------------------------------------

    def index(self, *, progress: bool = False, tier: Tier | None = None) -> IndexReport:
        """Build the index, or bring it up to date with the files on disk.

        Unchanged files are not chunked again and unchanged chunks keep their
        stored vectors; only new chunk texts are embedded. The new state is
        committed atomically, so a crash leaves the previous index intact.

        Args:
            progress: show a progress bar while embedding.
            tier: ``"full"`` (default: transformer vectors, plus the static
                tier when there is one), ``"static"`` (keywords and static
                vectors only: seconds, not minutes) or ``"keyword"``.

        Returns:
            Counts of files and chunks, how many were embedded, reused and
            removed, the tier built and the seconds taken.

        Raises:
            RootNotFoundError: the root is missing or not a folder.
            EmptyRepositoryError: nothing under the root can be indexed.
            IndexLockedError: another process is writing this index.
            ModelNotAvailableError: the model cannot be loaded here.
            ModelMismatchError: the index holds another model's vectors and
                ``tier="static"`` would leave them out of step.
        """
        if tier is None:
            tier = "keyword" if self._model is None else "full"
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r}; use one of {', '.join(TIERS)}")
        if tier != "keyword" and self._model is None:
            raise ModelNotAvailableError(_KEYWORD_ONLY)
        self._cancel.clear()
        with self.store.write_lock(timeout=self.lock_timeout):
            return self._index_locked(tier, progress)

    def _static_loads(self) -> None:
        """Load the static model; where it cannot be had (no cached distillation and no export extra),
        warn and go on without the static tier rather than fail the index."""
        try:
            self.static_embedder  # noqa: B018
        except (ExportError, ModelNotAvailableError) as exc:
            warnings.warn(f"codesearch: no static tier for {self.root} ({exc}); indexing with the transformer only",
                          RuntimeWarning, stacklevel=4)
            self._static_choice = False

    def cancel_indexing(self) -> None:
        """Ask an :meth:`index` running in another thread to stop at its next checkpoint.

        It raises :class:`~codesearch.exceptions.IndexCancelledError` there and
        commits nothing; the vectors embedded so far stay in the checkpoint,
        so the next run goes on from them.
        """
        self._cancel.set()

    def _index_locked(self, tier: Tier, progress: bool) -> IndexReport:
        started = time.perf_counter()
        previous = self._previous_snapshot()
        result = scan(self.root, use_ignore_files=self.use_ignore_files, exclude_dirs=[self.store.directory])
        chunks, changed = self._chunks(result.files, previous)
        if not chunks:
            raise EmptyRepositoryError(
                f"nothing to index under {self.root}: {result.files_seen} files seen, "
                f"{len(result.files)} readable text files, 0 chunks (see `codesearch stats`)"
            )
        # Models load only once there is something to embed: an empty folder fails in milliseconds.
        if tier != "keyword" and self.has_static:
            self._static_loads()  # turns the static tier off, with a warning, where it cannot be had
        if tier == "static" and not self.has_static:
            tier = "full"
        documents = [document_text(c.path, c.text) for c in chunks]
        keys = [chunk_key(d) for d in documents]
        kinds = [kind_of(c.path) for c in chunks]
        unread_kinds = self._unread_kinds(previous)
        read = [i for i, kind in enumerate(kinds) if kind not in unread_kinds]
        # A long definition's later windows share its first window's vector: the transformer reads each once.
        heads = {row: head for row, head in window_heads(chunks).items() if kinds[row] not in unread_kinds}
        arrays: dict[str, np.ndarray] = {}
        facts: dict[str, Any] = {}
        embedded = static_embedded = 0
        old_keys = {record["key"] for record in previous.chunks} if previous is not None else set()

        if tier in ("static", "full") and self.has_static:
            static = self.static_embedder
            vectors, fresh = self._vectors(static, documents, keys, range(len(keys)), previous, _STATIC, "static",
                                           checkpoint=False, progress=False)
            arrays[_STATIC] = vectors
            facts["static"] = {"name": static.spec.name, "fingerprint": static.fingerprint, "dim": static.dim}
            static_embedded = fresh
        if tier == "full":
            embedder = self.embedder
            arrays[_DENSE], embedded = self._vectors(embedder, documents, keys, read, previous, _DENSE, "model",
                                                     checkpoint=True, progress=progress, heads=heads)
            facts["model"] = {"name": embedder.spec.name, "fingerprint": embedder.fingerprint, "dim": embedder.dim,
                              "unread_kinds": sorted(unread_kinds)}
        elif tier == "static" and previous is not None and _DENSE in previous.arrays:
            # A static refresh of a full index keeps the transformer tier in step: embed its new chunks too.
            self._check_tier(previous.manifest, "model", self.embedder)
            arrays[_DENSE], embedded = self._vectors(self.embedder, documents, keys, read, previous, _DENSE,
                                                     "model", checkpoint=True, progress=progress, heads=heads)
            facts["model"] = {**previous.manifest["model"], "unread_kinds": sorted(unread_kinds)}
            tier = "full"

        bm25 = BM25().fit([keyword_text(c.path, c.text) for c in chunks])
        arrays.update({_BM25_PREFIX + k: v for k, v in bm25.to_arrays().items()})
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        manifest = {
            "root": str(self.root),
            "tier": tier,
            "model": facts.get("model"),
            "static": facts.get("static"),
            "chunker": self._chunker_facts(),
            "files": {f.path: f.sha256 for f in result.files},
            "stats": {path: list(stat) for path, stat in result.stats.items()},
            "walk_stats": {path: list(stat) for path, stat in result.walk_stats.items()},
            "use_ignore_files": self.use_ignore_files,
            "counts": {"files": len(result.files), "chunks": len(chunks)},
            "updated": now,
        }
        records = [
            {"path": c.path, "start_line": c.start_line, "end_line": c.end_line, "kind": kind,
             "key": key, "symbols": list(c.symbols), "text": c.text}
            for c, key, kind in zip(chunks, keys, kinds)
        ]
        self.store.save(IndexSnapshot(manifest, records, arrays))
        self.store.clear_checkpoint()
        self._loaded = _LoadedIndex(manifest, records, arrays.get(_DENSE), arrays.get(_STATIC), bm25)
        self._loaded_token = self.store.current_token()
        return IndexReport(
            files=len(result.files),
            chunks=len(chunks),
            embedded=embedded,
            reused=(len(read) - len(heads) - embedded) if tier == "full" else len(chunks) - static_embedded,
            removed=len(old_keys - set(keys)),
            seconds=round(time.perf_counter() - started, 3),
            tier=tier,
            static_embedded=static_embedded,
            changed_files=changed,
            unread=len(chunks) - len(read) if tier == "full" else 0,
            shared=len(heads) if tier == "full" else 0,
        )

    def _previous_snapshot(self) -> IndexSnapshot | None:
        """The stored index, or ``None`` when there is none or it is damaged (then it is rebuilt)."""
        if not self.store.exists():
            return None
        try:
            return self.store.load()
        except IndexCorruptError:
            return None

    def _chunker_facts(self) -> dict[str, Any]:
        """How this searcher cuts files; a stored index cut otherwise has its files cut again."""
        facts: dict[str, Any] = {"kind": self.chunking, **asdict(self.chunk_params)}
        if self.chunking == "definitions":
            facts["version"] = DEFINITIONS_VERSION
        return facts

    def _chunks(self, files: Sequence[Any], previous: IndexSnapshot | None) -> tuple[list[Chunk], int]:
        """Every file's chunks: a file whose bytes are unchanged keeps its stored chunks, the rest are cut again."""
        chunker = self._chunker_facts()
        kept: dict[str, list[Chunk]] = {}
        if previous is not None and previous.manifest.get("chunker") == chunker:
            old_files = previous.manifest.get("files", {})
            new_files = {f.path: f.sha256 for f in files}
            for record in previous.chunks:
                path = record["path"]
                if old_files.get(path) == new_files.get(path):
                    kept.setdefault(path, []).append(
                        Chunk(path, record["start_line"], record["end_line"], record["text"],
                              tuple(record.get("symbols", ()))))
        cut = _chunker(self.chunking)
        chunks: list[Chunk] = []
        changed = 0
        for source in files:
            if source.path in kept:
                chunks.extend(kept[source.path])
            else:
                changed += 1
                chunks.extend(cut(source.path, source.text, self.chunk_params))
        return chunks, changed

    def _unread_kinds(self, previous: IndexSnapshot | None) -> frozenset[str]:
        """The chunk kinds the transformer leaves to keywords and the static tier: as asked, else as stored."""
        if self.embed_tests is not None:
            return frozenset() if self.embed_tests else UNREAD_BY_DEFAULT
        stored = _unread_in(previous.manifest.get("model") if previous is not None else None)
        return UNREAD_BY_DEFAULT if stored is None else stored

    def _vectors(
        self, embedder: TextEmbedder, documents: Sequence[str], keys: Sequence[str], rows: Iterable[int],
        previous: IndexSnapshot | None, array: str, tier: str, *, checkpoint: bool, progress: bool,
        heads: dict[int, int] | None = None,
    ) -> tuple[np.ndarray, int]:
        """One tier's vectors: ``rows`` get stored ones reused by key or new ones, the rest zeros; and how many were new.

        ``heads`` (``{row: row it copies}``, rows among ``rows``; the transformer tier passes it, even empty):
        later windows of a long definition, which get their first window's vector instead of one of their own.
        Stored rows that were such copies are then never reused by their key.
        """
        found: dict[str, np.ndarray] = self.store.load_checkpoint(embedder.fingerprint) if checkpoint else {}
        if previous is not None and array in previous.arrays:
            stored = previous.manifest.get(tier) or {}
            if stored.get("fingerprint") == embedder.fingerprint:
                vectors = previous.arrays[array]
                unread = _unread_in(stored) or frozenset()
                # A shared row holds another chunk's vector: its key must not bring that vector back.
                shared = _previous_heads(previous) if heads is not None else {}
                found.update((record["key"], vectors[i]) for i, record in enumerate(previous.chunks)
                             if record.get("kind") not in unread and i not in shared)
        heads = heads or {}
        rows = [i for i in rows if i not in heads]
        missing = [i for i in rows if keys[i] not in found]
        fresh = self._embed(embedder, documents, keys, missing, checkpoint, progress)
        out = np.zeros((len(keys), embedder.dim), dtype=np.float32)
        for i in rows:
            out[i] = fresh[i] if i in fresh else found[keys[i]]
        for row, head in heads.items():
            out[row] = out[head]
        return out, len(missing)

    def _embed(
        self, embedder: TextEmbedder, documents: Sequence[str], keys: Sequence[str], missing: Sequence[int],
        checkpoint: bool, progress: bool,
    ) -> dict[int, np.ndarray]:
        """Embed ``documents[missing]``; in checkpointed slices, so a crash loses at most one slice."""
        from tqdm.auto import tqdm

        rows: dict[int, np.ndarray] = {}
        if not checkpoint:
            if missing:
                rows.update(zip(missing, embedder.embed_documents([documents[i] for i in missing])))
            return rows
        with tqdm(total=len(missing), desc="embedding", unit="chunk", disable=not progress or not missing) as bar:
            for start in range(0, len(missing), CHECKPOINT_EVERY):
                if self._cancel.is_set():
                    raise IndexCancelledError(f"indexing {self.root} was cancelled; {start} chunks kept for next time")
                part = missing[start:start + CHECKPOINT_EVERY]
                vectors = embedder.embed_documents([documents[i] for i in part])
                self.store.save_checkpoint(embedder.fingerprint, [keys[i] for i in part], vectors)
                rows.update(zip(part, vectors))
                bar.update(len(part))
        return rows

    # -- freshness ---------------------------------------------------------------

    def changes(self) -> Changes:
        """Files changed on disk since the stored index (added, modified, removed), found by a stat pass alone.

        Returns:
            Empty when there is no index yet.
        """
        if not self.store.exists():
            return Changes()
        return self._changed_since(self._ensure_loaded().manifest)

    def _changed_since(self, manifest: dict[str, Any]) -> Changes:
        return changed_files(self.root, manifest.get("stats", {}), use_ignore_files=self.use_ignore_files,
                             exclude_dirs=[self.store.directory], walk_stats=manifest.get("walk_stats"))

    def _refresh(self) -> int:
        """Re-index changed files before a search; 0 when nothing changed or another writer is busy."""
        loaded = self._ensure_loaded()
        if loaded.manifest.get("stats") is None:
            return 0  # an index from before the stat pass: `codesearch index` brings it up to date
        found = self._changed_since(loaded.manifest)
        if not found:
            return 0
        tier = loaded.manifest.get("tier") or ("full" if loaded.vectors is not None else "static")
        try:
            with self.store.write_lock(timeout=0):
                self._index_locked(tier if self._model is not None else "keyword", progress=False)  # type: ignore[arg-type]
        except IndexLockedError:
            return 0  # another writer is at it: answer from the committed state
        return len(found)

    # -- searching -------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 10,
        mode: Mode = "hybrid",
        *,
        scope: str | None = None,
        include: str | Iterable[str] = (),
        exclude: str | Iterable[str] = (),
        kinds: str | Iterable[str] | None = None,
        exclude_kinds: str | Iterable[str] = (),
        source_first: bool | None = None,
        refresh: bool | None = None,
    ) -> list[Hit]:
        """Find the ``k`` chunks that best answer ``query``.

        Args:
            query: words, a question, or an identifier.
            k: how many hits at most.
            mode: ``"bm25"`` (keywords), ``"dense"`` (embeddings) or
                ``"hybrid"`` (both, fused).
            scope: a path prefix such as ``"src/"``.
            include: gitignore-style globs a path must match.
            exclude: gitignore-style globs that drop a path.
            kinds: only these kinds (``source``, ``test``, ``doc``, ``config``).
            exclude_kinds: drop these kinds.
            source_first: override the ranking's test/doc/config priors for
                this query (``False`` ranks them purely on relevance).
            refresh: stat the files first and re-index those that changed
                (default: the searcher's ``refresh``).

        Filtering happens before the top-k cut, so asking for 10 source hits
        returns 10 source hits when there are that many. A repository never
        indexed is indexed first: its static tier when ``fast_start`` (the
        transformer follows with :meth:`index`), else in full.
        :attr:`last_search` says which tier answered.

        Returns:
            Hits in rank order, scored by the ranking pipeline.

        Raises:
            ValueError: an unknown mode or kind, an empty query, or ``k`` below 1.
            ModelMismatchError: the index was built with another model.
        """
        started = time.perf_counter()
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if not query.strip():
            raise ValueError("the query is empty; give words, a question or an identifier")
        where = Scope(
            prefix=scope,
            include=_strings(include),
            exclude=_strings(exclude),
            kinds=None if kinds is None else frozenset(_strings(kinds)),
            exclude_kinds=frozenset(_strings(exclude_kinds)),
        )
        ranking = self.ranking if source_first is None else _with_source_first(self.ranking, source_first)
        if mode != "bm25" and self._model is None:
            raise ModelNotAvailableError(_KEYWORD_ONLY)
        built = not self.store.exists()
        loaded = self._ensure_loaded()
        if mode != "bm25":
            self._check_name(loaded.manifest)
        wanted = self.refresh if refresh is None else refresh
        # Refreshing embeds changed chunks, so it needs this searcher's model to be the index's.
        stat_pass = not built and wanted and self._same_model(loaded.manifest)
        mask = None if where.is_unrestricted else where.mask(loaded.paths, loaded.kinds)
        # A query's vector depends on the model alone, not on the index: a worker thread embeds it
        # while this one runs the stat pass (and any refresh) and the keyword scores.
        semantic: tuple[str, TextEmbedder] | None = None
        pending: Future[np.ndarray] | None = None
        if mode != "bm25":
            semantic = self._semantic_tier(loaded, mask)
            pending = self._query_worker.submit(semantic[1].embed_query, query)
        refreshed = self._refresh() if stat_pass else 0
        if refreshed:
            loaded = self._ensure_loaded()
            mask = None if where.is_unrestricted else where.mask(loaded.paths, loaded.kinds)
        lists: dict[str, np.ndarray] = {}
        vectors: np.ndarray | None = None
        tier = "keyword"
        covered: dict[str, np.ndarray] = {}
        with _one_blas_thread():
            if mode != "dense":
                lists["bm25"] = loaded.bm25.score(query)
            if semantic is not None and pending is not None:
                # A refresh may have changed the tier (another process committed the transformer's).
                tier, embedder = self._semantic_tier(loaded, mask) if refreshed else semantic
                query_vector = pending.result() if embedder is semantic[1] else embedder.embed_query(query)
                vectors = loaded.vectors if tier == "full" else loaded.static
                lists["dense" if tier == "full" else "static"] = vectors @ query_vector  # type: ignore[operator]
                if tier == "full" and loaded.read is not None:
                    covered["dense"] = loaded.read
            self.last_search = SearchInfo(tier, refreshed, built, time.perf_counter() - started)
            ranked = rank(query, lists, loaded.facts, ranking, k, mask, vectors, covered)
        return [loaded.hit(i, score) for i, score in ranked]

    def _semantic_tier(self, loaded: _LoadedIndex, mask: np.ndarray | None = None) -> tuple[str, TextEmbedder]:
        """The best embedding tier for chunks in ``mask`` (transformer, else static) and the embedder for its queries.

        A scope of chunks the transformer did not read (``--kind test``) is answered by the static tier.
        """
        manifest = loaded.manifest
        unread_scope = loaded.read is not None and mask is not None and not (mask & loaded.read).any()
        if unread_scope and loaded.static is not None and self.has_static:
            self._check_tier(manifest, "static", self.static_embedder)
            return "static", self.static_embedder
        if loaded.vectors is not None:
            self._check_tier(manifest, "model", self.embedder)
            return "full", self.embedder
        if loaded.static is not None and self.has_static:
            self._check_tier(manifest, "static", self.static_embedder)
            return "static", self.static_embedder
        if loaded.static is None and manifest.get("model") is None and manifest.get("static") is None:
            raise ModelMismatchError(
                f"the index at {self.store.directory} is keyword-only (built without a model); "
                "search with mode='bm25' (--mode bm25) or re-index with a model"
            )
        self._check_tier(manifest, "model", self.embedder)  # a static index without a static model here
        raise ModelMismatchError(f"the index at {self.store.directory} has only a static tier, which this searcher "
                                 "cannot embed for; run `codesearch index` to add the transformer's")

    def related(self, path: str, line: int, k: int = 10) -> list[Hit]:
        """The ``k`` chunks most similar to the chunk at ``path:line``, that chunk left out.

        Args:
            path: a file path relative to the root (or absolute, inside it).
            line: a 1-based line the chunk covers.
            k: how many.

        Raises:
            ValueError: ``k`` below 1, a line below 1, or no indexed chunk covers ``path:line``.
            ModelNotAvailableError: a keyword-only index (similarity needs vectors).
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if line < 1:
            raise ValueError(f"line numbers start at 1, got {line}")
        loaded = self._ensure_loaded()
        relative = self._relative(path)
        candidates = [i for i, p in enumerate(loaded.paths) if p == relative]
        if not candidates:
            raise ValueError(f"{path} is not indexed under {self.root}")
        covering = [i for i in candidates if loaded.chunks[i]["start_line"] <= line <= loaded.chunks[i]["end_line"]]
        if not covering:
            raise ValueError(f"no indexed chunk of {relative} covers line {line}")
        seed = covering[0]
        transformer_read = loaded.vectors is not None and (loaded.read is None or bool(loaded.read[seed]))
        vectors = loaded.vectors if transformer_read else loaded.static
        if vectors is None:
            if loaded.vectors is not None:
                raise ModelNotAvailableError(
                    f"the transformer did not read {relative} (a {loaded.kinds[seed]} file) and the index has no "
                    "static tier; re-index with `codesearch index --embed-tests`")
            raise ModelNotAvailableError(f"the index at {self.store.directory} is keyword-only; related code needs vectors")
        with _one_blas_thread():
            scores = vectors @ vectors[seed]
        if transformer_read and loaded.read is not None:
            scores[~loaded.read] = -np.inf
        scores[seed] = -np.inf
        order = np.argsort(-scores, kind="stable")[:k]
        return [loaded.hit(int(i), float(scores[i])) for i in order if np.isfinite(scores[i])]

    def _relative(self, path: str) -> str:
        candidate = Path(path).expanduser()
        if candidate.is_absolute():
            try:
                return candidate.resolve().relative_to(self.root.resolve()).as_posix()
            except ValueError:
                raise ValueError(f"{path} is outside {self.root}") from None
        return candidate.as_posix().removeprefix("./")

    def _ensure_loaded(self) -> _LoadedIndex:
        token = self.store.current_token()
        if token is None:
            tier: Tier = "keyword" if self._model is None else ("static" if self.fast_start and self.has_static else "full")
            self.index(progress=self.progress, tier=tier)
            token = self.store.current_token()
        if self._loaded is None or token != self._loaded_token:
            snapshot = self.store.load()
            self._loaded = _LoadedIndex.from_snapshot(snapshot)
            self._loaded_token = token
        return self._loaded

    def _same_model(self, manifest: dict[str, Any]) -> bool:
        """Whether this searcher may write to an index with this manifest (same model name, or both keyword-only)."""
        stored = manifest.get("model") or manifest.get("static")
        if self._model is None or stored is None:
            return self._model is None and stored is None
        try:
            return self.model_name == stored.get("name")
        except ModelNotAvailableError:
            return False

    def _check_name(self, manifest: dict[str, Any]) -> None:
        """Refuse by name, before any model is loaded, an index built by another model."""
        asked = self.model_name
        stored = (manifest.get("model") or manifest.get("static") or {}).get("name")
        if asked is None or stored is None or asked == stored:
            return
        raise ModelMismatchError(
            f"the index at {self.store.directory} was built with model {stored!r}, not {asked!r}; search with "
            f"--model {stored}, or re-index with `codesearch index --model {asked}`"
        )

    def _check_tier(self, manifest: dict[str, Any], tier: str, embedder: TextEmbedder) -> None:
        stored = manifest.get(tier)
        if stored is None:
            return
        if stored.get("fingerprint") == embedder.fingerprint:
            return
        what = "static model" if tier == "static" else "model"
        if stored.get("name") == embedder.spec.name:
            raise ModelMismatchError(
                f"the index at {self.store.directory} was built with another export of {embedder.spec.name!r} "
                f"({what} fingerprint {str(stored.get('fingerprint'))[:12]}, this one is {embedder.fingerprint[:12]}: "
                "other export options, such as --fp32, or other library versions); "
                f"re-index with `codesearch index --model {embedder.spec.name}`"
            )
        raise ModelMismatchError(
            f"the index at {self.store.directory} was built with model {stored.get('name')!r} "
            f"({what} fingerprint {str(stored.get('fingerprint'))[:12]}), but this query would be embedded by "
            f"{embedder.spec.name!r} (fingerprint {embedder.fingerprint[:12]}); re-index with "
            f"`codesearch index --model {embedder.spec.name}` or search with --model {stored.get('name')}"
        )

    # -- facts -----------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Facts about the stored index without loading the model: model, tier, counts, location, last update.

        Raises:
            IndexNotFoundError: nothing has been indexed yet.
            IndexCorruptError: the manifest is damaged.
        """
        manifest = self.store.read_manifest()
        model = manifest.get("model") or {}
        static = manifest.get("static") or {}
        return {
            "root": manifest.get("root"),
            "index_dir": str(self.store.directory),
            "tier": manifest.get("tier") or ("full" if model else "keyword"),
            "model": model.get("name") or static.get("name"),
            "fingerprint": model.get("fingerprint"),
            "static_fingerprint": static.get("fingerprint"),
            "dim": model.get("dim"),
            "files": manifest.get("counts", {}).get("files"),
            "chunks": manifest.get("counts", {}).get("chunks"),
            "chunker": manifest.get("chunker"),
            "unread_kinds": model.get("unread_kinds", []),
            "updated": manifest.get("updated"),
            "format_version": manifest.get("format_version"),
        }

    def status(self) -> dict[str, Any]:
        """:meth:`info`, plus how many files changed on disk since (a stat pass; nothing is re-indexed).

        Raises:
            IndexNotFoundError: nothing has been indexed yet.
        """
        facts = self.info()
        changes = self.changes()
        facts["changed_files"] = len(changes)
        facts["changes"] = {"added": list(changes.added), "modified": list(changes.modified),
                            "removed": list(changes.removed)}
        return facts


def _unread_in(tier_facts: dict[str, Any] | None) -> frozenset[str] | None:
    """The chunk kinds a stored tier's model did not read; ``None`` when the index predates the choice."""
    if not tier_facts or "unread_kinds" not in tier_facts:
        return None
    return frozenset(tier_facts["unread_kinds"])


def _strings(value: str | Iterable[str]) -> tuple[str, ...]:
    """One string or many, as a tuple."""
    return (value,) if isinstance(value, str) else tuple(value)


def _with_source_first(ranking: Ranking, source_first: bool) -> Ranking:
    """``ranking`` with the test/doc/config priors on (their defaults) or off (1.0)."""
    multipliers = dict(ranking.prior_multipliers)
    for kind in ("test", "doc", "config"):
        multipliers[kind] = DEFAULT_PRIORS[kind] if source_first else 1.0
    return replace(ranking, priors=ranking.priors or source_first, prior_multipliers=multipliers)


def _chunker(chunking: Chunking):  # type: ignore[no-untyped-def]
    """The chunking function for a chunking name."""
    if chunking == "lines":
        return chunk_text
    from codesearch.definitions import chunk_definitions

    return chunk_definitions


@dataclass(slots=True)
class _LoadedIndex:
    """An index in memory, ready to answer queries."""

    manifest: dict[str, Any]
    chunks: list[dict[str, Any]]
    vectors: np.ndarray | None
    static: np.ndarray | None
    bm25: BM25
    paths: list[str] = field(init=False)
    kinds: list[str] = field(init=False)
    facts: IndexFacts = field(init=False)
    read: np.ndarray | None = field(init=False)
    """Per chunk, whether the transformer read it; ``None`` when it read every chunk (or there are no vectors)."""

    def __post_init__(self) -> None:
        self.paths = [c["path"] for c in self.chunks]
        self.kinds = [c["kind"] for c in self.chunks]
        self.facts = IndexFacts(self.chunks)
        unread = _unread_in(self.manifest.get("model")) or frozenset()
        read = np.array([kind not in unread for kind in self.kinds], dtype=bool)
        self.read = None if self.vectors is None or read.all() else read

    @classmethod
    def from_snapshot(cls, snapshot: IndexSnapshot) -> _LoadedIndex:
        arrays = {name[len(_BM25_PREFIX):]: a for name, a in snapshot.arrays.items() if name.startswith(_BM25_PREFIX)}
        vectors = snapshot.arrays.get(_DENSE)
        static = snapshot.arrays.get(_STATIC)
        for name, array in ((_DENSE, vectors), (_STATIC, static)):
            if array is not None and len(array) != len(snapshot.chunks):
                raise IndexCorruptError(f"the stored {name} do not match the stored chunks; re-run `codesearch index`")
        if vectors is not None and vectors.shape[1] == 0:
            vectors = None  # written by a keyword-only build before tiers existed
        return cls(snapshot.manifest, snapshot.chunks, vectors, static, BM25.from_arrays(arrays))

    def hit(self, i: int, score: float) -> Hit:
        c = self.chunks[i]
        return Hit(c["path"], c["start_line"], c["end_line"], float(score), c["kind"], c["text"],
                   tuple(c.get("symbols", ())))


__all__ = ["CodeSearch", "Hit", "IndexReport", "MODES", "Mode", "SearchInfo", "TIERS", "TextEmbedder", "Tier",
           "chunk_key", "document_text"]
