"""The package's import graph has no cycle (``TYPE_CHECKING`` imports counted), and the public import paths work."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest
from conftest import PACKAGE


def _module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the codesearch modules it imports anywhere: in functions, and under ``if TYPE_CHECKING`` too (an
    import only the type checker follows still ties the two modules' designs together)."""
    modules = {_module_name(p, package): p for p in package.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    edges.add(submodule if submodule in modules else node.module)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path of modules, or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_the_import_graph_has_no_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 40 and "codesearch.index.session" in graph["codesearch.search"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle or [])


def test_an_import_under_type_checking_is_an_edge(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\n")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n")
    graph = import_graph(package)
    assert graph["pkg.b"] == {"pkg.a"}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.a"]


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(("module", "names"), [
    ("codesearch", ["CodeSearch", "MultiSearch", "Hit", "IndexReport", "SearchInfo", "CodeSearchError", "Chunk",
                    "ChunkParams", "chunk_text", "CHUNKER_BACKEND"]),
    ("codesearch.search", ["CodeSearch", "Hit", "IndexReport", "SearchInfo"]),
    ("codesearch.chunking", ["Chunk", "ChunkParams", "chunk_text", "document_text", "chunk_key", "BACKEND"]),
    ("codesearch.keyword", ["BM25", "BM25Builder", "code_tokens", "split_identifier", "top_k"]),
    ("codesearch.ranking", ["Ranking", "ChunkFacts", "FileFacts", "Candidates", "rank", "rank_scores"]),
    ("codesearch.corpus", ["Corpus", "CorpusReport"]),
    ("codesearch.embedding", ["Embedder", "ModelSpec", "StaticEmbedder"]),
])
def test_public_module_paths_have_their_names(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    assert all(hasattr(imported, name) for name in names), [n for n in names if not hasattr(imported, n)]


@pytest.mark.parametrize("module", ["codesearch.embed", "codesearch.export", "codesearch.cli", "codesearch.mcp_server",
                                    "codesearch.definitions", "codesearch.languages", "codesearch.corpus.source",
                                    "codesearch.ranking.source"])
def test_moved_modules_left_no_shim(module: str) -> None:
    """0.1.0 has no users to break: a module that moved is gone from its old path (one path per module). (Found
    elsewhere it may be: an editable install of another checkout maps the package's names to its own files.)"""
    spec = importlib.util.find_spec(module)
    assert spec is None or spec.origin is None or not Path(spec.origin).resolve().is_relative_to(PACKAGE)
