"""The typed manifest of an index: what was indexed, how, and by which models; read and written here only.

The JSON keys are those the store has always written::

    {"root", "tier", "model", "static", "chunker", "walk_stats", "use_ignore_files",
     "counts", "scanned_ns", "updated"}

``model`` holds the transformer tier's facts and ``static`` the static tier's
(:class:`TierFacts`); the transformer's vectors are the array ``vectors`` and
the static tier's ``static_vectors`` (:data:`ARRAYS`). Everywhere else the
tiers go by one name each (:data:`codesearch.types.TIERS`). Each file's hash
and stat, which the manifest held until format 2, are columns of the index
(:class:`~codesearch.index.columns.ChunkColumns`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any

from codesearch.exceptions import IndexCorruptError
from codesearch.types import FULL, KEYWORD, STATIC, Tier

ARRAYS: Mapping[Tier, str] = MappingProxyType({FULL: "vectors", STATIC: "static_vectors"})
"""The stored array of each embedding tier's vectors."""
BM25_PREFIX = "bm25_"
"""The stored arrays of the keyword index are named ``bm25_<name>`` (:meth:`codesearch.keyword.BM25.to_arrays`)."""
_KEYS: Mapping[Tier, str] = MappingProxyType({FULL: "model", STATIC: "static"})


@dataclass(frozen=True, slots=True)
class TierFacts:
    """The model behind one embedding tier.

    Attributes:
        name: the model's name (``minilm``, a hub id, a folder).
        fingerprint: sha256 of everything that changes its vectors.
        dim: vector size.
        unread_kinds: the chunk kinds it did not read (the transformer leaves
            tests to keywords and the static tier); ``None`` for the static
            tier and for indexes older than the choice.
    """

    name: str
    fingerprint: str
    dim: int
    unread_kinds: frozenset[str] | None = None

    @classmethod
    def from_json(cls, data: Any) -> TierFacts | None:
        if not data:
            return None
        unread = data.get("unread_kinds")
        return cls(str(data.get("name")), str(data.get("fingerprint")), int(data.get("dim") or 0),
                   None if unread is None else frozenset(unread))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "fingerprint": self.fingerprint, "dim": self.dim}
        if self.unread_kinds is not None:
            data["unread_kinds"] = sorted(self.unread_kinds)
        return data


@dataclass(frozen=True, slots=True)
class IndexManifest:
    """Facts about one committed index.

    Attributes:
        root: the repository folder indexed.
        tier: the best tier the index holds.
        full: the transformer tier's model (JSON key ``model``), or ``None``.
        static: the static tier's model, or ``None``.
        chunker: how files were cut (kind, sizes, definitions version); an
            index cut otherwise has its files cut again.
        walk_stats: folder or ignore file -> ``(size, mtime_ns)`` the walk
            depended on (:attr:`codesearch.files.ScanResult.walk_stats`).
        use_ignore_files: whether ignore files were honoured.
        n_files: text files indexed.
        n_chunks: chunks indexed.
        scanned_ns: when the walk that made it started (a file modified within
            the racy window before it is read again by the next build).
        updated: ISO time of the commit.
    """

    root: str
    tier: Tier
    full: TierFacts | None
    static: TierFacts | None
    chunker: Mapping[str, Any]
    walk_stats: Mapping[str, tuple[int, int]] | None
    use_ignore_files: bool
    n_files: int
    n_chunks: int
    scanned_ns: int = 0
    updated: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def of(self, tier: Tier) -> TierFacts | None:
        """The facts of an embedding tier (``full`` or ``static``)."""
        return self.full if tier == FULL else self.static if tier == STATIC else None

    @property
    def model_name(self) -> str | None:
        """The model that built the index (either tier's), or ``None`` for a keyword-only index."""
        facts = self.full or self.static
        return facts.name if facts is not None else None

    @property
    def unread_kinds(self) -> frozenset[str] | None:
        """The chunk kinds the transformer did not read; ``None`` when it read all or predates the choice."""
        return self.full.unread_kinds if self.full is not None else None

    def describe(self) -> dict[str, Any]:
        """The facts ``codesearch info`` prints: root, tier, model and fingerprints, counts, chunker, last update."""
        full, static = self.full, self.static
        return {
            "root": self.root,
            "tier": self.tier,
            "model": self.model_name,
            "fingerprint": full.fingerprint if full else None,
            "static_fingerprint": static.fingerprint if static else None,
            "dim": full.dim if full else None,
            "files": self.n_files,
            "chunks": self.n_chunks,
            "chunker": dict(self.chunker),
            "unread_kinds": sorted(self.unread_kinds or ()),
            "updated": self.updated,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IndexManifest:
        """Read the manifest an :class:`~codesearch.index.store.IndexStore` returns.

        Raises:
            IndexCorruptError: a key holds something of the wrong shape.
        """
        try:
            full = TierFacts.from_json(data.get(_KEYS[FULL]))
            static = TierFacts.from_json(data.get(_KEYS[STATIC]))
            tier = data.get("tier") or (FULL if full else STATIC if static else KEYWORD)
            walk_stats = data.get("walk_stats")
            counts = data.get("counts") or {}
            return cls(
                root=str(data.get("root")),
                tier=tier,
                full=full,
                static=static,
                chunker=MappingProxyType(dict(data.get("chunker") or {})),
                walk_stats=None if walk_stats is None else {p: (int(s[0]), int(s[1])) for p, s in walk_stats.items()},
                use_ignore_files=bool(data.get("use_ignore_files", True)),
                n_files=int(counts.get("files") or 0),
                n_chunks=int(counts.get("chunks") or 0),
                scanned_ns=int(data.get("scanned_ns") or 0),
                updated=str(data.get("updated")),
            )
        except (AttributeError, TypeError, ValueError, IndexError) as err:
            raise IndexCorruptError(f"the index manifest is damaged ({err}); re-run `codesearch index`") from err

    def to_json(self) -> dict[str, Any]:
        """The JSON the store keeps (the same keys as every earlier version)."""
        return {
            "root": self.root,
            "tier": self.tier,
            _KEYS[FULL]: None if self.full is None else self.full.to_json(),
            _KEYS[STATIC]: None if self.static is None else self.static.to_json(),
            "chunker": dict(self.chunker),
            "walk_stats": None if self.walk_stats is None else {p: list(stat) for p, stat in self.walk_stats.items()},
            "use_ignore_files": self.use_ignore_files,
            "counts": {"files": self.n_files, "chunks": self.n_chunks},
            "scanned_ns": self.scanned_ns,
            "updated": self.updated,
        }


__all__ = ["ARRAYS", "BM25_PREFIX", "IndexManifest", "TierFacts"]
