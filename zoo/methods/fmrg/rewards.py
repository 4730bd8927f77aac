"""Analytic rewards of the toy and the exact linear-Gaussian (LQR) reference.

Rewards (method note section 6): ``quadratic`` ``r(x) = -||x - y||^2 / (2 tau^2) + c`` (``y`` may lie off the
data manifold), ``disc`` ``r(x) = -max(0, ||x - y|| - radius)^2 / (2 tau^2) + c`` (flat inside a disc, not smooth
in x: a reward that is not smooth in x̂₀) and ``mode`` = the log-density of one mixture component (a smooth "log-indicator" of a
low-weight mode), ``r(x) = log N(x; mu_k, Sigma_k) + c``.

**LQR optimum** (deterministic optimal control, the problem FMRG approximates: maximise
``r(x_1) - 1/2 int_0^1 |u_t|^2 dt`` subject to ``dx/dt = b_t(x) + u_t``). For data ``N(mu, diag v)`` the
rectified-flow drift is affine with state transition ``Phi(1, t) = S_1 / S_t`` per coordinate,
``S_t = sqrt((1 - t)^2 + t^2 v)`` (testbed section 1b). Pontryagin with the quadratic terminal reward gives
``u_t = Phi(1, t) p``, ``p = -(x_1 - y) / tau^2``, hence
``x_1* = (I + G / tau^2)^{-1} (X_{0,1}(x_0) + G y / tau^2)`` with the Gramian
``G = int_0^1 Phi(1, t)^2 dt = v int_0^1 dt / ((1 - t)^2 + t^2 v) = (pi / 2) sqrt(v)`` (the integral is
``(arctan sqrt(v) + arctan(1 / sqrt(v))) / sqrt(v) = pi / (2 sqrt(v))``; our derivation, checked by quadrature in
the tests).

**FMRG-J's continuous-time limit** on the same problem (our derivation, the invariant
``gaussian-quadratic-closed-form``): with one plain gradient step of size ``eta`` per step, the predicted
endpoint ``e_t = X_{t,1}(x_t)`` obeys ``de/dt = eta Phi(1, t)^2 grad r(e)``, so
``e_1 - y = (X_{0,1}(x_0) - y) exp(-eta G / tau^2)`` per coordinate: the greedy feedback law. It agrees with
the LQR optimum ``(X_{0,1} - y) / (1 + G / tau^2)`` to second order in ``kappa = eta G / tau^2``
(``|exp(-kappa) - 1 / (1 + kappa)| <= kappa^2 / 2``).
"""
from __future__ import annotations

import math

import torch

from zoo.common.gmm import GaussianMixture

from .params import Coord, RewardSpec  # noqa: F401 - moved to the torch-free params module


def reward_fn(spec: RewardSpec, gmm: GaussianMixture | None = None):
    """The reward ``r(x)`` ((B, d) -> (B,)) of ``spec``, differentiable in ``x``."""
    if spec.kind == "quadratic":
        y = torch.tensor(spec.target, dtype=torch.float64)

        def r(x: torch.Tensor) -> torch.Tensor:
            if x.shape[-1] != y.shape[0]:
                raise ValueError(f"reward target has {y.shape[0]} coordinates, samples have {x.shape[-1]}")
            return spec.scale * (-((x - y) ** 2).sum(-1) / (2 * spec.tau**2)) + spec.offset

        return r
    if spec.kind == "disc":  # flat inside the disc: the gradient vanishes there and jumps in curvature at its edge
        c = torch.tensor(spec.target, dtype=torch.float64)

        def r_disc(x: torch.Tensor) -> torch.Tensor:
            if x.shape[-1] != c.shape[0]:
                raise ValueError(f"reward target has {c.shape[0]} coordinates, samples have {x.shape[-1]}")
            d = (x - c).pow(2).sum(-1).clamp_min(1e-300).sqrt()
            return spec.scale * (-(d - spec.radius).clamp_min(0.0) ** 2 / (2 * spec.tau**2)) + spec.offset

        return r_disc
    if spec.kind == "constant":
        return lambda x: x.sum(-1) * 0.0 + spec.offset
    if gmm is None or spec.component >= gmm.num_components:
        raise ValueError(f"reward kind 'mode' needs a mixture with a component {spec.component}")
    mu, U, lam = gmm.means[spec.component], gmm.evecs[spec.component], gmm.evals[spec.component]

    def r_mode(x: torch.Tensor) -> torch.Tensor:
        z = (x - mu) @ U
        return spec.scale * (-0.5 * ((z**2) / lam + torch.log(2 * math.pi * lam)).sum(-1)) + spec.offset

    return r_mode


def reward_grad(r, x: torch.Tensor) -> torch.Tensor:
    """``grad r(x)`` of a batch (rows independent), float64."""
    with torch.enable_grad():
        z = x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(r(z).sum(), z)
    return g


def gramian(v: torch.Tensor) -> torch.Tensor:
    """``G = int_0^1 Phi(1, t)^2 dt = (pi / 2) sqrt(v)`` per coordinate (data variance ``v``)."""
    return 0.5 * math.pi * torch.sqrt(torch.as_tensor(v, dtype=torch.float64))


def lqr_endpoint(x1_unguided: torch.Tensor, v: torch.Tensor, y: torch.Tensor, tau: float) -> torch.Tensor:
    """The LQR optimum ``x_1* = (X_{0,1}(x_0) + G y / tau^2) / (1 + G / tau^2)`` (diagonal data ``N(mu, diag v)``)."""
    G = gramian(v)
    return (x1_unguided + G * y / tau**2) / (1 + G / tau**2)


def fmrg_j_limit_endpoint(x1_unguided: torch.Tensor, v: torch.Tensor, y: torch.Tensor, tau: float, eta: float) -> torch.Tensor:
    """FMRG-J's fine-grid limit with one plain gradient step of size ``eta``: ``y + (X_{0,1} - y) exp(-eta G / tau^2)``."""
    return y + (x1_unguided - y) * torch.exp(-eta * gramian(v) / tau**2)


