"""The one place where a spec's ``"package.module:attr"`` string becomes a Python object.

Two checks, both required:
1. before importing, the string's top-level package must be allowed (so naming a module
   never runs its import-time code unless it is trusted);
2. after resolving, the object's *real* defining module must be allowed too, which refuses
   aliases such as ``zoo.somemodule:os.system`` or ``logging.os:system`` (the Hydra
   GHSA-37p2-j732-x8pj class of bypass).

3. the object must be registered for the kind of field that names it (``@factory``,
   ``@metric_check``, a :class:`~registry.contract.Procedure` subclass, ...; see
   :mod:`registry.contract`), so an allowed package's other callables (``zoo:load``,
   ``zoo.cli:main``) are never gadgets a spec can call with arguments of its choosing.

Allowed: the packages registered with :func:`allow_package` (the zoo facade registers its own,
plugins arrive through the ``zoo.plugins`` entry-point group or ``ZOO_ALLOWED_PACKAGES``). The
standard library and libraries that load code or pickles (torch, numpy, transformers, ...) can
never be allowed: see :data:`DENIED_PACKAGES`.
"""
from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import threading
import warnings
from typing import Any

from . import contract, declare
from .errors import Location, ResolveError, one_line_import_error  # noqa: F401 - re-exported
from .schema import TARGET_RE

_lock = threading.Lock()
_allowed: set[str] = set()
_plugins_loaded = False
PLUGIN_GROUP = "zoo.plugins"


#: Packages that may never be allowed: the standard library (``os``, ``subprocess``, ``pickle``,
#: ``builtins``, ``importlib``, ...), libraries whose functions load pickles or run code
#: (``torch.load``, ``numpy.load(allow_pickle=True)``, ``joblib``, ``dill``, ``transformers``'
#: remote code ...), and this engine itself. Allowing a package trusts *its registered objects*;
#: these packages register nothing and offer loaders, so allowing them could only open holes.
DENIED_PACKAGES: frozenset[str] = frozenset(sys.stdlib_module_names) | frozenset({
    "torch", "torchvision", "torchaudio", "numpy", "scipy", "pandas", "sklearn", "joblib", "dill", "cloudpickle",
    "pickle5", "safetensors", "transformers", "diffusers", "timm", "accelerate", "huggingface_hub", "tokenizers",
    "peft", "datasets", "jax", "jaxlib", "flax", "tensorflow", "keras", "onnx", "onnxruntime", "h5py", "yaml",
    "ruamel", "pydantic", "hypothesis", "pytest", "_pytest", "IPython", "setuptools", "pkg_resources", "pip",
    "requests", "urllib3", "fsspec", "matplotlib", "numba", "sympy", "tqdm", "registry",
})


def _refusal(name: str) -> str | None:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return f"{name!r} is not a top-level package name"
    if name in DENIED_PACKAGES or name.lower() in DENIED_PACKAGES:
        what = "the standard library" if name in sys.stdlib_module_names else "a library that loads code or pickles"
        return f"{name!r} may not be allowed: it is {what}, not a zoo plugin (allowing a package lets specs name its registered factories, procedures and checks)"
    return None


def allow_package(name: str) -> None:
    """Trust a top-level package as a source of registered factories, procedures and checks."""
    why = _refusal(name)
    if why:
        raise ResolveError(f"allow_package: {why}")
    with _lock:
        _allowed.add(name)


def allowed_packages() -> frozenset[str]:
    """Allowed top-level packages. A denied name in ``ZOO_ALLOWED_PACKAGES`` is an error (fail
    closed and loud: silently dropping it would leave the caller guessing)."""
    _load_plugins()
    env = {p.strip() for p in os.environ.get("ZOO_ALLOWED_PACKAGES", "").split(",") if p.strip()}
    for name in sorted(env):
        why = _refusal(name)
        if why:
            raise ResolveError(f"ZOO_ALLOWED_PACKAGES: {why}")
    return frozenset(_allowed | env)


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    from importlib.metadata import entry_points

    for ep in entry_points(group=PLUGIN_GROUP):
        name = ep.value.split(":")[0].split(".")[0]
        try:
            allow_package(name)
        except ResolveError as exc:  # a broken plugin must not break every command
            warnings.warn(f"zoo.plugins entry point {ep.name!r} ignored: {exc}", stacklevel=2)
    _plugins_loaded = True


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


def resolve(target: str, location: Location | None = None, *, kind: str) -> Any:
    """Import ``"package.module:attr"`` if (and only if) the allowlist permits it, and return the
    object only if it is registered for ``kind`` (see :data:`registry.contract.KINDS`)."""
    loc = location or Location()
    if kind not in contract.KINDS:
        raise ValueError(f"resolve: unknown kind {kind!r}")
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
    if not contract.is_registered(obj, kind):
        how = "subclass registry.contract.Procedure" if kind == "procedure" else f"decorate it with @registry.contract.{kind}"
        raise ResolveError(f"{target!r} is not registered as a {kind.replace('_', ' ')} ({how})", loc)
    found = declare.find(target)  # what zoo validate read: the package's params module must name these very models
    if found is not None:
        why = declare.disagreement(target, found, obj, kind)
        if why:
            raise ResolveError(why, loc)
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
