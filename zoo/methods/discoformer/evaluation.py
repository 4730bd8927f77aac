"""Measurements of DiScoFormer against KDE baselines on held-out random mixtures with exact ground truth
(method note section 6): shared by the metric checks and the benchmark.

* :func:`compare` -- pooled relative score MSE ``sum |S_hat - S|^2 / sum |S|^2`` and log-density MSE
  ``mean (T_hat - log f)^2`` over ``tasks`` random mixtures of Algorithm 1 (queries drawn from the law), for
  DiScoFormer, Scott-rule KDE, SD-KDE with the KDE's own score, SD-KDE with DiScoFormer's score (the paper's
  plug-in use) and SD-KDE with the exact score (an oracle upper bound for the plug-in).
* :func:`symmetry_errors` -- the trained model's *learned* rotation equivariance (relative MSE of
  ``S(XR + mu, YR + mu)`` against ``S(X, Y) R``, MSE of ``T``) and its score/log-density consistency
  ``sum |S - grad_y T|^2 / sum |S|^2`` (not exact for the two-head design).
* :func:`gaussian_limit` -- on a Gaussian context, distance to the plug-in Gaussian ``N(mu_hat, Sigma_hat)``.
* :func:`normalisation` -- ``int exp(T)`` by grid quadrature (d = 1, 2): not enforced by MSE training.
* :func:`ou_particle_flow` -- the score as a plug-in for a Fokker-Planck particle solver (Ornstein-Uhlenbeck,
  exact Gaussian solution).
* :func:`ood_compare` -- laws outside the training family (rotated product Laplace / Student-t), with and without
  test-time training.
The held-out mixtures use seeds disjoint from training (the training generator is seeded 0 and advanced).
"""
from __future__ import annotations

import math
from typing import Any, Iterable

import torch

from zoo.common.toys2d import random_rotation

from .data import random_gmm
from .kde import kde_log_density_score, sd_kde

__all__ = ["ESTIMATORS", "compare", "symmetry_errors", "gaussian_limit", "normalisation", "product_law", "ood_compare", "ou_particle_flow",
           "gaussian_fit_score", "EVAL_SEED"]

#: held-out mixtures: seed of the evaluation generator (training uses seed 0 and never reaches these draws)
EVAL_SEED = 10_007
ESTIMATORS = ("discoformer", "kde", "sd-kde", "sd-kde+discoformer", "sd-kde+oracle")


