"""Exact rectified-flow quantities of a Gaussian mixture (extends :mod:`zoo.common.gmm`).

Notation of ``/work/shared/methods/gaussian-mixture-testbed.md`` section 1b.

**Rectified flow / flow matching** (Liu et al., arXiv 2209.03003; Lipman et al., arXiv 2210.02747):
interpolant ``x_t = (1 - t) x0 + t x1``, ``x0 ~ N(0, I)``, ``x1 ~ p`` (t = 0 noise, t = 1 data; diffusers /
FLUX use ``tau = 1 - t``). Given component k, ``x_t ~ N(t mu_k, C_k(t))`` with
``C_k(t) = (1 - t)^2 I + t^2 Sigma_k``; ``E[x1 | x_t, k] = mu_k + t Sigma_k C_k^{-1} (x_t - t mu_k)``,
``E[x0 | x_t, k] = (1 - t) C_k^{-1} (x_t - t mu_k)``; the velocity is
``b_t(x) = sum_k w_k(x, t) (E[x1 | x, k] - E[x0 | x, k])``. The flow map ``X_{s,t}`` solves
``dx/du = b_u(x)`` from ``u = s`` to ``u = t``. For one Gaussian it is closed form in the eigenbasis of
``Sigma``: with ``S_u = sqrt((1 - u)^2 + u^2 lambda)``, ``X_{s,t}(x) = t mu + U diag(S_t / S_s) U^T (x - s mu)``.
For a mixture it is integrated by the float64 adaptive Dormand-Prince 5(4) of :mod:`zoo.common.gmm`.

PFGM++ (the kernel and its exact mixture field) lives in :mod:`zoo.common.pfgmpp`; its names here are deprecated
aliases.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from .deprecation import install_aliases
from .gmm import GaussianMixture, _dopri5

__all__ = ["rf_velocity", "rf_flow_map"]

#: the PFGM++ names that moved to zoo.common.pfgmpp (one release of grace)
__deprecated_aliases__ = {"": {
    "gamma_sample": "zoo.common.pfgmpp:gamma_sample",
    "pfgmpp_noise": "zoo.common.pfgmpp:pfgmpp_noise",
    "pfgmpp_radius_cdf": "zoo.common.pfgmpp:pfgmpp_radius_cdf",
    "pfgmpp_log_kernel": "zoo.common.pfgmpp:pfgmpp_log_kernel",
    "pfgmpp_denoise": "zoo.common.pfgmpp:pfgmpp_denoise",
}}
__getattr__ = install_aliases(__name__, __deprecated_aliases__)


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
