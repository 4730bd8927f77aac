"""Metric checks of the ``fmrg`` toy variant: ``fn(pipeline) -> float``. They use their own exact models (the
benchmark's settings, ``zoo.methods.fmrg.benchmark``), so they re-measure the table's numbers."""
from __future__ import annotations

import math

import torch

from registry.contract import metric_check

from .benchmark import best_logp_at, sweep
from .model import ExactFlowMapModel
from .params import BenchStatParams, CeilingParams, ClosedFormErrorParams, LearnedGapParams, ParetoLogpParams
from .rewards import fmrg_j_limit_endpoint
from .sampler import FMRGSampler


@metric_check(params=ClosedFormErrorParams)
def closed_form_error(pipeline, num_steps: int = 400) -> float:
    """Max relative error (per coordinate, over 64 x_0, seed 1) of FMRG-J (one plain gradient step, eta 0.6, flow_map2)
    against its closed-form guided law on N((0.2, -0.4), diag(0.05, 3)), reward y = (1.5, -2), tau = 0.7."""
    from zoo.common.gmm import GaussianMixture

    v = torch.tensor([0.05, 3.0], dtype=torch.float64)
    y = torch.tensor([1.5, -2.0], dtype=torch.float64)
    m = ExactFlowMapModel(GaussianMixture([1.0], [[0.2, -0.4]], variances=[v.tolist()]))
    x0 = torch.randn(64, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    x1 = m.gmm.means[0] + x0 * v.sqrt()
    P = FMRGSampler.Params(num_steps=num_steps, sample_mode="flow_map2", grad_mode="jac", step_size=0.6, num_optim_iters=1, use_adam=False,
                           normalize_grad=False, reward={"kind": "quadratic", "target": y.tolist(), "tau": 0.7})
    out = FMRGSampler({"flow_map": m}, P)(noise=x0).samples
    return float(((out - fmrg_j_limit_endpoint(x1, v, y, 0.7, 0.6)).abs() / (x1 - y).abs()).max())


def _row(mixture: str, nfe: int, method: str, strength: float) -> dict:
    rows = sweep(mixture, [nfe], 256, 0)["rows"]
    for r in rows:
        if r["method"] == method and r["nfe"] == nfe and math.isclose(float(r["strength"]), strength):
            return r
    raise ValueError(f"no benchmark row {method} at NFE {nfe}, strength {strength}")


@metric_check(params=BenchStatParams)
def bench_stat(pipeline, mixture: str, nfe: int, method: str, strength: float, stat: str) -> float:
    """One cell of the benchmark table (256 particles, seed 0): ``stat`` in reward | log_p | dist_lqr."""
    return float(_row(mixture, nfe, method, strength)[stat])


@metric_check(params=ParetoLogpParams)
def pareto_logp(pipeline, mixture: str, nfe: int, method: str, min_reward: float = -2.0) -> float:
    """Best mean log p_data among the benchmark strengths of ``method`` at ``nfe`` whose mean reward is >= ``min_reward``."""
    v = best_logp_at(sweep(mixture, [nfe], 256, 0)["rows"], method, nfe, min_reward)
    if v is None:
        raise ValueError(f"{method} reaches no mean reward >= {min_reward} at NFE {nfe}")
    return v


_LEARNED: dict[tuple, dict] = {}


def _learned_result(pipeline, samples: int, grid: int, seeds: tuple[int, ...]) -> dict:
    """``zoo bench fmrg --learned`` (without the exact reference) on the pipeline's shipped seed-0 model and the
    other seeds retrained by the spec's recipe; cached per process."""
    key = (samples, grid, seeds)
    if key not in _LEARNED:
        from .learned_bench import run_learned
        from .params import TrainOptions
        from .train import train_pair

        params = dict(pipeline.ctx.spec.training["learned"].params)
        models = {s: pipeline.models["flow_map"] if s == 0 else train_pair(s, TrainOptions(**{**params, "progress": False}))[0] for s in seeds}
        _LEARNED[key] = run_learned(models, samples, grid, exact=None, progress=False)
    return _LEARNED[key]


@metric_check(params=LearnedGapParams)
def learned_gap(pipeline, reward: str, stat: str = "g_mean", arm: str | None = None, samples: int = 4096, grid: int = 13,
                seeds: list[int] = (0, 1, 2)) -> float:
    """The learned-model comparison (variant ``learned``): ``g_mean`` / ``g_sd`` of the paired gap g = best FMRG
    (J or E) - DPS in best mean log p at mean reward >= -2 (NFE 4) over the training seeds, or ``arm_mean`` =
    that summary of ``arm`` averaged over the seeds."""
    c = _learned_result(pipeline, samples, grid, tuple(seeds))["compare"][reward]
    if stat == "g_mean":
        return float(c["g_mean"])
    if stat == "g_sd":
        return float(c["g_sd"])
    vals = [s[arm] for s in c["summary"].values()]
    if any(v is None for v in vals):
        raise ValueError(f"{arm} reaches no mean reward >= -2 on some seed")
    return sum(vals) / len(vals)


@metric_check(params=CeilingParams)
def ceiling(pipeline, t: float, stat: str, n: int = 2048) -> float:
    """One ceiling of the shipped learned model (seed 0) at time ``t``: ``a_tweedie_err`` (learned vs exact Tweedie
    endpoint), ``b_fmap_vs_exact`` (learned flow map vs the exact flow endpoint), ... (``learned_bench.ceilings``)."""
    from .learned_bench import ceilings

    return float(ceilings(pipeline.models["flow_map"], n=n, ts=[t])[0][stat])
