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
import multiprocessing
import sys
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass

from codesearch.chunking import ChunkParams, chunk_text, document_text, keyword_text
from codesearch.files.scan import decode_bytes
from codesearch.files.walk import SkipReason
from codesearch.keyword.tokens import code_tokens

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
    """One chunk as the builder stores it."""

    start: int
    end: int
    text: str
    symbols: tuple[str, ...]
    key: bytes
    terms: list[str]
    counts: list[int]


@dataclass(frozen=True, slots=True)
class CutFile:
    """A file cut into chunks, or the reason it was skipped when reading it (``binary``, ``too_large``,
    ``unreadable``); ``same`` when its bytes are those the committed index holds (not cut: its chunks are kept)."""

    task: FileTask
    sha256: bytes
    size: int
    chunks: list[CutChunk]
    skipped: str | None = None
    same: bool = False


def cut_files(tasks: Sequence[FileTask], chunking: str, params: ChunkParams, max_file_bytes: int) -> list[CutFile]:
    """Read and cut ``tasks`` in order (a worker's job)."""
    if chunking == "lines":
        cut = chunk_text
    else:
        from codesearch.definitions import chunk_definitions as cut
    out: list[CutFile] = []
    for task in tasks:
        try:
            with open(task.path, "rb") as handle:
                data = handle.read(max_file_bytes + 1)
        except OSError:
            out.append(CutFile(task, b"", 0, [], SkipReason.UNREADABLE))
            continue
        if len(data) > max_file_bytes:  # grew since it was stat'ed
            out.append(CutFile(task, b"", len(data), [], SkipReason.TOO_LARGE))
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
                                   hashlib.sha256(document.encode("utf-8", "surrogatepass")).digest(),
                                   list(counts), list(counts.values())))
        out.append(CutFile(task, sha256, len(data), chunks))
    return out


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
                 workers: int) -> Iterator[CutFile]:
    """Cut ``tasks`` and yield the results in task order: on ``workers`` processes when there is enough to cut.

    At most two batches per worker are in flight, so results never pile up
    while the caller is busy with the ones before.
    """
    if workers < 2 or sum(t.size for t in tasks) < POOL_MIN_BYTES:
        for batch in _batches(tasks):
            yield from cut_files(batch, chunking, params, max_file_bytes)
        return
    method = "forkserver" if sys.platform.startswith("linux") else "spawn"
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
        pending: deque[Future[list[CutFile]]] = deque()
        for batch in _batches(tasks):
            pending.append(pool.submit(cut_files, batch, chunking, params, max_file_bytes))
            if len(pending) >= 2 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()


__all__ = ["BATCH_BYTES", "POOL_MIN_BYTES", "CutChunk", "CutFile", "FileTask", "cut_files", "cut_in_order"]
