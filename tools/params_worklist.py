#!/usr/bin/env python
"""Migration aid (registry.declare): list what a package registers and where its models live.

Usage: python tools/params_worklist.py zoo.methods.poe_bridge [...]
For every registered object reachable as "module:attr" in the package: its kinds, its params model (and CliInputs)
with where the class is defined, "DERIVED" when the engine derives it from the signature (needs an explicit model in
params.py), and whether declare.find() already agrees."""
from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def walk(package: str) -> list:
    pkg = importlib.import_module(package)
    mods = [pkg]
    for info in pkgutil.walk_packages(getattr(pkg, "__path__", []), prefix=package + "."):
        if info.name.endswith(".params"):
            continue
        mods.append(importlib.import_module(info.name))
    return mods


def registered(package: str):
    """(target, obj, kinds) for every public "module:attr" of the package reaching a registered object."""
    from registry import contract

    mods = walk(package)
    kinds_of: dict[int, list[str]] = {}
    for kind, objs in contract._REGISTRY.items():
        for obj in objs:
            kinds_of.setdefault(id(obj), []).append(kind)
    out = []
    for m in mods:
        names = list(vars(m))
        exports = getattr(m, "__all__", None)
        if exports:  # lazy packages: the names they export
            names += [n for n in exports if n not in names]
        for attr in sorted(set(names)):
            if attr.startswith("_"):
                continue
            try:
                obj = getattr(m, attr)
            except AttributeError:
                continue
            kinds = kinds_of.get(id(obj))
            if kinds:
                out.append((f"{m.__name__}:{attr}", obj, sorted(kinds)))
    return out


def main() -> None:
    from registry import declare

    for package in sys.argv[1:]:
        print(f"== {package}")
        for target, obj, kinds in registered(package):
            found = declare.find(target)
            for kind in kinds:
                params, cli = declare.runtime_models(obj, kind)
                derived = params is not None and getattr(params, "__zoo_derived__", False)
                where = lambda m: "-" if m is None else f"{m.__module__}:{m.__qualname__}"  # noqa: E731
                status = "no params.py" if found is None else (declare.disagreement(target, found, obj, kind) or "OK")
                print(f"{target:70s} {kind:12s} params={'DERIVED ' if derived else ''}{where(params)} cli={where(cli)}  [{status}]")


if __name__ == "__main__":
    main()
