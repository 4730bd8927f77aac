"""Named property checks of FMRG (``/work/shared/methods/fmrg.md`` section 7), each with a negative control.

All deterministic in float64 on exact flow maps (closed form for one Gaussian, so no integrator tolerance
enters except where stated); none is statistical, so there is no false-fail rate beyond the stated numeric
tolerances. Example counts come from the active Hypothesis profile (the harness loads "ci").
"""
from __future__ import annotations

import math

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.contract import invariant
from zoo.common.gmm import GaussianMixture

from .model import ExactFlowMapModel
from .rewards import fmrg_j_limit_endpoint, gramian, lqr_endpoint
from .sampler import BestOfNSampler, DPSSampler, FlowMapSampler, FMRGSampler, backprojection_weight, time_grid

_S = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=12)
seeds = st.integers(0, 2**31 - 1)
coord = st.floats(-2.0, 2.0)
var = st.floats(0.05, 3.0)


def _gauss(mu, v) -> ExactFlowMapModel:
    return ExactFlowMapModel(GaussianMixture([1.0], [list(mu)], variances=[list(v)]))


def _mix() -> ExactFlowMapModel:
    return ExactFlowMapModel(GaussianMixture([0.6, 0.4], [[1.0, 0.0], [-1.0, 1.0]], variances=[0.2, 0.4]), rtol=1e-7, atol=1e-7)


