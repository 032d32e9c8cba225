"""The static tier's model: a transformer distilled into one vector per token with model2vec, cached.

model2vec runs every token of the vocabulary through the transformer once,
reduces the token vectors with PCA and weights them by token frequency (its
defaults); the result needs only numpy and the tokenizer at search time
(:class:`codesearch.embedding.static.StaticEmbedder`). Distillations live in
``<cache>/models/<name>-static-<hash>/`` (:mod:`codesearch.cache`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codesearch.cache import MANIFEST_FILE, complete_manifest, folder_lock, folder_slug, models_dir, publish, sha256_files
from codesearch.embedding.catalogue import ModelSpec, package_version, resolve_model, weights_identity
from codesearch.embedding.export import INSTALL_HINT, download_weights, quiet_libraries, steps
from codesearch.embedding.onnx import TOKENIZER_FILE
from codesearch.exceptions import CodeSearchError, ExportError
from codesearch.jsonfiles import read_json, sha256_json

STATIC_FORMAT = 1
"""Version of the static distillation's files; part of every static cache key."""

STATIC_PCA_DIMS = 256
"""Dimensions the distilled token vectors keep (model2vec's default)."""

STATIC_EMBEDDINGS_FILE = "embeddings.npy"


@dataclass(frozen=True, slots=True)
class StaticExport:
    """A static model distilled from a transformer: one vector per token, on disk.

    Attributes:
        path: the folder with ``embeddings.npy``, ``tokenizer.json`` and ``manifest.json``.
        spec: the transformer it was distilled from.
        sha256: hex sha256 over the embeddings and the tokenizer.
        cached: whether it was found rather than made by this call.
    """

    path: Path
    spec: ModelSpec
    sha256: str
    cached: bool


def static_key(spec: ModelSpec) -> str:
    """The cache folder name of ``spec``'s static distillation."""
    material = {"static": STATIC_FORMAT, "pca_dims": STATIC_PCA_DIMS, "source": weights_identity(spec),
                "model2vec": package_version("model2vec")}
    return f"{folder_slug(spec.name)}-static-{sha256_json(material)[:16]}"


def find_static(model: str | ModelSpec, cache_dir: str | os.PathLike[str] | None = None) -> StaticExport | None:
    """A finished static distillation of ``model`` from the cache, or ``None`` (imports no torch).

    Where model2vec is not installed (a search-only environment) a
    distillation of the same weights made with another model2vec is accepted.
    """
    spec = resolve_model(model)
    folder = models_dir(cache_dir)
    found = _read_static(folder / static_key(spec), spec)
    if found is not None or importlib.util.find_spec("model2vec") is not None:
        return found
    wanted = sha256_json(weights_identity(spec))
    for manifest_path in sorted(folder.glob(f"*-static-*/{MANIFEST_FILE}"), key=lambda p: -p.stat().st_mtime):
        manifest = read_json(manifest_path)
        if isinstance(manifest, dict) and manifest.get("source_key") == wanted:
            found = _read_static(manifest_path.parent, spec)
            if found is not None:
                return found
    return None


def export_static(
    model: str | ModelSpec, progress: bool = True, cache_dir: str | os.PathLike[str] | None = None
) -> StaticExport:
    """Distil ``model`` into a static model with model2vec, or return the cached one.

    model2vec runs every token of the vocabulary through the transformer once,
    reduces the token vectors with PCA and weights them by token frequency
    (its defaults); the result needs only numpy and the tokenizer at search
    time. Needs the ``export`` extra (torch, transformers, model2vec).

    Raises:
        ModelNotAvailableError: the weights cannot be found or downloaded.
        ExportError: model2vec or torch is missing, or the distillation failed.
    """
    spec = resolve_model(model)
    target = models_dir(cache_dir) / static_key(spec)
    found = _read_static(target, spec)
    if found is not None:
        return found
    missing = [name for name in ("torch", "transformers", "model2vec") if importlib.util.find_spec(name) is None]
    if missing:
        raise ExportError(f"{spec.name} has no cached static model and distilling one needs {', '.join(missing)}: "
                          f"{INSTALL_HINT}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(target, progress):
        found = _read_static(target, spec)
        if found is not None:
            return found
        scratch = target.parent / f".{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        try:
            with steps(f"static {spec.name}", 2, progress) as step, quiet_libraries():
                step("distil token vectors (model2vec)")
                from model2vec.distill import distill

                folder = spec.local_path() or download_weights(spec)
                with open(os.devnull, "w") as sink, contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
                    static = distill(str(folder), pca_dims=STATIC_PCA_DIMS)
                step("save")
                np.save(scratch / STATIC_EMBEDDINGS_FILE, np.asarray(static.embedding, dtype=np.float32),
                        allow_pickle=False)
                (scratch / TOKENIZER_FILE).write_text(static.tokenizer.to_str(), encoding="utf-8")
            files = [scratch / STATIC_EMBEDDINGS_FILE, scratch / TOKENIZER_FILE]
            manifest = {
                "format": STATIC_FORMAT,
                "key": target.name,
                "source_key": sha256_json(weights_identity(spec)),
                "model": spec.name,
                "dim": int(static.dim),
                "normalize": bool(static.normalize),
                "median_token_length": int(static.median_token_length),
                "unk_token_id": static.unk_token_id,
                "sha256": sha256_files(files),
                "versions": {"model2vec": package_version("model2vec"), "transformers": package_version("transformers")},
            }
            publish(scratch, target, [p.name for p in files], manifest)
        except CodeSearchError:
            raise
        except Exception as exc:
            reason = (str(exc).strip().splitlines() or [""])[0][:300]
            raise ExportError(f"distilling {spec.name} into a static model failed ({type(exc).__name__}: {reason})") from exc
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    result = _read_static(target, spec)
    if result is None:  # pragma: no cover - only if the folder vanished under us
        raise ExportError(f"the static model in {target} vanished; run the export again")
    return dataclasses.replace(result, cached=False)


def _read_static(folder: Path, spec: ModelSpec) -> StaticExport | None:
    manifest = complete_manifest(folder)
    if manifest is None or manifest.get("format") != STATIC_FORMAT:
        return None
    return StaticExport(folder, spec, str(manifest.get("sha256")), cached=True)


__all__ = ["STATIC_EMBEDDINGS_FILE", "STATIC_FORMAT", "STATIC_PCA_DIMS", "StaticExport", "export_static", "find_static",
           "static_key"]
