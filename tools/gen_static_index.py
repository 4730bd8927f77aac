#!/usr/bin/env python
"""Generate the static indexes ``zoo validate`` reads instead of importing torch (issue #11 item 5).

* ``<package>/zoo-index.json`` for each method package (default: ``zoo.common`` and every ``zoo.methods.*``; name
  others, e.g. a plugin's top package): every callable the package registers with
  :mod:`registry.contract` (procedures, factories, metric checks, converters, transforms,
  benchmarks), keyed by each ``"module:attr"`` spelling that reaches it (the defining module and
  the packages re-exporting it), with the JSON Schema of a procedure's ``Params``, a
  factory's ``config`` model, a metric check's ``check_params`` model and a transform's
  ``transform_config`` model.
* ``registry/library_names.json``: the public CamelCase names of transformers and diffusers at
  the installed versions (``model_class:`` is checked against them), and timm's registered
  architecture names (``timm.list_models()``; a timm role's ``model_name:`` is checked against them).

``tests/test_static_index.py`` regenerates both in memory and fails when a committed file is
stale: run ``python tools/gen_static_index.py`` after changing a ``Params`` model.

Usage: ``python tools/gen_static_index.py [--check] [package ...]``
"""
from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

INDEX_NAME = "zoo-index.json"
LIBRARIES = ("transformers", "diffusers")


def _schema(model: Any) -> dict[str, Any]:
    """A pydantic model's JSON Schema; a field whose type has none (a tensor, a callable) is ``{}`` (anything)."""
    from pydantic import TypeAdapter

    try:
        return model.model_json_schema()
    except Exception:  # noqa: BLE001 - arbitrary types: per field
        props = {}
        for name, f in model.model_fields.items():
            try:
                props[name] = TypeAdapter(f.annotation).json_schema()
            except Exception:  # noqa: BLE001
                props[name] = {}
        return {"type": "object", "properties": props, "additionalProperties": False}


def _modules(package: str) -> list[Any]:
    pkg = importlib.import_module(package)
    mods = [pkg]
    for info in pkgutil.walk_packages(getattr(pkg, "__path__", []), prefix=package + "."):
        mods.append(importlib.import_module(info.name))
    return mods


def package_index(package: str) -> dict[str, Any]:
    """The index of one package: ``{"targets": {"mod:attr": {"kinds": [...], "params": schema?}}}``."""
    from registry import contract

    mods = _modules(package)
    kinds_of: dict[int, list[str]] = {}
    for kind, objs in contract._REGISTRY.items():
        for obj in objs:
            kinds_of.setdefault(id(obj), []).append(kind)
    targets: dict[str, dict[str, Any]] = {}
    for m in mods:  # every "module:attr" of the package that reaches a registered object (re-exports too)
        for attr, obj in sorted(vars(m).items()):
            kinds = kinds_of.get(id(obj))
            if not kinds or attr.startswith("_"):
                continue
            entry: dict[str, Any] = {"kinds": sorted(kinds)}
            if "procedure" in kinds and getattr(obj, "Params", None) is not None:
                entry["params"] = _schema(obj.Params)
            if "factory" in kinds:
                entry["params"] = _schema(contract.factory_params(obj))
            for kind, model_of in (("metric_check", contract.check_params_model), ("transform", contract.transform_params)):
                if kind in kinds:
                    try:
                        entry["params"] = _schema(model_of(obj))
                    except TypeError:  # a signature the engine cannot validate: refused at build time, no static schema
                        pass
            targets[f"{m.__name__}:{attr}"] = entry
    return {"generated_by": "tools/gen_static_index.py", "package": package,
            "targets": dict(sorted(targets.items()))}


def library_names() -> dict[str, Any]:
    from importlib.metadata import version

    out = {}
    for lib in LIBRARIES:
        mod = importlib.import_module(lib)
        names = sorted(n for n in dir(mod) if n[:1].isupper() and n.replace("_", "").isalnum())
        out[lib] = {"version": version(lib), "names": names}
    import timm

    out["timm"] = {"version": version("timm"), "names": sorted(timm.list_models())}
    return {"generated_by": "tools/gen_static_index.py", **out}


def default_packages() -> list[str]:
    return ["zoo.common"] + sorted(f"zoo.methods.{p.name}" for p in (ROOT / "zoo" / "methods").iterdir()
                                   if (p / "__init__.py").is_file())


def outputs(packages: list[str]) -> dict[Path, str]:
    """Every generated file's path and text."""
    files = {}
    for package in packages:
        pkg = importlib.import_module(package)
        folder = Path(list(pkg.__path__)[0])
        files[folder / INDEX_NAME] = json.dumps(package_index(package), indent=1, sort_keys=True) + "\n"
    files[ROOT / "registry" / "library_names.json"] = json.dumps(library_names(), indent=0) + "\n"
    return files


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("packages", nargs="*", help="method packages (default: every zoo.methods.*)")
    ap.add_argument("--check", action="store_true", help="exit 1 if a committed file differs (write nothing)")
    args = ap.parse_args(argv)
    stale = []
    for path, text in outputs(args.packages or default_packages()).items():
        if path.is_file() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    if args.check and stale:
        print("stale: " + ", ".join(str(p) for p in stale) + " (run python tools/gen_static_index.py)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
