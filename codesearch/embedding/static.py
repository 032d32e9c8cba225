"""The static tier: token vectors distilled from the transformer, averaged per text.

:class:`StaticEmbedder` owns the distilled model (see
:func:`codesearch.embedding.distill.export_static`): a ``(vocabulary, dim)`` float32 array
and its tokenizer. Embedding a text is tokenizing it, looking up its tokens'
vectors and averaging them -- numpy and the tokenizer only, thousands of
chunks a second -- so an index can answer from it before the transformer
has embedded anything.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from codesearch.cache import MANIFEST_FILE
from codesearch.embedding.catalogue import DEFAULT_MODEL, ModelSpec, resolve_model, static_folder
from codesearch.embedding.distill import STATIC_EMBEDDINGS_FILE, export_static, find_static
from codesearch.embedding.onnx import load_tokenizer, tokenizer_text
from codesearch.embedding.vectors import l2_normalize
from codesearch.embedding.wordpiece import WordPieceWords
from codesearch.exceptions import ModelNotAvailableError
from codesearch.jsonfiles import sha256_json

MAX_TOKENS = 512
"""Tokens of a text that count (model2vec's default); the rest are cut."""
BATCH = 1024
"""Texts tokenized at a time."""


class StaticEmbedder:
    """Embed texts with a static model distilled from ``model``.

    Args:
        model: the transformer the static model comes from (a catalogue name,
            hub id, local folder or :class:`ModelSpec`).
        cache_dir: the cache root (see :func:`codesearch.cache.cache_root`).
        export_progress: show progress if it has to be distilled first.

    Raises:
        ModelNotAvailableError: the static files cannot be read.
        ExportError: it must be distilled and that fails or needs the ``export`` extra.
    """

    def __init__(
        self,
        model: str | ModelSpec = DEFAULT_MODEL,
        cache_dir: str | os.PathLike[str] | None = None,
        *,
        export_progress: bool = True,
    ) -> None:
        self.spec = resolve_model(model)
        shipped = static_folder(self.spec)
        if shipped is not None:
            self._from(shipped)
            return
        found = find_static(self.spec, cache_dir) or export_static(
            self.spec, progress=export_progress, cache_dir=cache_dir)
        self.export = found
        self._load(found.path)
        self.last_seconds = 0.0

    @classmethod
    def from_folder(cls, folder: str | os.PathLike[str], model: str | ModelSpec = DEFAULT_MODEL) -> StaticEmbedder:
        """A static model saved in ``folder`` (``embeddings.npy``, ``tokenizer.json``, ``manifest.json``), such as one
        shipped with a model or fitted by :func:`codesearch.training.static_fit.fit_static`; ``model`` is the
        transformer it goes with.

        Raises:
            ModelNotAvailableError: the folder holds no complete static model.
        """
        self = cls.__new__(cls)
        self.spec = resolve_model(model)
        self._from(Path(folder))
        return self

    def _from(self, path: Path) -> None:
        from codesearch.cache import complete_manifest
        from codesearch.embedding.distill import StaticExport

        manifest = complete_manifest(path)
        if manifest is None:
            raise ModelNotAvailableError(f"{path} holds no complete static model (embeddings.npy, tokenizer.json, "
                                         "manifest.json)")
        self.export = StaticExport(path, self.spec, str(manifest.get("sha256")), cached=True)
        self._load(path)
        self.last_seconds = 0.0

    def _load(self, folder: Path) -> None:
        try:
            manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
            # A fitted model saved with float16=True keeps its vectors in float16 (half the size, converted here at
            # ~3 ns a value); they are averaged in float32. The shipped one is stored as float32: nothing to convert.
            self.embeddings = np.load(folder / STATIC_EMBEDDINGS_FILE, allow_pickle=False).astype(np.float32, copy=False)
            self.tokenizer = load_tokenizer(folder)
        except (OSError, ValueError) as exc:
            raise ModelNotAvailableError(f"cannot read the static model in {folder} ({exc}); delete it to distil again") from exc
        self.dim = int(self.embeddings.shape[1])
        self.normalize = bool(manifest.get("normalize", True))
        self.unk_token_id = manifest.get("unk_token_id")
        self.max_chars = MAX_TOKENS * max(int(manifest.get("median_token_length", 4)), 1)
        # Plain-ASCII texts are split into words and each word's pieces remembered (the same ids, about 5x faster).
        self._words = WordPieceWords.of(self.tokenizer, self.unk_token_id)
        material = {"sha256": self.export.sha256, "max_tokens": MAX_TOKENS, "normalize": self.normalize}
        self.fingerprint = sha256_json(material)

    def embed_documents(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Embed texts; a float32 ``(len(texts), dim)`` array, rows L2-normalised (zero for a text with no token).

        Texts are tokenized :data:`BATCH` at a time (tokenizing 95k chunks in one call held gigabytes).
        """
        started = time.perf_counter()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        embeddings = self.embeddings
        for first in range(0, len(texts), BATCH):
            for row, ids in enumerate(self._batch_ids(texts[first:first + BATCH]), start=first):
                if ids:
                    # One text's tokens at a time: the gathered rows stay in cache (gathering a
                    # whole repository's tokens at once moved ~1 GB through memory).
                    out[row] = embeddings[ids].mean(axis=0)
        if self.normalize:
            l2_normalize(out)
        self.last_seconds = time.perf_counter() - started
        return out

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """The token ids whose vectors make each text's vector: no special or unknown tokens, at most
        :data:`MAX_TOKENS` of them."""
        return [ids for first in range(0, len(texts), BATCH) for ids in self._batch_ids(texts[first:first + BATCH])]

    def _batch_ids(self, texts: Sequence[str]) -> list[list[int]]:
        encode = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        unk, words = self.unk_token_id, self._words
        batch = [tokenizer_text(t[: self.max_chars]) for t in texts]
        known: list[list[int] | None] = [words.ids(t) for t in batch] if words is not None else [None] * len(batch)
        rest = [i for i, ids in enumerate(known) if ids is None]
        if rest:  # texts the fast path does not take, through the tokenizer in one call
            for i, encoding in zip(rest, encode([batch[i] for i in rest], add_special_tokens=False)):
                ids = encoding.ids
                known[i] = [t for t in ids if t != unk] if unk is not None and unk in ids else ids
        return [ids[:MAX_TOKENS] if ids else [] for ids in known]

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query: a float32 ``(dim,)`` vector."""
        return self.embed_documents([text])[0]

    def __repr__(self) -> str:
        return f"StaticEmbedder({self.spec.name!r}, dim={self.dim}, fingerprint={self.fingerprint[:12]})"


__all__ = ["BATCH", "MAX_TOKENS", "StaticEmbedder"]
