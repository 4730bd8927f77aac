"""Zoo's engine: spec schema, safe loader, catalog, resolver, builder and conformance harness.

The engine knows no method by name. Importing it is cheap (no torch, and submodules load on
first use); heavy libraries load only when :func:`registry.build.build_pipeline` builds something.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Catalog": "catalog", "Entry": "catalog",
    "CliInputs": "contract", "Procedure": "contract", "ProcedureParams": "contract", "invariant": "contract",
    "FactoryParams": "contract", "factory": "contract", "metric_check": "contract", "benchmark": "contract",
    "trainer": "contract", "Options": "contract", "Context": "context",
    "BuildError": "errors", "CollisionError": "errors", "HardwareError": "errors", "NotFoundError": "errors",
    "ParamError": "errors", "RequirementError": "errors", "ResolveError": "errors", "RunError": "errors", "SpecError": "errors",
    "SpecErrors": "errors", "ZooError": "errors",
    "load_spec_file": "loader", "Spec": "spec", "json_schema": "spec",
    "Pipeline": "build", "build_pipeline": "build",
    "ProcedureOutput": "outputs", "ImageOutput": "outputs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'registry' has no attribute {name!r}")
