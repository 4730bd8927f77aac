"""Helpers for the engine-extension tests: tiny specs written to a temp folder, built and checked."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from registry.catalog import Entry
from registry.conformance import checks_for, run_check
from registry.loader import load_spec_file

LIN = {"source": "zoo", "factory": "zoo_ext_plugin:build_lin", "config": {"dim": 2}}
BASE: dict[str, Any] = {
    "name": "ext-demo",
    "title": "engine extension demo",
    "task": "unconditional-sampling",
    "implementation": "zoo_ext_plugin",
    "models": {"model": {"kind": "linear", "variants": {"toy": LIN}}},
    "samplers": {"apply": {"target": "zoo_ext_plugin:Apply"}},
    "default": "apply",
    "variants": ["toy"],
    "hardware": {"toy": {"accelerator": "cpu"}},
}


def spec_dict(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


def write_spec(folder: Path, data: dict[str, Any], name: str = "ext-demo.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def entry(path: Path) -> Entry:
    return Entry(path.resolve(), "test", spec=load_spec_file(path.resolve()))


def run_all(path: Path, only: str | None = None) -> dict[str, tuple[str, str]]:
    """``check id -> (status, message)`` for every conformance check of a spec file."""
    out = {}
    for check in checks_for(entry(path), slow=False):
        if only is None or only in check.id:
            status, msg, _ = run_check(check)
            out[check.id] = (status, msg)
    return out
