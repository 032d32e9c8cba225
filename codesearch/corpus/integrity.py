"""The sha256 of a corpus's files: recorded as a build or refresh commits, checked before a command answers.

A Lance version reads files that are never changed once written: its
manifest (``_versions/``), data files (``data/``), deletion files
(``_deletions/``) and index files (``_indices/``). As a build or refresh
commits (just before ``corpus.json`` names the new versions), :func:`record`
lists the files of every version the manifest will name and records each one's
size and sha256 in a sidecar beside the datasets (:class:`Checksums`, written
as ``checksums-<sha256>.json`` and named in ``corpus.json`` by its sha256, so
the manifest's commit switches both at once). The sums of files the previous
sidecar records are carried over, never hashed again: a refresh hashes only
the files its commits wrote.

Before a command answers from the versions a manifest names (``corpus
search``, ``corpus status``, a server's first answer from them),
:class:`Verifier` hashes every file the sidecar records, in threads, once per
process: a server that saw one version hashes only a new version's new files.
A file that differs, or is missing, is one
:class:`~codesearch.exceptions.CorpusCorruptError` naming it, and no answer is
read from the version. A long-lived server starts the check in a thread at
open (:meth:`Verifier.start`); its answers wait for the verdict.

A corpus written before codesearch recorded sums (``corpus.json`` names no
sidecar) opens unchecked, with one warning per process; its next build or
refresh records every file's sum (hashing each once). What was damaged before
that is recorded as it is then; and the files a compaction rewrites are read
from the previous version unchecked (a refresh does not hash the whole store
again).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import NamedTuple

from codesearch.corpus.schema import MANIFEST_FILE, CorpusManifest
from codesearch.corpus.store import REBUILD_CORPUS, SIDECAR_PREFIX, CorpusStore
from codesearch.exceptions import CodeSearchError, CorpusCorruptError

logger = logging.getLogger(__name__)

FORMAT = "codesearch-corpus-checksums"
HASH_THREADS = 8
"""Files hashed at once, at most (one per core below that): hashlib and Arrow's reads release the GIL."""

_warned: set[str] = set()
_warned_guard = threading.Lock()


class FileSum(NamedTuple):
    """A file's size in bytes and sha256 (hex)."""

    size: int
    sha256: str


