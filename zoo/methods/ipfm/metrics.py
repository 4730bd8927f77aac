"""Metric checks of ``specs/ipfm.yaml``: ``fn(pipeline, **check_params) -> float``."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from .params import DistilledStatParams, ShippedStatParams

_RUNS: dict[tuple[int, str], Any] = {}


@metric_check(params=DistilledStatParams)
def distilled_stat(pipeline: Any, recipe: str = "ipfm", stat: str = "sw2") -> float:
    """Run ``recipe`` of the pipeline with seed 0 (its spec params) and return the trained one-step generator's final
    ``sw2`` or ``loglik`` (2000 evaluation samples, fixed z)."""
    key = (id(pipeline), recipe)  # both stats of one run share the (slow) training
    if key not in _RUNS:
        _RUNS.clear()
        _RUNS[key] = pipeline.procedures[recipe](seed=0, num_samples=16)
    return float(_RUNS[key][stat])


@metric_check(params=ShippedStatParams)
def shipped_stat(pipeline: Any, stat: str = "sw2", n: int = 2000) -> float:
    """``sw2`` / ``loglik`` of ``n`` one-step samples of the shipped generator (z seed 2, exact reference seed 1: the
    training run's own evaluation, so the number must equal the one ``zoo train ipfm`` printed)."""
    import torch

    from zoo.common.pfgmpp import quality

    teacher = pipeline.procedures["one-step"].models["teacher"]
    x = pipeline.procedures["one-step"](seed=2, num_samples=n).samples
    return float(quality(x, teacher, teacher.gmm.sample(n, torch.Generator().manual_seed(1)))[stat])
