"""Vectors embedded before a commit, kept beside an index's generations so a run that dies loses none of them.

Checkpoints live in ``DIR/checkpoint/``, never inside a generation, so the
index itself is only ever the old or the new state. Each save writes one
part by write-to-temp and rename; a part torn by a crash is ignored when
read, and its vectors are embedded again. The store takes them through
:meth:`~codesearch.index.store.IndexStore.save_checkpoint` (under its write lock).
"""

from __future__ import annotations

import os
import secrets
import shutil
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

FOLDER = "checkpoint"
"""The checkpoints' folder inside an index folder."""


def save_checkpoint(directory: Path, fingerprint: str, keys: Sequence[str], vectors: np.ndarray) -> None:
    """Keep ``vectors`` (float32 rows, one chunk key each) that the model ``fingerprint`` made, as one more part.

    Raises:
        ValueError: ``keys`` and ``vectors`` differ in length.
    """
    if len(keys) != len(vectors):
        raise ValueError(f"save_checkpoint got {len(keys)} keys for {len(vectors)} vectors")
    if not keys:
        return
    folder = directory / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    part = len([n for n in os.listdir(folder) if n.endswith(".npz")])
    name = f"{fingerprint[:16]}-{part:06d}-{secrets.token_hex(4)}.npz"
    tmp = folder / f".{name}.tmp"
    with open(tmp, "wb") as handle:
        np.savez(handle, keys=np.asarray(list(keys), dtype=str),
                 vectors=np.asarray(vectors, dtype=np.float32),
                 fingerprint=np.asarray(fingerprint, dtype=str))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, folder / name)


def load_checkpoint(directory: Path, fingerprint: str) -> dict[str, np.ndarray]:
    """Vectors by chunk key that interrupted runs of the model ``fingerprint`` left behind (empty if none)."""
    folder = directory / FOLDER
    found: dict[str, np.ndarray] = {}
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".npz") and n.startswith(fingerprint[:16]))
    except OSError:
        return found
    for name in names:
        try:
            with np.load(folder / name, allow_pickle=False) as part:
                if str(part["fingerprint"]) != fingerprint:
                    continue
                keys, vectors = part["keys"], part["vectors"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            continue  # a part torn by a crash: its vectors are simply embedded again
        if vectors.ndim == 2 and len(keys) == len(vectors) and np.isfinite(vectors).all():
            found.update(zip(keys.tolist(), vectors))
    return found


def clear_checkpoint(directory: Path) -> None:
    """Drop every checkpoint part (after a commit has made them redundant)."""
    shutil.rmtree(directory / FOLDER, ignore_errors=True)


__all__ = ["FOLDER", "clear_checkpoint", "load_checkpoint", "save_checkpoint"]
