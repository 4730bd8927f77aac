"""The shipped models as the engine builds them from their specs' declarations, for tests: private deep copies,
so a test may quantise or train them without touching the process-wide cache (no path into the checkout)."""
from __future__ import annotations

import copy
from typing import Any


def shipped_role(spec: str, role: str, variant: str = "toy") -> Any:
    """A deep copy of role ``role`` of ``spec``'s ``variant`` pipeline (sha256-verified, strictly loaded)."""
    import zoo

    return copy.deepcopy(zoo.load(spec, variant=variant).models[role])


def digits_dit() -> Any:
    """A fresh copy of the shared digits DiT (``specs/digits.yaml``, role ``dit``)."""
    return shipped_role("digits", "dit")


def spec_file(spec: str, relative_path: str) -> Any:
    """The verified path of a file ``spec`` declares (``ctx.spec_file``)."""
    import zoo

    return zoo.load(spec, variant="toy").ctx.spec_file(relative_path)
