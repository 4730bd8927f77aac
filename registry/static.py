"""Static checks for ``zoo validate``: what a spec's targets are and accept, read from indexes the
implementation packages ship, so validation imports neither the method code nor torch.

* ``<package>/zoo-index.json`` (written by ``tools/gen_static_index.py``, freshness-tested): each
  registered callable by ``"module:attr"``, its kinds, and the JSON Schema of a procedure's
  ``Params`` / a factory's ``config``. Found by walking up the target's module path to the first
  package folder holding one, located with :func:`registry.catalog.package_dirs` (no import).
* ``registry/library_names.json``: the public CamelCase names of transformers and diffusers, used
  only when the installed version is the recorded one.

:func:`check_values` validates YAML values against the subset of JSON Schema pydantic emits
(types, ``anyOf``, ``enum``/``const``, bounds, lengths, ``$ref``, closed objects), with pydantic's
lax coercions (``3.0`` for an int, ``1`` for a bool, numeric strings), so what it refuses the
runtime refuses too.
"""
from __future__ import annotations

import difflib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

INDEX_NAME = "zoo-index.json"


@lru_cache(maxsize=64)
def _read_index(folder: str) -> dict[str, Any] | None:
    path = Path(folder) / INDEX_NAME
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("targets"), dict) else None


def index_for(target: str) -> tuple[dict[str, Any], str] | None:
    """``(index, its file)`` of the package that ships an index covering ``target``'s module, or None."""
    from .catalog import package_dirs

    module = target.split(":", 1)[0]
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        for folder in package_dirs(".".join(parts[:n])):
            idx = _read_index(folder)
            if idx is not None:
                return idx, os.path.join(folder, INDEX_NAME)
    return None


def target_info(target: str) -> tuple[dict[str, Any] | None, str] | None:
    """``(entry or None, index file)`` when an index covers ``target``; None when no index does
    (the caller falls back to importing)."""
    found = index_for(target)
    if found is None:
        return None
    idx, file = found
    return idx["targets"].get(target), file


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


