"""The corpus's GPU actors' encoder on a GPU: throughput, and agreement with the CPU's int8 vectors.

Usage:
    # here, on the CPU: the chunk texts of some trees as the index embeds them, and their int8 vectors (a sample)
    python -m benchmarks.gpu_embed prepare --trees DIR [--limit 20000] [--sample 1000] --out DIR
    # on the GPU machine: the PyTorch encoder (float16) over those texts
    python -m benchmarks.gpu_embed measure --data DIR --model-folder MINILM_WEIGHTS [--json OUT]

``measure`` embeds the prepared texts (four times over) with
:class:`codesearch.embedding.torch_encoder.TorchEncoder` (MiniLM at the length the index reads, 128 tokens) after a
warm-up, three times, and reports the best chunks/s and tokens/s; compares the sample's vectors with the CPU's
int8 vectors made by ``prepare`` (min and mean cosine); and runs the
bge-m3 architecture with random weights (24 layers, 1024 wide; nothing to download) on random tokens of 256 and
2048 tokens for its throughput. JSON keys: ``device``, ``chunks``, ``minilm`` (``chunks_s``, ``tokens_s``,
``min_cos_int8``, ``mean_cos_int8``, ``batch_tokens``), ``bge_m3_random`` (per length ``chunks_s``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

REPEAT = 4
LENGTHS = (256, 2048)
BGE_BATCHES = 8
"""The prepared texts are embedded this many times over in one timed run."""


def prepare(trees: Path, out: Path, limit: int, sample: int) -> None:
    from codesearch.chunking import document_text
    from codesearch.chunking.definitions import chunk_definitions
    from codesearch.embedding import Embedder
    from codesearch.files import scan

    texts: list[str] = []
    for tree in sorted(p for p in trees.iterdir() if p.is_dir()):
        for f in scan(tree).files:
            texts.extend(document_text(f.path, c.text) for c in chunk_definitions(f.path, f.text))
    texts = texts[:limit]
    out.mkdir(parents=True, exist_ok=True)
    with gzip.open(out / "texts.json.gz", "wt", encoding="utf-8") as f:
        json.dump(texts, f)
    step = max(1, len(texts) // sample)
    rows = list(range(0, len(texts), step))[:sample]
    vectors = Embedder("minilm", int8=True).embed_documents([texts[r] for r in rows])
    np.save(out / "int8_rows.npy", np.asarray(rows))
    np.save(out / "int8_vectors.npy", vectors)
    print(f"{len(texts)} texts, {len(rows)} int8 vectors in {out}")


def _best_rate(run: object, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best


def measure(data: Path, folder: Path, json_out: Path | None) -> dict[str, object]:
    import torch

    from codesearch.embedding.catalogue import resolve_model
    from codesearch.embedding.torch_encoder import TorchEncoder

    with gzip.open(data / "texts.json.gz", "rt", encoding="utf-8") as f:
        sample_texts = json.load(f)
    texts = sample_texts * REPEAT  # long enough a run to time
    rows = np.load(data / "int8_rows.npy")
    int8 = np.load(data / "int8_vectors.npy")
    spec = resolve_model("minilm")
    encoder = TorchEncoder(folder, spec)
    encoder.encode(texts[:2000])  # warm-up: kernels, allocator
    torch.cuda.synchronize() if torch.cuda.is_available() else None
    vectors: dict[str, np.ndarray] = {}

    def run() -> None:
        vectors["all"], _, vectors["tokens"] = encoder.encode(texts)  # type: ignore[assignment]

    seconds = _best_rate(run)
    cos = (vectors["all"][: len(sample_texts)][rows] * int8).sum(axis=1)
    result: dict[str, object] = {
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "chunks": len(texts),
        "minilm": {"chunks_s": len(texts) / seconds, "tokens_s": int(vectors["tokens"]) / seconds,  # type: ignore[call-overload]
                   "min_cos_int8": float(cos.min()), "mean_cos_int8": float(cos.mean()),
                   "batch_tokens": encoder.batch_tokens, "half": encoder.half},
        "bge_m3_random": {},
    }
    from transformers import XLMRobertaConfig, XLMRobertaModel

    config = XLMRobertaConfig(vocab_size=250002, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                              intermediate_size=4096, max_position_embeddings=8194, type_vocab_size=1)
    device = encoder.device
    model = XLMRobertaModel(config).half().to(device).eval() if device.type == "cuda" else XLMRobertaModel(config).eval()
    for length in LENGTHS:
        batch = max(1, 64 * 1024 // length)
        n = batch * BGE_BATCHES
        ids = torch.randint(5, 250000, (n, length), device=device)

        def forward(ids: torch.Tensor = ids, batch: int = batch) -> None:
            with torch.inference_mode():
                for start in range(0, len(ids), batch):
                    model(input_ids=ids[start : start + batch]).last_hidden_state.float().mean(dim=1).cpu()

        forward()
        result["bge_m3_random"][str(length)] = {"chunks_s": n / _best_rate(forward)}  # type: ignore[index]
    print(json.dumps(result, indent=2))
    if json_out:
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--trees", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--limit", type=int, default=20000)
    p.add_argument("--sample", type=int, default=1000)
    m = sub.add_parser("measure")
    m.add_argument("--data", type=Path, required=True)
    m.add_argument("--model-folder", type=Path, required=True)
    m.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.trees, args.out, args.limit, args.sample)
    else:
        measure(args.data, args.model_folder, args.json_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
