"""Chunk the same real source text with the Cython and the pure-Python chunker.

Usage:
    python -m benchmarks.chunker_speed [--corpus DIR] [--min-mb 50] [--repeat 3] [--json OUT]

The corpus defaults to this interpreter's site-packages. Files are taken by the
library's own scanner (sorted, so the sample is reproducible) until at least
``--min-mb`` MB of text is gathered; both backends then chunk exactly that text
in the same run, best of ``--repeat``, with the garbage collector paused while
timing (as ``timeit`` does). Prints MB/s for each, the ratio, and
whether the outputs are identical. JSON keys: mb, cython_mb_s, python_mb_s,
speedup, identical, plus slice_floor_s and max_speedup: the time to only cut
the chunk strings out of the texts (no line finding at all), and the speedup a
chunker that did nothing else would reach.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence

from codesearch.chunking import _chunker_py
from codesearch.files import scan

Chunker = Callable[[str], list[tuple[int, int, str]]]


def gather(corpus: str, min_mb: float) -> list[str]:
    texts: list[str] = []
    total = 0
    for source in scan(corpus, use_ignore_files=False).files:
        texts.append(source.text)
        total += len(source.text.encode("utf-8"))
        if total >= min_mb * 1e6:
            break
    return texts


def best_time(chunker: Chunker, texts: Sequence[str], repeat: int) -> tuple[float, list[list[tuple[int, int, str]]]]:
    best = float("inf")
    output: list[list[tuple[int, int, str]]] = []
    for _ in range(repeat):
        output = []
        gc.collect()
        gc.disable()  # as timeit does: a collection pass is not the chunker's cost
        try:
            start = time.perf_counter()
            output = [chunker(text) for text in texts]
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best, output


def chunk_spans(text: str, chunks: list[tuple[int, int, str]]) -> list[tuple[int, int]]:
    """(offset, length) of each chunk's text in ``text`` (where CRLF was normalised, a span of its length)."""
    spans, offset = [], 0
    for _, _, body in chunks:
        found = text.find(body, offset)
        offset = found if found >= 0 else min(offset, len(text) - len(body))
        spans.append((offset, len(body)))
    return spans


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=sysconfig.get_paths()["purelib"], help="folder of real source text")
    parser.add_argument("--min-mb", type=float, default=50.0, help="MB of text to chunk (default 50)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per backend; the best counts")
    parser.add_argument("--json", dest="json_out", help="write the results as JSON to this file")
    args = parser.parse_args(argv)

    try:
        from codesearch.chunking import _chunker
    except ImportError:
        print("error: the Cython chunker is not built (pip install -e . with Cython and a C compiler)", file=sys.stderr)
        return 2

    texts = gather(args.corpus, args.min_mb)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    if mb < args.min_mb:
        print(f"warning: only {mb:.1f} MB of text under {args.corpus}", file=sys.stderr)
    cython_s, cython_out = best_time(_chunker.chunk_lines, texts, args.repeat)
    python_s, python_out = best_time(_chunker_py.chunk_lines, texts, args.repeat)
    # The floor of any chunker that returns these strings: only slicing them out.
    spans = [chunk_spans(t, chunks) for t, chunks in zip(texts, cython_out)]
    floor_s, _ = best_time(lambda pair: [pair[0][a:a + n] for a, n in pair[1]], list(zip(texts, spans)), args.repeat)
    result = {
        "mb": round(mb, 2),
        "files": len(texts),
        "chunks": sum(len(c) for c in cython_out),
        "cython_mb_s": round(mb / cython_s, 1),
        "python_mb_s": round(mb / python_s, 1),
        "speedup": round(python_s / cython_s, 1),
        "identical": cython_out == python_out,
        "slice_floor_s": round(floor_s, 4),
        "max_speedup": round(python_s / floor_s, 1),
    }
    print(f"corpus   {args.corpus}: {result['files']:,} files, {mb:.1f} MB, {result['chunks']:,} chunks")
    print(f"{'backend':<10}{'seconds':>10}{'MB/s':>10}")
    print(f"{'cython':<10}{cython_s:>10.3f}{result['cython_mb_s']:>10}")
    print(f"{'python':<10}{python_s:>10.3f}{result['python_mb_s']:>10}")
    print(f"{'slices':<10}{floor_s:>10.3f}{'':>10}  (only cutting out the chunk strings)")
    print(f"speedup  {result['speedup']}x   identical: {result['identical']}   "
          f"bound set by the slices alone: {result['max_speedup']}x")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
