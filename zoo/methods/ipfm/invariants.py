"""Named property checks of the ``ipfm`` spec (``/work/shared/methods/ipfm.md`` section 7, items 5-7).

The Pythagoras check is statistical (its false-fail rate is stated); the loss algebra is exact up to float64 rounding.
"""
from __future__ import annotations

import math

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.contract import invariant
from zoo.common.gmm import GaussianMixture, build_mixture
from zoo.common.pfgmpp import pfgmpp_denoise, pfgmpp_noise

from .losses import ipfm_loss, sid_loss

_S = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**31 - 1)


@invariant("ipfm-loss-is-twice-sid-at-alpha-half")
@settings(_S, max_examples=30)
@given(st.integers(1, 16), st.integers(1, 64), st.floats(1e-3, 1e3), seeds)
def ipfm_twice_sid(batch: int, dim: int, scale: float, seed: int) -> None:
    """Pointwise algebra: ||a - y||^2 - ||b - y||^2 = 2 [(a - b)^T (a - y) - 1/2 ||a - b||^2], so the per-sample IPFM loss
    equals 2 x SiD(alpha = 1/2) for arbitrary tensors (float64, relative error <= 1e-10 of the terms' scale);
    negative controls: SiD's default alpha = 1.2 and alpha = 1 differ from IPFM / 2 (by (alpha - 1/2) ||a - b||^2)."""
    g = torch.Generator().manual_seed(seed)
    a, b, y = (scale * torch.randn(batch, dim, dtype=torch.float64, generator=g) for _ in range(3))
    lhs, rhs = ipfm_loss(a, b, y), 2 * sid_loss(a, b, y, 0.5)
    tol = 1e-10 * (scale**2) * dim
    assert (lhs - rhs).abs().max() <= tol, (lhs - rhs).abs().max()
    for alpha in (1.0, 1.2):
        gap = 2 * sid_loss(a, b, y, alpha) - lhs
        expected = -2 * (alpha - 0.5) * ((a - b) ** 2).sum(1)
        assert (gap - expected).abs().max() <= tol
        assert (gap.abs() > tol).all()


def _shifted(gmm: GaussianMixture, shrink: float) -> GaussianMixture:
    return GaussianMixture(gmm.log_weights.exp(), gmm.means * shrink, variances=gmm.evals * shrink**2)


@invariant("pythagoras-ipfm-loss-equals-field-mismatch")
@settings(_S, max_examples=4)
@given(st.sampled_from([3.0, 4.0, 16.0, math.inf]), st.floats(0.3, 2.0), st.floats(0.5, 0.9), seeds)
def pythagoras(D: float, sigma: float, shrink: float, seed: int) -> None:
    """With the *exact* fake field f_psi* of a known generator law q (gmm3 shrunk by ``shrink``), the IPFM loss has the
    same expectation as the squared field mismatch: E[||f_phi - y||^2 - ||f_psi* - y||^2] = E||f_phi - f_psi*||^2 for
    y ~ q, x = y + PFGM++ noise. The per-sample difference 2 (f_phi - f_psi*)^T (f_psi* - y) has mean 0; its 8000-sample
    mean is within 5 s.e. of 0 (false-fail rate 6e-7 per example). When q is the data law the loss is identically 0.
    Negative control: a *mis-specified* fake field (the fake of a law shrunk by a further 0.8) leaves a mean more than
    5 s.e. away from 0."""
    data = build_mixture("gmm3")
    q = _shifted(data, shrink)
    g = torch.Generator().manual_seed(seed)
    y = q.sample(8000, g)
    x = y + pfgmpp_noise(8000, 2, sigma, D, g)
    f_t = pfgmpp_denoise(data, x, sigma, D, nodes=101)
    f_f = pfgmpp_denoise(q, x, sigma, D, nodes=101)
    diff = ipfm_loss(f_t, f_f, y) - ((f_t - f_f) ** 2).sum(1)
    se = diff.std() / math.sqrt(diff.numel())
    assert diff.mean().abs() <= 5 * se, (float(diff.mean()), float(se))
    assert ipfm_loss(f_t, f_t, y).abs().max() == 0.0
    wrong = pfgmpp_denoise(_shifted(data, shrink * 0.8), x, sigma, D, nodes=101)
    dw = ipfm_loss(f_t, wrong, y) - ((f_t - wrong) ** 2).sum(1)
    assert dw.mean().abs() > 5 * dw.std() / math.sqrt(dw.numel())
