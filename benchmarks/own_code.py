"""A model trained on a user's own repository, against the default, on that repository's own questions.

Usage:
    codesearch train TREE --out MODEL_DIR                       # what a user runs (timed in MODEL_DIR/training.json)
    python -m benchmarks.own_code --questions QUESTIONS.json --tree TREE --model MODEL_DIR
        [--index-dir DIR] [--json OUT]

``QUESTIONS.json`` has the format of ``benchmarks/data/questions.json`` (one corpus, the tree; questions written
blind, before any system ran on the tree). The tree is a repository outside semble's benchmark (never one of
``../shared/benchmark-repos.txt``). Both models index the tree afresh, full tier (int8, default ranking) and static
tier alone; each question is asked (hybrid, top 100) and scored as ``quality.py`` scores the held-out questions:
Hit@1/5/10, MRR and NDCG@10, overall and per kind. Index seconds are measured side by side in this run; the
training's seconds per step are read from the model folder.

JSON keys: ``models`` (per model and tier: ``metrics``, ``by_kind``, ``ranks``, ``index_s``), ``training``
(the model folder's ``seconds_by_step``, ``pairs``, ``validation_before`` / ``validation_after``), ``questions``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import quality as q
from benchmarks._harness import table
from codesearch import CodeSearch


def score(cs: CodeSearch, questions: Sequence[q.Question]) -> dict[str, Any]:
    """Metrics overall and per kind, and each question's answer ranks (hybrid, top ``quality.DEPTH``)."""
    ranks = {x.id: q.answer_ranks(cs.search(x.query, k=q.DEPTH), x.answers) for x in questions}
    kinds = sorted({x.kind for x in questions})
    return {"metrics": q.metrics([(ranks[x.id], len(x.answers)) for x in questions]),
            "by_kind": {kind: q.metrics([(ranks[x.id], len(x.answers)) for x in questions if x.kind == kind])
                        for kind in kinds},
            "ranks": ranks}


def run(model: str, label: str, tree: Path, index_root: Path, questions: Sequence[q.Question]) -> dict[str, Any]:
    """Index ``tree`` with ``model``, full tier then static tier alone, and score both."""
    out: dict[str, Any] = {}
    for tier in ("full", "static"):
        index_dir = index_root / f"{label}-{tier}"
        shutil.rmtree(index_dir, ignore_errors=True)
        cs = CodeSearch(tree, model=model, index_dir=index_dir)
        cs.static_embedder if tier == "static" else cs.embedder  # noqa: B018 - loaded outside the timing
        started = time.perf_counter()
        cs.index(tier=tier)
        out[tier] = {**score(cs, questions), "index_s": time.perf_counter() - started}
        print(f"{label} ({tier} tier): NDCG@10 {out[tier]['metrics']['ndcg@10']:.3f}", file=sys.stderr)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--tree", type=Path, required=True, help="the repository the questions are about")
    parser.add_argument("--model", required=True, help="the model folder `codesearch train TREE --out` wrote")
    parser.add_argument("--baseline", default="minilm", help="the model it is compared with (the default)")
    parser.add_argument("--index-dir", type=Path, default=Path(tempfile.gettempdir()) / "codesearch-own-code")
    parser.add_argument("--json", dest="json_out", type=Path)
    args = parser.parse_args(argv)
    folders, questions = q.load_heldout(args.questions)
    if len(folders) != 1:
        parser.error("the questions must be about one corpus, the tree")
    models = {args.baseline: args.baseline, "trained": str(Path(args.model).resolve())}
    results = {label: run(model, label, args.tree, args.index_dir, questions) for label, model in models.items()}
    card = Path(args.model) / "training.json"  # absent for a model folder codesearch train did not write
    training = json.loads(card.read_text("utf-8")) if card.is_file() else {}
    kinds = sorted({x.kind for x in questions})
    rows = []
    for label, tiers in results.items():
        for tier, r in tiers.items():
            m = r["metrics"]
            rows.append([label, tier, f"{m['ndcg@10']:.3f}", f"{m['mrr']:.3f}", f"{m['hit@1']:.2f}", f"{m['hit@5']:.2f}",
                         f"{m['hit@10']:.2f}", *[f"{r['by_kind'][k]['ndcg@10']:.3f}" for k in kinds],
                         f"{r['index_s']:.1f}"])
    print(f"\n{len(questions)} questions on {args.tree.name} (hybrid; NDCG@10 overall and per kind; index s, same run)\n")
    print(table(["model", "tier", "NDCG@10", "MRR", "hit@1", "hit@5", "hit@10", *kinds, "index s"], rows))
    print(f"\ntraining: {training.get('pairs')} pairs, seconds by step {json.dumps(training.get('seconds_by_step'))}; "
          f"validation MRR@10 {training.get('validation_before', {}).get('mrr10')} -> "
          f"{training.get('validation_after', {}).get('mrr10')}")
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "models": results, "questions": len(questions),
            "training": {k: training.get(k) for k in ("pairs", "seconds_by_step", "validation_before",
                                                      "validation_after", "recipe", "mining")}}, indent=2) + "\n",
            encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
