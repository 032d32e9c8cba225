"""The package's import graph has no cycle, and the module paths users may import from still work."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "codesearch"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_graph() -> dict[str, set[str]]:
    """Module -> the codesearch modules it imports anywhere (functions too), except under ``if TYPE_CHECKING``."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        skipped: set[int] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node):
                skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
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


def test_the_cycle_finder_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize(("module", "names"), [
    ("codesearch.search", ["CodeSearch", "Hit", "IndexReport", "SearchInfo"]),
    ("codesearch.embed", ["Embedder", "EmbedReport", "available_cores", "document_text"]),
    ("codesearch.export", ["export_model", "find_export", "export_static", "find_static", "int8_gate", "cache_root"]),
    ("codesearch.keyword", ["BM25", "code_tokens", "split_identifier", "top_k"]),
    ("codesearch", ["CodeSearch", "MultiSearch", "Hit", "IndexReport", "SearchInfo", "CodeSearchError"]),
])
def test_old_module_paths_keep_their_names(module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    assert all(hasattr(imported, name) for name in names)
