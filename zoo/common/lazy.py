"""Lazy package exports (PEP 562): a method package's ``__init__`` names what it re-exports without importing it,
so importing the package -- and its torch-free ``params`` module, which ``zoo validate`` reads
(:mod:`registry.declare`) -- runs no method code and imports no torch::

    from zoo.common.lazy import lazy_exports

    __all__ = ["MySampler", "build_model"]
    __getattr__, __dir__ = lazy_exports(__name__, {"MySampler": ".sampler", "build_model": ".toy"})

``pkg.MySampler`` (and ``from pkg import MySampler``, and a spec's ``target: "pkg:MySampler"``) imports
``pkg.sampler`` on first access and returns its ``MySampler``; the value is then cached on the package.
``fallback`` is another ``__getattr__`` asked for any other name (the deprecated aliases of
:func:`zoo.common.deprecation.install_aliases`).

An export named like one of the package's submodules (``pkg.distill`` the function, ``pkg/distill.py`` the
module) stays the export: the import system binds a submodule on its package when it loads it, which would
otherwise replace the function by the module once anything imported ``pkg.distill`` (an eager ``from .distill
import distill`` re-bound it afterwards; a lazy package keeps it by refusing that one binding). The submodule
itself stays importable (``sys.modules``, ``import pkg.distill``).
"""
from __future__ import annotations

import importlib
import sys
import types
from typing import Any, Callable


class _LazyPackage(types.ModuleType):
    """A package module whose lazy exports are not overwritten by the submodule of the same name."""

    def __setattr__(self, name: str, value: Any) -> None:
        exports = self.__dict__.get("__zoo_lazy_exports__", {})
        if (name in exports and isinstance(value, types.ModuleType) and value.__name__ == f"{self.__name__}.{name}"
                and getattr(value, name, None) is not None):
            return  # the import system binding the submodule: the package keeps (or will load) the export
        super().__setattr__(name, value)


def lazy_exports(package: str, exports: dict[str, str], fallback: Callable[[str], Any] | None = None
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``(__getattr__, __dir__)`` serving ``exports`` (name -> module, relative to the package when
    it starts with ``.``)."""
    mod = sys.modules[package]
    mod.__dict__["__zoo_lazy_exports__"] = dict(exports)
    if type(mod) is types.ModuleType:
        mod.__class__ = _LazyPackage

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        sys.modules[package].__dict__[name] = value  # cached: __getattr__ is not asked again
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
