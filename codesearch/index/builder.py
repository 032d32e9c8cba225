"""Build an index, or bring one up to date: scan -> chunk -> embed -> keywords -> store.

Indexing is incremental in both embedding tiers: every chunk is keyed by the
sha256 of the exact text given to the model (:func:`chunk_key`), so a chunk
whose text is unchanged keeps its stored vectors, and a file whose bytes are
unchanged is not cut again. The transformer's vectors are checkpointed every
:data:`CHECKPOINT_EVERY` chunks, so a run that dies loses at most one slice;
the new state is committed atomically, so a crash leaves the previous index.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from codesearch.chunking import DEFINITIONS_VERSION, Chunk, ChunkParams, chunk_text, document_text, keyword_text, window_heads
from codesearch.exceptions import EmptyRepositoryError, IndexCancelledError, ModelNotAvailableError
from codesearch.files import SourceFile, scan
from codesearch.index.loaded import LoadedIndex
from codesearch.index.manifest import ARRAYS, BM25_PREFIX, IndexManifest, TierFacts
from codesearch.index.store import IndexSnapshot, IndexStore
from codesearch.index.tiers import Tiers
from codesearch.keyword import BM25
from codesearch.scope import kind_of
from codesearch.types import FULL, KEYWORD, STATIC, Chunking, IndexReport, TextEmbedder, Tier

CHECKPOINT_EVERY = 128
"""Chunks embedded between two checkpoints of an index run (also how soon :meth:`IndexBuilder.cancel` acts)."""
UNREAD_BY_DEFAULT = frozenset({"test"})
"""Chunk kinds the transformer leaves to keywords and the static tier unless ``embed_tests``."""


def chunk_key(document: str) -> str:
    """Identity of a chunk's model input: sha256 of its exact text."""
    return hashlib.sha256(document.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class BuildOptions:
    """How a repository is indexed.

    Attributes:
        chunking: ``definitions`` or ``lines``.
        chunk_params: chunk sizes.
        use_ignore_files: honour ``.gitignore`` and ``.codesearchignore``.
        embed_tests: whether the transformer reads test files; ``None`` keeps
            the stored index's choice (tests left out for a new index).
    """

    chunking: Chunking
    chunk_params: ChunkParams
    use_ignore_files: bool = True
    embed_tests: bool | None = None

    def chunker_facts(self) -> dict[str, Any]:
        """How files are cut; a stored index cut otherwise has its files cut again."""
        facts: dict[str, Any] = {"kind": self.chunking, **asdict(self.chunk_params)}
        if self.chunking == "definitions":
            facts["version"] = DEFINITIONS_VERSION
        return facts


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
            previous: the committed index, whose unchanged files and chunk
                texts are kept; ``None`` builds from nothing.
            progress: show a progress bar while embedding.
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
        started = time.perf_counter()
        result = scan(self.root, use_ignore_files=self.options.use_ignore_files, exclude_dirs=[self.store.directory])
        chunks, changed = self._chunks(result.files, previous)
        if not chunks:
            raise EmptyRepositoryError(
                f"nothing to index under {self.root}: {result.files_seen} files seen, "
                f"{len(result.files)} readable text files, 0 chunks (see `codesearch stats`)"
            )
        # Models load only once there is something to embed: an empty folder fails in milliseconds.
        has_static = tier != KEYWORD and self.tiers.static_loads(self.root)
        if tier == STATIC and not has_static:
            if not first_answer:
                raise ModelNotAvailableError(f"there is no static tier for {self.root} here; index the full tier instead")
            tier = FULL
        documents = [document_text(c.path, c.text) for c in chunks]
        keys = [chunk_key(d) for d in documents]
        kinds = [kind_of(c.path) for c in chunks]
        unread_kinds = self._unread_kinds(previous)
        read = [i for i, kind in enumerate(kinds) if kind not in unread_kinds]
        # A long definition's later windows share its first window's vector: the transformer reads each once.
        heads = {row: head for row, head in window_heads(chunks).items() if kinds[row] not in unread_kinds}
        vectors: dict[Tier, np.ndarray] = {}
        static_facts = full_facts = None
        embedded = static_embedded = 0

        if has_static:
            static = self.tiers.static_embedder
            vectors[STATIC], static_embedded = self._vectors(static, STATIC, documents, keys, range(len(keys)),
                                                             previous, progress=False)
            static_facts = TierFacts(static.spec.name, static.fingerprint, static.dim)
        keeps_full = tier == STATIC and previous is not None and FULL in previous.vectors
        if tier == FULL or keeps_full:
            # A static refresh of a full index keeps the transformer tier in step: its new chunks are embedded too.
            embedder = self.tiers.embedder
            if keeps_full:
                assert previous is not None
                self.tiers.check(previous.manifest, FULL, embedder)
            vectors[FULL], embedded = self._vectors(embedder, FULL, documents, keys, read, previous, progress=progress,
                                                    heads=heads, checkpoint=commit)
            full_facts = TierFacts(embedder.spec.name, embedder.fingerprint, embedder.dim, unread_kinds)
            tier = FULL

        # The same chunk texts in the same order are the same keyword documents (a key hashes path and text):
        # an index whose files moved, or were only touched, keeps its fitted BM25.
        if previous is not None and keys == previous.chunk_keys():
            bm25 = previous.bm25
        else:
            bm25 = BM25().fit([keyword_text(c.path, c.text) for c in chunks])
        manifest = IndexManifest(
            root=str(self.root),
            tier=tier,
            full=full_facts,
            static=static_facts,
            chunker=self.options.chunker_facts(),
            files={f.path: f.sha256 for f in result.files},
            stats=dict(result.stats),
            walk_stats=dict(result.walk_stats),
            use_ignore_files=self.options.use_ignore_files,
            n_files=len(result.files),
            n_chunks=len(chunks),
        )
        records = [
            {"path": c.path, "start_line": c.start_line, "end_line": c.end_line, "kind": kind,
             "key": key, "symbols": list(c.symbols), "text": c.text}
            for c, key, kind in zip(chunks, keys, kinds)
        ]
        arrays = {ARRAYS[t]: v for t, v in vectors.items()}
        arrays.update({BM25_PREFIX + name: array for name, array in bm25.to_arrays().items()})
        if commit:
            self.store.save(IndexSnapshot(manifest.to_json(), records, arrays))
            self.store.clear_checkpoint()
            token = self.store.current_token()
        else:
            token = previous.token if previous is not None else None
        loaded = LoadedIndex(manifest, records, vectors, bm25, token)
        old_keys = set(previous.chunk_keys()) if previous is not None else set()
        report = IndexReport(
            files=len(result.files),
            chunks=len(chunks),
            embedded=embedded,
            reused=(len(read) - len(heads) - embedded) if tier == FULL else len(chunks) - static_embedded,
            removed=len(old_keys - set(keys)),
            seconds=round(time.perf_counter() - started, 3),
            tier=tier,
            static_embedded=static_embedded,
            changed_files=changed,
            unread=len(chunks) - len(read) if tier == FULL else 0,
            shared=len(heads) if tier == FULL else 0,
        )
        return loaded, report

    def _chunks(self, files: Sequence[SourceFile], previous: LoadedIndex | None) -> tuple[list[Chunk], int]:
        """Every file's chunks: a file whose bytes are unchanged keeps its stored chunks, the rest are cut again."""
        kept: dict[str, list[Chunk]] = {}
        if previous is not None and previous.manifest.chunker == self.options.chunker_facts():
            old_files = previous.manifest.files
            new_files = {f.path: f.sha256 for f in files}
            for record in previous.records:
                path = record["path"]
                if old_files.get(path) == new_files.get(path):
                    kept.setdefault(path, []).append(
                        Chunk(path, record["start_line"], record["end_line"], record["text"],
                              tuple(record.get("symbols", ()))))
        if self.options.chunking == "lines":
            cut = chunk_text
        else:
            from codesearch.definitions import chunk_definitions as cut
        chunks: list[Chunk] = []
        changed = 0
        for source in files:
            if source.path in kept:
                chunks.extend(kept[source.path])
            else:
                changed += 1
                chunks.extend(cut(source.path, source.text, self.options.chunk_params))
        return chunks, changed

    def _unread_kinds(self, previous: LoadedIndex | None) -> frozenset[str]:
        """The chunk kinds the transformer leaves to keywords and the static tier: as asked, else as stored."""
        if self.options.embed_tests is not None:
            return frozenset() if self.options.embed_tests else UNREAD_BY_DEFAULT
        stored = previous.manifest.unread_kinds if previous is not None else None
        return UNREAD_BY_DEFAULT if stored is None else stored

    def _vectors(
        self, embedder: TextEmbedder, tier: Tier, documents: Sequence[str], keys: Sequence[str], rows: Sequence[int] | range,
        previous: LoadedIndex | None, *, progress: bool, heads: dict[int, int] | None = None, checkpoint: bool = True,
    ) -> tuple[np.ndarray, int]:
        """One tier's vectors: ``rows`` get stored ones reused by key or new ones, the rest zeros; and how many were new.

        ``heads`` (the transformer tier's, ``{row: row it copies}``, rows among ``rows``): later windows of a long
        definition, which get their first window's vector instead of one of their own. Such rows of the stored
        index hold another chunk's vector, so they are never reused by their own key. Only the transformer's
        vectors are checkpointed (the static tier embeds thousands of chunks a second), and only with ``checkpoint``.
        """
        shares_windows = heads is not None
        heads = heads or {}
        found: dict[str, np.ndarray] = self.store.load_checkpoint(embedder.fingerprint) if tier == FULL else {}
        stored = previous.manifest.of(tier) if previous is not None else None
        if previous is not None and tier in previous.vectors and stored is not None \
                and stored.fingerprint == embedder.fingerprint:
            old = previous.vectors[tier]
            unread = stored.unread_kinds or frozenset()
            copies = _stored_heads(previous) if shares_windows else {}
            found.update((record["key"], old[i]) for i, record in enumerate(previous.records)
                         if record.get("kind") not in unread and i not in copies)
        rows = [i for i in rows if i not in heads]
        missing = [i for i in rows if keys[i] not in found]
        fresh = self._embed(embedder, documents, keys, missing, checkpoint=checkpoint and tier == FULL, progress=progress)
        out = np.zeros((len(keys), embedder.dim), dtype=np.float32)
        for i in rows:
            out[i] = fresh[i] if i in fresh else found[keys[i]]
        for row, head in heads.items():
            out[row] = out[head]
        return out, len(missing)

    def _embed(self, embedder: TextEmbedder, documents: Sequence[str], keys: Sequence[str], missing: Sequence[int],
               *, checkpoint: bool, progress: bool) -> dict[int, np.ndarray]:
        """Embed ``documents[missing]``; with ``checkpoint``, in checkpointed slices, so a crash loses at most one."""
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


def _stored_heads(previous: LoadedIndex) -> dict[int, int]:
    """:func:`~codesearch.chunking.window_heads` of a stored index's chunk records."""
    return window_heads([Chunk(r["path"], r["start_line"], r["end_line"], "", tuple(r.get("symbols", ())))
                         for r in previous.records])


__all__ = ["CHECKPOINT_EVERY", "UNREAD_BY_DEFAULT", "BuildOptions", "IndexBuilder", "chunk_key"]
