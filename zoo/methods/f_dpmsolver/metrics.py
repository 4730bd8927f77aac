"""Cheap metric checks of the ``f-dpmsolver`` toy variant: ``fn(pipeline) -> float``.

All use the fixed evaluation set of :mod:`zoo.common.scheduler_report` (256 rows of x_T,
seed 2026) and the exact PF-ODE of the toy mixture; they run in about a second.
"""
from __future__ import annotations

from registry.contract import metric_check

from zoo.common.scheduler_report import CHECK_ROWS, CHECK_SEED, as_procedure, evaluate, toy_nfe, toy_path_error
from zoo.common.scheduler_samplers import DDIMSampler

from .params import BenchRatioParams, DigitsRatioParams

__all__ = ["toy_path_error", "toy_nfe", "ddim_over_fddim", "bench_ratio", "digits_ratio"]


@metric_check
def ddim_over_fddim(pipeline) -> float:
    """Median path error of diffusers' DDIM divided by F-DPMSolver's, at the pipeline's step count, on the
    same mixture and the same x_T (> 1 means F-DPMSolver is more accurate at equal NFE)."""
    proc = as_procedure(pipeline)
    ddim = DDIMSampler(proc.models, DDIMSampler.Params(num_inference_steps=proc.params.num_inference_steps))
    x_T = proc.draw_noise(CHECK_ROWS, CHECK_SEED)
    return evaluate(ddim, x_T)["path_err_median"] / evaluate(proc, x_T)["path_err_median"]


@metric_check(params=BenchRatioParams)
def bench_ratio(pipeline, grid: str, mixture: str, nfe: int, sampler: str = "F-DDIM") -> float:
    """Slow check: DDIM / ``sampler`` median path error on the ``grid`` (vp | edm) grid, ``mixture``
    (gaussian | gaussian-centred | gmm3), at ``nfe`` model calls, 1000 x_T (seed 0), as in ``zoo bench f-dpmsolver``
    (ignores the pipeline's own params). On the EDM grid DDIM runs on F-DDIM's own N + 1 points (authors' protocol)."""
    from .bench import compare

    r = compare(grid, mixture, nfe)
    return r["DDIM"]["path_err"] / r[sampler]["path_err"]


@metric_check(params=DigitsRatioParams)
def digits_ratio(pipeline, nfe: int, sampler: str = "F-DDIM") -> float:
    """Slow check (~50 s): on the digits UNet, DDIM / ``sampler`` median path error at ``nfe`` against the
    high-accuracy PF-ODE solution of the learned model (64 x_T, seed 0; all end at sigma(t=0))."""
    from .bench import digits_compare

    r = digits_compare(as_procedure(pipeline).model, [nfe])[nfe]
    return r["DDIM"] / r[sampler]
