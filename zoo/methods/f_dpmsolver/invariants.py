"""Named property checks of F-DPMSolver (``/work/shared/methods/f-dpmsolver.md`` section 7).

All run in float64 on the exact Gaussian-mixture testbed (``zoo.common.gmm``); none is statistical
(every quantity is deterministic given the drawn example), so there is no false-fail rate beyond
the stated numeric tolerances. Convergence checks use the paper's EDM grid (Karras sigma 80 -> 0.002,
rho 7) and the closed-form single-Gaussian PF-ODE as the reference.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.contract import invariant
from zoo.common.gmm import AnalyticDiffusionModel, GaussianMixture

from .scheduler import FDPMSolverScheduler, _to_eps_x0, fdpm_sample, lookahead_predict, lookahead_weights, phi

# example counts come from the active Hypothesis profile (the harness loads "ci" = 20, "nightly" = 400)
_FAST = _SLOWER = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

means2 = st.lists(st.floats(-3.0, 3.0), min_size=2, max_size=2)
seeds = st.integers(0, 2**31 - 1)


def _karras(N: int) -> FDPMSolverScheduler:
    sch = FDPMSolverScheduler(use_karras_sigmas=True, sigma_min=0.002, sigma_max=80.0)
    sch.set_timesteps(N)
    return sch


def _xT(n: int, d: int, seed: int) -> torch.Tensor:
    return torch.randn(n, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def _eps_fn(g: GaussianMixture, alphas: list[float], prediction_type: str = "epsilon"):
    return lambda x, k: g.predict_vp(x, alphas[k] ** 2, prediction_type)


def ddim_direct(model_fn, x_T: torch.Tensor, alphas: list[float], sigmas: list[float]) -> torch.Tensor:
    """DDIM (eta = 0, Song et al. 2010.02502 eq. 12) on the same grid: x0 and eps frozen at the left end."""
    x = x_T
    for k in range(len(alphas) - 1):
        eps = model_fn(x, k)
        x0 = (x - sigmas[k] * eps) / alphas[k]
        x = alphas[k + 1] * x0 + sigmas[k + 1] * eps
    return x


def _exact_vp(g: GaussianMixture, x_T: torch.Tensor, sch: FDPMSolverScheduler) -> torch.Tensor:
    a, sig = sch.grid_alphas, sch.grid_sigmas
    return g.exact_ode(x_T / a[0], float(sig[0]), float(sig[-1])) * a[-1]


def _errors(g: GaussianMixture, N: int, x_T: torch.Tensor) -> dict[str, torch.Tensor]:
    sch = _karras(N)
    a, s = sch.grid_alphas, sch.grid_vp_sigmas
    f = _eps_fn(g, a)
    ddim = ddim_direct(f, x_T, a, s)
    fddim = fdpm_sample(f, x_T, a, s, order=1)
    ref = _exact_vp(g, x_T, sch)
    return {"ddim": ddim - ref, "fddim": fddim - ref, "avg": 0.5 * (ddim + fddim) - ref, "ref": ref, "ddim_x": ddim, "fddim_x": fddim}


@invariant("point-mass-exact")
@_FAST
@given(means2, st.integers(1, 25), st.sampled_from(["approx", "evaluate"]), st.integers(1, 3), seeds)
def point_mass_exact(mu, N, first_eps, order, seed):
    """Point-mass data (D(x; sigma) = mu): F-DPMSolver (any order, both first-eps modes), DDIM and the exact
    ODE coincide for every N >= 1 (tolerance 1e-10 in float64); the F-DDIM e_0 = x_T approximation is harmless
    because x0hat = mu whatever the look-ahead point."""
    g = GaussianMixture([1.0], [mu], variances=[0.0])
    sch = _karras(N)
    a, s = sch.grid_alphas, sch.grid_vp_sigmas
    x_T = _xT(16, 2, seed)
    ref = _exact_vp(g, x_T, sch)
    f = _eps_fn(g, a)
    fd = fdpm_sample(f, x_T, a, s, order=order, first_eps=first_eps)
    dd = ddim_direct(f, x_T, a, s)
    assert torch.allclose(fd, ref, atol=1e-10, rtol=0), float((fd - ref).abs().max())
    assert torch.allclose(dd, ref, atol=1e-10, rtol=0), float((dd - ref).abs().max())


@invariant("first-order-convergence")
@_SLOWER
@given(means2, st.floats(0.05, 4.0), seeds)
def first_order_convergence(mu, s2, seed):
    """DDIM and F-DDIM are first order: on N(mu, s2 I) with the closed-form reference, the mean path error
    ratio err(2N)/err(N) lies in [0.4, 0.65] for N = 40 -> 80 -> 160 (measured 0.50-0.60)."""
    g = GaussianMixture([1.0], [mu], variances=[s2])
    x_T = _xT(64, 2, seed)
    errs = [_errors(g, N, x_T) for N in (40, 80, 160)]
    for key in ("ddim", "fddim"):
        e = [float(r[key].norm(dim=1).mean()) for r in errs]
        for lo, hi in zip(e, e[1:]):
            assert 0.4 <= hi / lo <= 0.65, (key, e)


@invariant("opposite-sign-leading-errors")
@_SLOWER
@given(means2, st.floats(0.05, 4.0), seeds)
def opposite_sign_leading_errors(mu, s2, seed):
    """The leading errors of DDIM and F-DDIM have opposite signs: for N >= 40 the mean signed radial error
    (||x - mu|| of the sampler minus that of the exact ODE) is negative for DDIM (under-dispersed) and
    positive for F-DDIM (over-dispersed), for s2 in [0.05, 4] (checked below and above 1)."""
    g = GaussianMixture([1.0], [mu], variances=[s2])
    x_T = _xT(64, 2, seed)
    for N in (40, 80):
        r = _errors(g, N, x_T)
        m = g.means[0] * _karras(N).grid_alphas[-1]
        rad = lambda x: float(((x - m).norm(dim=1) - (r["ref"] - m).norm(dim=1)).mean())  # noqa: E731
        assert rad(r["ddim_x"]) < 0 < rad(r["fddim_x"]), (N, rad(r["ddim_x"]), rad(r["fddim_x"]))


@invariant("half-sum-second-order")
@_SLOWER
@given(means2, st.floats(0.05, 4.0), seeds)
def half_sum_second_order(mu, s2, seed):
    """Because the leading errors cancel, (DDIM + F-DDIM) / 2 is second order: err(2N)/err(N) <= 0.35 for
    N = 40 -> 80 -> 160 (measured 0.26), while each alone is first order (~0.5)."""
    g = GaussianMixture([1.0], [mu], variances=[s2])
    x_T = _xT(64, 2, seed)
    e = [float(_errors(g, N, x_T)["avg"].norm(dim=1).mean()) for N in (40, 80, 160)]
    for lo, hi in zip(e, e[1:]):
        assert hi / lo <= 0.35, e


@invariant("order1-predictor-is-ddim")
@_FAST
@given(st.floats(0.01, 0.99), st.floats(0.01, 0.99), st.integers(0, 4), st.floats(0.01, 3.0), seeds)
def order1_predictor_is_ddim(ab_k, frac, j, h, seed):
    """The order-1 look-ahead equals one DDIM step with the supplied eps; phi_j(h) equals the quadrature of
    int_0^h e^{-u} u^j du (rel. 1e-8); a one-node Vandermonde fit is the identity (weight phi_0(h))."""
    ab_next = ab_k + (1 - ab_k) * frac  # less noise at the next point
    ak, sk, an, sn = math.sqrt(ab_k), math.sqrt(1 - ab_k), math.sqrt(ab_next), math.sqrt(1 - ab_next)
    lk, ln = math.log(ak / sk), math.log(an / sn)
    x = _xT(8, 3, seed)
    eps = _xT(8, 3, seed + 1)
    pred = lookahead_predict(x, [eps], [lk], ak, an, lk, ln)
    ddim = an * (x - sk * eps) / ak + sn * eps
    assert torch.allclose(pred, ddim, atol=1e-12, rtol=1e-10)
    u = np.linspace(0.0, h, 20001)
    quad = np.trapezoid(np.exp(-u) * u**j, u)
    assert abs(phi(j, h) - quad) <= 1e-8 * max(1.0, abs(quad)) + 1e-12
    assert lookahead_weights([lk], lk, h) == [phi(0, h)]


class CountingModel:
    """A model that records every call (timestep and input) and returns the exact eps of a mixture."""

    def __init__(self, g: GaussianMixture, sch: FDPMSolverScheduler):
        self.g, self.sch, self.calls = g, sch, []

    def __call__(self, x, t):
        self.calls.append(t)
        j = int((self.sch.grid_timesteps == t).nonzero()[0])
        from types import SimpleNamespace

        return SimpleNamespace(sample=self.g.predict_vp(x, self.sch.grid_alphas[j] ** 2))


def pipeline_loop(sch, model, x_T: torch.Tensor, N: int, **set_kw) -> torch.Tensor:
    """The diffusers pipeline loop (scale_model_input, model, step)."""
    sch.set_timesteps(N, **set_kw)
    x = x_T
    for t in sch.timesteps:
        out = model(sch.scale_model_input(x, t), t).sample
        x = sch.step(out, t, x).prev_sample
    return x


@invariant("nfe-accounting")
@_FAST
@given(st.integers(1, 30), st.sampled_from(["approx", "mean", "evaluate"]), st.booleans(), seeds)
def nfe_accounting(N, first_eps, karras, seed):
    """A counting model is called exactly N times, at t_1 ... t_N (never t_0), with first_eps="approx" or "mean", and
    N + 1 times at t_0 ... t_N with "evaluate" - inside the diffusers pipeline loop."""
    g = GaussianMixture([1.0], [[0.5, -0.5]], variances=[0.3])
    sch = FDPMSolverScheduler(first_eps=first_eps, use_karras_sigmas=karras)
    sch.set_timesteps(N)
    model = CountingModel(g, sch)
    pipeline_loop(sch, model, _xT(4, 2, seed), N)
    grid = [float(t) for t in sch.grid_timesteps]
    called = [float(t) for t in model.calls]
    assert called == (grid if first_eps == "evaluate" else grid[1:]), (called, grid)


@invariant("scheduler-matches-direct-loop")
@_FAST
@given(st.integers(1, 20), st.integers(1, 3), st.sampled_from(["approx", "mean", "evaluate"]), st.booleans(), seeds)
def scheduler_matches_direct_loop(N, order, first_eps, karras, seed):
    """The diffusers-protocol scheduler (state kept inside, look-ahead returned as prev_sample) produces the
    same x_N as the direct F-DPMSolver loop of the method note (atol 1e-12, float64), for orders 1-3."""
    g = GaussianMixture([0.6, 0.4], [[1.0, 0.0], [-1.0, 1.0]], variances=[0.2, 0.4])
    mean = [0.2, 0.4]
    sch = FDPMSolverScheduler(first_eps=first_eps, use_karras_sigmas=karras, solver_order=order, data_mean=mean)
    sch.set_timesteps(N)
    x_T = _xT(6, 2, seed)
    a, s = sch.grid_alphas, sch.grid_vp_sigmas
    direct = fdpm_sample(_eps_fn(g, a), x_T, a, s, order=order, first_eps=first_eps, data_mean=mean)
    via = pipeline_loop(sch, CountingModel(g, sch), x_T, N)
    assert torch.allclose(via, direct, atol=1e-12, rtol=0), float((via - direct).abs().max())


@invariant("batch-independence")
@_FAST
@given(st.integers(1, 12), st.integers(1, 2), seeds)
def batch_independence(N, order, seed):
    """Row i of the output depends only on row i of x_T: permuting the batch permutes the outputs
    (tolerance 1e-12, float64), in the pipeline loop with the analytic diffusers model."""
    m = AnalyticDiffusionModel(weights=[0.5, 0.5], means=[[1.0, 1.0], [-1.0, 0.0]], variances=[0.3, 0.1])
    x_T = _xT(7, 2, seed)
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(seed))
    out = pipeline_loop(FDPMSolverScheduler(solver_order=order), m, x_T, N)
    out_p = pipeline_loop(FDPMSolverScheduler(solver_order=order), m, x_T[perm], N)
    assert torch.allclose(out[perm], out_p, atol=1e-12, rtol=0)


@invariant("seeded-determinism")
@_FAST
@given(st.integers(1, 12), st.sampled_from([torch.float32, torch.float64]), seeds)
def seeded_determinism(N, dtype, seed):
    """Same x_T (same seed) -> bitwise-identical output on a reused scheduler, and the dtype is preserved."""
    m = AnalyticDiffusionModel(weights=[1.0], means=[[0.3, -0.2]], variances=[0.5])
    sch = FDPMSolverScheduler()
    x_T = _xT(5, 2, seed).to(dtype)
    first = pipeline_loop(sch, m, x_T, N)
    second = pipeline_loop(sch, m, x_T, N)
    assert first.dtype == dtype
    assert torch.equal(first, second)


@invariant("prediction-type-equivalence")
@_FAST
@given(st.integers(1, 12), st.integers(1, 2), seeds)
def prediction_type_equivalence(N, order, seed):
    """The same analytic model parameterised as eps, x0 ("sample") or v gives identical samples (1e-10)."""
    outs = []
    for pt in ("epsilon", "sample", "v_prediction"):
        m = AnalyticDiffusionModel(weights=[0.7, 0.3], means=[[1.0, 0.0], [-1.0, 1.0]], variances=[0.2, 0.3], prediction_type=pt)
        sch = FDPMSolverScheduler(prediction_type=pt, solver_order=order)
        outs.append(pipeline_loop(sch, m, _xT(5, 2, seed), N))
    for o in outs[1:]:
        assert torch.allclose(o, outs[0], atol=1e-10, rtol=0), float((o - outs[0]).abs().max())


@invariant("rectified-flow-euler")
@_FAST
@given(st.integers(1, 20), means2, st.floats(0.05, 2.0), seeds)
def rectified_flow_euler(N, mu, s2, seed):
    """With alpha = 1 - sigma (rectified flow) the order-1 update equals the Euler step
    x_{k+1} = x_k + (sigma_{k+1} - sigma_k)(x_k - x0hat)/sigma_k with x0hat from the look-ahead point
    (direct implementation below; atol 1e-10)."""
    g = GaussianMixture([1.0], [mu], variances=[s2])
    sig = list(np.linspace(0.999, 0.02, N + 1))
    alp = [1 - s for s in sig]

    def x0_of(x, k):  # exact E[x0 | x_t] for x_t = (1 - s) x0 + s eps  (EDM sigma = s / (1 - s))
        return g.denoise(x / alp[k], sig[k] / alp[k])

    def eps_fn(x, k):
        return (x - alp[k] * x0_of(x, k)) / sig[k]

    x_T = _xT(6, 2, seed)
    got = fdpm_sample(eps_fn, x_T, alp, sig, order=1)
    x, e = x_T, x_T  # e_0 := x_T
    for k in range(N):
        xhat = alp[k + 1] * (x - sig[k] * e) / alp[k] + sig[k + 1] * e  # order-1 look-ahead (a DDIM step)
        e, x0 = _to_eps_x0(eps_fn(xhat, k + 1), xhat, alp[k + 1], sig[k + 1], "epsilon")
        x = x + (sig[k + 1] - sig[k]) * (x - x0) / sig[k]
    assert torch.allclose(got, x, atol=1e-10, rtol=0), float((got - x).abs().max())
