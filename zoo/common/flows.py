"""Exact rectified-flow and PFGM++ quantities of a Gaussian mixture (extends :mod:`zoo.common.gmm`).

Notation of ``/work/shared/methods/gaussian-mixture-testbed.md`` sections 1b-1c.

**Rectified flow / flow matching** (Liu et al., arXiv 2209.03003; Lipman et al., arXiv 2210.02747):
interpolant ``x_t = (1 - t) x0 + t x1``, ``x0 ~ N(0, I)``, ``x1 ~ p`` (t = 0 noise, t = 1 data; diffusers /
FLUX use ``tau = 1 - t``). Given component k, ``x_t ~ N(t mu_k, C_k(t))`` with
``C_k(t) = (1 - t)^2 I + t^2 Sigma_k``; ``E[x1 | x_t, k] = mu_k + t Sigma_k C_k^{-1} (x_t - t mu_k)``,
``E[x0 | x_t, k] = (1 - t) C_k^{-1} (x_t - t mu_k)``; the velocity is
``b_t(x) = sum_k w_k(x, t) (E[x1 | x, k] - E[x0 | x, k])``. The flow map ``X_{s,t}`` solves
``dx/du = b_u(x)`` from ``u = s`` to ``u = t``. For one Gaussian it is closed form in the eigenbasis of
``Sigma``: with ``S_u = sqrt((1 - u)^2 + u^2 lambda)``, ``X_{s,t}(x) = t mu + U diag(S_t / S_s) U^T (x - s mu)``.
For a mixture it is integrated by the float64 adaptive Dormand-Prince 5(4) of :mod:`zoo.common.gmm`.

**PFGM++** (Xu et al., arXiv 2302.04265, sec. 3-4): with ``r = sigma sqrt(D)`` the perturbation kernel
``p_r(x | y) ~ (||x - y||^2 + r^2)^{-(N + D)/2}`` in ``R^N`` is a multivariate Student-t with ``D``
degrees of freedom and scale ``sigma``; its radius ``R = ||x - y||`` satisfies
``R^2 / (R^2 + r^2) ~ Beta(N/2, D/2)`` (the paper's sampling rule: ``R = r sqrt(b / (1 - b))``, uniform
direction). Equivalently ``x - y = sigma z / sqrt(w)``, ``z ~ N(0, I)``, ``w ~ Gamma(D/2, rate D/2)``,
so the exact posterior mean ("denoiser") of a mixture is a 1-D integral over ``w`` of Gaussian denoisers
at noise ``sigma / sqrt(w)``, computed here by a trapezoid rule in ``log w`` (spectrally accurate for
this smooth, unimodal integrand). ``D = inf`` is the Gaussian (diffusion) case.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from .gmm import GaussianMixture, _dopri5

__all__ = [
    "rf_velocity", "rf_flow_map", "gamma_sample", "pfgmpp_noise", "pfgmpp_radius_cdf", "pfgmpp_log_kernel", "pfgmpp_denoise",
]


# ----------------------------------------------------------------------------- rectified flow
def _as_t(t: Any, batch: int, ref: torch.Tensor) -> torch.Tensor:
    s = torch.as_tensor(t, dtype=torch.float64, device=ref.device)
    return (s.expand(batch) if s.ndim == 0 else s).reshape(batch)


def rf_velocity(gmm: GaussianMixture, x: torch.Tensor, t: Any) -> torch.Tensor:
    """Exact rectified-flow velocity ``b_t(x)`` (t = 0 noise, t = 1 data), ``t`` scalar or ``(B,)``."""
    xf = gmm._flat(x)
    tt = _as_t(t, xf.shape[0], xf)[:, None, None]
    diff = xf[:, None, :] - tt * gmm.means[None]
    z = torch.einsum("kde,bkd->bke", gmm.evecs, diff)
    c = (1 - tt) ** 2 + tt**2 * gmm.evals[None]
    logn = -0.5 * ((z**2) / c + torch.log(2 * math.pi * c)).sum(-1)
    w = torch.softmax(gmm.log_weights[None] + logn, dim=-1)
    coef = (tt * gmm.evals[None] - (1 - tt)) / c  # E[x1|.] - E[x0|.] - mu in eigen-coords, per unit z
    v = gmm.means[None] + torch.einsum("kde,bke->bkd", gmm.evecs, coef * z)
    return (w[..., None] * v).sum(1).reshape(x.shape).to(x.dtype)


def rf_flow_map(gmm: GaussianMixture, x: torch.Tensor, s: float, t: float, rtol: float = 1e-10, atol: float = 1e-10) -> torch.Tensor:
    """Exact flow map ``X_{s,t}(x)`` of the rectified flow (closed form for one Gaussian, else DOPRI5)."""
    if not (0.0 <= s <= 1.0 and 0.0 <= t <= 1.0):
        raise ValueError(f"times must lie in [0, 1], got s={s}, t={t}")
    xf = gmm._flat(x)
    if gmm.is_single_gaussian:
        lam, U, mu = gmm.evals[0], gmm.evecs[0], gmm.means[0]
        S = lambda u: torch.sqrt((1 - u) ** 2 + u**2 * lam)  # noqa: E731
        Ss = S(s)
        if bool((Ss == 0).any()):
            raise ValueError("flow map from s = 1 of a degenerate Gaussian is not defined")
        z = (xf - s * mu) @ U
        out = t * mu + (z * (S(t) / Ss)) @ U.T
        return out.reshape(x.shape).to(x.dtype)
    y = _dopri5(lambda u, y: gmm._flat(rf_velocity(gmm, y, u)), float(s), float(t), xf, rtol, atol)
    return y.reshape(x.shape).to(x.dtype)


# ----------------------------------------------------------------------------- PFGM++
def gamma_sample(shape_param: float, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` draws of ``Gamma(shape_param, rate 1)`` (float64) from a torch generator.

    Marsaglia & Tsang (ACM TOMS 26(3), 2000) squeeze-rejection for shape >= 1; shape < 1 via
    ``Gamma(a) = Gamma(a + 1) U^{1/a}``.
    """
    a = float(shape_param)
    if a <= 0:
        raise ValueError("gamma shape must be positive")
    boost = a < 1
    a1 = a + 1 if boost else a
    d = a1 - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    out = torch.empty(n, dtype=torch.float64)
    todo = torch.arange(n)
    while todo.numel():
        m = todo.numel()
        z = torch.randn(m, dtype=torch.float64, generator=generator)
        u = torch.rand(m, dtype=torch.float64, generator=generator)
        v = (1 + c * z) ** 3
        ok = (v > 0) & (torch.log(u) < 0.5 * z**2 + d - d * v + d * torch.log(v.clamp_min(1e-300)))
        out[todo[ok]] = d * v[ok]
        todo = todo[~ok]
    if boost:
        out = out * torch.rand(n, dtype=torch.float64, generator=generator) ** (1.0 / a)
    return out


