"""Export an embedding model to ONNX, fuse it, optionally quantise it, and cache it.

The pipeline: optimum (optimum-onnx) exports the ``feature-extraction`` graph
from the PyTorch weights; onnxruntime's transformer optimizer fuses attention,
LayerNorm and GELU (unfused fp32 is slower than PyTorch, fused is faster); with
``int8=True`` onnxruntime's dynamic quantisation (per-channel weights, suited to
AVX-512 VNNI) follows, and the result must pass a quality gate against fp32 on
real code chunks, else fp32 is kept and the gate says why.

Exports live in ``<cache>/models/<key>/`` where ``<cache>`` is ``$CODESEARCH_CACHE_DIR``
or the platform's user cache dir for ``codesearch``, and the key covers the model
source, the options and the versions of the libraries that produce the graph. A
file lock keeps two processes from exporting the same model at once.

Only :func:`export_model` needs torch and optimum (the ``export`` extra), and it
imports them when it runs; importing this module and finding a cached export
(:func:`find_export`) never does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import sys
import sysconfig
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from codesearch.exceptions import CodeSearchError, ExportError, ModelNotAvailableError
from codesearch.models import ModelSpec, resolve_model

EXPORT_FORMAT = 3
"""Version of the export pipeline; part of every cache key. Bump it when the graph changes."""

GATE_MEAN_COS = 0.985
"""The int8 model's mean cosine to fp32 over the calibration chunks must reach this.

0.985 rather than 0.99: with onnxruntime 1.32 MiniLM's per-channel int8 scores
0.9897 here (0.9938 with the onnxruntime of the previous measurement), and on
the peer benchmark it ranks as well as fp32 (NDCG@10 of the two within 0.002)
while embedding 1.7x as fast as fp32 (the next setup, feed-forward outputs in
fp32, only 1.3x). Broken setups stay refused by ``GATE_MIN_COS`` (quantised
embeddings: min cosine 0.79)."""

GATE_MIN_COS = 0.97
"""Every calibration chunk's cosine between int8 and fp32 must reach this."""

CALIBRATION_CHUNKS = 128
LOCK_TIMEOUT_S = 3600.0
ONNX_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "config.json"
MANIFEST_FILE = "manifest.json"
_EXTERNAL_DATA_LIMIT = 1_800_000_000  # protobuf cannot hold more than 2 GiB
# onnxruntime fusions to leave off when loading our graphs (see _build_fp32).
_DISABLED_OPTIMIZERS = ("SkipLayerNormFusion", "BiasGeluFusion", "BiasSkipLayerNormFusion")
_LIBRARIES = ("onnxruntime", "onnx", "optimum-onnx", "optimum", "transformers", "torch")
_EXPORT_MODULES = ("torch", "optimum", "transformers")
_INSTALL_HINT = (
    "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu "
    "&& pip install 'codesearch-hybrid[export]'"
)
# Modules of the standard library whose code joins codesearch's own as int8 calibration text.
_STDLIB_SAMPLE = (
    "json/decoder.py",
    "json/encoder.py",
    "textwrap.py",
    "shlex.py",
    "fnmatch.py",
    "csv.py",
    "configparser.py",
    "argparse.py",
    "dataclasses.py",
    "pathlib.py",
    "functools.py",
    "http/client.py",
)
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


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Return the cache root: ``cache_dir``, else ``$CODESEARCH_CACHE_DIR``, else the user cache dir."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("CODESEARCH_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_cache_dir("codesearch"))