def _noise(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


@invariant("zero-strength-is-unguided")
@_S
@given(st.integers(1, 4), st.sampled_from(["flow_map1", "flow_map2"]), st.sampled_from(["jac", "euc"]), st.booleans(), st.booleans(),
       st.floats(0.3, 4.0), seeds)
def zero_strength_is_unguided(N, mode, grad_mode, adam, normalize, shift, seed):
    """Reward strength 0 (step_size = 0, any n_opt, Adam or plain, normalised or not) gives the unguided flow-map
    sampler's samples bit for bit (torch.equal), on a 2-component mixture through the integrator. Negative control:
    step_size = 1e-6 is not bit-identical (the guidance path is live, so the equality is not vacuous)."""
    m = _mix()
    R = {"kind": "quadratic", "target": [0.3, 1.4], "tau": 0.5}
    x0 = _noise(3, seed)
    ref = FlowMapSampler({"flow_map": m}, FlowMapSampler.Params(num_steps=N, sample_mode=mode, shift=shift, reward=R))(noise=x0).samples
    kw = dict(num_steps=N, sample_mode=mode, shift=shift, reward=R, grad_mode=grad_mode, num_optim_iters=2, use_adam=adam, normalize_grad=normalize)
    off = FMRGSampler({"flow_map": m}, FMRGSampler.Params(step_size=0.0, **kw))(noise=x0).samples
    assert torch.equal(off, ref), float((off - ref).abs().max())
    on = FMRGSampler({"flow_map": m}, FMRGSampler.Params(step_size=1e-6, **kw))(noise=x0).samples
    assert not torch.equal(on, ref)


@invariant("reward-shift")
@_S
@given(st.integers(1, 5), st.sampled_from(["jac", "euc"]), st.floats(-50.0, 50.0), seeds)
def reward_shift(N, grad_mode, c, seed):
    """r + c gives the same samples bit for bit (only gradients enter); a constant reward equals unguided sampling.
    Negative control: 2 r (a different reward) changes the samples of plain, unnormalised ascent (with the authors'
    normalisation the gradient's scale is divided out, so 2 r and r coincide there by design)."""
    m = _gauss([0.5, -0.3], [0.3, 1.5])
    x0 = _noise(5, seed)
    base = dict(num_steps=N, grad_mode=grad_mode, step_size=0.5, num_optim_iters=2)
    run = lambda **r: FMRGSampler({"flow_map": m}, FMRGSampler.Params(reward=r, **base))(noise=x0).samples  # noqa: E731
    a = run(kind="quadratic", target=[1.0, 1.0], tau=0.7)
    assert torch.equal(a, run(kind="quadratic", target=[1.0, 1.0], tau=0.7, offset=c))
    doubled = FMRGSampler({"flow_map": m}, FMRGSampler.Params(reward=dict(kind="quadratic", target=[1.0, 1.0], tau=0.7, scale=2.0),
                                                             **{**base, "use_adam": False, "normalize_grad": False}))(noise=x0).samples
    plain = FMRGSampler({"flow_map": m}, FMRGSampler.Params(reward=dict(kind="quadratic", target=[1.0, 1.0], tau=0.7),
                                                           **{**base, "use_adam": False, "normalize_grad": False}))(noise=x0).samples
    assert not torch.equal(plain, doubled)
    const = FMRGSampler({"flow_map": m}, FMRGSampler.Params(reward={"kind": "constant", "offset": c}, **{**base, "normalize_grad": False}))(noise=x0).samples
    ref = FlowMapSampler({"flow_map": m}, FlowMapSampler.Params(num_steps=N))(noise=x0).samples
    assert torch.equal(const, ref)


@invariant("semigroup-endpoint")
@_S
@given(coord, coord, var, var, st.integers(1, 7), st.floats(0.3, 4.0), seeds)
def semigroup_endpoint(m1, m2, v1, v2, N, shift, seed):
    """Unguided flow_map2 ends at X_{0,1}(x_0) for any grid (semigroup; atol 1e-10, closed-form Gaussian maps);
    flow_map1 is exact for point-mass data (straight paths). Negative control: flow_map1 on a non-degenerate
    Gaussian with v != 1 misses X_{0,1}(x_0) by more than 1e-3 for N <= 7."""
    x0 = _noise(8, seed)
    m = _gauss([m1, m2], [v1, v2])
    end = m.gmm.means[0] + (x0 * torch.sqrt(torch.tensor([v1, v2], dtype=torch.float64)))
    fm2 = FlowMapSampler({"flow_map": m}, FlowMapSampler.Params(num_steps=N, shift=shift, sample_mode="flow_map2"))(noise=x0).samples
    assert torch.allclose(fm2, end, atol=1e-10, rtol=0), float((fm2 - end).abs().max())
    pm = _gauss([m1, m2], [0.0, 0.0])
    fm1 = FlowMapSampler({"flow_map": pm}, FlowMapSampler.Params(num_steps=N, shift=shift))(noise=x0).samples
    assert torch.allclose(fm1, pm.gmm.means[0].expand_as(fm1), atol=1e-10, rtol=0)
    if N > 1 and min(abs(v1 - 1), abs(v2 - 1)) > 0.3:
        bad = FlowMapSampler({"flow_map": m}, FlowMapSampler.Params(num_steps=N, shift=shift))(noise=x0).samples
        assert float((bad - end).abs().max()) > 1e-3


@invariant("backprojection-weight-shape")
@_S
@given(st.integers(2, 400), st.floats(0.3, 4.0))
def backprojection_weight_shape(N, shift):
    """w(t, t') = (1 - t) t' >= 0, equals the step Delta at the first (t = 0) and last (t' = 1) step; on a uniform
    fine grid (N >= 50) it peaks at 1/4 +- 1/N mid-trajectory. Negative control: the code's tau-convention formula
    read in the wrong convention, t (1 - t'), is 0 at both ends instead."""
    ts = time_grid(N, shift)
    w = [backprojection_weight(a, b) for a, b in zip(ts, ts[1:])]
    assert min(w) >= 0
    assert math.isclose(w[0], ts[1] - ts[0], abs_tol=1e-15) and math.isclose(w[-1], ts[-1] - ts[-2], abs_tol=1e-15)
    assert (ts[0] * (1 - ts[1])) == 0 and (ts[-2] * (1 - ts[-1])) == 0
    if N >= 50:
        wu = [backprojection_weight(a, b) for a, b in zip(time_grid(N), time_grid(N)[1:])]
        assert abs(max(wu) - 0.25) <= 1.0 / N


@invariant("gaussian-quadratic-closed-form")
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=6)
@given(coord, coord, var, var, coord, coord, st.floats(0.7, 2.0), st.floats(0.05, 0.6), seeds)
def gaussian_quadratic_closed_form(m1, m2, v1, v2, y1, y2, tau, eta, seed):
    """Data N(mu, diag v), reward -||x - y||^2 / (2 tau^2), FMRG-J with one plain gradient step of size eta per step
    (no normalisation, no Adam), flow_map2, N = 400 uniform steps: the endpoint matches the closed-form guided law
    y + (X_{0,1}(x_0) - y) exp(-eta G / tau^2), G = (pi/2) sqrt(v) (rewards module), within 0.5 % of
    |X_{0,1} - y| per coordinate (Euler error O(1/N): measured 0.07 % at N = 400, 0.5 % at N = 50), and the LQR optimum
    of the strength-eta problem (X_{0,1} + kappa y) / (1 + kappa), kappa = eta G / tau^2, within that plus kappa^2 / 2.
    Negative controls: the same law with the Jacobian dropped (G -> 1, what FMRG-E's Euclidean gradient would
    integrate) is off by more than the tolerance when G differs from 1 enough; G equals its quadrature."""
    v = torch.tensor([v1, v2], dtype=torch.float64)
    y = torch.tensor([y1, y2], dtype=torch.float64)
    m = _gauss([m1, m2], [v1, v2])
    x0 = _noise(8, seed)
    x1 = m.gmm.means[0] + x0 * v.sqrt()
    R = {"kind": "quadratic", "target": [y1, y2], "tau": tau}
    out = FMRGSampler({"flow_map": m}, FMRGSampler.Params(num_steps=400, sample_mode="flow_map2", grad_mode="jac", step_size=eta,
                                                         num_optim_iters=1, use_adam=False, normalize_grad=False, reward=R))(noise=x0).samples
    scale = (x1 - y).abs() + 1e-12
    law = fmrg_j_limit_endpoint(x1, v, y, tau, eta)
    assert float(((out - law).abs() / scale).max()) <= 0.005, float(((out - law).abs() / scale).max())
    kappa = eta * gramian(v) / tau**2
    lqr = lqr_endpoint(x1, v, y, tau / math.sqrt(eta))  # eta r is the quadratic reward of width tau / sqrt(eta)
    assert bool(((out - lqr).abs() <= (0.005 + kappa**2 / 2) * scale).all())
    tt = torch.linspace(0, 1, 20001, dtype=torch.float64)[:, None]
    quad = torch.trapezoid(v / ((1 - tt) ** 2 + tt**2 * v), tt[:, 0], dim=0)
    assert torch.allclose(quad, gramian(v), rtol=1e-6)
    wrong = y + (x1 - y) * math.exp(-eta / tau**2)
    gap = (gramian(v) - 1).abs() * eta / tau**2
    sel = gap > 0.2
    if bool(sel.any()):
        assert float(((out - wrong).abs() / scale)[:, sel].min()) > 0.005


