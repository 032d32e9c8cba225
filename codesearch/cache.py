"""The one cache root, where exported models and indexes live.

Layout::

    <cache>/                 $CODESEARCH_CACHE_DIR, else the platform's user cache folder for "codesearch"
      models/<key>/          an exported or distilled model (:mod:`codesearch.embedding.export`,
                             :mod:`codesearch.embedding.distill`), complete once its manifest.json is there
      models/<key>.lock      held while one process makes that folder
      indexes/<name>-<hash>/ the index of one repository unless ``--index-dir`` says otherwise

A model folder is made in a scratch folder beside it and published file by
file, its manifest last (:func:`publish`), so a folder with a manifest whose
recorded sizes match is complete (:func:`complete_manifest`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import platformdirs

from codesearch._lock import FileLock, LockHeld
from codesearch.exceptions import ExportError
from codesearch.jsonfiles import read_json

CACHE_DIR_ENV = "CODESEARCH_CACHE_DIR"
MANIFEST_FILE = "manifest.json"
LOCK_TIMEOUT_S = 3600.0


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """``cache_dir``, else ``$CODESEARCH_CACHE_DIR``, else the user cache folder for ``codesearch``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get(CACHE_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("codesearch", appauthor=False))


def models_dir(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Where exported and distilled models live."""
    return cache_root(cache_dir) / "models"


def default_index_dir(root: str | os.PathLike[str]) -> Path:
    """Where the index of ``root`` lives unless ``--index-dir`` says otherwise.

    The folder is ``<cache>/indexes/<basename>-<sha256 of the absolute root>[:16]``.

    Returns:
        The folder's path; it is not created.
    """
    resolved = Path(root).expanduser().resolve()
    digest = hashlib.sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    basename = re.sub(r"[^A-Za-z0-9._-]+", "_", resolved.name).strip("._")[:40] or "root"
    return cache_root() / "indexes" / f"{basename}-{digest}"


def folder_slug(name: str) -> str:
    """A model name as the readable start of a folder name (``BAAI/bge-small`` -> ``BAAI-bge-small``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name.strip("/")).strip("-")[-40:] or "model"


def complete_manifest(folder: Path) -> dict[str, Any] | None:
    """The manifest of a published folder whose every recorded file has its recorded size, else ``None``."""
    manifest = read_json(folder / MANIFEST_FILE)
    if not isinstance(manifest, dict):
        return None
    for name, size in manifest.get("files", {}).items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != size:
            return None
    return manifest


def publish(scratch: Path, target: Path, names: Sequence[str], manifest: dict[str, Any]) -> None:
    """Move ``names`` from ``scratch`` into ``target``, then write the manifest: a folder is complete once it has one.

    The manifest records each file's size under ``"files"``.
    """
    manifest["files"] = {name: (scratch / name).stat().st_size for name in sorted(names)}
    target.mkdir(parents=True, exist_ok=True)
    (target / MANIFEST_FILE).unlink(missing_ok=True)
    for name in names:
        os.replace(scratch / name, target / name)
    staged = scratch / MANIFEST_FILE
    staged.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(staged, target / MANIFEST_FILE)


def sha256_files(paths: Sequence[Path]) -> str:
    """Hex sha256 over the bytes of ``paths``, in order (a cached model's identity)."""
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def folder_lock(target: Path, progress: bool) -> Iterator[None]:
    """Hold ``<target>.lock`` so that one process at a time makes ``target``; waits for another.

    Raises:
        ExportError: another process has held it for over an hour.
    """
    lock = FileLock(str(target) + ".lock")
    try:
        lock.acquire(0.05)
    except LockHeld as held:
        if progress:
            print(f"codesearch: waiting for another process ({held.holder}) exporting to {target}", file=sys.stderr)
        try:
            lock.acquire(LOCK_TIMEOUT_S)
        except LockHeld as still:
            raise ExportError(
                f"another process ({still.holder}) has been exporting to {target} for over "
                f"{LOCK_TIMEOUT_S:.0f} s; if none is running, stop it"
            ) from None
    try:
        yield
    finally:
        lock.release()


__all__ = ["CACHE_DIR_ENV", "MANIFEST_FILE", "cache_root", "complete_manifest", "default_index_dir", "folder_lock",
           "folder_slug", "models_dir", "publish", "sha256_files"]
