"""Method test files never re-run the invariants a spec lists (the conformance
suite already runs each one, under the same Hypothesis profile)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import yaml

from registry.contract import registered_invariants

ROOT = Path(__file__).resolve().parents[1]


def _listed_invariant_functions() -> dict[str, str]:
    """``function name -> "spec: invariant"`` for every invariant a built-in spec lists."""
    out: dict[str, str] = {}
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        impl = data.get("implementation")
        if not impl or not data.get("invariants"):
            continue
        try:
            importlib.import_module(f"{impl}.invariants")
        except ModuleNotFoundError:
            importlib.import_module(impl)
        found = registered_invariants(impl)
        for name in data["invariants"]:
            if name in found:
                out[found[name].__name__] = f"{data['name']}: {name}"
    return out


def test_method_test_files_do_not_call_listed_invariants() -> None:
    """No call ``f()`` / ``mod.f()`` of a listed invariant's function, and no call of a looked-up
    entry ``...[name]()`` in a file that uses ``registered_invariants``, in tests/methods/*.py."""
    functions = _listed_invariant_functions()
    assert functions, "no listed invariants found: the scan would prove nothing"
    offenders = []
    for path in sorted((ROOT / "tests" / "methods").glob("test_*.py")):
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call):
                continue
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
            if name in functions:
                offenders.append(f"{path.name}:{node.lineno} calls {name} ({functions[name]})")
            if isinstance(fn, ast.Subscript) and "registered_invariants" in text:
                offenders.append(f"{path.name}:{node.lineno} calls a registered invariant ({ast.unparse(fn)})")
    assert not offenders, "; ".join(offenders)