# ----------------------------------------------------------------------------- JSON Schema subset
def check_values(schema: dict[str, Any], values: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems of ``values`` (a params mapping) against an object ``schema``: ``(key, message)``."""
    defs = schema.get("$defs", {})
    props = schema.get("properties", {})
    out: list[tuple[str, str]] = []
    for key, value in values.items():
        if key not in props:
            if schema.get("additionalProperties", True) is False:
                close = difflib.get_close_matches(str(key), list(props), n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(props) or 'none'}"
                out.append((str(key), f"unknown parameter; {hint}"))
            continue
        msg = _check(props[key], value, defs)
        if msg:
            out.append((str(key), msg))
    return out


def check_caps(schema: dict[str, Any], values: dict[str, Any]) -> list[tuple[str, str]]:
    """The engine's default size caps (:func:`registry.limits.check_tree`) on each value whose property in
    ``schema`` declares no upper bound (``maximum``/``exclusiveMaximum``/``maxItems``/``maxLength``, an ``enum``
    or a ``const``), as the build applies them: ``(dotted key, message)``."""
    from .limits import SizeError, check_tree

    props = schema.get("properties", {})
    defs = schema.get("$defs", {})
    out: list[tuple[str, str]] = []
    for key, value in values.items():
        if key in props and _declares_bound(props[key], defs):
            continue
        try:
            check_tree(value, str(key))
        except SizeError as exc:
            out.append((exc.path, exc.detail))
    return out


def _declares_bound(s: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> bool:
    if depth > 20:
        return False
    if "$ref" in s:
        return _declares_bound(defs.get(s["$ref"].rsplit("/", 1)[-1], {}), defs, depth + 1)
    if any(k in s for k in ("maximum", "exclusiveMaximum", "maxItems", "maxLength", "enum", "const")) or s.get("type") == "boolean":
        return True
    subs = s.get("anyOf") or s.get("oneOf") or s.get("allOf")
    return bool(subs) and all(_declares_bound(x, defs, depth + 1) or x.get("type") == "null" for x in subs)


def _show(value: Any) -> str:
    return repr(value) if not isinstance(value, (dict, list)) else type(value).__name__


def _check(s: dict[str, Any], v: Any, defs: dict[str, Any], depth: int = 0) -> str | None:
    """None if ``v`` satisfies ``s``, else a one-line reason."""
    if depth > 20:
        return None
    if "$ref" in s:
        ref = s["$ref"].rsplit("/", 1)[-1]
        return _check({**defs.get(ref, {}), **{k: x for k, x in s.items() if k != "$ref"}}, v, defs, depth + 1)
    for key in ("anyOf", "oneOf"):
        if key in s:
            msgs = [_check(sub, v, defs, depth + 1) for sub in s[key]]
            if all(m is not None for m in msgs):
                return msgs[0] if len(msgs) == 1 else "; or ".join(dict.fromkeys(m for m in msgs if m))
            return None
    if "allOf" in s:
        for sub in s["allOf"]:
            m = _check(sub, v, defs, depth + 1)
            if m:
                return m
    if "const" in s and v != s["const"]:
        return f"expected {s['const']!r} (got {_show(v)})"
    if "enum" in s and v not in s["enum"]:
        return f"expected one of {', '.join(repr(e) for e in s['enum'])} (got {_show(v)})"
    t = s.get("type")
    if t is None:
        return None
    num: float | None = None
    if t == "null":
        return None if v is None else f"expected null (got {_show(v)})"
    if t == "boolean":
        if isinstance(v, bool) or v in (0, 1) or (isinstance(v, str) and v.lower() in ("true", "false", "yes", "no", "on", "off", "0", "1")):
            return None
        return f"Input should be a valid boolean (got {_show(v)})"
    if t == "string":
        if not isinstance(v, str):
            return f"Input should be a valid string (got {_show(v)})"
        if "minLength" in s and len(v) < s["minLength"]:
            return f"String should have at least {s['minLength']} characters (got {_show(v)})"
        if "maxLength" in s and len(v) > s["maxLength"]:
            return f"String should have at most {s['maxLength']} characters"
        return None
    if t in ("integer", "number"):
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, str):
            try:
                v = float(v) if t == "number" else int(v)
            except ValueError:
                return f"Input should be a valid {'integer' if t == 'integer' else 'number'} (got {_show(v)})"
        if not isinstance(v, (int, float)):
            return f"Input should be a valid {'integer' if t == 'integer' else 'number'} (got {_show(v)})"
        if t == "integer" and isinstance(v, float) and not v.is_integer():
            return f"Input should be a valid integer, got a number with a fractional part (got {_show(v)})"
        num = float(v)
        for key, ok, word in (("minimum", lambda a, b: a >= b, "greater than or equal to"),
                              ("maximum", lambda a, b: a <= b, "less than or equal to"),
                              ("exclusiveMinimum", lambda a, b: a > b, "greater than"),
                              ("exclusiveMaximum", lambda a, b: a < b, "less than")):
            if key in s and not ok(num, s[key]):
                return f"Input should be {word} {s[key]} (got {_show(v)})"
        return None
    if t == "array":
        if not isinstance(v, (list, tuple)):
            return f"Input should be a valid list (got {_show(v)})"
        if "minItems" in s and len(v) < s["minItems"]:
            return f"List should have at least {s['minItems']} items (got {len(v)})"
        if "maxItems" in s and len(v) > s["maxItems"]:
            return f"List should have at most {s['maxItems']} items (got {len(v)})"
        items = s.get("items")
        if isinstance(items, dict):
            for i, x in enumerate(v):
                m = _check(items, x, defs, depth + 1)
                if m:
                    return f"item {i}: {m}"
        return None
    if t == "object":
        if not isinstance(v, dict):
            return f"Input should be a valid dictionary (got {_show(v)})"
        for k, m in check_values({**s, "$defs": defs}, v):
            return f"{k}: {m}"
        extra = s.get("additionalProperties")
        if isinstance(extra, dict):
            for k, x in v.items():
                m = _check(extra, x, defs, depth + 1)
                if m:
                    return f"{k}: {m}"
        return None
    return None
