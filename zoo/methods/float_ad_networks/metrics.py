"""Metric checks for ``specs/float-ad-networks.yaml``: ``fn(pipeline, **check_params) -> float``,
the numbers ``zoo bench float-ad-networks`` reports (seed 0)."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from .analysis import DTYPES, measure
from .params import ExactRateParams, NNonzeroParams


@metric_check(params=ExactRateParams)
def exact_rate(pipeline: Any, start: float, n: int, dtype: str = "float32", gate: str = "tanh",
               step_scale: str = "per-threshold", what: str = "both") -> float:
    """Fraction of the ``n`` grid points from ``start`` whose value (``what=values``), gradient
    (``grads``) or both match random targets (1e-20..1e20) bit for bit."""
    r = measure(start, n, DTYPES[dtype], gate, 0, step_scale)
    key = {"values": "exact_values", "grads": "exact_grads"}.get(what)
    return (r[key] if key else min(r["exact_values"], r["exact_grads"])) / n


@metric_check(params=NNonzeroParams)
def n_nonzero(pipeline: Any, n: int, dtype: str = "float32") -> float:
    """Non-zero weights and biases of the network for ``n`` grid points from 1.5 (tanh gate)."""
    return float(measure(1.5, n, DTYPES[dtype], "tanh", 0)["nonzero"])
