"""Train several recipes in one GPU session and bring back what each learned, small enough to carry.

A lent GPU machine runs a command over a copy of the repository with at most 64 MiB carried along and 64 MiB
brought back (8 files of at most 16 MiB), and it has PyTorch but nothing of codesearch's own dependencies. So:

- the base model travels in float16 (``model.fp16.safetensors``; turned back into float32 here before training),
  the pairs as gzip JSONL already in the form the index embeds (``path`` newline code, cut at 1,000 characters);
- each recipe of ``--recipes`` (a JSON list of :class:`~codesearch.training.finetune.Recipe` objects) is trained by
  ``codesearch/training/finetune.py`` run as a plain file (it imports no codesearch module), validated on the
  held-out repositories' pairs, and packed as 4-bit differences from the base
  (:func:`~codesearch.training.finetune.pack_delta`, about 5 MB for MiniLM with the word embeddings frozen) into
  tar files of at most 15.5 MB that grow as recipes finish, so a run stopped by its time limit still returns the
  recipes it finished;
- recipes are skipped, in order, once the time left (``--budget`` seconds, less ``--reserve`` for what follows)
  would not cover another one at the pace of those before.

``summary.json`` in ``--out`` lists every recipe with its validation figures, seconds and pairs per second.
Usage (on the GPU machine, from the repository root)::

    python3 training/gpu_run.py --carry .carry --recipes training/recipes.json --out $OUT --budget 420
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

TAR_LIMIT = 15_500_000


def _finetune() -> Any:
    path = Path(__file__).resolve().parent.parent / "codesearch" / "training" / "finetune.py"
    spec = importlib.util.spec_from_file_location("finetune", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["finetune"] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def float32_base(carry: Path, work: Path) -> Path:
    """The carried float16 base model as a float32 model folder (what training starts from)."""
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    folder = work / "base"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(carry / "base", folder, ignore=shutil.ignore_patterns("model.fp16.safetensors"))
    weights = load_file(str(carry / "base" / "model.fp16.safetensors"))
    save_file({k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in weights.items()},
              str(folder / "model.safetensors"))
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--carry", type=Path, required=True, help="folder with base/, pairs/")
    parser.add_argument("--recipes", type=Path, required=True, help="JSON list of recipes")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/codesearch-train"))
    parser.add_argument("--budget", type=float, default=420.0, help="seconds this script may run")
    parser.add_argument("--reserve", type=float, default=60.0, help="seconds kept for what runs after it")
    parser.add_argument("--bits", type=int, default=4)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    started = time.monotonic()
    finetune = _finetune()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    base = float32_base(args.carry, args.work)
    recipes = [finetune.Recipe.from_dict(r) for r in json.loads(args.recipes.read_text("utf-8"))]
    summary: dict[str, Any] = {"recipes": [], "skipped": []}
    tar_index, tar_bytes = 0, 0
    paces: list[float] = []
    for recipe in recipes:
        left = args.budget - args.reserve - (time.monotonic() - started)
        expected = max(paces, default=0.0) * recipe.epochs * 1.1
        if left < expected or left < 20:
            summary["skipped"].append({"name": recipe.name, "left_s": round(left, 1), "expected_s": round(expected, 1)})
            continue
        began = time.monotonic()
        out = args.work / recipe.name
        report = finetune.train(args.carry / "pairs" / "train.jsonl.gz", base, out, recipe,
                                validation_path=args.carry / "pairs" / "validation.jsonl.gz", device=args.device,
                                checkpoint_every=0, progress=False, base_cache=args.work)
        seconds = time.monotonic() - began
        paces.append(seconds / recipe.epochs)
        delta = args.work / f"{recipe.name}.delta.npz"
        packed = finetune.pack_delta(base, out, delta, bits=args.bits)
        if tar_bytes and tar_bytes + packed["bytes"] > TAR_LIMIT:
            tar_index, tar_bytes = tar_index + 1, 0
        with tarfile.open(args.out / f"deltas-{tar_index}.tar", "a") as tar:
            tar.add(delta, arcname=delta.name)
            tar.add(out / finetune.TRAINING_FILE, arcname=f"{recipe.name}.training.json")
        tar_bytes += packed["bytes"]
        entry = {"name": recipe.name, "recipe": recipe.to_dict(), "seconds": round(seconds, 1),
                 "pairs": report.pairs, "pairs_per_second": round(report.pairs_per_second, 1),
                 "validation_before": report.validation_before, "validation_after": report.validation_after,
                 "delta_bytes": packed["bytes"], "tar": f"deltas-{tar_index}.tar"}
        summary["recipes"].append(entry)
        print(json.dumps(entry), flush=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    summary["seconds"] = round(time.monotonic() - started, 1)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
