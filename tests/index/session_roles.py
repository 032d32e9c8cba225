"""The roles a searcher wires (store, tiers, builder, freshness, session), made here without the facade, as
``CodeSearch`` makes them: for the direct tests of ``index/freshness.py`` and ``index/session.py``."""

from __future__ import annotations

import os
from pathlib import Path

from codesearch.chunking import ChunkParams
from codesearch.index.builder import BuildOptions, IndexBuilder
from codesearch.index.freshness import Freshness
from codesearch.index.session import IndexSession, SessionOptions
from codesearch.index.store import IndexStore
from codesearch.index.tiers import Tiers

OLD_NS = 1_000_000_000_000_000_000
"""An mtime far older than any racy window (files dated then are trusted by their stats)."""


def write(path: Path, text: str) -> None:
    """Write ``path`` and date it well before now, as a repository's files are older than its index."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, ns=(OLD_NS, OLD_NS))


def repo(root: Path) -> Path:
    write(root / "pkg" / "sessions.py", "class Session:\n    def send(self, request):\n        return request\n")
    write(root / "pkg" / "utils.py", "def super_len(o):\n    return len(o)\n")
    write(root / "README.md", "# A small repository\n")
    os.utime(root / "pkg", ns=(OLD_NS, OLD_NS))
    os.utime(root, ns=(OLD_NS, OLD_NS))
    return root


def session(root: Path, index_dir: Path, *, read_only: bool = False, **options: object) -> IndexSession:
    """A keyword-only searcher's session over ``root`` (no model: builds in milliseconds)."""
    store = IndexStore(index_dir, read_only=read_only)
    tiers = Tiers(None, True, False, f"the index at {store.directory}")
    builder = IndexBuilder(root, store, tiers, BuildOptions("definitions", ChunkParams.for_chunking("definitions")))
    freshness = Freshness(root, store, use_ignore_files=True)
    return IndexSession(root, store, tiers, builder, freshness, SessionOptions(**options))  # type: ignore[arg-type]
