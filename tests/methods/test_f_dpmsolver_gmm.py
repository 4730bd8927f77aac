"""The exact Gaussian-mixture testbed (zoo.common.gmm): every closed form against an independent route."""
from __future__ import annotations

import math

import pytest
import torch

from zoo.common.gmm import AnalyticDiffusionModel, GaussianMixture, VPSchedule, analytic_model, sliced_wasserstein2


def random_mixture(K=3, d=3, seed=0, full=True) -> GaussianMixture:
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(K, d, generator=g, dtype=torch.float64) * 2
    w = torch.rand(K, generator=g, dtype=torch.float64) + 0.2
    if full:
        A = torch.randn(K, d, d, generator=g, dtype=torch.float64) * 0.5
        covs = A @ A.transpose(-1, -2) + 0.05 * torch.eye(d, dtype=torch.float64)
        return GaussianMixture(w, means, covs=covs)
    return GaussianMixture(w, means, variances=torch.rand(K, d, generator=g, dtype=torch.float64) + 0.1)


@pytest.mark.parametrize("full", [True, False])
def test_score_is_the_gradient_of_log_prob_and_tweedie_holds(full):
    gmm = random_mixture(full=full)
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    for sigma in (0.0, 0.3, 2.0, 50.0):
        (grad,) = torch.autograd.grad(gmm.log_prob(x, sigma).sum(), x)
        assert torch.allclose(gmm.score(x.detach(), sigma), grad, atol=1e-10)
        if sigma > 0:  # Tweedie: D = x + sigma^2 grad log p_sigma
            assert torch.allclose(gmm.denoise(x.detach(), sigma), x.detach() + sigma**2 * grad, atol=1e-9)


def test_denoiser_matches_the_matrix_formula_with_full_covariances():
    gmm = random_mixture(full=True)
    x = torch.randn(5, 3, dtype=torch.float64)
    sigma = 0.7
    covs = gmm.covariances()
    C = covs + sigma**2 * torch.eye(3, dtype=torch.float64)
    logn = torch.stack([torch.distributions.MultivariateNormal(gmm.means[k], C[k]).log_prob(x) for k in range(3)], 1)
    w = torch.softmax(gmm.log_weights + logn, 1)
    post = torch.stack([gmm.means[k] + (covs[k] @ torch.linalg.solve(C[k], (x - gmm.means[k]).T)).T for k in range(3)], 1)
    assert torch.allclose(gmm.denoise(x, sigma), (w[..., None] * post).sum(1), atol=1e-12)