def _model_fn(model: torch.nn.Module):
    p = next(model.parameters())

    def fn(X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            T, S = model(X.to(p.dtype), Y.to(p.dtype))
        return T.double(), S.double()

    return fn


def compare(model: torch.nn.Module | None, dim: int, n: int, tasks: int = 32, n_query: int = 256, seed: int = EVAL_SEED,
            estimators: Iterable[str] = ESTIMATORS, progress: Any = None) -> dict[str, dict[str, float]]:
    """Pooled errors per estimator (module docstring). ``model=None`` skips the DiScoFormer-based rows."""
    ests = [e for e in estimators if model is not None or "discoformer" not in e]
    g = torch.Generator().manual_seed(seed + 1000 * dim + n)
    fn = _model_fn(model) if model is not None else None
    num = {e: 0.0 for e in ests}
    dens = {e: 0.0 for e in ests}
    den = 0.0
    it = range(tasks) if progress is None else progress(range(tasks), desc=f"d={dim} n={n}")
    for _ in it:
        law = random_gmm(dim, g)
        X, Y = law.sample(n, g), law.sample(n_query, g)
        lf, sc = law.log_prob(Y), law.score(Y, 0.0)
        den += float((sc**2).sum())
        for e in ests:
            if e == "discoformer":
                T, S = fn(X, Y)  # type: ignore[misc]
            elif e == "kde":
                T, S = kde_log_density_score(X, Y)
            elif e == "sd-kde":
                T, S = sd_kde(X, Y)
            elif e == "sd-kde+discoformer":
                T, S = sd_kde(X, Y, fn(X, X)[1])  # type: ignore[misc]
            elif e == "sd-kde+oracle":
                T, S = sd_kde(X, Y, law.score(X, 0.0))
            else:
                raise ValueError(f"unknown estimator {e!r}; have {ESTIMATORS}")
            num[e] += float(((S - sc) ** 2).sum())
            dens[e] += float(((T - lf) ** 2).sum())
    return {e: {"rel_score_mse": num[e] / den, "log_density_mse": dens[e] / (tasks * n_query)} for e in ests}


def symmetry_errors(model: torch.nn.Module, dim: int, n: int = 256, tasks: int = 16, n_query: int = 128, seed: int = EVAL_SEED + 1) -> dict[str, float]:
    """Learned rotation equivariance and score/log-density consistency of the trained model (module docstring)."""
    g = torch.Generator().manual_seed(seed + dim)
    p = next(model.parameters())
    rot_s = rot_t = cons = den = 0.0
    for _ in range(tasks):
        law = random_gmm(dim, g)
        X, Y = law.sample(n, g).to(p.dtype), law.sample(n_query, g).to(p.dtype)
        R = (random_rotation(dim, g) if dim > 1 else -torch.ones(1, 1, dtype=torch.float64)).to(p.dtype)
        mu = torch.randn(dim, generator=g, dtype=torch.float64).to(p.dtype)
        Yg = Y.clone().requires_grad_(True)
        T, S = model(X, Yg)
        (gT,) = torch.autograd.grad(T.sum(), Yg)
        with torch.no_grad():
            T2, S2 = model(X @ R + mu, Y @ R + mu)
        S, T = S.detach().double(), T.detach().double()
        den += float((S**2).sum())
        rot_s += float(((S2.double() - S @ R.double()) ** 2).sum())
        rot_t += float(((T2.double() - T) ** 2).sum())
        cons += float(((S - gT.double()) ** 2).sum())
    return {"rotation_rel_score_mse": rot_s / den, "rotation_log_density_mse": rot_t / (tasks * n_query), "consistency_rel_mse": cons / den}


def gaussian_limit(model: torch.nn.Module, dim: int, n: int = 1024, tasks: int = 8, n_query: int = 256, seed: int = EVAL_SEED + 2) -> dict[str, float]:
    """On a Gaussian context, relative score MSE and log-density MSE of the model against the plug-in Gaussian
    ``N(mu_hat, Sigma_hat)`` fitted to the same samples, and of both against the true law."""
    from zoo.common.gmm import GaussianMixture

    g = torch.Generator().manual_seed(seed + dim)
    fn = _model_fn(model)
    num = num_true = den = dens = 0.0
    for _ in range(tasks):
        law = random_gmm(dim, g, k_min=1, k_max=1)
        X, Y = law.sample(n, g), law.sample(n_query, g)
        fit = GaussianMixture([1.0], X.mean(0, keepdim=True), covs=torch.cov(X.T, correction=0).reshape(1, dim, dim))
        T, S = fn(X, Y)
        s_fit = fit.score(Y, 0.0)
        num += float(((S - s_fit) ** 2).sum())
        num_true += float(((S - law.score(Y, 0.0)) ** 2).sum())
        den += float((s_fit**2).sum())
        dens += float(((T - fit.log_prob(Y)) ** 2).sum())
    return {"rel_score_mse_vs_plugin_gaussian": num / den, "rel_score_mse_vs_truth": num_true / den,
            "log_density_mse_vs_plugin_gaussian": dens / (tasks * n_query)}


def normalisation(model: torch.nn.Module, dim: int, n: int = 256, tasks: int = 8, grid: int = 200, seed: int = EVAL_SEED + 3) -> list[float]:
    """``int exp(T(X, y)) dy`` by the midpoint rule on a box of +-6 context standard deviations (d = 1, 2)."""
    if dim not in (1, 2):
        raise ValueError("normalisation: grid quadrature only for d = 1, 2")
    g = torch.Generator().manual_seed(seed + dim)
    fn = _model_fn(model)
    out = []
    for _ in range(tasks):
        law = random_gmm(dim, g)
        X = law.sample(n, g)
        lo, hi = X.min(0).values - 3 * X.std(0), X.max(0).values + 3 * X.std(0)
        axes = [lo[i] + (hi[i] - lo[i]) * (torch.arange(grid, dtype=torch.float64) + 0.5) / grid for i in range(dim)]
        pts = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).reshape(-1, dim)
        T, _ = fn(X, pts)
        cell = float(torch.prod((hi - lo) / grid))
        out.append(float(T.exp().sum()) * cell)
    return out


def product_law(kind: str, dim: int, generator: torch.Generator) -> tuple[Any, Any, Any]:
    """A non-Gaussian-mixture law (not seen in training): ``x = R z`` with a Haar rotation ``R`` and i.i.d.
    unit-variance coordinates ``z`` -- ``laplace`` (b = 1/sqrt 2) or ``student-t`` (nu = 5, scaled). Returns
    ``(sample(n, g), log_prob(x), score(x))`` with exact log-density and score."""
    R = random_rotation(dim, generator) if dim > 1 else torch.ones(1, 1, dtype=torch.float64)
    if kind == "laplace":
        b = 1 / math.sqrt(2)

        def draw(n: int, g: torch.Generator) -> torch.Tensor:
            u = torch.rand(n, dim, dtype=torch.float64, generator=g) - 0.5
            return -b * torch.sign(u) * torch.log1p(-2 * u.abs())

        logg = lambda z: (-z.abs() / b - math.log(2 * b)).sum(-1)  # noqa: E731
        dlogg = lambda z: -torch.sign(z) / b  # noqa: E731
    elif kind == "student-t":
        nu = 5.0
        c = math.sqrt((nu - 2) / nu)  # z = c t has unit variance

        def draw(n: int, g: torch.Generator) -> torch.Tensor:
            t = torch.randn(n, dim, dtype=torch.float64, generator=g)
            chi2 = (torch.randn(n, dim, int(nu), dtype=torch.float64, generator=g) ** 2).sum(-1)
            return c * t / torch.sqrt(chi2 / nu)

        const = math.lgamma((nu + 1) / 2) - math.lgamma(nu / 2) - 0.5 * math.log(nu * math.pi) - math.log(c)
        logg = lambda z: (const - (nu + 1) / 2 * torch.log1p((z / c) ** 2 / nu)).sum(-1)  # noqa: E731
        dlogg = lambda z: -(nu + 1) * (z / c) / (nu + (z / c) ** 2) / c  # noqa: E731
    else:
        raise ValueError(f"unknown law {kind!r}; have laplace, student-t")
    return (lambda n, g: draw(n, g) @ R.T), (lambda x: logg(x @ R)), (lambda x: dlogg(x @ R) @ R.T)