def pfgmpp_noise(n: int, dim: int, sigma: float, D: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """``n`` draws of the PFGM++ perturbation ``x - y`` in ``R^dim`` (float64, ``(n, dim)``).

    Radius ``R = r sqrt(b / (1 - b))``, ``r = sigma sqrt(D)``, ``b ~ Beta(dim/2, D/2)``, uniform direction
    (Xu et al. 2023, Alg. 1/3). Sampled as ``b/(1-b) = G1/G2`` with ``G1 = ||z||^2/2 ~ Gamma(dim/2)``
    from the same Gaussian ``z`` whose direction is used (norm and direction of ``z`` are independent)
    and ``G2 ~ Gamma(D/2)``. ``D = inf``: ``sigma z``.
    """
    z = torch.randn(n, dim, dtype=torch.float64, generator=generator)
    if math.isinf(D):
        return sigma * z
    g2 = gamma_sample(D / 2.0, n, generator)
    # R = r sqrt(G1/G2) = sigma sqrt(D) ||z|| / sqrt(2 G2); direction z / ||z||
    return z * (sigma * math.sqrt(D) / torch.sqrt(2.0 * g2))[:, None]


def pfgmpp_radius_cdf(R: Any, dim: int, sigma: float, D: float) -> Any:
    """CDF of the PFGM++ kernel radius: ``P(||x - y|| <= R) = I_{R^2/(R^2 + r^2)}(dim/2, D/2)`` (regularised
    incomplete beta), from the radial density ``p(R) ~ R^{dim-1} (R^2 + r^2)^{-(dim+D)/2}``."""
    import numpy as np
    from scipy.special import betainc

    R = np.asarray(R, dtype=np.float64)
    r2 = sigma**2 * D
    return betainc(dim / 2.0, D / 2.0, R**2 / (R**2 + r2))


def pfgmpp_log_kernel(x: torch.Tensor, y: torch.Tensor, sigma: float, D: float) -> torch.Tensor:
    """Normalised ``log p_r(x | y)`` in ``R^N`` (multivariate Student-t, ``nu = D``, scale ``sigma``)."""
    N = x.shape[-1]
    q = ((x.double() - y.double()) ** 2).sum(-1) / sigma**2
    const = math.lgamma((D + N) / 2) - math.lgamma(D / 2) - 0.5 * N * math.log(D * math.pi) - N * math.log(sigma)
    return const - 0.5 * (D + N) * torch.log1p(q / D)


def pfgmpp_denoise(gmm: GaussianMixture, x: torch.Tensor, sigma: Any, D: float, nodes: int = 801, span_sd: float = 12.0) -> torch.Tensor:
    """Exact PFGM++ posterior mean ``E[y | x]`` of the mixture under the kernel at ``sigma`` with ``D``.

    ``E[y|x] = sum_k int pi_k Gamma(w) N(x; mu_k, Sigma_k + sigma^2/w I) [mu_k + Sigma_k (Sigma_k + sigma^2/w I)^{-1}
    (x - mu_k)] dw / (same without the bracket)`` (testbed section 1c), by a trapezoid rule in ``l = log w``
    with ``nodes`` points per (row, component), spanning the prior ``w = 1`` and the point-mass posterior
    mode ``w* = (D + N) / (D + ||x - mu_k||^2 / sigma^2)``, ``span_sd`` log-w standard deviations beyond each.
    ``sigma`` is a scalar or a ``(B,)`` tensor (one noise level per row); the result is differentiable in ``x``.
    """
    if math.isinf(D):
        return gmm.denoise(x, sigma)
    xf = gmm._flat(x)
    B, N = xf.shape
    K = gmm.num_components
    sd = math.sqrt(2.0 / D)  # prior sd of log w, >= the posterior's
    s2 = _as_t(sigma, B, xf)[:, None] ** 2  # (B, 1)
    q = ((xf[:, None, :] - gmm.means[None]) ** 2).sum(-1)  # (B, K)
    l_star = math.log(D + N) - torch.log(D + q / s2)
    lo = torch.minimum(l_star, torch.zeros_like(l_star)) - span_sd * sd
    hi = torch.maximum(l_star, torch.zeros_like(l_star)) + span_sd * sd
    frac = torch.linspace(0.0, 1.0, nodes, dtype=torch.float64)
    ell = lo[..., None] + (hi - lo)[..., None] * frac  # (B, K, G)
    h = (hi - lo) / (nodes - 1)
    trap = torch.full((nodes,), 0.0, dtype=torch.float64)
    trap[0] = trap[-1] = math.log(0.5)
    w = ell.exp()
    log_prior = 0.5 * D * math.log(0.5 * D) - math.lgamma(0.5 * D) + 0.5 * D * ell - 0.5 * D * w  # log(gamma(w) * w)
    z = gmm._eigen_coords(xf)  # (B, K, N)
    c = gmm.evals[None, :, None, :] + (s2[..., None] / w)[..., None]  # (B, K, G, N)
    logn = -0.5 * ((z[:, :, None, :] ** 2) / c + torch.log(2 * math.pi * c)).sum(-1)  # (B, K, G)
    logint = log_prior + logn + trap + torch.log(h)[..., None]
    log_z = torch.logsumexp(logint, dim=-1)  # (B, K)
    inner = torch.softmax(logint, dim=-1)  # (B, K, G)
    shrunk = (inner[..., None] * (gmm.evals[None, :, None, :] / c)).sum(2) * z  # (B, K, N) eigen-coords
    back = torch.einsum("kde,bke->bkd", gmm.evecs, shrunk) + gmm.means[None]
    resp = torch.softmax(gmm.log_weights[None] + log_z, dim=-1)
    out = (resp[..., None] * back).sum(1)
    return out.reshape(x.shape).to(x.dtype)
