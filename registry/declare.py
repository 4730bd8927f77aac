"""What a method package declares, torch-free, about the callables it registers: one validation path.

Each implementation package (``zoo.common``, every ``zoo.methods.*``, a plugin's package) keeps the pydantic models
its specs fill -- a procedure's ``Params`` and ``CliInputs``, a factory's ``config``, a metric check's
``check_params``, a transform's ``transform_config``, a benchmark's or trainer's options -- in one module
``<package>/params.py`` that imports neither torch nor the method's code, and ends with a table naming what each
registered callable takes::

    from registry import declare
    from registry.contract import FactoryParams, ProcedureParams

    class MySamplerParams(ProcedureParams):
        num_inference_steps: Steps = 20

    TARGETS = {
        "MySampler": declare.procedure(MySamplerParams, cli=MyCli),   # zoo.methods.my_method[.<any module>]:MySampler
        "toy:build_model": declare.factory(ToyConfig),                # only zoo.methods.my_method.toy:build_model
        "metrics:exact_error": declare.metric_check(ExactErrorParams),
    }

The implementation uses the *same classes* (``Params = MySamplerParams``, ``@factory(params=ToyConfig)``,
``@metric_check(params=ExactErrorParams)``), so ``zoo validate`` and ``zoo run``'s pre-checks validate a spec with
pydantic and the very model the build will use, without importing torch; :func:`registry.resolve.resolve` refuses an
object whose models are not the ones its package's table names (the table cannot go stale silently).

A key is ``"attr"`` (any module of the package) or ``"sub.module:attr"`` (that module only, looked up first). The
package's ``__init__`` must import lazily (PEP 562, :mod:`zoo.common.lazy`) so importing ``<package>.params`` runs
no method code. A package without a params module is validated by importing its code (``zoo validate`` says so).
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from . import contract
from .discovery import package_dirs
from .errors import one_line_import_error

#: the module of a package holding its declarations (``<package>/params.py``)
MODULE = "params"


@dataclass(frozen=True)
class Declared:
    """One registered callable as its package's params module declares it: its kinds and its models
    (``params``: ``Params`` / ``config`` / ``check_params`` / ``transform_config`` / options; ``None``: takes none)."""

    kinds: tuple[str, ...]
    params: type[BaseModel] | None = None
    cli_inputs: type[BaseModel] | None = None

    def __or__(self, other: "Declared") -> "Declared":
        """One object registered as two kinds (``declare.factory(C) | declare.metric_check(P)``); models must agree."""
        for a, b in ((self.params, other.params), (self.cli_inputs, other.cli_inputs)):
            if a is not None and b is not None and a is not b:
                raise TypeError("declare: one object cannot take two different params models")
        return Declared(tuple(dict.fromkeys(self.kinds + other.kinds)), self.params or other.params,
                        self.cli_inputs or other.cli_inputs)


def _model(model: Any, what: str) -> type[BaseModel] | None:
    if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"declare.{what}: expected a pydantic model class or None, got {model!r}")
    return model


def procedure(params: type[BaseModel] | None = None, *, cli: type[BaseModel] | None = None) -> Declared:
    """A :class:`~registry.contract.Procedure` subclass: its ``Params`` (None: the base ``ProcedureParams``, no
    parameters) and its ``CliInputs`` (``zoo run``'s options; None: it takes none)."""
    return Declared(("procedure",), _model(params, "procedure"), _model(cli, "procedure"))


def factory(params: type[BaseModel] | None = None) -> Declared:
    """A ``@factory(params=...)``: its ``config`` model (None: it takes no config)."""
    return Declared(("factory",), _model(params, "factory"))


def metric_check(params: type[BaseModel] | None = None) -> Declared:
    """A ``@metric_check(params=...)``: its ``check_params`` model (None: it takes none)."""
    return Declared(("metric_check",), _model(params, "metric_check"))


def transform(params: type[BaseModel] | None = None) -> Declared:
    """A ``@transform(params=...)``: its ``transform_config`` model (None: it takes none)."""
    return Declared(("transform",), _model(params, "transform"))


def benchmark(options: type[BaseModel] | None = None) -> Declared:
    """A ``@benchmark(options=...)`` (None: no options of its own)."""
    return Declared(("benchmark",), _model(options, "benchmark"))


def trainer(options: type[BaseModel] | None = None) -> Declared:
    """A ``@trainer(options=...)`` (None: no options of its own; a spec's ``training.<name>.params`` fill them)."""
    return Declared(("trainer",), _model(options, "trainer"))


def converter() -> Declared:
    """A ``@converter`` (takes no params)."""
    return Declared(("converter",))


# ----------------------------------------------------------------------------- lookup
@dataclass(frozen=True)
class Found:
    """The answer of :func:`find`: the declaration (None: the package's params module names no such target, or the
    target's module does not exist), the params module's file, and a one-line import failure of that module."""

    entry: Declared | None
    file: str
    error: str | None = None


def _module_exists(folder: str, rel: str, package: Any) -> bool:
    """Whether ``rel`` (a dotted module path under the package folder, "" for the package) is a module file, or a
    deprecated alias module the package declares (:mod:`zoo.common.deprecation`)."""
    if not rel:
        return True
    path = os.path.join(folder, *rel.split("."))
    if os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py")):
        return True
    return rel in (getattr(package, "__deprecated_aliases__", None) or {})


def find(target: str) -> Found | None:
    """The declaration covering ``"module:attr"``, from the params module of the nearest package above the module
    that has one (located on ``sys.path`` without importing anything else), or None when none has one. Imports the
    package (its ``__init__``, lazy) and its params module: call it only for allowlisted packages."""
    module, _, attr = target.partition(":")
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        pkg = ".".join(parts[:n])
        for folder in package_dirs(pkg):
            file = os.path.join(folder, MODULE + ".py")
            if not os.path.isfile(file):
                continue
            try:
                package = importlib.import_module(pkg)
                mod = importlib.import_module(f"{pkg}.{MODULE}")
            except Exception as exc:  # noqa: BLE001 - a broken plugin may raise anything at import time
                return Found(None, file, one_line_import_error(exc))
            table = getattr(mod, "TARGETS", None)
            if not isinstance(table, dict):
                return Found(None, file, f"{pkg}.{MODULE} defines no TARGETS table (registry.declare)")
            rel = ".".join(parts[n:])
            aliases = (getattr(package, "__deprecated_aliases__", None) or {}).get(rel, {})
            if attr in aliases:  # a moved name (zoo.common.deprecation): the new path's declaration
                return find(aliases[attr])
            if not _module_exists(folder, rel, package):
                return Found(None, file)
            entry = table.get(f"{rel}:{attr}") if rel else None
            if entry is None:
                entry = table.get(attr)
            return Found(entry if isinstance(entry, Declared) else None, file)
    return None


# ----------------------------------------------------------------------------- agreement with the runtime
def runtime_models(obj: Any, kind: str) -> tuple[type[BaseModel] | None, type[BaseModel] | None]:
    """``(params model, CliInputs)`` the engine will use for ``obj`` registered as ``kind`` (None: takes none)."""
    if kind == "procedure":
        params = getattr(obj, "Params", None)
        return (None if params is contract.ProcedureParams else params), getattr(obj, "CliInputs", None)
    if kind == "factory":
        return _or_none(contract.factory_params(obj)), None
    if kind in ("metric_check", "transform"):
        getter = contract.check_params_model if kind == "metric_check" else contract.transform_params
        try:
            return _or_none(getter(obj)), None
        except TypeError:
            return None, None
    if kind in ("benchmark", "trainer"):
        options = getattr(obj, "zoo_options", None)
        return (None if options is contract.Options else options), None
    return None, None


def _or_none(model: Any) -> Any:
    """A derived model with no fields stands for "takes none" (a declared ``None``)."""
    return None if model is None or (not model.model_fields and getattr(model, "__zoo_derived__", False)) else model


def disagreement(target: str, found: Found, obj: Any, kind: str) -> str | None:
    """Why ``obj`` (``target`` resolved for ``kind``) does not match its package's declaration, or None."""
    where = found.file
    if found.error:
        return f"{target!r}: its package's params module {where} cannot be imported: {found.error}"
    entry = found.entry
    if entry is None:
        return f"{target!r} is registered as a {kind.replace('_', ' ')} but {where} does not declare it (add it to TARGETS)"
    if kind not in entry.kinds:
        return f"{target!r} is registered as a {kind.replace('_', ' ')} but {where} declares it as a {', '.join(entry.kinds)}"
    params, cli = runtime_models(obj, kind)
    for label, want, got in (("params model", entry.params, params), ("CliInputs", entry.cli_inputs, cli)):
        if want is not got:
            name = lambda m: "none" if m is None else f"{m.__module__}.{m.__qualname__}"  # noqa: E731
            return (f"{target!r}: {where} declares {label} {name(want)} but the implementation uses {name(got)} "
                    "(the implementation must use the params module's classes)")
    return None



# ----------------------------------------------------------------------------- what a package registers (tests, authors)
def registered_targets(package: str) -> list[tuple[str, Any, list[str]]]:
    """``(target, object, kinds)`` for every public ``"module:attr"`` of ``package`` reaching a registered object,
    found by importing every module of the package (its code: tests and authors only, never ``zoo validate``).
    A lazy package's exports (``__all__``) count as its attributes."""
    import pkgutil

    pkg = importlib.import_module(package)
    mods = [pkg] + [importlib.import_module(i.name) for i in pkgutil.walk_packages(getattr(pkg, "__path__", []), package + ".")
                    if not i.name.endswith("." + MODULE)]
    kinds_of: dict[int, list[str]] = {}
    for kind in contract.KINDS:
        for obj in contract.registered(kind):
            kinds_of.setdefault(id(obj), []).append(kind)
    out = []
    for m in mods:
        names = set(vars(m)) | set(getattr(m, "__all__", None) or [])
        for attr in sorted(names):
            if attr.startswith("_"):
                continue
            try:
                obj = getattr(m, attr)
            except AttributeError:
                continue
            kinds = kinds_of.get(id(obj))
            if kinds:
                out.append((f"{m.__name__}:{attr}", obj, sorted(kinds)))
    return out


def report(package: str) -> list[str]:
    """One line per registered target of ``package`` and kind: its models, and whether its params module agrees."""
    lines = []
    for target, obj, kinds in registered_targets(package):
        found = find(target)
        for kind in kinds:
            params, cli = runtime_models(obj, kind)
            derived = params is not None and getattr(params, "__zoo_derived__", False)
            name = lambda m: "-" if m is None else f"{m.__module__}:{m.__qualname__}"  # noqa: E731
            status = "no params module" if found is None else (disagreement(target, found, obj, kind) or "OK")
            lines.append(f"{target} {kind} params={'DERIVED ' if derived else ''}{name(params)} cli={name(cli)} [{status}]")
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m registry.declare PACKAGE ...``: what each package registers, its models, and whether its params
    module declares them (``[OK]``); exit 1 when a line is not OK."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m registry.declare", description=main.__doc__)
    ap.add_argument("packages", nargs="+", help="importable packages, e.g. zoo.methods.poe_bridge or my_plugin")
    args = ap.parse_args(argv)
    bad = 0
    for package in args.packages:
        print(f"== {package}")
        for line in report(package):
            print(line)
            bad += not line.endswith("[OK]")
    return 1 if bad else 0


if __name__ == "__main__":  # run as registry.declare, not __main__: params modules import that one (one Declared class)
    from registry.declare import main as _main

    raise SystemExit(_main())
