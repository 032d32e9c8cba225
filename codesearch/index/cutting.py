"""Cut files into chunks, in this process or in a pool of worker processes: read, decode, hash, chunk, tokenize.

The builder hands over files in batches (:class:`FileTask`) and takes back, in
the same order, each file's hash and chunks with everything a chunk needs that
only its text can give: its model-input key and its keyword term counts
(:class:`CutFile`). Tree-sitter parsing and tokenizing are the first answer's
longest steps, so a large repository is cut on every core
(:func:`cut_in_order`); a small one in this process, where starting workers
would cost more than it saves.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import os
import sys
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace

import numpy as np

from codesearch.chunking import ChunkParams, chunk_key, chunk_text, document_text, keyword_text
from codesearch.embedding.catalogue import ModelSpec
from codesearch.exceptions import ModelNotAvailableError
from codesearch.files.read import SkippedFile, read_file
from codesearch.files.scan import decode_bytes
from codesearch.files.walk import SkipReason
from codesearch.keyword.tokens import code_tokens
from codesearch.types import TextEmbedder

logger = logging.getLogger(__name__)

POOL_MIN_BYTES = 8 << 20
"""Below this many bytes to cut, files are cut in this process (a worker pool takes about a second to start)."""
BATCH_BYTES = 1 << 20
"""Bytes of files per batch handed to a worker."""


@dataclass(frozen=True, slots=True)
class FileTask:
    """A file to cut: its path from the root, its absolute path, its stat when the walk met it, and the sha256 the
    committed index recorded for it when it may be unchanged (then it is not cut again if the bytes still match)."""

    rel: str
    path: str
    size: int
    mtime_ns: int
    expected_sha256: bytes | None = None


@dataclass(frozen=True, slots=True)
class CutChunk:
    """One chunk as the builder stores it (``static``: its static-tier vector, when the cutter made it)."""

    start: int
    end: int
    text: str
    symbols: tuple[str, ...]
    key: bytes
    terms: list[str]
    counts: list[int]
    static: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class CutFile:
    """A file cut into chunks, or the reason it was skipped when reading it (``binary``, ``too_large``,
    ``unreadable``, ``special_file``, ``symlink``: see :func:`~codesearch.files.scan.read_file`); ``same`` when its
    bytes are those the committed index holds (not cut: its chunks are kept)."""

    task: FileTask
    sha256: bytes
    size: int
    chunks: list[CutChunk]
    skipped: str | None = None
    same: bool = False


_WORKER_STATIC: dict[str, TextEmbedder] = {}


def _static_model(static: TextEmbedder | ModelSpec | None) -> TextEmbedder | None:
    """The static embedder itself, or (in a worker) the one a spec names, loaded once per process."""
    if static is None or not isinstance(static, ModelSpec):
        return static
    found = _WORKER_STATIC.get(static.name)
    if found is None:
        from codesearch.embedding.static import StaticEmbedder

        found = _WORKER_STATIC[static.name] = StaticEmbedder(static, export_progress=False)
    return found


def cut_files(tasks: Sequence[FileTask], chunking: str, params: ChunkParams, max_file_bytes: int,
              static: TextEmbedder | ModelSpec | None = None, static_fingerprint: str | None = None) -> list[CutFile]:
    """Read and cut ``tasks`` in order (a worker's job); with ``static``, also embed the chunks with it.

    Raises:
        ModelNotAvailableError: a worker's static model is not the one asked for (``static_fingerprint``).
    """
    if chunking == "lines":
        cut = chunk_text
    else:
        from codesearch.chunking.definitions import chunk_definitions as cut
    out: list[CutFile] = []
    for task in tasks:
        try:
            data = read_file(task.path, max_file_bytes)
        except SkippedFile as skipped:
            grown = skipped.reason == SkipReason.TOO_LARGE  # grew since it was stat'ed
            out.append(CutFile(task, b"", max_file_bytes + 1 if grown else 0, [], skipped.reason))
            continue
        sha256 = hashlib.sha256(data).digest()
        if sha256 == task.expected_sha256:
            out.append(CutFile(task, sha256, len(data), [], same=True))
            continue
        decoded = decode_bytes(data)
        if decoded is None:
            out.append(CutFile(task, b"", len(data), [], SkipReason.BINARY))
            continue
        chunks = []
        for chunk in cut(task.rel, decoded[0], params):
            document = document_text(chunk.path, chunk.text)
            counts = Counter(code_tokens(keyword_text(chunk.path, chunk.text)))
            chunks.append(CutChunk(chunk.start_line, chunk.end_line, chunk.text, chunk.symbols,
                                   chunk_key(document),
                                   list(counts), list(counts.values())))
        out.append(CutFile(task, sha256, len(data), chunks))
    return _with_static(out, _static_model(static), static_fingerprint)


def _with_static(cut: list[CutFile], static: TextEmbedder | None, fingerprint: str | None) -> list[CutFile]:
    """``cut`` with every chunk's static vector, made in one call for the batch."""
    if static is None:
        return cut
    if fingerprint is not None and static.fingerprint != fingerprint:
        raise ModelNotAvailableError(f"a worker's static model {static.fingerprint[:12]} is not the builder's "
                                     f"{fingerprint[:12]}; delete the cached models and index again")
    documents = [document_text(f.task.rel, c.text) for f in cut for c in f.chunks]
    if not documents:
        return cut
    vectors = iter(static.embed_documents(documents))
    return [replace(f, chunks=[replace(c, static=next(vectors)) for c in f.chunks]) if f.chunks else f for f in cut]


def _batches(tasks: Iterable[FileTask]) -> Iterator[list[FileTask]]:
    batch: list[FileTask] = []
    size = 0
    for task in tasks:
        batch.append(task)
        size += task.size
        if size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def cut_in_order(tasks: Sequence[FileTask], chunking: str, params: ChunkParams, max_file_bytes: int,
                 workers: int, static: TextEmbedder | None = None) -> Iterator[CutFile]:
    """Cut ``tasks`` and yield the results in task order: on ``workers`` processes when there is enough to cut.

    With ``static`` (the static tier's :class:`StaticEmbedder`) and workers,
    every chunk comes with its static vector, made by the worker that cut it
    with the same model loaded by its spec, so the cores share that work too.
    In this process (or for a stand-in embedder) chunks come without, and the
    caller embeds those it cannot reuse. At most two batches per worker are in
    flight, so results never pile up while the caller is busy with the ones before.
    """
    if workers < 2 or sum(t.size for t in tasks) < POOL_MIN_BYTES:
        for batch in _batches(tasks):
            yield from cut_files(batch, chunking, params, max_file_bytes)
        return
    from codesearch.embedding.static import StaticEmbedder

    by_name = static.spec if isinstance(static, StaticEmbedder) else None
    fingerprint = static.fingerprint if by_name is not None and static is not None else None
    if not _workers_can_start():
        for batch in _batches(tasks):
            yield from cut_files(batch, chunking, params, max_file_bytes)
        return
    method = "forkserver" if sys.platform.startswith("linux") else "spawn"
    batches = iter(_batches(tasks))
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
        pending: deque[tuple[list[FileTask], Future[list[CutFile]]]] = deque()
        try:
            for batch in batches:
                pending.append((batch, pool.submit(cut_files, batch, chunking, params, max_file_bytes, by_name,
                                                   fingerprint)))
                if len(pending) >= 2 * workers:
                    yield from pending[0][1].result()
                    pending.popleft()
            while pending:
                yield from pending[0][1].result()
                pending.popleft()
        except BrokenProcessPool as error:
            # A worker died (killed, out of memory, or it could not start): what it had not returned is cut here.
            logger.warning("a cutting worker stopped (%s); the rest is cut in this process", error)
    for batch in [b for b, _ in pending] + list(batches):
        yield from cut_files(batch, chunking, params, max_file_bytes)


def _workers_can_start() -> bool:
    """Whether a worker process can import this program's ``__main__`` as spawned workers do: not a script read
    from standard input (``python -``), whose path ``<stdin>`` a worker cannot open."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    return path is None or os.path.exists(path)


__all__ = ["BATCH_BYTES", "POOL_MIN_BYTES", "CutChunk", "CutFile", "FileTask", "cut_files", "cut_in_order"]
