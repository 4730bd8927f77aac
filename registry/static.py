"""Static checks for ``zoo validate`` and ``zoo run``'s pre-checks: what a spec's targets are and accept, known
without importing the method code or torch.

* Each implementation package's torch-free params module (:mod:`registry.declare`): the very pydantic models the
  build validates with, so a spec's params are checked by pydantic itself, through the same functions as at build
  time (:func:`registry.calls.validated_kwargs`, :func:`registry.calls.procedure_params`).
* ``registry/library_names.json``: the public CamelCase names of transformers and diffusers (and timm's
  architectures), used only when the installed version is the recorded one.

A package without a params module is checked by importing its code (``zoo validate`` does; ``zoo run`` at build
time).
"""
from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel


@dataclass(frozen=True)
class Info:
    """What is known statically about one target: its kinds (None: not registered there), its params model and its
    ``CliInputs`` (None: takes none), the file that says so, and a one-line failure reading that file."""

    kinds: tuple[str, ...] | None
    params: type[BaseModel] | None
    cli: type[BaseModel] | None
    file: str
    error: str | None = None


def target_info(target: str) -> Info | None:
    """The static description of ``target`` from its package's params module, or None when its package has none
    (the caller imports the code instead). The target's top package must be allowlisted (checked here too: a
    params module is code, imported only for a trusted package)."""
    from .declare import find
    from .resolve import allowed_packages

    if target.split(":", 1)[0].split(".")[0] not in allowed_packages():
        return None
    found = find(target)
    if found is None:
        return None
    entry = found.entry
    return Info(entry.kinds if entry else None, entry.params if entry else None,
                entry.cli_inputs if entry else None, found.file, found.error)


@lru_cache(maxsize=1)
def _library_names() -> dict[str, Any]:
    try:
        return json.loads((Path(__file__).parent / "library_names.json").read_text())
    except (OSError, ValueError):
        return {}


def library_has(library: str, name: str) -> tuple[bool, list[str]] | None:
    """``(known, close names)`` for a model class name (transformers, diffusers) or a timm architecture
    name, or None when the installed version is not the recorded one (no static answer)."""
    from importlib.metadata import PackageNotFoundError, version

    rec = _library_names().get(library)
    if not isinstance(rec, dict):
        return None
    try:
        if version(library) != rec.get("version"):
            return None
    except PackageNotFoundError:
        return None
    names = rec.get("names") or []
    if name in set(names):
        return True, []
    return False, difflib.get_close_matches(name, names, n=1, cutoff=0.75)


def schema_of(model: type[BaseModel] | None) -> dict[str, Any] | None:
    """A params model's JSON Schema, for listing options (``zoo run NAME --help``, ``zoo show``); a field whose type
    has none (a callable) is ``{}``. Validation never reads it: the model itself validates."""
    from pydantic import TypeAdapter

    if model is None:
        return None
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
