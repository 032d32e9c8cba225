"""The package's layout holds: rooms of a readable size, one implementation of each shared rule (the corpus imports
the library's), tests that mirror the package, and tests of the corpus's parts that need neither Ray nor Lance."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from conftest import PACKAGE, ROOT, TESTS
from test_imports import import_graph

MAX_LINES = 600
LONGER = {
    "training/finetune.py": "the code-model pipeline's trainer, restructured by that pipeline's own work",
}
"""Modules allowed past :data:`MAX_LINES`, and why."""


def test_no_module_is_longer_than_600_lines() -> None:
    longer = {}
    for path in PACKAGE.rglob("*.py"):
        name = path.relative_to(PACKAGE).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_LINES and name not in LONGER:
            longer[name] = lines
    assert not longer, longer
    assert all((PACKAGE / name).is_file() for name in LONGER)  # an exemption that outlived its module goes


SHARED = {
    "codesearch.ranking.candidates": "the candidate stage (the keyword priors, the cut, the score ranges)",
    "codesearch.ranking.facts": "the ranking facts (file facts and the chunk map)",
    "codesearch.files.changes": "the change rule",
    "codesearch.files.kinds": "kinds and the transformer's unread kinds",
    "codesearch.index.tiers": "the models and their guards",
    "codesearch.keyword.arrow": "the BM25 fit of joined terms",
    "codesearch.keyword.blob": "a BM25 fit's storage",
    "codesearch.chunking.symbols": "definition names",
    "codesearch._lock": "the file lock",
}
REIMPLEMENTED = {
    "fit_counts", "BM25Builder", "RACY_NS", "prior_multipliers", "keyword_priors", "path_classes", "top_k", "flock",
    "msvcrt", "filelock",
}
"""Names whose use under ``corpus/`` would mean a rule written again there: a BM25 fit, the change rule's window,
the keyword priors, the candidate cut, a lock of its own. A model guard would compare fingerprints (checked
apart)."""


def test_the_corpus_imports_the_shared_rules_instead_of_writing_them_again() -> None:
    graph = import_graph()
    corpus = {name: edges for name, edges in graph.items() if name.startswith("codesearch.corpus")}
    imported = set().union(*corpus.values())
    assert not set(SHARED) - imported, {m: SHARED[m] for m in set(SHARED) - imported}
    found = []
    for path in (PACKAGE / "corpus").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name in REIMPLEMENTED:
                found.append(f"{path.name}:{node.lineno} {name}")
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{path.name}:{node.lineno} import {m}" for m in modules if m.split(".")[0] in REIMPLEMENTED]
            if isinstance(node, ast.Compare) and any(isinstance(side, ast.Attribute) and side.attr == "fingerprint"
                                                     for side in (node.left, *node.comparators)):
                found.append(f"{path.name}:{node.lineno} a fingerprint compared (a model guard)")
    assert not found, found


def test_the_tests_mirror_the_package() -> None:
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name not in {"fixtures", "__pycache__"}}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert folders <= packages, folders - packages
    assert packages <= folders, packages - folders
    names = [p.name for p in TESTS.rglob("test_*.py")]
    assert len(names) == len(set(names))  # one basename each (the tests import by it)


def test_the_corpus_parts_that_need_neither_ray_nor_lance_run_without_them() -> None:
    files = ["tests/corpus/test_corpus_units.py", "tests/corpus/test_corpus_changes.py", "tests/keyword/test_arrow.py",
             "tests/keyword/test_blob.py"]
    code = ("import sys\n"
            "sys.modules['ray'] = None\n"  # an import of either fails, as where they are not installed
            "sys.modules['lance'] = None\n"
            "import pytest\n"
            f"sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-rs', *{files!r}]))\n")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-2000:]
