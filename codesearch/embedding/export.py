"""Export an embedding model to a fused ONNX graph, optionally quantised to int8, into the cache.

The pipeline: optimum (optimum-onnx) exports the ``feature-extraction`` graph
from the PyTorch weights; onnxruntime's transformer optimizer fuses attention,
LayerNorm and GELU (unfused fp32 is slower than PyTorch, fused is faster); with
``int8=True`` onnxruntime's dynamic quantisation (per-channel weights, suited to
AVX-512 VNNI) follows, and the result must pass the quality gate of
:mod:`codesearch.embedding.gate` against fp32, else fp32 is kept and the gate
says why.

Exports live in ``<cache>/models/<key>/`` (:mod:`codesearch.cache`), where the
key covers the weights, the options and the versions of the libraries that
produce the graph. A file lock keeps two processes from exporting the same
model at once. Only :func:`export_model` needs torch and optimum (the
``export`` extra), and it imports them when it runs; importing this module and
finding a cached export (:func:`find_export`) never does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import logging
import os
import shutil
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codesearch.cache import (
    MANIFEST_FILE,
    complete_manifest,
    folder_lock,
    folder_slug,
    models_dir,
    publish,
    sha256_files,
)
from codesearch.embedding.catalogue import ModelSpec, package_version, resolve_model, weights_identity
from codesearch.embedding.gate import GATE_MEAN_COS, GATE_MIN_COS, calibration_texts, int8_gate
from codesearch.embedding.onnx import CONFIG_FILE, ONNX_FILE, TOKENIZER_FILE
from codesearch.exceptions import CodeSearchError, ExportError, ModelNotAvailableError
from codesearch.jsonfiles import read_json, sha256_json

EXPORT_FORMAT = 3
"""Version of the export pipeline; part of every cache key. Bump it when the graph changes."""

INSTALL_HINT = (
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu "
    "&& pip install 'codesearch-hybrid[export]'"
)
_EXTERNAL_DATA_LIMIT = 1_800_000_000  # protobuf cannot hold more than 2 GiB
# onnxruntime fusions to leave off when loading our graphs (see _build_fp32).
_DISABLED_OPTIMIZERS = ("SkipLayerNormFusion", "BiasGeluFusion", "BiasSkipLayerNormFusion")
_LIBRARIES = ("onnxruntime", "onnx", "optimum-onnx", "optimum", "transformers", "torch")
_EXPORT_MODULES = ("torch", "optimum", "transformers")

# Quantisation setups tried in order; the first one that passes the gate is kept.
# Dynamic int8 quantises activations per tensor at run time and weights per output
# channel; "ffn-out-fp32" also leaves the MatMuls after GELU (whose inputs have
# the largest outliers) in fp32. Quantising the embeddings (Gather) or weights per
# tensor loses too much: min cosine 0.79 on real code with MiniLM.
_QUANT_SETUPS: tuple[dict[str, Any], ...] = (
    {"name": "per-channel", "per_channel": True, "exclude_ffn_out": False},
    {"name": "per-channel, ffn-out fp32", "per_channel": True, "exclude_ffn_out": True},
)


@dataclass(frozen=True, slots=True)
class ExportResult:
    """An exported model on disk.

    Attributes:
        path: the folder with ``model.onnx``, ``tokenizer.json``, ``config.json``
            and ``manifest.json``.
        spec: the model it was exported from.
        int8_requested: whether int8 was asked for.
        int8_used: whether ``model.onnx`` is the int8 model (the gate passed).
        gate: the int8 quality gate's numbers (``passed``, ``mean_cos``,
            ``min_cos``, ``chunks``, ``setup``, ``attempts``), or ``None`` for fp32.
        cached: whether the export was found rather than made by this call.
        seconds: time this call took.
        onnx_sha256: hex sha256 over the ONNX file(s).
    """

    path: Path
    spec: ModelSpec
    int8_requested: bool
    int8_used: bool
    gate: dict[str, Any] | None
    cached: bool
    seconds: float
    onnx_sha256: str

    @property
    def onnx_path(self) -> Path:
        """The ONNX graph to load."""
        return self.path / ONNX_FILE

    @property
    def tokenizer_path(self) -> Path:
        """The fast tokenizer (``tokenizers`` JSON) that goes with the graph."""
        return self.path / TOKENIZER_FILE

    def __str__(self) -> str:
        kind = "int8" if self.int8_used else "fp32"
        line = f"{self.spec.name} ({kind}) at {self.path}"
        if self.gate is not None:
            verdict = "passed" if self.gate["passed"] else "failed, kept fp32"
            line += (
                f"; int8 gate {verdict}: mean cosine {self.gate['mean_cos']:.4f}, "
                f"min {self.gate['min_cos']:.4f} on {self.gate['chunks']} code chunks"
            )
        return line


def export_key(spec: ModelSpec, int8: bool = False) -> str:
    """Return the cache folder name for ``spec`` exported with these options.

    The name is readable (``minilm-fp32-…``) and ends with a hash of the model
    source, the options and the versions of the exporting libraries.

    Raises:
        ModelNotAvailableError: the spec names a local directory that is missing.
    """
    material = {**_source_material(spec, int8), "versions": _library_versions()}
    digest = sha256_json(material)[:16]
    return f"{folder_slug(spec.name)}-{'int8' if int8 else 'fp32'}-{digest}"


def find_export(
    model: str | ModelSpec,
    int8: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
) -> ExportResult | None:
    """Return a finished export of ``model`` from the cache, or ``None``.

    Imports neither torch nor optimum. When they are not installed (a search-only
    environment), an export of the same model and options made with other
    library versions is accepted too, since nothing could export a new one.
    """
    started = time.perf_counter()
    spec = resolve_model(model)
    folder = models_dir(cache_dir)
    found = _read_export(folder / export_key(spec, int8), spec, int8, started)
    if found is not None or _export_deps_installed():
        return found
    wanted = sha256_json(_source_material(spec, int8))
    candidates = []
    for manifest_path in folder.glob(f"*/{MANIFEST_FILE}"):
        manifest = read_json(manifest_path)
        if isinstance(manifest, dict) and manifest.get("source_key") == wanted:
            candidates.append((manifest_path.stat().st_mtime, manifest_path.parent))
    for _, candidate in sorted(candidates, reverse=True):
        found = _read_export(candidate, spec, int8, started)
        if found is not None:
            return found
    return None


def export_model(
    model: str | ModelSpec,
    int8: bool = False,
    out: str | os.PathLike[str] | None = None,
    progress: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
) -> ExportResult:
    """Export ``model`` to a fused ONNX graph, or return the cached export.

    Args:
        model: a catalogue name, hub id, local directory or :class:`ModelSpec`.
        int8: quantise to int8 if the result passes the quality gate
            (mean cosine to fp32 >= ``GATE_MEAN_COS``, min >= ``GATE_MIN_COS``
            on real code chunks); otherwise keep fp32 and record the gate.
        out: the folder to write to; defaults to the cache.
        progress: show a progress bar on stderr.
        cache_dir: the cache root (see :func:`codesearch.cache.cache_root`).

    Returns:
        The export; ``cached`` tells whether it already existed.

    Raises:
        ModelNotAvailableError: the weights cannot be found or downloaded.
        ExportError: torch/optimum are missing, or exporting failed.
    """
    started = time.perf_counter()
    spec = resolve_model(model)
    key = export_key(spec, int8)
    target = Path(out).expanduser() if out is not None else models_dir(cache_dir) / key
    found = _read_export(target, spec, int8, started, key=key)
    if found is not None:
        return found
    _require_export_deps(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(target, progress):
        found = _read_export(target, spec, int8, started, key=key)
        if found is not None:
            return found
        fp32 = export_model(spec, False, None, progress, cache_dir) if int8 else None
        scratch = target.parent / f".{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        try:
            with quiet_libraries():
                if fp32 is None:
                    manifest = _build_fp32(spec, scratch, progress)
                else:
                    manifest = _build_int8(spec, fp32, scratch, progress)
            manifest.update(
                format=EXPORT_FORMAT,
                key=key,
                source_key=sha256_json(_source_material(spec, int8)),
                source=spec.source,
                model=spec.name,
                int8_requested=int8,
                versions=_library_versions(),
                created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            )
            manifest["onnx_sha256"] = sha256_files(_onnx_files(scratch))
            publish(scratch, target, [p.name for p in _onnx_files(scratch)] + [TOKENIZER_FILE, CONFIG_FILE], manifest)
        except CodeSearchError:
            raise
        except Exception as exc:  # the exporters raise anything; say which step and how to fix
            reason = (str(exc).strip().splitlines() or [""])[0][:300]
            raise ExportError(
                f"exporting {spec.name} to ONNX failed ({type(exc).__name__}: {reason}); "
                "check that the folder loads with transformers' AutoModel, or pass another model"
            ) from exc
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    _warn_about(spec, manifest)
    result = _read_export(target, spec, int8, started, key=key)
    if result is None:  # pragma: no cover - only if the folder vanished under us
        raise ExportError(f"the export in {target} vanished; run the export again")
    return dataclasses.replace(result, cached=False)


# --- building -----------------------------------------------------------------


def _build_fp32(spec: ModelSpec, scratch: Path, progress: bool) -> dict[str, Any]:
    with steps(f"export {spec.name}", 5, progress) as step:
        step("load torch and optimum")
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model
        from optimum.exporters.onnx import main_export

        step("find weights")
        source = spec.local_path() or download_weights(spec)
        config = read_json(source / CONFIG_FILE)
        if not isinstance(config, dict):
            raise ModelNotAvailableError(
                f"{source} has no readable config.json; pass a model folder"
            )
        _check_length(spec, config)
        step("export graph (torch)")
        raw = scratch / "raw"
        main_export(
            str(source),
            raw,
            task="feature-extraction",
            library_name="transformers",
            do_validation=False,
            local_files_only=True,
            device="cpu",
        )
        step("fuse attention, LayerNorm, GELU")
        options = FusionOptions("bert")
        # Measured on 2 AVX-512 cores: the fused SkipLayerNormalization and BiasGelu
        # kernels are 2-5x slower than Add + LayerNormalization / Gelu, so keep those
        # apart; MultiHeadAttention (not Attention) has onnxruntime's flash-attention path.
        options.enable_skip_layer_norm = False
        options.enable_bias_skip_layer_norm = False
        options.enable_bias_gelu = False
        options.use_multi_head_attention = True
        if config.get("model_type") not in ("bert", None):
            # EmbedLayerNormalization numbers positions 0..n-1; RoBERTa-style models
            # count from padding_idx + 1, so their embeddings stay unfused.
            options.enable_embed_layer_norm = False
        optimized = optimize_model(
            str(raw / ONNX_FILE),
            model_type="bert",
            num_heads=int(config.get("num_attention_heads", 0)),
            hidden_size=int(config.get("hidden_size", 0)),
            optimization_options=options,
            opt_level=0,
        )
        fused = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
        unmasked = _drop_attention_masks(optimized.model.graph)
        big = _onnx_bytes(raw) > _EXTERNAL_DATA_LIMIT
        optimized.save_model_to_file(str(scratch / ONNX_FILE), use_external_data_format=big)
        step("save tokenizer")
        tokenizer = next(
            (p for p in (raw / TOKENIZER_FILE, source / TOKENIZER_FILE) if p.is_file()), None
        )
        if tokenizer is None:
            raise ExportError(
                f"{spec.source} has no fast tokenizer (tokenizer.json); save one with "
                "AutoTokenizer.from_pretrained(DIR).save_pretrained(DIR) and pass DIR"
            )
        shutil.copyfile(tokenizer, scratch / TOKENIZER_FILE)
        shutil.copyfile(source / CONFIG_FILE, scratch / CONFIG_FILE)
        shutil.rmtree(raw)
    return {
        "int8_used": False,
        "gate": None,
        "fused": fused,
        "unmasked_attention": unmasked,
        "disabled_optimizers": list(_DISABLED_OPTIMIZERS),
    }


def _build_int8(
    spec: ModelSpec, fp32: ExportResult, scratch: Path, progress: bool
) -> dict[str, Any]:
    shutil.copyfile(fp32.path / TOKENIZER_FILE, scratch / TOKENIZER_FILE)
    shutil.copyfile(fp32.path / CONFIG_FILE, scratch / CONFIG_FILE)
    texts = calibration_texts()
    attempts: list[dict[str, Any]] = []
    candidate = scratch / "int8.onnx"
    with steps(f"int8 {spec.name}", 2 * len(_QUANT_SETUPS), progress) as step:
        for setup in _QUANT_SETUPS:
            step(f"quantise ({setup['name']})")
            _quantize(fp32.onnx_path, candidate, setup)
            step(f"quality gate on {len(texts)} code chunks")
            gate = {**int8_gate(fp32.path, candidate, spec, texts), "setup": setup["name"]}
            attempts.append(gate)
            if gate["passed"]:
                break
    gate = {**attempts[-1], "attempts": attempts}
    if gate["passed"]:
        os.replace(candidate, scratch / ONNX_FILE)
    else:
        candidate.unlink()
        for part in _onnx_files(fp32.path):
            _link_or_copy(part, scratch / part.name)
    fp32_manifest = read_json(fp32.path / MANIFEST_FILE) or {}
    return {
        "int8_used": bool(gate["passed"]),
        "gate": gate,
        "fp32_key": fp32.path.name,
        "unmasked_attention": fp32_manifest.get("unmasked_attention", 0),
        "disabled_optimizers": fp32_manifest.get("disabled_optimizers", []),
    }


def _drop_attention_masks(graph: Any) -> int:
    """Detach the padding mask from fused attention nodes; return how many changed.

    :mod:`codesearch.embedding.transformer` never pads (it runs one text per call), so the
    mask is all ones, and without it ``MultiHeadAttention`` takes onnxruntime's
    flash-attention path.
    """
    mask_input = {"MultiHeadAttention": 4, "Attention": 3}
    changed = 0
    for node in graph.node:
        index = mask_input.get(node.op_type)
        if index is None or node.domain != "com.microsoft" or len(node.input) <= index:
            continue
        if node.input[index]:
            node.input[index] = ""
            changed += 1
        while node.input and not node.input[-1]:
            del node.input[-1]
    return changed


def _quantize(fp32_onnx: Path, int8_onnx: Path, setup: dict[str, Any]) -> None:
    """Dynamic int8 quantisation of the weight MatMuls (and fused Attention, if any)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    exclude = _ffn_output_matmuls(fp32_onnx) if setup.get("exclude_ffn_out") else []
    quantize_dynamic(
        fp32_onnx,
        int8_onnx,
        op_types_to_quantize=setup.get("op_types", ["MatMul", "Attention"]),
        per_channel=setup["per_channel"],
        reduce_range=False,  # VNNI multiplies u8 x s8 without the 16-bit saturation
        weight_type=QuantType.QInt8,
        nodes_to_exclude=exclude,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT, "MatMulConstBOnly": True},
    )


