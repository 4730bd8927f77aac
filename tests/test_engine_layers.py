"""The engine's modules import each other without a circle: every import between ``registry`` modules counts,
at module level or inside a function (only ``if TYPE_CHECKING:`` blocks, which never run, are left out; imports of
other libraries, lazy or not, are not edges of this graph). The layering it allows is written in
docs/architecture.md."""
from __future__ import annotations

import ast
import shutil
from pathlib import Path

REGISTRY = Path(__file__).resolve().parents[1] / "registry"


def import_graph(root: Path) -> dict[str, set[str]]:
    """``module -> the registry modules it imports`` (``registry.checks.base``-style names)."""
    package = root.name
    mods = {}
    for p in root.rglob("*.py"):
        parts = p.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = p
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, p in mods.items():
        tree = ast.parse(p.read_text())
        here = name if p.name == "__init__.py" else name.rpartition(".")[0]
        typing_only = {id(x) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
                       for b in n.body for x in ast.walk(b)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [target, *(f"{target}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in mods and t != name and t.split(".")[0] == package}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_engine_import_graph_has_no_circle() -> None:
    graph = import_graph(REGISTRY)
    assert len(graph) > 25 and graph["registry.context"] >= {"registry.build", "registry.saved"}
    assert cycles(graph) == []


def test_a_planted_function_level_import_circle_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "registry"
    shutil.copytree(REGISTRY, copy, ignore=shutil.ignore_patterns("__pycache__"))
    errors = copy / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _planted() -> None:\n    from .context import Context  # noqa: F401\n")
    found = cycles(import_graph(copy))
    assert len(found) == 1 and {"registry.errors", "registry.context"} <= set(found[0])
    typing_only = copy / "files.py"
    typing_only.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .context import Context\n" + typing_only.read_text())
    assert len(cycles(import_graph(copy))) == 1  # a TYPE_CHECKING import never runs: not an edge