def export_key(spec: ModelSpec, int8: bool = False) -> str:
    """Return the cache folder name for ``spec`` exported with these options.

    The name is readable (``minilm-fp32-…``) and ends with a hash of the model
    source, the options and the versions of the exporting libraries.

    Raises:
        ModelNotAvailableError: the spec names a local directory that is missing.
    """
    material = {**_source_material(spec, int8), "versions": _library_versions()}
    digest = _sha256_json(material)[:16]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.name.strip("/")).strip("-")[-40:] or "model"
    return f"{slug}-{'int8' if int8 else 'fp32'}-{digest}"


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
    models_dir = cache_root(cache_dir) / "models"
    found = _read_export(models_dir / export_key(spec, int8), spec, int8, started)
    if found is not None or _export_deps_installed():
        return found
    wanted = _sha256_json(_source_material(spec, int8))
    candidates = []
    for manifest_path in models_dir.glob(f"*/{MANIFEST_FILE}"):
        manifest = _read_json(manifest_path)
        if isinstance(manifest, dict) and manifest.get("source_key") == wanted:
            candidates.append((manifest_path.stat().st_mtime, manifest_path.parent))
    for _, folder in sorted(candidates, reverse=True):
        found = _read_export(folder, spec, int8, started)
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
        cache_dir: the cache root (see :func:`cache_root`).

    Returns:
        The export; ``cached`` tells whether it already existed.

    Raises:
        ModelNotAvailableError: the weights cannot be found or downloaded.
        ExportError: torch/optimum are missing, or exporting failed.
    """
    started = time.perf_counter()
    spec = resolve_model(model)
    key = export_key(spec, int8)
    target = Path(out).expanduser() if out is not None else cache_root(cache_dir) / "models" / key
    found = _read_export(target, spec, int8, started, key=key)
    if found is not None:
        return found
    _require_export_deps(spec)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _export_lock(target, progress):
        found = _read_export(target, spec, int8, started, key=key)
        if found is not None:
            return found
        fp32 = export_model(spec, False, None, progress, cache_dir) if int8 else None
        scratch = target.parent / f".{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        try:
            with _quiet_libraries():
                if fp32 is None:
                    manifest = _build_fp32(spec, scratch, progress)
                else:
                    manifest = _build_int8(spec, fp32, scratch, progress)
            manifest.update(
                format=EXPORT_FORMAT,
                key=key,
                source_key=_sha256_json(_source_material(spec, int8)),
                source=spec.source,
                model=spec.name,
                int8_requested=int8,
                versions=_library_versions(),
                created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            )
            _publish(scratch, target, manifest)
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


def int8_gate(
    fp32_dir: Path,
    int8_onnx: Path,
    spec: ModelSpec,
    texts: Sequence[str],
    mean_cos: float = GATE_MEAN_COS,
    min_cos: float = GATE_MIN_COS,
) -> dict[str, Any]:
    """Compare an int8 graph with the fp32 export on ``texts``.

    Args:
        fp32_dir: an fp32 export folder (graph, tokenizer, config).
        int8_onnx: the int8 graph; it shares the folder's tokenizer and config.
        spec: gives pooling and maximum length.
        texts: document texts, e.g. from :func:`calibration_texts`.
        mean_cos: the least mean cosine that passes.
        min_cos: the least per-text cosine that passes.

    Returns:
        ``{"passed", "mean_cos", "min_cos", "chunks", "thresholds"}``.
    """
    from codesearch.embed import _OnnxEncoder

    inputs = [spec.document_prefix + t for t in texts]
    reference = _OnnxEncoder(fp32_dir / ONNX_FILE, fp32_dir, spec).encode(inputs)[0]
    candidate = _OnnxEncoder(int8_onnx, fp32_dir, spec).encode(inputs)[0]
    reference /= _norms(reference)
    candidate /= _norms(candidate)
    cosines = (reference * candidate).sum(axis=1)
    mean, low = float(cosines.mean()), float(cosines.min())
    return {
        "passed": bool(mean >= mean_cos and low >= min_cos),
        "mean_cos": round(mean, 6),
        "min_cos": round(low, 6),
        "chunks": len(texts),
        "thresholds": {"mean_cos": mean_cos, "min_cos": min_cos},
    }


def calibration_texts(limit: int = CALIBRATION_CHUNKS) -> list[str]:
    """Return up to ``limit`` real code chunks as document texts.

    They come from codesearch's own source files, then a fixed sample of the
    Python standard library, so the gate needs no outside corpus.

    Raises:
        ExportError: fewer than 16 chunks could be read.
    """
    from codesearch.chunking import chunk_text
    from codesearch.embed import document_text

    package = Path(__file__).resolve().parent
    files = [(f"codesearch/{p.name}", p) for p in sorted(package.glob("*.py"))]
    files += [(f"codesearch/{p.name}", p) for p in sorted(package.glob("*.pyx"))]
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files += [(name, stdlib / name) for name in _STDLIB_SAMPLE]
    texts: list[str] = []
    for label, path in files:
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        texts.extend(document_text(label, chunk.text) for chunk in chunk_text(label, source))
        if len(texts) >= limit:
            break
    if len(texts) < 16:
        raise ExportError(
            f"found only {len(texts)} code chunks to check int8 quality against; "
            "reinstall codesearch-hybrid, or export without --int8"
        )
    return texts[:limit]


# --- building -----------------------------------------------------------------


def _build_fp32(spec: ModelSpec, scratch: Path, progress: bool) -> dict[str, Any]:
    with _steps(f"export {spec.name}", 5, progress) as step:
        step("load torch and optimum")
        from onnxruntime.transformers.fusion_options import FusionOptions
        from onnxruntime.transformers.optimizer import optimize_model
        from optimum.exporters.onnx import main_export

        step("find weights")
        source = spec.local_path() or _download(spec)
        config = _read_json(source / CONFIG_FILE)
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
    with _steps(f"int8 {spec.name}", 2 * len(_QUANT_SETUPS), progress) as step:
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
    fp32_manifest = _read_json(fp32.path / MANIFEST_FILE) or {}
    return {
        "int8_used": bool(gate["passed"]),
        "gate": gate,
        "fp32_key": fp32.path.name,
        "unmasked_attention": fp32_manifest.get("unmasked_attention", 0),
        "disabled_optimizers": fp32_manifest.get("disabled_optimizers", []),
    }


def _drop_attention_masks(graph: Any) -> int:
    """Detach the padding mask from fused attention nodes; return how many changed.

    :mod:`codesearch.embed` never pads (it runs one text per call), so the
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