def _ffn_output_matmuls(path: Path) -> list[str]:
    """Names of the MatMuls that take a GELU's output (the feed-forward down projections)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    producer = {out: node.op_type for node in graph.node for out in node.output}
    gelus = {"Gelu", "BiasGelu", "FastGelu", "QuickGelu"}
    return [
        node.name
        for node in graph.node
        if node.op_type == "MatMul" and producer.get(node.input[0]) in gelus
    ]


def download_weights(spec: ModelSpec) -> Path:
    """Fetch a hub model's config, tokenizer and weights; say what to do when offline."""
    try:
        from huggingface_hub import snapshot_download

        patterns = ["*.json", "*.txt", "*.model", "*.safetensors"]
        folder = Path(
            snapshot_download(spec.source, revision=spec.revision, allow_patterns=patterns)
        )
        if not any(folder.glob("*.safetensors")):
            folder = Path(
                snapshot_download(
                    spec.source, revision=spec.revision, allow_patterns=[*patterns, "*.bin"]
                )
            )
    except Exception as exc:  # offline, unknown id, gated repo, ...
        hint = (
            f"resolve_model({spec.name!r}, source='DIR')"
            if spec.name != spec.source
            else f"resolve_model('DIR', pooling={spec.pooling!r})"
        )
        raise ModelNotAvailableError(
            f"cannot download {spec.source} from the Hugging Face hub ({type(exc).__name__}); "
            f"where you are online run `huggingface-cli download {spec.source} --local-dir DIR`, "
            f"copy DIR here and pass {hint}"
        ) from exc
    return folder


