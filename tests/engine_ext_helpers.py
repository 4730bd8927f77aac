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


def planted_check(tmp_path: Path, monkeypatch: Any, pkg: str, code: str, cls: str, check: str) -> tuple[str, str]:
    """``(status, message)`` of conformance check ``...::<check>`` on a one-sampler spec whose sampler is class
    ``cls`` of a throwaway package ``pkg`` (its ``__init__.py`` is ``code``), allowed for this test only."""
    (tmp_path / pkg).mkdir()
    (tmp_path / pkg / "__init__.py").write_text(code)
    spec = tmp_path / f"{pkg}.yaml"
    spec.write_text(f"name: {pkg.replace('_', '-')}\ntitle: t\ntask: demo\nimplementation: {pkg}\n"
                    f'samplers: {{s: {{target: "{pkg}:{cls}"}}}}\ndefault: s\nvariants: [toy]\n'
                    "hardware: {toy: {accelerator: cpu}}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import os

    allowed = os.environ.get("ZOO_ALLOWED_PACKAGES", "")
    monkeypatch.setenv("ZOO_ALLOWED_PACKAGES", ",".join(p for p in (allowed, pkg) if p))
    e = Entry(spec.resolve(), "test", spec=load_spec_file(spec.resolve()))
    found = next(c for c in checks_for(e) if c.id.endswith(f"::{check}"))
    status, msg = run_check(found)[:2]
    return status, msg
