"""Metric checks for ``specs/asgd-stability.yaml``: ``fn(pipeline, **check_params) -> float``.

Each re-runs one recipe of the spec with its own parameters (20 seeds x 4 replaced indices,
seed 0), exactly what ``zoo bench asgd-stability`` reports."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from .params import MIndependentParams, RateConsistentParams, SlopeParams, StabilityRatioParams


def _run(pipeline: Any, recipe: str) -> dict:
    return pipeline.procedures[recipe](seed=0)


@metric_check(params=SlopeParams)
def slope(pipeline: Any, recipe: str) -> float:
    """Least-squares slope of log ε against log N (or log m) of ``recipe``."""
    return float(_run(pipeline, recipe)["slope"])


@metric_check(params=RateConsistentParams)
def rate_consistent(pipeline: Any, recipe: str) -> float:
    """1.0 if ε = O(1/sqrt(mn)) is consistent with ``recipe``'s sweep (slope <= -1/2 + 2.326 s.e.,
    a 1% false-fail rate when the true slope is exactly -1/2), else 0.0."""
    return float(_run(pipeline, recipe)["rate_consistent"])


@metric_check(params=MIndependentParams)
def m_independent(pipeline: Any, recipe: str) -> float:
    """1.0 if ε at fixed N = mn does not depend on m (|slope vs m| <= 2.576 s.e.: 1% false-fail
    rate when it does not), else 0.0."""
    return float(_run(pipeline, recipe)["m_independent"])


@metric_check(params=StabilityRatioParams)
def stability_ratio(pipeline: Any, recipe: str, num: int, den: int) -> float:
    """ε of row ``num`` over ε of row ``den`` of ``recipe`` (e.g. delay 16 vs none)."""
    rows = _run(pipeline, recipe)["rows"]
    return rows[num]["stability"] / rows[den]["stability"]
