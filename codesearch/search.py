"""The :class:`CodeSearch` facade: index a repository, keep it fresh, query it.

Data flows scan -> chunk -> embed -> index (store) -> search -> fuse -> filter.
Indexing is incremental: every chunk is keyed by the sha256 of the exact text
given to the model, so a chunk whose text is unchanged keeps its stored vector
and only new chunks are embedded. A query is refused (``ModelMismatchError``)
when the index was built by a different model than the one asked for.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np

from codesearch.chunking import ChunkParams, chunk_text, document_text
from codesearch.exceptions import (
    EmptyRepositoryError,
    IndexCorruptError,
    ModelMismatchError,
    ModelNotAvailableError,
    RootNotFoundError,
)
from codesearch.fusion import reciprocal_rank_fusion
from codesearch.keyword import BM25, top_k
from codesearch.ranking import DEFAULT as DEFAULT_RANKING
from codesearch.ranking import Ranking, query_identifiers, rerank, resolve_ranking, symbol_names
from codesearch.scan import scan
from codesearch.scope import Scope, kind_of
from codesearch.store import IndexSnapshot, IndexStore, default_index_dir

if TYPE_CHECKING:
    from codesearch.models import ModelSpec

Mode = Literal["bm25", "dense", "hybrid"]
MODES: tuple[Mode, ...] = ("bm25", "dense", "hybrid")
Chunking = Literal["definitions", "lines"]
CHUNKINGS: tuple[Chunking, ...] = ("definitions", "lines")
DEFAULT_MODEL = "minilm"
CHECKPOINT_EVERY = 256
"""Chunks embedded between two checkpoints of an index run."""
DEFAULT_NON_SOURCE_PENALTY = DEFAULT_RANKING.non_source_penalty
_BM25_PREFIX = "bm25_"
_KEYWORD_ONLY = "this searcher is keyword-only (model=None); pass a model to embed, or search with mode='bm25'"


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
    the bare ``path:start-end`` an editor opens.
    """

    path: str
    start_line: int
    end_line: int
    score: float
    kind: str
    text: str

    @property
    def location(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"

    def __str__(self) -> str:
        return f"{self.location}  ({self.score:.4f}, {self.kind})"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class IndexReport:
    """What one :meth:`CodeSearch.index` run did."""

    files: int
    chunks: int
    embedded: int
    reused: int
    removed: int
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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
        int8: use the int8-quantised export (only if it passed its quality gate).
        use_ignore_files: honour ``.gitignore`` and ``.codesearchignore``.
        chunking: ``"definitions"`` (default) cuts code along functions,
            classes and methods and records the symbols each chunk defines;
            ``"lines"`` is the published line-window chunker.
        ranking: ``"default"`` (symbol matches and source-first on top of
            RRF), ``"article"`` (the published plain RRF) or a
            :class:`~codesearch.ranking.Ranking`.
        chunk_params: chunk sizes.
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
        int8: bool = False,
        use_ignore_files: bool = True,
        chunking: Chunking = "definitions",
        ranking: str | Ranking = "default",
        chunk_params: ChunkParams = ChunkParams(),
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
        self.chunk_params = chunk_params
        self.lock_timeout = lock_timeout
        self.progress = progress
        self._model = model
        self._int8 = int8
        # An object that can embed is used as it is; a name, path or spec is loaded on first use.
        self._embedder: TextEmbedder | None = model if hasattr(model, "embed_query") else None  # type: ignore[assignment]
        self._loaded: _LoadedIndex | None = None

    # -- model -----------------------------------------------------------------

    @property
    def embedder(self) -> TextEmbedder:
        """The embedding model, loaded (and exported if needed) on first use.

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

    # -- indexing --------------------------------------------------------------

    def index(self, *, progress: bool = False) -> IndexReport:
        """Build the index, or bring it up to date with the files on disk.

        Unchanged chunks keep their stored vectors; only new chunk texts are
        embedded. The new state is committed atomically, so a crash leaves the
        previous index intact.

        Returns:
            Counts of files and chunks, how many were embedded, reused and
            removed, and the seconds taken.

        Raises:
            RootNotFoundError: the root is missing or not a folder.
            EmptyRepositoryError: nothing under the root can be indexed.
            IndexLockedError: another process is writing this index.
            ModelNotAvailableError: the model cannot be loaded here.
        """
        started = time.perf_counter()
        result = scan(self.root, use_ignore_files=self.use_ignore_files, exclude_dirs=[self.store.directory])
        cut = _chunker(self.chunking)
        chunks = [chunk for source in result.files for chunk in cut(source.path, source.text, self.chunk_params)]
        if not chunks:
            raise EmptyRepositoryError(
                f"nothing to index under {self.root}: {result.files_seen} files seen, "
                f"{len(result.files)} readable text files, 0 chunks (see `codesearch stats`)"
            )
        documents = [document_text(c.path, c.text) for c in chunks]
        keys = [chunk_key(d) for d in documents]
        embedder = self.embedder if self._model is not None else None

        with self.store.write_lock(timeout=self.lock_timeout):
            if embedder is None:
                previous: dict[str, np.ndarray] = {}
                missing: list[int] = []
                vectors = np.zeros((len(chunks), 0), dtype=np.float32)
                model_facts = None
            else:
                previous = self._previous_vectors(embedder)
                missing = [i for i, key in enumerate(keys) if key not in previous]
                fresh_rows = self._embed_with_checkpoints(embedder, documents, keys, missing, progress)
                vectors = np.empty((len(chunks), embedder.dim), dtype=np.float32)
                for i, key in enumerate(keys):
                    vectors[i] = fresh_rows[i] if i in fresh_rows else previous[key]
                model_facts = {"name": embedder.spec.name, "fingerprint": embedder.fingerprint, "dim": embedder.dim}
            bm25 = BM25().fit(documents)
            now = datetime.now(timezone.utc).isoformat(timespec="seconds")
            manifest = {
                "root": str(self.root),
                "model": model_facts,
                "chunker": {"kind": self.chunking, **asdict(self.chunk_params)},
                "files": {f.path: f.sha256 for f in result.files},
                "counts": {"files": len(result.files), "chunks": len(chunks)},
                "updated": now,
            }
            records = [
                {"path": c.path, "start_line": c.start_line, "end_line": c.end_line, "kind": kind_of(c.path),
                 "key": key, "symbols": list(c.symbols), "text": c.text}
                for c, key in zip(chunks, keys)
            ]
            arrays = {"vectors": vectors, **{_BM25_PREFIX + k: v for k, v in bm25.to_arrays().items()}}
            self.store.save(IndexSnapshot(manifest, records, arrays))
            self.store.clear_checkpoint()

        new_keys = set(keys)
        removed = sum(1 for key in previous if key not in new_keys)
        self._loaded = _LoadedIndex(manifest, records, vectors, bm25)
        return IndexReport(
            files=len(result.files),
            chunks=len(chunks),
            embedded=len(missing),
            reused=len(chunks) - len(missing),
            removed=removed,
            seconds=round(time.perf_counter() - started, 3),
        )

    def _previous_vectors(self, embedder: TextEmbedder) -> dict[str, np.ndarray]:
        """Vectors by chunk key that need no embedding: the stored index's (same model) and checkpoints'."""
        found = self.store.load_checkpoint(embedder.fingerprint)
        if not self.store.exists():
            return found
        try:
            snapshot = self.store.load()
        except IndexCorruptError:
            return found  # rebuild; the new commit replaces the damaged one
        if (snapshot.manifest.get("model") or {}).get("fingerprint") != embedder.fingerprint:
            return found
        vectors = snapshot.arrays["vectors"]
        found.update((record["key"], vectors[i]) for i, record in enumerate(snapshot.chunks))
        return found

    def _embed_with_checkpoints(
        self, embedder: TextEmbedder, documents: Sequence[str], keys: Sequence[str], missing: Sequence[int],
        progress: bool,
    ) -> dict[int, np.ndarray]:
        """Embed ``documents[missing]`` in slices, checkpointing each, so a crash loses at most one slice."""
        from tqdm.auto import tqdm

        rows: dict[int, np.ndarray] = {}
        with tqdm(total=len(missing), desc="embedding", unit="chunk", disable=not progress or not missing) as bar:
            for start in range(0, len(missing), CHECKPOINT_EVERY):
                part = missing[start:start + CHECKPOINT_EVERY]
                vectors = embedder.embed_documents([documents[i] for i in part])
                self.store.save_checkpoint(embedder.fingerprint, [keys[i] for i in part], vectors)
                rows.update(zip(part, vectors))
                bar.update(len(part))
        return rows

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
    ) -> list[Hit]:
        """Find the ``k`` chunks that best answer ``query``.

        Args:
            query: words, a question, or an identifier.
            k: how many hits at most.
            mode: ``"bm25"`` (keywords), ``"dense"`` (embeddings) or
                ``"hybrid"`` (both, fused by reciprocal rank fusion).
            scope: a path prefix such as ``"src/"``.
            include: gitignore-style globs a path must match.
            exclude: gitignore-style globs that drop a path.
            kinds: only these kinds (``source``, ``test``, ``doc``, ``config``).
            exclude_kinds: drop these kinds.
            source_first: override the ranking's source-first setting for this
                query (``False`` ranks tests and docs purely on relevance).

        Filtering happens before the top-k cut, so asking for 10 source hits
        returns 10 source hits when there are that many. With the default
        ranking, definitions of identifiers named in the query come first and
        tests/docs/config rank below source hits of similar relevance.

        Returns:
            Hits in rank order. Scores are BM25 scores, cosine similarities or
            fused RRF scores, by mode; a definition moved up by a symbol match
            keeps its own score (0.0 if the mode did not retrieve it).

        Raises:
            ValueError: an unknown mode or kind, or ``k`` below 1.
            ModelMismatchError: the index was built with another model.
        """
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; use one of {', '.join(MODES)}")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        where = Scope(
            prefix=scope,
            include=_strings(include),
            exclude=_strings(exclude),
            kinds=None if kinds is None else frozenset(_strings(kinds)),
            exclude_kinds=frozenset(_strings(exclude_kinds)),
        )
        ranking = self.ranking
        if source_first is not None:
            penalty = max(ranking.non_source_penalty, DEFAULT_NON_SOURCE_PENALTY) if source_first else 1.0
            ranking = replace(ranking, non_source_penalty=penalty)
        loaded = self._ensure_loaded(need_model=mode != "bm25")
        mask = None if where.is_unrestricted else where.mask(loaded.paths, loaded.kinds)

        # Re-ranking may pull hits up from below the cut, so take a deeper list first.
        depth = max(k, ranking.rrf_depth) * (4 if ranking.adjusts else 1)
        if mode == "bm25":
            ranked = self._bm25_ranking(loaded, query, depth, mask)
        elif mode == "dense":
            ranked = self._dense_ranking(loaded, query, depth, mask)
        else:
            ranked = reciprocal_rank_fusion(
                [
                    [i for i, _ in self._bm25_ranking(loaded, query, max(k, ranking.rrf_depth), mask)],
                    [i for i, _ in self._dense_ranking(loaded, query, max(k, ranking.rrf_depth), mask)],
                ],
                k=ranking.rrf_k,
                depth=ranking.rrf_depth,
                weights=(ranking.bm25_weight, ranking.dense_weight),
            )
        defining = loaded.defining(query, mask) if ranking.symbol_matches else []
        ranked = rerank(ranked, loaded.kinds, ranking, defining)
        return [loaded.hit(i, score) for i, score in ranked[:k]]

    def _bm25_ranking(self, loaded: _LoadedIndex, query: str, k: int, mask: np.ndarray | None) -> list[tuple[int, float]]:
        scores = loaded.bm25.score(query)
        return [(int(i), float(scores[i])) for i in top_k(scores, k, mask=mask, above=0.0)]

    def _dense_ranking(self, loaded: _LoadedIndex, query: str, k: int, mask: np.ndarray | None) -> list[tuple[int, float]]:
        scores = loaded.vectors @ self.embedder.embed_query(query)
        return [(int(i), float(scores[i])) for i in top_k(scores, k, mask=mask)]

    def _ensure_loaded(self, *, need_model: bool) -> _LoadedIndex:
        if self._loaded is None:
            if not self.store.exists():
                self.index(progress=self.progress)
            else:
                snapshot = self.store.load()
                self._loaded = _LoadedIndex.from_snapshot(snapshot)
        assert self._loaded is not None
        if need_model:
            self._check_model(self._loaded.manifest)
        return self._loaded

    def _check_model(self, manifest: dict[str, Any]) -> None:
        if self._model is None:
            raise ModelNotAvailableError(_KEYWORD_ONLY)
        stored = manifest.get("model")
        if stored is None:
            raise ModelMismatchError(
                f"the index at {self.store.directory} is keyword-only (built without a model); "
                "search with mode='bm25' (--mode bm25) or re-index with a model"
            )
        embedder = self.embedder
        if stored.get("fingerprint") == embedder.fingerprint:
            return
        if stored.get("name") == embedder.spec.name:
            raise ModelMismatchError(
                f"the index at {self.store.directory} was built with another export of {embedder.spec.name!r} "
                f"(fingerprint {str(stored.get('fingerprint'))[:12]}, this one is {embedder.fingerprint[:12]}: "
                "other export options, such as --int8, or other library versions); "
                f"re-index with `codesearch index --model {embedder.spec.name}`"
            )
        raise ModelMismatchError(
            f"the index at {self.store.directory} was built with model {stored.get('name')!r} "
            f"(fingerprint {str(stored.get('fingerprint'))[:12]}), but this query would be embedded by "
            f"{embedder.spec.name!r} (fingerprint {embedder.fingerprint[:12]}); re-index with "
            f"`codesearch index --model {embedder.spec.name}` or search with --model {stored.get('name')}"
        )

    # -- facts -----------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Facts about the stored index without loading the model: model, counts, location, last update.

        Raises:
            IndexNotFoundError: nothing has been indexed yet.
            IndexCorruptError: the manifest is damaged.
        """
        manifest = self.store.read_manifest()
        model = manifest.get("model") or {}
        return {
            "root": manifest.get("root"),
            "index_dir": str(self.store.directory),
            "model": model.get("name"),
            "fingerprint": model.get("fingerprint"),
            "dim": model.get("dim"),
            "files": manifest.get("counts", {}).get("files"),
            "chunks": manifest.get("counts", {}).get("chunks"),
            "chunker": manifest.get("chunker"),
            "updated": manifest.get("updated"),
            "format_version": manifest.get("format_version"),
        }


def _strings(value: str | Iterable[str]) -> tuple[str, ...]:
    """One string or many, as a tuple."""
    return (value,) if isinstance(value, str) else tuple(value)


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
    vectors: np.ndarray
    bm25: BM25
    paths: list[str] = field(init=False)
    kinds: list[str] = field(init=False)

    symbols: dict[str, list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.paths = [c["path"] for c in self.chunks]
        self.kinds = [c["kind"] for c in self.chunks]
        self.symbols = {}
        for i, chunk in enumerate(self.chunks):
            for symbol in chunk.get("symbols", ()):
                for name in symbol_names(symbol):
                    self.symbols.setdefault(name, []).append(i)

    def defining(self, query: str, mask: np.ndarray | None) -> list[int]:
        """Chunks (in scope) that define an identifier named in ``query``, source first, in file order."""
        found: list[int] = []
        for name in query_identifiers(query):
            for i in self.symbols.get(name, ()):
                if i not in found and (mask is None or mask[i]):
                    found.append(i)
        return sorted(found, key=lambda i: self.kinds[i] != "source")

    @classmethod
    def from_snapshot(cls, snapshot: IndexSnapshot) -> _LoadedIndex:
        arrays = {name[len(_BM25_PREFIX):]: a for name, a in snapshot.arrays.items() if name.startswith(_BM25_PREFIX)}
        vectors = snapshot.arrays.get("vectors")
        if vectors is None or len(vectors) != len(snapshot.chunks):
            raise IndexCorruptError("the stored vectors do not match the stored chunks; re-run `codesearch index`")
        return cls(snapshot.manifest, snapshot.chunks, vectors, BM25.from_arrays(arrays))

    def hit(self, i: int, score: float) -> Hit:
        c = self.chunks[i]
        return Hit(c["path"], c["start_line"], c["end_line"], float(score), c["kind"], c["text"])


__all__ = ["CodeSearch", "Hit", "IndexReport", "MODES", "Mode", "TextEmbedder", "chunk_key", "document_text"]
