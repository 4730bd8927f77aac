"""Deprecated aliases for public names that moved (one release of grace, then removed).

A method package declares what moved as a literal mapping in its ``__init__.py`` (read statically by
``tests/methods/test_public_names.py`` and followed by :func:`registry.declare.find`, so it must stay a plain literal)::

    __deprecated_aliases__ = {
        "toy": {"build_digits_unet": "zoo.common.digits:build_digits_unet"},   # zoo.methods.<pkg>.toy.<name>
        "": {"old_name": "zoo.methods.<pkg>.new_module:new_name"},              # zoo.methods.<pkg>.<name>
    }
    __getattr__ = install_aliases(__name__, __deprecated_aliases__)

The key ``""`` is the package itself (served by the returned PEP 562 ``__getattr__``); any other key is a submodule
that no longer exists as a file: :func:`install_aliases` puts a small module object under that name into
``sys.modules`` (and on the package), so ``import``, ``from ... import`` and a spec's ``factory:`` /
``target:`` string naming the old path keep working. Every access to an old name emits one
:class:`DeprecationWarning` naming the new path and returns the very object the new path names (so it is still
the registered factory / procedure, and ``registry.resolve`` accepts it: its defining module is unchanged).
"""
from __future__ import annotations

import importlib
import sys
import types
import warnings
from importlib.machinery import ModuleSpec
from typing import Any, Callable

__all__ = ["REMOVED_IN", "install_aliases", "resolve_alias"]

#: the release in which the aliases declared today are removed
REMOVED_IN = "0.2"


def resolve_alias(new: str) -> Any:
    """The object a ``"module:attr"`` string names (imported on first use)."""
    module, _, attr = new.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _getattr_for(module_name: str, aliases: dict[str, str]) -> Callable[[str], Any]:
    """A PEP 562 ``__getattr__`` serving ``aliases`` (old name -> new ``"module:attr"``) with a DeprecationWarning."""

    def __getattr__(name: str) -> Any:
        new = aliases.get(name)
        if new is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        warnings.warn(f"{module_name}.{name} moved to {new.replace(':', '.')}; the old path is a deprecated alias "
                      f"removed in zoo {REMOVED_IN}", DeprecationWarning, stacklevel=2)
        return resolve_alias(new)

    return __getattr__


def install_aliases(package: str, declared: dict[str, dict[str, str]]) -> Callable[[str], Any]:
    """Install the deprecated aliases ``declared`` for ``package`` (see the module docstring); returns the package's
    ``__getattr__`` (for the key ``""``; raises ``AttributeError`` for anything else)."""
    pkg = sys.modules[package]
    for sub, aliases in declared.items():
        if not sub:
            continue
        full = f"{package}.{sub}"
        mod = sys.modules.get(full)
        if mod is None or getattr(mod, "__deprecated_aliases__", None) is None:
            mod = types.ModuleType(full, f"Deprecated alias module: its public names moved (removed in zoo {REMOVED_IN}): "
                                         + ", ".join(f"{k} -> {v}" for k, v in sorted(aliases.items())))
            mod.__spec__ = ModuleSpec(full, None)
            mod.__package__ = package
            mod.__deprecated_aliases__ = dict(aliases)
            mod.__all__ = []  # nothing public is defined here any more
            mod.__getattr__ = _getattr_for(full, mod.__deprecated_aliases__)  # type: ignore[attr-defined]
            mod.__dir__ = lambda names=sorted(aliases): list(names)  # type: ignore[attr-defined]
            sys.modules[full] = mod
        setattr(pkg, sub, mod)
    return _getattr_for(package, dict(declared.get("", {})))