def _check_length(spec: ModelSpec, config: dict[str, Any]) -> None:
    positions = config.get("max_position_embeddings")
    if not isinstance(positions, int):
        return
    limit = positions
    if config.get("model_type") in ("roberta", "xlm-roberta", "camembert"):
        limit -= int(config.get("pad_token_id", 1)) + 1  # positions start after padding_idx
    if spec.max_length > limit:
        raise ExportError(
            f"{spec.source} has {limit} token positions; pass max_length={limit} or less "
            f"instead of {spec.max_length}"
        )


# --- the cache ----------------------------------------------------------------


def _read_export(
    folder: Path, spec: ModelSpec, int8: bool, started: float, key: str | None = None
) -> ExportResult | None:
    """Load a finished export's manifest; ``None`` if absent, incomplete or another key."""
    manifest = complete_manifest(folder)
    if manifest is None or manifest.get("format") != EXPORT_FORMAT:
        return None
    if key is not None and manifest.get("key") != key:
        return None
    if bool(manifest.get("int8_requested")) != int8:
        return None
    sizes = manifest.get("files", {})
    if ONNX_FILE not in sizes or TOKENIZER_FILE not in sizes:
        return None
    return ExportResult(
        path=folder,
        spec=spec,
        int8_requested=int8,
        int8_used=bool(manifest.get("int8_used")),
        gate=manifest.get("gate"),
        cached=True,
        seconds=time.perf_counter() - started,
        onnx_sha256=str(manifest["onnx_sha256"]),
    )