def _download(spec: ModelSpec) -> Path:
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
    manifest = _read_json(folder / MANIFEST_FILE)
    if not isinstance(manifest, dict) or manifest.get("format") != EXPORT_FORMAT:
        return None
    if key is not None and manifest.get("key") != key:
        return None
    if bool(manifest.get("int8_requested")) != int8:
        return None
    sizes = manifest.get("files", {})
    for name, size in sizes.items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != size:
            return None
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


def _publish(scratch: Path, target: Path, manifest: dict[str, Any]) -> None:
    """Move the finished files into ``target``; the manifest goes last, marking it complete."""
    keep = {*(p.name for p in _onnx_files(scratch)), TOKENIZER_FILE, CONFIG_FILE}
    manifest["files"] = {name: (scratch / name).stat().st_size for name in sorted(keep)}
    manifest["onnx_sha256"] = _sha256_files(_onnx_files(scratch))
    target.mkdir(parents=True, exist_ok=True)
    (target / MANIFEST_FILE).unlink(missing_ok=True)
    for name in keep:
        os.replace(scratch / name, target / name)
    staged = scratch / MANIFEST_FILE
    staged.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
    os.replace(staged, target / MANIFEST_FILE)


@contextlib.contextmanager
def _export_lock(target: Path, progress: bool) -> Iterator[None]:
    from filelock import FileLock, Timeout

    lock = FileLock(str(target) + ".lock")
    try:
        lock.acquire(timeout=0.05)
    except Timeout:
        if progress:
            print(f"codesearch: waiting for another process exporting to {target}", file=sys.stderr)
        try:
            lock.acquire(timeout=LOCK_TIMEOUT_S)
        except Timeout:
            raise ExportError(
                f"another process has been exporting to {target} for over "
                f"{LOCK_TIMEOUT_S:.0f} s; if none is running, delete {lock.lock_file}"
            ) from None
    try:
        yield
    finally:
        lock.release()


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
    folder = spec.local_path()
    source: dict[str, Any]
    if folder is not None and spec.package is not None:
        source = {"package": spec.package, "version": _version(spec.package)}
    elif folder is not None:
        files = sorted(
            (p.name, p.stat().st_size, p.stat().st_mtime_ns)
            for p in folder.iterdir()
            if p.is_file()
        )
        source = {"dir": str(folder.resolve()), "files": files}
    else:
        source = {"hub": spec.source, "revision": spec.revision or "main"}
    options: dict[str, Any] = {"int8": int8}
    if int8:
        options["setups"] = list(_QUANT_SETUPS)
        options["gate"] = [GATE_MEAN_COS, GATE_MIN_COS]
    return {"format": EXPORT_FORMAT, "source": source, "options": options}


def _library_versions() -> dict[str, str | None]:
    return {name: _version(name) for name in _LIBRARIES}


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _export_deps_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in _EXPORT_MODULES)


def _require_export_deps(spec: ModelSpec) -> None:
    missing = [name for name in _EXPORT_MODULES if importlib.util.find_spec(name) is None]
    if importlib.util.find_spec("optimum") is not None and _version("optimum-onnx") is None:
        missing.append("optimum-onnx")
    if missing:
        raise ExportError(
            f"{spec.name} has no cached ONNX export and exporting one needs "
            f"{', '.join(missing)}: {_INSTALL_HINT}"
        )


