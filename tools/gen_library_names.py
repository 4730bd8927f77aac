#!/usr/bin/env python
"""Generate ``registry/library_names.json``: the public CamelCase names of transformers and diffusers at the
installed versions (a spec's ``model_class:`` is checked against them) and timm's registered architecture names
(``timm.list_models()``; a timm role's ``model_name:`` is checked against them), so ``zoo validate`` checks both
without importing those libraries. Used only when the installed version is the recorded one.

``tests/test_static_validation.py`` regenerates it in memory and fails when the committed file is stale.

Usage: ``python tools/gen_library_names.py [--check]``
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LIBRARIES = ("transformers", "diffusers")


def library_names() -> dict[str, Any]:
    from importlib.metadata import version

    out = {}
    for lib in LIBRARIES:
        mod = importlib.import_module(lib)
        names = sorted(n for n in dir(mod) if n[:1].isupper() and n.replace("_", "").isalnum())
        out[lib] = {"version": version(lib), "names": names}
    import timm

    out["timm"] = {"version": version("timm"), "names": sorted(timm.list_models())}
    return {"generated_by": "tools/gen_library_names.py", **out}


def outputs() -> dict[Path, str]:
    """The generated file's path and text."""
    return {ROOT / "registry" / "library_names.json": json.dumps(library_names(), indent=0) + "\n"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed file differs (write nothing)")
    args = ap.parse_args(argv)
    stale = []
    for path, text in outputs().items():
        if path.is_file() and path.read_text() == text:
            continue
        stale.append(path)
        if not args.check:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if args.check and stale:
        print("stale: " + ", ".join(str(p) for p in stale) + " (run python tools/gen_library_names.py)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
