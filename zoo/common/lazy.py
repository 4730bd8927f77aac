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
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Callable


def lazy_exports(package: str, exports: dict[str, str], fallback: Callable[[str], Any] | None = None
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The package's ``(__getattr__, __dir__)`` serving ``exports`` (name -> module, relative to the package when
    it starts with ``.``)."""

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(where, package), name)
        setattr(sys.modules[package], name, value)  # cached: __getattr__ is not asked again
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