# --- the static tier ------------------------------------------------------------

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
    material = {"static": STATIC_FORMAT, "pca_dims": STATIC_PCA_DIMS, "source": _source_material(spec, False)["source"],
                "model2vec": _version("model2vec")}
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", spec.name.strip("/")).strip("-")[-40:] or "model"
    return f"{slug}-static-{_sha256_json(material)[:16]}"


def find_static(model: str | ModelSpec, cache_dir: str | os.PathLike[str] | None = None) -> StaticExport | None:
    """A finished static distillation of ``model`` from the cache, or ``None`` (imports no torch).

    Where model2vec is not installed (a search-only environment) a
    distillation of the same weights made with another model2vec is accepted.
    """
    spec = resolve_model(model)
    models_dir = cache_root(cache_dir) / "models"
    found = _read_static(models_dir / static_key(spec), spec)
    if found is not None or importlib.util.find_spec("model2vec") is not None:
        return found
    wanted = _sha256_json(_source_material(spec, False)["source"])
    for manifest_path in sorted(models_dir.glob(f"*-static-*/{MANIFEST_FILE}"), key=lambda p: -p.stat().st_mtime):
        manifest = _read_json(manifest_path)
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
    target = cache_root(cache_dir) / "models" / static_key(spec)
    found = _read_static(target, spec)
    if found is not None:
        return found
    missing = [name for name in ("torch", "transformers", "model2vec") if importlib.util.find_spec(name) is None]
    if missing:
        raise ExportError(f"{spec.name} has no cached static model and distilling one needs {', '.join(missing)}: "
                          f"{_INSTALL_HINT}")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _export_lock(target, progress):
        found = _read_static(target, spec)
        if found is not None:
            return found
        scratch = target.parent / f".{target.name}.tmp-{os.getpid()}"
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        try:
            with _steps(f"static {spec.name}", 2, progress) as step, _quiet_libraries():
                step("distil token vectors (model2vec)")
                import numpy as np
                from model2vec.distill import distill

                folder = spec.local_path() or _download(spec)
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
                "source_key": _sha256_json(_source_material(spec, False)["source"]),
                "model": spec.name,
                "dim": int(static.dim),
                "normalize": bool(static.normalize),
                "median_token_length": int(static.median_token_length),
                "unk_token_id": static.unk_token_id,
                "sha256": _sha256_files(files),
                "files": {p.name: p.stat().st_size for p in files},
                "versions": {"model2vec": _version("model2vec"), "transformers": _version("transformers")},
            }
            target.mkdir(parents=True, exist_ok=True)
            (target / MANIFEST_FILE).unlink(missing_ok=True)
            for path in files:
                os.replace(path, target / path.name)
            staged = scratch / MANIFEST_FILE
            staged.write_text(json.dumps(manifest, indent=2, sort_keys=True), encoding="utf-8")
            os.replace(staged, target / MANIFEST_FILE)
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
    manifest = _read_json(folder / MANIFEST_FILE)
    if not isinstance(manifest, dict) or manifest.get("format") != STATIC_FORMAT:
        return None
    for name, size in manifest.get("files", {}).items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != size:
            return None
    return StaticExport(folder, spec, str(manifest.get("sha256")), cached=True)


# --- small helpers --------------------------------------------------------------


def _onnx_files(folder: Path) -> list[Path]:
    """The graph and its external data file, if any."""
    return sorted(p for p in folder.iterdir() if p.name.startswith(ONNX_FILE) and p.is_file())


def _onnx_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file() and "onnx" in p.name)


def _sha256_files(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _norms(vectors: Any) -> Any:
    import numpy as np

    return np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


@contextlib.contextmanager
def _steps(description: str, total: int, progress: bool) -> Iterator[Any]:
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
def _quiet_libraries() -> Iterator[None]:
    """Hide the exporters' tracer warnings and log chatter; errors still raise."""
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


__all__ = [
    "CALIBRATION_CHUNKS",
    "EXPORT_FORMAT",
    "GATE_MEAN_COS",
    "GATE_MIN_COS",
    "ExportResult",
    "STATIC_FORMAT",
    "StaticExport",
    "cache_root",
    "calibration_texts",
    "export_key",
    "export_model",
    "export_static",
    "find_export",
    "find_static",
    "int8_gate",
    "static_key",
]
