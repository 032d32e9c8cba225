"""Which embedding models a searcher has, whether they may read a store, and which tier answers a query.

:class:`Tiers` loads the transformer and the static model lazily (keyword
search never loads one), refuses a store built by another model -- by name
before anything is loaded, and by fingerprint per tier -- and embeds queries on
a worker thread so a search can stat its files meanwhile. A single index and a
corpus both hold one (the store named in its messages); which tier answers a
query over a single index is :meth:`Tiers.answering`.
"""

from __future__ import annotations

import warnings
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

import numpy as np

from codesearch.embedding.catalogue import ModelSpec
from codesearch.exceptions import ExportError, ModelMismatchError, ModelNotAvailableError
from codesearch.index.loaded import LoadedIndex
from codesearch.types import FULL, STATIC, TextEmbedder, Tier

REINDEX = "re-index with `codesearch index --model {model}`"
"""How a single index is rebuilt for another model (``model``: its name)."""
KEYWORD_ONLY = ("this searcher is keyword-only (model=None); pass a model to embed, or search with mode='bm25'")


class StoredTier(Protocol):
    """What a store records of the model behind one of its tiers."""

    @property
    def name(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...


class Tiers:
    """The models behind a searcher's embedding tiers.

    Args:
        model: a catalogue name, hub id, local folder or
            :class:`~codesearch.embedding.ModelSpec` (loaded on first use), an
            object that embeds (used as it is), or ``None`` for keyword-only.
        int8: use the int8 export where it passed its quality gate.
        static: the static tier's embedder: ``None`` distils one from
            ``model`` when that is a name, folder or spec; ``False`` for none;
            or an object that embeds.
        place: the store these models serve, as errors name it (``the index at DIR``).
        rebuild: how that store is built for another model, ``{model}`` its name.

    Attributes:
        model, int8: as given.
        given_static: ``static`` as given.
    """

    def __init__(self, model: str | ModelSpec | TextEmbedder | None, int8: bool,
                 static: TextEmbedder | bool | None, place: str, rebuild: str = REINDEX) -> None:
        self._model = self.model = model
        self._int8 = self.int8 = int8
        self.given_static = static
        self._place = place
        self._rebuild = rebuild
        given = model if model is not None and hasattr(model, "embed_query") else None
        self._embedder: TextEmbedder | None = given  # type: ignore[assignment]
        self._static: TextEmbedder | None = static if hasattr(static, "embed_query") else None  # type: ignore[assignment]
        # A static model is distilled from the transformer's weights: only a model given by name, folder or spec has them.
        self._distil_static = static is None and model is not None and given is None
        self._model_name: str | None = None
        self._query_worker: ThreadPoolExecutor | None = None

    # -- what there is -------------------------------------------------------------

    @property
    def keyword_only(self) -> bool:
        """Whether this searcher has no model at all."""
        return self._model is None

    @property
    def model_name(self) -> str | None:
        """The name of the model asked for, known without loading it (``None`` for keyword-only).

        Raises:
            ModelNotAvailableError: an unknown model name.
        """
        if self._model is None:
            return None
        if self._model_name is None:
            if self._embedder is not None:
                self._model_name = str(self._embedder.spec.name)
            else:
                from codesearch.embedding.catalogue import resolve_model

                self._model_name = resolve_model(self._model).name  # type: ignore[arg-type]
        return self._model_name

    def transformer_dim(self) -> int:
        """The transformer's vector size, known without loading it (the catalogue's, else the embedder's; 384 when
        neither says)."""
        if self._embedder is not None:
            return int(self._embedder.dim)
        from codesearch.embedding.catalogue import resolve_model

        dim = resolve_model(self._model).dim  # type: ignore[arg-type]
        return int(dim) if dim else 384

    @property
    def embedder(self) -> TextEmbedder:
        """The transformer, loaded (and exported if needed) on first use.

        Raises:
            ModelNotAvailableError: the model cannot be loaded, or this is a
                keyword-only searcher (``model=None``).
        """
        if self._model is None:
            raise ModelNotAvailableError(KEYWORD_ONLY)
        if self._embedder is None:
            from codesearch.embedding.transformer import Embedder

            self._embedder = Embedder(self._model, int8=self._int8)  # type: ignore[arg-type]
        return self._embedder

    @property
    def has_static(self) -> bool:
        """Whether there is a static tier (a given embedder, or one to distil from the model)."""
        return self._static is not None or self._distil_static

    @property
    def static_embedder(self) -> TextEmbedder:
        """The static tier's embedder, loaded (and distilled if needed) on first use.

        Raises:
            ModelNotAvailableError: this searcher has no static tier.
        """
        if self._static is None:
            if not self._distil_static:
                raise ModelNotAvailableError("this searcher has no static tier (static=False, or the model is an object)")
            from codesearch.embedding.static import StaticEmbedder

            self._static = StaticEmbedder(self._model)  # type: ignore[arg-type]
        return self._static

    def static_loads(self, root: Path) -> bool:
        """Load the static model; where it cannot be had (no cached distillation and no export extra),
        warn and go on without a static tier. Returns whether there is one."""
        if not self.has_static:
            return False
        try:
            self.static_embedder  # noqa: B018
        except (ExportError, ModelNotAvailableError) as exc:
            warnings.warn(f"codesearch: no static tier for {root} ({exc}); indexing with the transformer only",
                          RuntimeWarning, stacklevel=4)
            self._distil_static = False
            return False
        return True

    def embed_query_soon(self, embedder: TextEmbedder, query: str) -> Future[np.ndarray]:
        """``embedder.embed_query(query)`` on a worker thread: a query's vector depends on the model alone."""
        if self._query_worker is None:
            self._query_worker = ThreadPoolExecutor(1, thread_name_prefix="codesearch-query")
        return self._query_worker.submit(embedder.embed_query, query)

    # -- guards --------------------------------------------------------------------

    def may_write(self, stored: str | None) -> bool:
        """Whether this searcher may update a store built by the model ``stored`` (the same name, or both
        keyword-only)."""
        if self._model is None or stored is None:
            return self._model is None and stored is None
        try:
            return self.model_name == stored
        except ModelNotAvailableError:
            return False

    def static_outdated(self, stored: StoredTier | None) -> bool:
        """Whether a store's static vectors (``stored``, as its store records that tier) came from an older static
        tier of this same model (the package ships a new one): derived data a writer recomputes, unlike a transformer
        tier of another export, which is refused. Only a static tier this searcher chose itself (shipped or
        distilled for its model) is codesearch's to replace; a static embedder given as an object is the caller's,
        and another one's vectors are refused (:meth:`check`).
        """
        if stored is None or not self._distil_static or stored.name != self.model_name:
            return False
        try:
            return stored.fingerprint != self.static_embedder.fingerprint
        except (ExportError, ModelNotAvailableError):
            return False

    def check_name(self, stored: str | None) -> None:
        """Refuse by name, before any model is loaded, a store built by the model ``stored`` if that is another.

        Raises:
            ModelMismatchError: the store was built by another model.
        """
        asked = self.model_name
        if asked is None or stored is None or asked == stored:
            return
        raise ModelMismatchError(
            f"{self._place} was built with model {stored!r}, not {asked!r}; search with "
            f"--model {stored}, or {self._rebuild.format(model=asked)}"
        )

    def check(self, stored: StoredTier | None, tier: Tier, embedder: TextEmbedder) -> None:
        """Refuse by fingerprint an embedding tier (``stored``, as its store records it) made by another model or
        export than ``embedder``.

        Raises:
            ModelMismatchError: the tier's vectors came from another model or export.
        """
        if stored is None or stored.fingerprint == embedder.fingerprint:
            return
        what = "static model" if tier == STATIC else "model"
        name = embedder.spec.name
        if stored.name == name:
            raise ModelMismatchError(
                f"{self._place} was built with another export of {name!r} "
                f"({what} fingerprint {stored.fingerprint[:12]}, this one is {embedder.fingerprint[:12]}: "
                f"other export options, such as --fp32, or other library versions); {self._rebuild.format(model=name)}"
            )
        raise ModelMismatchError(
            f"{self._place} was built with model {stored.name!r} "
            f"({what} fingerprint {stored.fingerprint[:12]}), but this query would be embedded by "
            f"{name!r} (fingerprint {embedder.fingerprint[:12]}); {self._rebuild.format(model=name)} "
            f"or search with --model {stored.name}"
        )

    def answering(self, loaded: LoadedIndex, mask: np.ndarray | None = None) -> tuple[Tier, TextEmbedder]:
        """The best embedding tier for the chunks in ``mask`` (transformer, else static) and its query embedder.

        A scope of chunks the transformer did not read (``--kind test``) is answered by the static tier.

        Raises:
            ModelMismatchError: the index's tiers cannot be embedded for here.
        """
        manifest = loaded.manifest
        unread_scope = loaded.read is not None and mask is not None and not (mask & loaded.read).any()
        if unread_scope and STATIC in loaded.vectors and self.has_static:
            self.check(manifest.of(STATIC), STATIC, self.static_embedder)
            return STATIC, self.static_embedder
        if FULL in loaded.vectors:
            self.check(manifest.of(FULL), FULL, self.embedder)
            return FULL, self.embedder
        if STATIC in loaded.vectors and self.has_static:
            self.check(manifest.of(STATIC), STATIC, self.static_embedder)
            return STATIC, self.static_embedder
        if STATIC not in loaded.vectors and manifest.model_name is None:
            raise ModelMismatchError(
                f"{self._place} is keyword-only (built without a model); "
                "search with mode='bm25' (--mode bm25) or re-index with a model"
            )
        self.check(manifest.of(FULL), FULL, self.embedder)  # a static index without a static model here
        raise ModelMismatchError(f"{self._place} has only a static tier, which this searcher "
                                 "cannot embed for; run `codesearch index` to add the transformer's")


def default_tier(tiers: Tiers, fast_start: bool) -> Tier:
    """The tier a search builds for a repository never indexed: static first when it can, else everything."""
    if tiers.keyword_only:
        return "keyword"
    return STATIC if fast_start and tiers.has_static else FULL


__all__ = ["KEYWORD_ONLY", "REINDEX", "StoredTier", "Tiers", "default_tier"]
