"""Time sentence-transformers (torch fp32) against ONNX Runtime fp32 (fused) and int8.

All three embed the same chunks (``path + "\\n" + chunk text``) truncated at the
model's maximum length, in one run. Each engine lives in its own worker process
(so torch's and onnxruntime's thread pools never compete and each has its own
peak memory); the workers take turns, round after round, and the best round
counts, which damps a noisy machine.

    python -m benchmarks.embed_speed --corpus /work/corpora/requests --json out.json

Prints a table: seconds, tokens/s, speed-up over torch, min/mean cosine to torch,
peak memory. The JSON holds ``chunks``, ``torch_s``, ``onnx_fp32_s``,
``onnx_int8_s``, ``fp32_speedup``, ``int8_speedup``, ``fp32_min_cos``,
``int8_min_cos``, ``int8_mean_cos`` and more.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._harness import script_command, script_env

ENGINES = ("torch", "onnx_fp32", "onnx_int8")
PREPARE = "prepare"  # a worker that only makes sure both ONNX exports are in the cache
LABELS = {
    "torch": "sentence-transformers torch fp32",
    "onnx_fp32": "onnxruntime fp32 (fused)",
    "onnx_int8": "onnxruntime int8",
}


def corpus_texts(root: Path) -> list[str]:
    """Return the document texts of every chunk under ``root``.

    Uses ``codesearch.scan.scan`` when it exists (the files the index would see);
    otherwise every UTF-8 text file outside ``.git``.
    """
    from codesearch.chunking import chunk_text, document_text

    try:
        from codesearch.files import scan
    except ImportError:
        files = _walk(root)
    else:
        files = [(f.path, f.text) for f in scan(root).files]
    return [document_text(path, c.text) for path, text in files for c in chunk_text(path, text)]


def _walk(root: Path) -> list[tuple[str, str]]:
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or ".git" in path.relative_to(root).parts:
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        try:
            found.append((path.relative_to(root).as_posix(), data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return found


# --- workers ---------------------------------------------------------------------


def worker(engine: str, model: str, texts_file: Path, out_dir: Path, cache_dir: str | None) -> None:
    """Load one engine, answer ``run`` lines on stdin with a JSON timing line on stdout."""
    from codesearch.embedding import Embedder, available_cores
    from codesearch.embedding.catalogue import resolve_model

    spec = resolve_model(model)
    if engine == PREPARE:  # export here, so no engine's peak memory includes torch's export
        Embedder(spec, cache_dir=cache_dir)
        Embedder(spec, int8=True, cache_dir=cache_dir)
        return
    texts = json.loads(texts_file.read_text(encoding="utf-8"))
    info: dict[str, Any] = {"engine": engine}
    if engine == "torch":
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(available_cores())
        folder = spec.local_path()
        st = SentenceTransformer(str(folder) if folder else spec.source, device="cpu")
        st.max_seq_length = spec.max_length

        def embed(batch: list[str]) -> np.ndarray:
            # As a user calls it (encode runs under torch.inference_mode itself).
            return st.encode(batch, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)

        info["threads"] = torch.get_num_threads()
    else:
        emb = Embedder(spec, int8=engine == "onnx_int8", cache_dir=cache_dir)

        def embed(batch: list[str]) -> np.ndarray:
            return emb.embed_documents(batch)

        info.update(threads=available_cores(), int8_used=emb.int8, gate=emb.export.gate)
        info["fingerprint"] = emb.fingerprint
    embed(texts[:16])  # warm up: first-call allocations and lazy initialisation
    if engine == "onnx_fp32":
        emb.embed_documents(texts)
        report = emb.last_report
        assert report is not None
        info.update(
            tokens=report.tokens,
            median_tokens=report.median_tokens,
            max_tokens=report.max_tokens,
            truncated=report.truncated,
        )
    print(json.dumps({"ready": True, **info}), flush=True)
    saved = False
    for line in sys.stdin:
        if line.strip() != "run":
            break
        started = time.perf_counter()
        vectors = embed(texts)
        seconds = time.perf_counter() - started
        if not saved:
            np.save(out_dir / f"{engine}.npy", np.asarray(vectors, dtype=np.float32))
            saved = True
        print(json.dumps({"seconds": seconds}), flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_rss_mb": round(peak, 1)}), flush=True)


class _Worker:
    def __init__(self, engine: str, args: argparse.Namespace, texts_file: Path, out_dir: Path):
        command = [
            *script_command("embed_speed"),
            "--worker",
            engine,
            "--model",
            args.model,
            "--texts-file",
            str(texts_file),
            "--out-dir",
            str(out_dir),
        ]
        if args.cache_dir:
            command += ["--cache-dir", args.cache_dir]
        self.engine = engine
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=script_env()
        )
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.engine} worker died (see its error above)")
        return json.loads(line)

    def run(self) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write("run\n")
        self.process.stdin.flush()
        return float(self._read()["seconds"])

    def close(self) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        peak = float(self._read()["peak_rss_mb"])
        self.process.wait()
        return peak


# --- the benchmark -----------------------------------------------------------------


def bench(args: argparse.Namespace) -> dict[str, Any]:
    """Run the three engines round-robin and return the results."""
    texts = corpus_texts(Path(args.corpus))
    if args.limit:
        texts = texts[: args.limit]
    if not texts:
        raise SystemExit(f"no chunks under {args.corpus}")
    with tempfile.TemporaryDirectory(prefix="embed-speed-") as tmp:
        tmp_path = Path(tmp)
        texts_file = tmp_path / "texts.json"
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
        prepare = [*script_command("embed_speed"), "--worker", PREPARE, "--model", args.model]
        subprocess.run(
            prepare + (["--cache-dir", args.cache_dir] if args.cache_dir else []), check=True, env=script_env()
        )
        workers = {engine: _Worker(engine, args, texts_file, tmp_path) for engine in ENGINES}
        rounds: dict[str, list[float]] = {engine: [] for engine in ENGINES}
        for _ in range(args.repeat):
            for engine, w in workers.items():
                rounds[engine].append(w.run())
        peaks = {engine: w.close() for engine, w in workers.items()}
        vectors = {engine: np.load(tmp_path / f"{engine}.npy") for engine in ENGINES}
    reference = vectors["torch"]
    cosines = {e: (vectors[e] * reference).sum(axis=1) for e in ("onnx_fp32", "onnx_int8")}
    best = {engine: min(times) for engine, times in rounds.items()}
    fp32_info, int8_info = workers["onnx_fp32"].info, workers["onnx_int8"].info
    tokens = int(fp32_info["tokens"])
    gate = int8_info.get("gate") or {}
    return {
        "corpus": str(args.corpus),
        "model": args.model,
        "chunks": len(texts),
        "tokens": tokens,
        "median_tokens": fp32_info["median_tokens"],
        "max_tokens": fp32_info["max_tokens"],
        "truncated": fp32_info["truncated"],
        "threads": fp32_info["threads"],
        "repeat": args.repeat,
        "torch_s": round(best["torch"], 3),
        "onnx_fp32_s": round(best["onnx_fp32"], 3),
        "onnx_int8_s": round(best["onnx_int8"], 3),
        "fp32_speedup": round(best["torch"] / best["onnx_fp32"], 3),
        "int8_speedup": round(best["torch"] / best["onnx_int8"], 3),
        "fp32_min_cos": round(float(cosines["onnx_fp32"].min()), 6),
        "fp32_mean_cos": round(float(cosines["onnx_fp32"].mean()), 6),
        "int8_min_cos": round(float(cosines["onnx_int8"].min()), 6),
        "int8_mean_cos": round(float(cosines["onnx_int8"].mean()), 6),
        "int8_used": bool(int8_info.get("int8_used")),
        "int8_gate": gate,
        "peak_rss_mb": peaks,
        "rounds_s": {engine: [round(t, 3) for t in times] for engine, times in rounds.items()},
    }


def print_table(result: dict[str, Any]) -> None:
    """Print the results as an aligned table."""
    print(
        f"{result['chunks']} chunks, {result['tokens']} tokens after truncation "
        f"(median {result['median_tokens']:g} / max {result['max_tokens']} before, "
        f"{result['truncated']} truncated), {result['threads']} threads, "
        f"best of {result['repeat']} rounds"
    )
    header = f"{'engine':34} {'seconds':>8} {'tokens/s':>9} {'vs torch':>8} {'min cos':>8} {'mean cos':>9} {'peak MB':>8}"
    print(header)
    print("-" * len(header))
    rows = [
        ("torch", result["torch_s"], 1.0, 1.0, 1.0),
        (
            "onnx_fp32",
            result["onnx_fp32_s"],
            result["fp32_speedup"],
            result["fp32_min_cos"],
            result["fp32_mean_cos"],
        ),
        (
            "onnx_int8",
            result["onnx_int8_s"],
            result["int8_speedup"],
            result["int8_min_cos"],
            result["int8_mean_cos"],
        ),
    ]
    for engine, seconds, ratio, low, mean in rows:
        print(
            f"{LABELS[engine]:34} {seconds:8.2f} {result['tokens'] / seconds:9.0f} "
            f"{ratio:7.2f}x {low:8.4f} {mean:9.4f} {result['peak_rss_mb'][engine]:8.0f}"
        )
    gate = result["int8_gate"]
    if gate:
        verdict = "passed" if gate.get("passed") else "FAILED (int8 not used)"
        print(
            f"int8 gate {verdict}: mean {gate['mean_cos']:.4f}, min {gate['min_cos']:.4f} vs fp32 "
            f"on {gate['chunks']} calibration chunks ({gate.get('setup')})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", help="a folder of code to chunk and embed")
    parser.add_argument("--model", default="minilm", help="catalogue name, hub id or folder")
    parser.add_argument("--json", metavar="PATH", help="also write the results here")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per engine (best counts)")
    parser.add_argument("--limit", type=int, default=0, help="embed only the first N chunks")
    parser.add_argument("--cache-dir", help="codesearch cache root for the ONNX exports")
    parser.add_argument("--worker", choices=(*ENGINES, PREPARE), help=argparse.SUPPRESS)
    parser.add_argument("--texts-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out-dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.model, args.texts_file, args.out_dir, args.cache_dir)
        return 0
    if not args.corpus:
        parser.error("--corpus is required")
    result = bench(args)
    print_table(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
