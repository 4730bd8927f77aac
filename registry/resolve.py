"""The one place where a spec's ``"package.module:attr"`` string becomes a Python object.

Two checks, both required:
1. before importing, the string's top-level package must be allowed (so naming a module
   never runs its import-time code unless it is trusted);
2. after resolving, the object's *real* defining module must be allowed too, which refuses
   aliases such as ``zoo.somemodule:os.system`` or ``logging.os:system`` (the Hydra
   GHSA-37p2-j732-x8pj class of bypass).

Allowed: the packages registered with :func:`allow_package` (the zoo facade registers its own,
plugins arrive through the ``zoo.plugins`` entry-point group or ``ZOO_ALLOWED_PACKAGES``).
"""
from __future__ import annotations

import importlib
import inspect
import os
import re
import threading
from typing import Any

from .errors import Location, ResolveError
from .spec import TARGET_RE

_lock = threading.Lock()
_allowed: set[str] = set()
_plugins_loaded = False
PLUGIN_GROUP = "zoo.plugins"


def allow_package(name: str) -> None:
    """Trust a top-level package as a source of factories, procedures and invariants."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ResolveError(f"allow_package: {name!r} is not a top-level package name")
    with _lock:
        _allowed.add(name)


def allowed_packages() -> frozenset[str]:
    _load_plugins()
    env = {p.strip() for p in os.environ.get("ZOO_ALLOWED_PACKAGES", "").split(",") if p.strip()}
    return frozenset(_allowed | env)


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    from importlib.metadata import entry_points

    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            allow_package(ep.value.split(":")[0].split(".")[0])
        except ResolveError:  # a malformed entry point value: reported by plugin_problems()
            continue
    _plugins_loaded = True


def one_line_import_error(exc: BaseException) -> str:
    """``Type: message`` of an import-time failure, on one line and short."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"


def plugin_problems() -> dict[str, str]:
    """``{entry point: one-line error}`` for every ``zoo.plugins`` entry point whose package fails
    to import (imports each plugin: for ``zoo doctor`` / ``zoo list --broken``, not for listing)."""
    from importlib.metadata import entry_points

    problems: dict[str, str] = {}
    for ep in sorted(entry_points(group=PLUGIN_GROUP), key=lambda e: e.name):
        try:
            importlib.import_module(ep.value.split(":")[0])
        except Exception as exc:  # noqa: BLE001 - arbitrary import-time errors of a third-party package
            problems[f"{ep.name} ({ep.value})"] = one_line_import_error(exc)
    return problems


def _top(module: str | None) -> str:
    return (module or "").split(".")[0]


def resolve(target: str, location: Location | None = None, *, kind: str = "callable") -> Any:
    """Import ``"package.module:attr"`` if (and only if) the allowlist permits it."""
    loc = location or Location()
    if not isinstance(target, str) or not re.fullmatch(TARGET_RE, target):
        raise ResolveError(f"expected 'package.module:attr', got {target!r}", loc)
    module_name, _, attr_path = target.partition(":")
    allowed = allowed_packages()
    if _top(module_name) not in allowed:
        raise ResolveError(
            f"{target!r} is not allowed: package {_top(module_name)!r} is not in the allowlist "
            f"({', '.join(sorted(allowed)) or 'empty'}); register plugins via the '{PLUGIN_GROUP}' entry point",
            loc,
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - a broken plugin may raise anything at import time
        raise ResolveError(f"cannot import module {module_name!r} for {target!r}: {one_line_import_error(exc)}", loc) from None
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ResolveError(f"{target!r}: {module_name} has no attribute {attr_path!r}", loc) from None
    if inspect.ismodule(obj):
        raise ResolveError(f"{target!r} names a module, expected a {kind}", loc)
    real_module = getattr(obj, "__module__", None)
    if _top(real_module) not in allowed:
        raise ResolveError(
            f"{target!r} resolves to {real_module or '?'}.{getattr(obj, '__qualname__', '?')}, "
            f"outside the allowlist; aliases of foreign objects are refused",
            loc,
        )
    if not callable(obj):
        raise ResolveError(f"{target!r} is not callable", loc)
    return obj


def library_class(library: str, name: str, location: Location | None = None) -> type:
    """A public class of transformers / diffusers / timm by name (never a function or module)."""
    if library not in ("transformers", "diffusers"):
        raise ResolveError(f"unknown model library {library!r}", location)
    if not re.fullmatch(r"[A-Z][A-Za-z0-9_]*", name):
        raise ResolveError(f"model_class: expected a class name of {library}, got {name!r}", location)
    lib = importlib.import_module(library)
    try:
        cls = getattr(lib, name)
    except AttributeError:
        raise ResolveError(f"model_class: {library} has no class {name!r}", location) from None
    if not inspect.isclass(cls) or _top(cls.__module__) != library:
        raise ResolveError(f"model_class: {library}.{name} is not a {library} class", location)
    return cls