@dataclass(frozen=True)
class Checksums:
    """A sidecar: the dataset versions it is of, and every file they read (a path under the store) with its sum."""

    versions: dict[str, int]
    files: dict[str, FileSum]

    def to_json(self) -> str:
        data = {"format": FORMAT, "versions": self.versions,
                "files": {path: list(found) for path, found in sorted(self.files.items())}}
        return json.dumps(data, indent=0, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Checksums:
        """Raises ValueError (or KeyError, TypeError) when ``text`` is not a sidecar."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not a codesearch corpus checksums file")
        return cls({name: int(v) for name, v in data["versions"].items()},
                   {path: FileSum(int(size), str(sha)) for path, (size, sha) in data["files"].items()})

    @property
    def bytes(self) -> int:
        return sum(found.size for found in self.files.values())


class Verdict(NamedTuple):
    """What :meth:`Verifier.check` found: whether the corpus's files were checked (``False``: it records no sums),
    and how many files and bytes its versions read."""

    verified: bool
    files: int
    bytes: int


def sidecar_name(sha256: str) -> str:
    """The file name of the sidecar whose sha256 is ``sha256``."""
    return f"{SIDECAR_PREFIX}{sha256[:16]}.json"


def read_checksums(store: CorpusStore, manifest: CorpusManifest) -> Checksums | None:
    """The sidecar ``manifest`` names (``None``: a corpus written before codesearch recorded sums).

    Raises:
        CorpusCorruptError: the sidecar is missing, differs from the sha256 ``corpus.json`` records, or is of
            other versions than those ``corpus.json`` names.
    """
    if manifest.checksums is None:
        return None
    name = sidecar_name(manifest.checksums)
    where = f"corpus file {store.uri}/{name}"
    data = store.read_bytes(name)
    if data is None:
        raise CorpusCorruptError(f"{where} is missing ({MANIFEST_FILE} names it); {REBUILD_CORPUS}")
    if hashlib.sha256(data).hexdigest() != manifest.checksums:
        raise CorpusCorruptError(f"{where} is damaged (its sha256 differs from the one {MANIFEST_FILE} records); "
                                 f"{REBUILD_CORPUS}")
    try:
        sums = Checksums.from_json(data.decode("utf-8"))
    except (ValueError, KeyError, TypeError) as exc:
        raise CorpusCorruptError(f"{where} cannot be read ({exc}); {REBUILD_CORPUS}") from None
    if sums.versions != manifest.versions:
        raise CorpusCorruptError(f"{where} records versions {sums.versions}, {MANIFEST_FILE} names "
                                 f"{manifest.versions}; {REBUILD_CORPUS}")
    return sums


def record(store: CorpusStore, versions: Mapping[str, int],
           previous: Checksums | None) -> tuple[Checksums, int, int]:
    """The sums of every file the datasets at ``versions`` read: ``previous``'s for the files it records (a file is
    never changed once written), the others hashed; and how many files and bytes were hashed.

    Raises:
        OSError: a file cannot be read.
    """
    paths = [path for name, version in sorted(versions.items()) for path in store.version_files(name, version)]
    known = previous.files if previous is not None else {}
    new = [path for path in paths if path not in known]
    hashed = dict(zip(new, hash_files(store, new)))
    files = {path: known[path] if path in known else _present(hashed[path], path) for path in paths}
    return Checksums(dict(versions), files), len(new), sum(found.size for found in hashed.values() if found)


def _present(found: FileSum | None, path: str) -> FileSum:
    if found is None:
        raise FileNotFoundError(f"a file the corpus's new version reads is gone: {path}")
    return found


def write_checksums(store: CorpusStore, sums: Checksums) -> str:
    """Write the sidecar ``sums`` (a new file, named by its content); its sha256, for ``corpus.json``."""
    data = sums.to_json().encode("utf-8")
    sha256 = hashlib.sha256(data).hexdigest()
    store.write_bytes(sidecar_name(sha256), data)
    return sha256


def remove_sidecars(store: CorpusStore, keep: Iterable[str | None]) -> None:
    """Remove the sidecars but those of ``keep`` (sha256s: the manifest's and the previous one's, which a reader that
    opened it still checks against)."""
    kept = {sidecar_name(sha256) for sha256 in keep if sha256}
    for name in store.names(SIDECAR_PREFIX):
        if name not in kept and name.endswith(".json"):
            store.remove(name)


def hash_files(store: CorpusStore, paths: Sequence[str]) -> list[FileSum | None]:
    """The sum of each file of ``paths`` (``None``: it is missing), hashed in threads, the largest first.

    Raises:
        OSError: a file cannot be read (other than missing).
    """
    def one(path: str) -> FileSum | None:
        try:
            return FileSum(*store.file_sum(path))
        except FileNotFoundError:
            return None

    if len(paths) < 2:
        return [one(path) for path in paths]
    with ThreadPoolExecutor(min(HASH_THREADS, os.cpu_count() or 1, len(paths)),
                            thread_name_prefix="codesearch-corpus-hash") as pool:
        return list(pool.map(one, paths))


class Verifier:
    """The check of a corpus's files before it answers: once per sidecar in this process, its verdict kept.

    Args:
        store: the corpus's store.
    """

    def __init__(self, store: CorpusStore) -> None:
        self.store = store
        self._guard = threading.Lock()
        self._good: dict[str, FileSum] = {}  # files found as a sidecar records them
        self._verdicts: dict[str, Verdict | str] = {}  # sidecar sha256 -> verdict, or the damage found

    def check(self, manifest: CorpusManifest) -> Verdict:
        """Check the files of the versions ``manifest`` names (waiting for a check already running); the verdict.

        A corpus that records no sums is answered from unchecked, with one warning per process.

        Raises:
            CorpusCorruptError: a file differs from its recorded sum, or is missing; the message names it.
            OSError: a file cannot be read (nothing kept: the next call checks again).
        """
        if manifest.checksums is None:
            self._warn()
            return Verdict(False, 0, 0)
        with self._guard:
            verdict = self._verdicts.get(manifest.checksums)
            if verdict is None:
                try:
                    verdict = self._run(manifest)
                except CorpusCorruptError as exc:
                    verdict = str(exc)
                self._verdicts[manifest.checksums] = verdict
        if isinstance(verdict, str):
            raise CorpusCorruptError(verdict)
        return verdict

    def start(self, manifest: CorpusManifest) -> threading.Thread:
        """:meth:`check` in a daemon thread (a server at open); a :meth:`check` meanwhile waits for its verdict."""
        def run() -> None:
            with suppress(CodeSearchError, OSError):  # kept (or not) for the first answer to raise
                self.check(manifest)

        thread = threading.Thread(target=run, name="codesearch-corpus-verify", daemon=True)
        thread.start()
        return thread

    def _run(self, manifest: CorpusManifest) -> Verdict:
        sums = read_checksums(self.store, manifest)
        assert sums is not None
        todo = sorted((path for path, found in sums.files.items() if self._good.get(path) != found),
                      key=lambda path: (-sums.files[path].size, path))
        damaged = []
        for path, found in zip(todo, hash_files(self.store, todo)):
            wanted = sums.files[path]
            if found is None:
                damaged.append((path, "it is missing"))
            elif found.size != wanted.size:
                damaged.append((path, f"{found.size:,} bytes where {wanted.size:,} were recorded"))
            elif found.sha256 != wanted.sha256:
                damaged.append((path, "its sha256 differs from the one recorded"))
            else:
                self._good[path] = wanted
        if damaged:
            path, why = min(damaged)
            more = f"; {len(damaged) - 1} more files differ" if len(damaged) > 1 else ""
            raise CorpusCorruptError(f"corpus file {self.store.uri}/{path} is damaged ({why}{more}); {REBUILD_CORPUS}")
        return Verdict(True, len(sums.files), sums.bytes)

    def _warn(self) -> None:
        with _warned_guard:
            if self.store.uri in _warned:
                return
            _warned.add(self.store.uri)
        logger.warning("codesearch: the corpus at %s records no checksums (written before codesearch recorded them); "
                       "it is read unchecked until its next build or refresh records them", self.store.uri)


__all__ = ["FORMAT", "HASH_THREADS", "Checksums", "FileSum", "Verdict", "Verifier", "hash_files", "read_checksums",
           "record", "remove_sidecars", "sidecar_name", "write_checksums"]