def ood_compare(model: torch.nn.Module, dim: int, kind: str, n: int = 256, tasks: int = 16, n_query: int = 256,
                ttt_steps: int = 4, ttt_lr: float = 1e-4, seed: int = EVAL_SEED + 4) -> dict[str, dict[str, float]]:
    """Relative score MSE and log-density MSE on a law outside the training family (:func:`product_law`) for
    DiScoFormer, DiScoFormer after ``ttt_steps`` of test-time training, and the Scott-rule KDE."""
    from .model import test_time_train

    g = torch.Generator().manual_seed(seed + dim)
    p = next(model.parameters())
    num = {e: 0.0 for e in ("discoformer", "discoformer+ttt", "kde")}
    dens = dict(num)
    den = 0.0
    for _ in range(tasks):
        draw, logp, score = product_law(kind, dim, g)
        X, Y = draw(n, g), draw(n_query, g)
        lf, sc = logp(Y), score(Y)
        den += float((sc**2).sum())
        adapted = test_time_train(model, X.to(p.dtype), ttt_steps, ttt_lr)[0]
        for e, fn in (("discoformer", _model_fn(model)), ("discoformer+ttt", _model_fn(adapted)), ("kde", kde_log_density_score)):
            T, S = fn(X, Y)
            num[e] += float(((S - sc) ** 2).sum())
            dens[e] += float(((T - lf) ** 2).sum())
    return {e: {"rel_score_mse": num[e] / den, "log_density_mse": dens[e] / (tasks * n_query)} for e in num}


def ou_particle_flow(score_fn: Any, dim: int = 2, n: int = 256, T: float = 1.0, steps: int = 50, seed: int = EVAL_SEED + 5) -> dict[str, float]:
    """Fokker-Planck smoke test with exact ground truth (method note section 6): the Ornstein-Uhlenbeck process
    ``dx = -x dt + sqrt(2) dW`` from ``N(m0, S0)`` has law ``N(m_t, S_t)``, ``m_t = e^{-t} m0``,
    ``S_t = e^{-2t} S0 + (1 - e^{-2t}) I``. The deterministic particle flow ``dx/dt = -x - grad log f_t(x)`` (the
    probability-flow ODE) moves ``n`` particles with ``f_t`` estimated from the particles themselves by
    ``score_fn(X, X) -> (log f, score)`` (explicit Euler, ``steps`` steps). Returns the final relative errors of the
    particle mean and covariance against ``m_T``, ``S_T``; the sample noise floor is the error at ``t = 0``."""
    g = torch.Generator().manual_seed(seed + dim)
    m0 = torch.full((dim,), 2.0, dtype=torch.float64)
    L = torch.randn(dim, dim, dtype=torch.float64, generator=g) * 0.5 + torch.eye(dim, dtype=torch.float64) * 0.3
    S0 = L @ L.T + 0.05 * torch.eye(dim, dtype=torch.float64)
    X = m0 + torch.randn(n, dim, dtype=torch.float64, generator=g) @ torch.linalg.cholesky(S0).T

    def errs(X: torch.Tensor, t: float) -> tuple[float, float]:
        m_t = math.exp(-t) * m0
        S_t = math.exp(-2 * t) * S0 + (1 - math.exp(-2 * t)) * torch.eye(dim, dtype=torch.float64)
        C = torch.cov(X.T, correction=1).reshape(dim, dim)
        return float((X.mean(0) - m_t).norm() / m0.norm()), float(torch.linalg.matrix_norm(C - S_t) / torch.linalg.matrix_norm(S_t))

    e0 = errs(X, 0.0)
    dt = T / steps
    for _ in range(steps):
        _, s = score_fn(X, X)
        X = X + dt * (-X - s.double())
    eT = errs(X, T)
    return {"mean_err_t0": e0[0], "cov_err_t0": e0[1], "mean_err": eT[0], "cov_err": eT[1]}


def gaussian_fit_score(X: torch.Tensor, Y: torch.Tensor) -> tuple[None, torch.Tensor]:
    """The score of the Gaussian ``N(mean(X), cov(X))`` fitted to the particles (the parametric reference for
    :func:`ou_particle_flow`, whose exact law is Gaussian)."""
    C = torch.cov(X.T, correction=0).reshape(X.shape[-1], X.shape[-1])
    return None, -(Y - X.mean(0)) @ torch.linalg.inv(C)