class _Refuse:
    """A VP-only model (no two-time interface)."""

    dim = 2


@invariant("nfe-accounting")
@_S
@given(st.integers(1, 6), st.integers(0, 4), st.sampled_from(["flow_map1", "flow_map2"]), st.sampled_from(["jac", "euc"]), st.integers(1, 5))
def nfe_accounting(N, n_opt, mode, grad_mode, n_cand):
    """Calls counted on the model: guided flow_map1 = 1 per step, flow_map2 = 2 per step, FMRG-J adds n_opt - 1
    per step (its first ascent reuses the step's call); early_stop k + unguided_steps j = k guided steps plus j
    jumps of 1 call; DPS 1 per step; best-of-N = n_candidates x N per output. Negative control: a model without the
    two-time interface is refused with a one-line ParamError naming sample_mode."""
    m = _gauss([0.0, 0.0], [0.5, 2.0])
    x0 = _noise(3, 0)
    per = (1 if mode == "flow_map1" else 2) + (max(n_opt, 1) - 1 if grad_mode == "jac" else 0)
    P = FMRGSampler.Params
    assert FMRGSampler({"flow_map": m}, P(num_steps=N, sample_mode=mode, grad_mode=grad_mode, num_optim_iters=n_opt))(noise=x0).nfe == N * per
    k = N // 2
    out = FMRGSampler({"flow_map": m}, P(num_steps=N, sample_mode=mode, grad_mode=grad_mode, num_optim_iters=n_opt, early_stop=k, unguided_steps=2))(noise=x0)
    assert out.nfe == k * per + (2 if k < N else 0)
    assert DPSSampler({"flow_map": m}, DPSSampler.Params(num_steps=N))(noise=x0).nfe == N
    assert BestOfNSampler({"flow_map": m}, BestOfNSampler.Params(num_steps=N, n_candidates=n_cand, sample_mode=mode))(noise=x0).nfe == N * n_cand
    from registry.errors import ParamError

    try:
        FMRGSampler({"flow_map": _Refuse()}, P())
    except ParamError as exc:
        assert "two-time" in str(exc) and "sample_mode" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("a model without the two-time interface was accepted")
