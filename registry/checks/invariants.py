"""Invariants: each one the spec lists is registered by its implementation package and passes (under the
Hypothesis profile the run loaded); one that needs the models gets the spec's shared context."""
from __future__ import annotations

import importlib

from .base import Check, SpecUnderCheck, context_for, family, has_submodule


@family
def invariants(s: SpecUnderCheck) -> list[Check]:
    return [s.check(f"invariant[{inv}]", lambda inv=inv: _run_invariant(s, inv)) for inv in s.spec.invariants]


def _run_invariant(s: SpecUnderCheck, inv: str) -> None:
    from ..contract import call_invariant, registered_invariants
    from ..resolve import allowed_packages

    impl = s.spec.implementation
    if impl.split(".")[0] not in allowed_packages():
        raise AssertionError(f"implementation {impl!r} is not in the allowlist")
    module = f"{impl}.invariants" if has_submodule(impl, "invariants") else impl
    importlib.import_module(module)
    found = registered_invariants(impl)
    if inv not in found:
        raise AssertionError(f"invariant {inv!r} is not registered by {impl} (registered: {', '.join(sorted(found)) or 'none'})")
    call_invariant(found[inv], context_for(s.entry, s.target))
