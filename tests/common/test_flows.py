"""Exact rectified-flow and PFGM++ quantities of Gaussian mixtures."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from zoo.common.exact import check_ks, ks_pvalue
from zoo.common.flows import rf_flow_map, rf_velocity
from zoo.common.pfgmpp import gamma_sample, pfgmpp_denoise, pfgmpp_log_kernel, pfgmpp_noise, pfgmpp_radius_cdf
from zoo.common.gmm import GaussianMixture
from zoo.common.toys2d import random_rotated_mixtures

COV = [[[0.5, 0.2], [0.2, 0.3]]]


@given(st.floats(0.0, 0.95), st.floats(0.0, 1.0), st.integers(0, 1000))
@settings(max_examples=15, deadline=None)
def test_flow_map_matches_closed_form_for_one_gaussian(s, t, seed):
    """For one Gaussian, integrating the exact velocity (the mixture code path: two identical components)
    reproduces the closed-form flow map X_{s,t}(x) = t mu + U diag(S_t/S_s) U^T (x - s mu) to 1e-6."""
    one = GaussianMixture([1.0], [[1.0, -0.5]], covs=COV)
    two = GaussianMixture([0.5, 0.5], [[1.0, -0.5]] * 2, covs=COV * 2)
    x = torch.randn(8, 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    assert (rf_flow_map(one, x, s, t) - rf_flow_map(two, x, s, t)).abs().max() < 1e-6


def test_flow_map_transports_noise_to_data_and_composes():
    """X_{0,1} of N(0, I) samples is distributed as the data (KS per coordinate of a 1-D Gaussian); the
    flow map composes X_{0.6,1} o X_{0,0.6} = X_{0,1} for a mixture; X_{s,s} = id; velocity = d/dt X."""
    g = GaussianMixture([1.0], [[2.0]], variances=[0.25])
    z = torch.randn(4000, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert check_ks(rf_flow_map(g, z, 0.0, 1.0)[:, 0], "norm", args=(2.0, 0.5)).passed
    mix = random_rotated_mixtures(1, 2, 3, torch.Generator().manual_seed(3))[0]
    x = torch.randn(6, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    direct = rf_flow_map(mix, x, 0.0, 1.0)
    assert (rf_flow_map(mix, rf_flow_map(mix, x, 0.0, 0.6), 0.6, 1.0) - direct).abs().max() < 1e-6
    assert torch.equal(rf_flow_map(mix, x, 0.3, 0.3), x)
    h = 1e-5
    fd = (rf_flow_map(mix, x, 0.4, 0.4 + h) - rf_flow_map(mix, x, 0.4, 0.4 - h)) / (2 * h)
    assert (fd - rf_velocity(mix, x, 0.4)).abs().max() < 1e-6


def test_rf_velocity_at_t0_is_mean_minus_noise():
    """At t = 0, b_0(x) = E[x1] - x (x is the noise): mixture mean minus x."""
    mix = random_rotated_mixtures(1, 3, 4, torch.Generator().manual_seed(5))[0]
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    mean = (mix.log_weights.exp()[:, None] * mix.means).sum(0)
    assert torch.allclose(rf_velocity(mix, x, 0.0), mean[None] - x, atol=1e-12)


@pytest.mark.parametrize("D", [1, 4, 128, 1e6])
def test_pfgmpp_kernel_radius_law_by_ks(D):
    """The kernel radius ||x - y|| follows the analytic radial law p(R) ~ R^{N-1}(R^2 + r^2)^{-(N+D)/2}
    (CDF = regularised incomplete beta) by KS (p > 1e-3, N = 8); the CDF itself matches a numerical integral
    of the radial density; a sample scaled by 1.2 is rejected (negative control)."""
    from scipy.integrate import quad

    N, sigma = 8, 0.5
    n = pfgmpp_noise(5000, N, sigma, D, torch.Generator().manual_seed(int(D) % 1000))
    R = n.norm(dim=1)
    cdf = lambda r: pfgmpp_radius_cdf(r, N, sigma, D)  # noqa: E731
    assert ks_pvalue(R, cdf) > 1e-3
    assert ks_pvalue(R * 1.2, cdf) < 1e-6
    if D < 1e3:
        r2 = sigma**2 * D
        dens = lambda u: u ** (N - 1) * (1 + u * u / r2) ** (-(N + D) / 2)  # noqa: E731  (same law, rescaled)
        total = quad(dens, 0, math.inf, epsabs=0, epsrel=1e-12, limit=200)[0]
        assert quad(dens, 0, 1.3, epsabs=0, epsrel=1e-12, limit=200)[0] / total == pytest.approx(float(cdf(1.3)), rel=1e-7)


def test_pfgmpp_kernel_moments_and_direction():
    """E||n||^2 = N sigma^2 D/(D - 2) within 4 standard errors (D = 16); the mean direction is ~0."""
    N, sigma, D = 4, 1.3, 16
    n = pfgmpp_noise(40000, N, sigma, D, torch.Generator().manual_seed(0))
    sq = (n**2).sum(1)
    assert abs(float(sq.mean()) - N * sigma**2 * D / (D - 2)) < 4 * float(sq.std()) / 200
    u = n / n.norm(dim=1, keepdim=True)
    assert float(u.mean(0).abs().max()) < 4 / math.sqrt(40000)


def test_pfgmpp_log_kernel_is_student_t():
    """log p_r(x|y) equals scipy's multivariate_t logpdf (df = D, shape sigma^2 I)."""
    from scipy.stats import multivariate_t

    x = torch.randn(7, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.tensor([0.3, -1.0, 2.0], dtype=torch.float64)
    for D in (1, 5, 300):
        ref = multivariate_t(loc=y.numpy(), shape=0.49 * torch.eye(3).numpy(), df=D).logpdf(x.numpy())
        assert torch.allclose(pfgmpp_log_kernel(x, y, 0.7, D), torch.as_tensor(ref), atol=1e-10)


def test_gamma_sampler_law():
    """gamma_sample matches Gamma(a) by KS for a < 1 and a >= 1."""
    for a in (0.5, 3.0, 1024.0):
        x = gamma_sample(a, 4000, torch.Generator().manual_seed(1))
        assert ks_pvalue(x, "gamma", args=(a,)) > 1e-3


@pytest.mark.parametrize("D", [1, 4, 16, 128, 2048])
def test_pfgmpp_denoiser_exact_on_point_masses(D):
    """For zero-variance components the quadrature denoiser equals the closed-form Student-t softmax over
    the points (PFGM++ point-cloud posterior mean) to 1e-9, near and far from the data."""
    pts = torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, -1.0]], dtype=torch.float64)
    w = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    g = GaussianMixture(w, pts, variances=[0.0, 0.0, 0.0])
    x = torch.randn(100, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 4
    sig = 0.7
    lw = torch.log(w)[None] + pfgmpp_log_kernel(x[:, None, :], pts[None], sig, D)
    ref = (torch.softmax(lw, -1)[..., None] * pts[None]).sum(1)
    assert (pfgmpp_denoise(g, x, sig, D) - ref).abs().max() < 1e-9


def test_pfgmpp_denoiser_tends_to_gaussian_denoiser():
    """As D grows the PFGM++ denoiser of a full-covariance mixture tends to the Gaussian one (D = inf):
    error at D = 1e8 is below 1e-6 and below the error at D = 1e4."""
    mix = random_rotated_mixtures(1, 2, 3, torch.Generator().manual_seed(4))[0]
    x = torch.randn(50, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 2
    gauss = mix.denoise(x, 0.8)
    e4 = (pfgmpp_denoise(mix, x, 0.8, 1e4) - gauss).abs().max()
    e8 = (pfgmpp_denoise(mix, x, 0.8, 1e8) - gauss).abs().max()
    assert e8 < 1e-6 and e8 < e4
    assert torch.equal(pfgmpp_denoise(mix, x, 0.8, math.inf), gauss)