def _warn_about(spec: ModelSpec, manifest: dict[str, Any]) -> None:
    """Warn (outside the quietened export) about a slow graph or a refused int8."""
    if "fused" in manifest and not ({"Attention", "MultiHeadAttention"} & set(manifest["fused"])):
        warnings.warn(
            f"onnxruntime could not fuse attention in {spec.name}; the graph works but is "
            "slower than it could be",
            RuntimeWarning,
            stacklevel=3,
        )
    gate = manifest.get("gate")
    if gate is not None and not gate["passed"]:
        warnings.warn(
            f"int8 {spec.name} failed the quality gate (mean cosine {gate['mean_cos']:.4f}, "
            f"min {gate['min_cos']:.4f} against fp32; needs {GATE_MEAN_COS} and {GATE_MIN_COS}); "
            "keeping fp32",
            RuntimeWarning,
            stacklevel=3,
        )


def _source_material(spec: ModelSpec, int8: bool) -> dict[str, Any]:
    """What identifies the exported graph apart from library versions."""
    options: dict[str, Any] = {"int8": int8}
    if int8:
        options["setups"] = list(_QUANT_SETUPS)
        options["gate"] = [GATE_MEAN_COS, GATE_MIN_COS]
    return {"format": EXPORT_FORMAT, "source": weights_identity(spec), "options": options}


