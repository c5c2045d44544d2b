"""The layering of issue #19: engines never import mechanisms, and the package's import graph has no cycle.

The graph is read from the source (every `import`, also inside functions, where the old
count_release ↔ spark.api cycle hid), so a lazy import cannot slip through. The cycle check leaves
out imports under `if TYPE_CHECKING:` (they only name types for the checker and never run); the
layering checks count them too.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "duckdp"
# the engine layer: generic stages, their lifecycles and the noise stage they run
ENGINE_MODULES = ("duckdp.stages", "duckdp.spark", "duckdp.engines", "duckdp.lifecycle", "duckdp.run",
                  "duckdp.noise_stage")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _nodes(tree: ast.AST, runtime_only: bool) -> list[ast.AST]:
    """Every node of `tree`; with `runtime_only`, not the bodies of `if TYPE_CHECKING:` blocks."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        if (runtime_only and isinstance(node, ast.If) and isinstance(node.test, ast.Name)
                and node.test.id == "TYPE_CHECKING"):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return out


def _graph(runtime_only: bool = False) -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _nodes(ast.parse(path.read_text(encoding="utf-8")), runtime_only):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name.split(".")[0] == "duckdp"}
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
                if target.split(".")[0] != "duckdp":
                    continue
                for alias in node.names:        # `from pkg import submodule` imports the submodule
                    edges.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in files else target)
        graph[name] = {e for e in edges if e in files and e != name}
    return graph


def _is_engine(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in ENGINE_MODULES)


def test_no_engine_module_imports_a_mechanism():
    graph = _graph()
    bad = sorted((m, e) for m, edges in graph.items() if _is_engine(m)
                 for e in edges if e == "duckdp.mechanisms" or e.startswith("duckdp.mechanisms."))
    assert bad == []


def test_import_graph_has_no_cycle():
    graph = _graph(runtime_only=True)
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_engine_base_names_no_mechanism():
    """The engine interface's abstract stages are generic: none is named after a mechanism family."""
    from duckdp.mechanisms import MECHANISMS
    from duckdp.stages.base import Engine

    families = {p.name for p in (PACKAGE / "mechanisms").iterdir() if p.is_dir() and p.name != "__pycache__"}
    words = families | set(MECHANISMS) | {"mad", "mad2r", "policy", "geometric", "sips", "pcr", "top_counts"}
    stages = sorted(Engine.__abstractmethods__)
    assert [s for s in stages if any(w in s for w in words)] == [], stages
