"""IPFM and SiD generator losses and the PFGM++ noise-level laws (``/work/shared/methods/ipfm.md`` section 4).

* IPFM (Shlenskii & Korotin, arXiv 2509.22454; code github.com/daniil-shlenskii/pfgmpp-idmd, loss mode ``idmd``):
  per sample ``L = ||f_phi(x, sigma) - y||^2 - ||f_psi(x, sigma) - y||^2`` with ``y = G_theta(z)``, ``x = y + n``,
  ``n`` from the PFGM++ kernel. By the Pythagorean identity of conditional expectations its expectation is
  ``E ||f_phi - f_psi*||^2`` when ``f_psi*`` is the exact field of the generator's law.
* SiD (Zhou et al., arXiv 2404.04057, eq. 22 / the code's ``sid_loss``):
  ``L = (f_phi - f_psi)^T [(f_phi - y) - alpha (f_phi - f_psi)]``.
* The identity ``||a - y||^2 - ||b - y||^2 = 2 [(a - b)^T (a - y) - 1/2 ||a - b||^2]`` makes IPFM exactly
  ``2 x SiD(alpha = 1/2)`` pointwise (an invariant of the spec).
* Both are divided by ``w = mean |y - f_phi|`` (detached, clipped at 1e-5), the SiD code's normaliser.
"""
from __future__ import annotations

import math

import torch

__all__ = ["ipfm_loss", "sid_loss", "sid_weight", "sigma_lognormal", "sigma_sid_tmax", "sigma_loguniform", "GEN_SIGMA_LAWS", "gen_sigma"]


def ipfm_loss(f_teacher: torch.Tensor, f_fake: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample IPFM loss ``||f_phi - y||^2 - ||f_psi - y||^2`` (summed over features), shape ``(B,)``."""
    return ((f_teacher - y) ** 2).flatten(1).sum(1) - ((f_fake - y) ** 2).flatten(1).sum(1)


def sid_loss(f_teacher: torch.Tensor, f_fake: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """Per-sample SiD loss ``(f_phi - f_psi)^T [(f_phi - y) - alpha (f_phi - f_psi)]``, shape ``(B,)``."""
    diff = f_teacher - f_fake
    return (diff * ((f_teacher - y) - alpha * diff)).flatten(1).sum(1)


def sid_weight(y: torch.Tensor, f_teacher: torch.Tensor) -> torch.Tensor:
    """SiD's per-sample normaliser ``w = mean |y - f_phi|`` (detached, >= 1e-5), shape ``(B,)``."""
    return (y - f_teacher).detach().abs().flatten(1).mean(1).clamp_min(1e-5)


def sigma_lognormal(n: int, generator: torch.Generator, p_mean: float = -1.2, p_std: float = 1.2) -> torch.Tensor:
    """EDM's training law ``ln sigma ~ N(P_mean, P_std^2)`` (Karras et al. 2022, Table 1), used for the fake-field fit."""
    return (p_mean + p_std * torch.randn(n, generator=generator, dtype=torch.float64)).exp()


def sigma_sid_tmax(n: int, generator: torch.Generator, t_max: float = 800.0, sigma_min: float = 0.002, sigma_max: float = 80.0,
                   rho: float = 7.0) -> torch.Tensor:
    """SiD's generator-step law: ``u ~ U[0, t_max / 1000]``, ``sigma = (s_max^{1/rho} + (1 - u)(s_min^{1/rho} - s_max^{1/rho}))^rho``
    (sigma in [0.002, ~24.4] for t_max = 800)."""
    u = torch.rand(n, generator=generator, dtype=torch.float64) * (t_max / 1000.0)
    a, b = sigma_max ** (1 / rho), sigma_min ** (1 / rho)
    return (a + (1 - u) * (b - a)) ** rho




def sigma_loguniform(n: int, generator: torch.Generator, sigma_min: float = 0.002, sigma_max: float = 24.4) -> torch.Tensor:
    """``ln sigma ~ U[ln sigma_min, ln sigma_max]`` on the same range as SiD's ``t_max = 800`` rule (an ablation arm,
    not a paper setting: it spreads the generator-step noise levels evenly in log sigma)."""
    u = torch.rand(n, generator=generator, dtype=torch.float64)
    return (math.log(sigma_min) + u * (math.log(sigma_max) - math.log(sigma_min))).exp()


#: the generator-step noise-level laws: ``tmax`` = SiD's / the IPFM code's (``sid_training_loop.py``: ``t ~ U[0, tmax]``,
#: Karras-spaced), ``lognormal`` = EDM's training law, the one the fake field is fitted with, ``loguniform`` = the ablation
GEN_SIGMA_LAWS = ("tmax", "lognormal", "loguniform")


def gen_sigma(law: str, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` generator-step noise levels from ``law`` (one of :data:`GEN_SIGMA_LAWS`)."""
    if law == "tmax":
        return sigma_sid_tmax(n, generator)
    if law == "lognormal":
        return sigma_lognormal(n, generator)
    if law == "loguniform":
        return sigma_loguniform(n, generator)
    raise ValueError(f"gen_sigma must be one of {GEN_SIGMA_LAWS}, got {law!r}")