def _library_versions() -> dict[str, str | None]:
    return {name: package_version(name) for name in _LIBRARIES}


def _export_deps_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in _EXPORT_MODULES)


def _require_export_deps(spec: ModelSpec) -> None:
    missing = [name for name in _EXPORT_MODULES if importlib.util.find_spec(name) is None]
    if importlib.util.find_spec("optimum") is not None and package_version("optimum-onnx") is None:
        missing.append("optimum-onnx")
    if missing:
        raise ExportError(
            f"{spec.name} has no cached ONNX export and exporting one needs "
            f"{', '.join(missing)}: {INSTALL_HINT}"
        )


# --- small helpers --------------------------------------------------------------


def _onnx_files(folder: Path) -> list[Path]:
    """The graph and its external data file, if any."""
    return sorted(p for p in folder.iterdir() if p.name.startswith(ONNX_FILE) and p.is_file())


def _onnx_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and "onnx" in p.name)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


@contextlib.contextmanager
def steps(description: str, total: int, progress: bool) -> Iterator[Any]:
    """A step counter shown as a tqdm bar; yields ``step(name)``."""
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc=description, unit="step", disable=not progress, leave=True)
    started = [False]

    def step(name: str) -> None:
        if started[0]:
            bar.update(1)
        started[0] = True
        bar.set_postfix_str(name)

    try:
        yield step
        bar.update(bar.total - bar.n)
    finally:
        bar.close()


@contextlib.contextmanager
def quiet_libraries() -> Iterator[None]:
    """Hide the exporters' tracer warnings and log chatter; errors still raise."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


__all__ = ["EXPORT_FORMAT", "INSTALL_HINT", "ONNX_FILE", "ExportResult", "download_weights", "export_key", "export_model",
           "find_export", "quiet_libraries", "steps"]