def test_exact_ode_integrator_matches_the_single_gaussian_closed_form():
    """A 2-component mixture of two identical anisotropic Gaussians is a single Gaussian, but takes the
    Dormand-Prince path; it must match the closed form to 1e-8 over sigma 80 -> 0.002."""
    A = torch.tensor([[1.0, 0.3], [0.3, 0.4]], dtype=torch.float64)
    one = GaussianMixture([1.0], [[1.0, -0.5]], covs=A[None])
    two = GaussianMixture([0.5, 0.5], [[1.0, -0.5], [1.0, -0.5]], covs=torch.stack([A, A]))
    assert one.is_single_gaussian and not two.is_single_gaussian
    x = torch.randn(20, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 80
    assert torch.allclose(two.exact_ode(x, 80.0, 0.002), one.exact_ode(x, 80.0, 0.002), atol=1e-8)
    assert torch.allclose(two.exact_ode(x, 80.0, 0.0), one.exact_ode(x, 80.0, 0.0), atol=1e-8)


def test_exact_ode_round_trip():
    gmm = random_mixture(K=3, d=2, seed=1, full=True)
    x = torch.randn(10, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 5
    y = gmm.exact_ode(x, 5.0, 0.05)
    assert torch.allclose(gmm.exact_ode(y, 0.05, 5.0), x, atol=1e-7)


def test_vp_predictions_are_consistent():
    gmm = random_mixture(d=2, full=False)
    x = torch.randn(4, 2, dtype=torch.float64)
    ab = torch.tensor([0.01, 0.3, 0.7, 0.99], dtype=torch.float64)
    a, s = ab.sqrt()[:, None], (1 - ab).sqrt()[:, None]
    eps, x0, v = (gmm.predict_vp(x, ab, p) for p in ("epsilon", "sample", "v_prediction"))
    assert torch.allclose(a * x0 + s * eps, x, atol=1e-12)
    assert torch.allclose(v, a * eps - s * x0, atol=1e-12)
    assert torch.allclose(x0, gmm.denoise(x / a, (s / a)[:, 0]), atol=1e-12)


def test_vp_schedule_matches_diffusers_and_the_scheduler_time_map():
    from diffusers import DDIMScheduler

    from zoo.methods.f_dpmsolver import FDPMSolverScheduler

    sch = VPSchedule.from_betas()
    assert torch.allclose(sch.alpha_bar(torch.arange(1000.0)).float(), DDIMScheduler().alphas_cumprod, atol=1e-6)
    f = FDPMSolverScheduler()
    t = torch.tensor([0.3, 17.5, 500.25, 998.9], dtype=torch.float64)
    sigma = ((1 - sch.alpha_bar(t)) / sch.alpha_bar(t)).sqrt().numpy()
    assert torch.allclose(torch.from_numpy(f._sigma_to_t(sigma)), t, atol=1e-9)


def test_samples_have_the_mixture_moments():
    """Statistical: mean of 20000 exact samples within 5 standard errors (false-fail rate < 1e-5 per coordinate)."""
    gmm = random_mixture(d=2, seed=3)
    x = gmm.sample(20000, generator=torch.Generator().manual_seed(0))
    w = gmm.log_weights.exp()
    mean = (w[:, None] * gmm.means).sum(0)
    cov = (w[:, None, None] * (gmm.covariances() + gmm.means[:, :, None] * gmm.means[:, None, :])).sum(0) - mean[:, None] * mean[None]
    se = (cov.diagonal() / 20000).sqrt()
    assert ((x.mean(0) - mean).abs() < 5 * se).all()


def test_sliced_wasserstein_of_a_translation_is_exact():
    """For a translation by delta, every sorted projection shifts by <delta, theta>, so SW2 = rms(<delta, theta>)."""
    x = torch.randn(500, 3, dtype=torch.float64)
    delta = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    assert sliced_wasserstein2(x, x) == 0.0
    g = torch.Generator().manual_seed(5)
    dirs = torch.randn(128, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    dirs = dirs / dirs.norm(dim=1, keepdim=True)
    expected = float(((dirs @ delta) ** 2).mean().sqrt())
    assert math.isclose(sliced_wasserstein2(x + delta, x, generator=g), expected, rel_tol=1e-10)


def test_analytic_model_is_a_diffusers_model(tmp_path):
    m = analytic_model("gmm3", prediction_type="v_prediction")
    assert m.dtype == torch.float64
    out = m(torch.randn(3, 2, dtype=torch.float64), torch.tensor([10, 500, 999])).sample
    assert out.shape == (3, 2) and len(m.call_log) == 1
    m.save_pretrained(tmp_path)
    again = AnalyticDiffusionModel.from_pretrained(tmp_path)
    x = torch.randn(2, 2, dtype=torch.float64)
    assert torch.allclose(again.to(torch.float64)(x, 300).sample, m(x, 300).sample, atol=1e-12)


def test_rejects_bad_mixtures():
    with pytest.raises(ValueError):
        GaussianMixture([1.0], [[0.0, 0.0]])
    with pytest.raises(ValueError):
        GaussianMixture([1.0, -1.0], [[0.0], [1.0]], variances=[1.0, 1.0])
    with pytest.raises(ValueError):
        analytic_model("nope")
