"""The analytic PFGM++ teacher and the small networks of the IPFM toy (``specs/pfgmpp.yaml``, ``specs/ipfm.yaml``).

The teacher is *exact*: the PFGM++ posterior mean ("denoiser", Xu et al., arXiv 2302.04265, eq. 9 / sec. 4) of a
Gaussian mixture under the perturbation kernel ``p_r(x | y) ~ (||x - y||^2 + r^2)^{-(N + D)/2}``, ``r = sigma sqrt(D)``,
computed by :func:`zoo.common.flows.pfgmpp_denoise` (a Gamma scale-mixture quadrature; ``D = inf`` is the Gaussian
diffusion denoiser). So any distillation failure on the toy is the distiller's, never the teacher's.

The learned networks (generator ``G_theta`` and fake field ``f_psi``) use EDM preconditioning (Karras et al.,
arXiv 2206.00364, Table 1): ``f(x, sigma) = c_skip x + c_out F(c_in x, c_noise)`` with
``c_skip = sigma_d^2 / (sigma^2 + sigma_d^2)``, ``c_out = sigma sigma_d / sqrt(sigma^2 + sigma_d^2)``,
``c_in = 1 / sqrt(sigma^2 + sigma_d^2)``, ``c_noise = log(sigma) / 4``; ``F`` is :class:`zoo.common.mlp_diffusion.MLPDenoiser`.
"""
from __future__ import annotations

import math
from typing import Annotated, Any, Literal

import torch
from pydantic import Field
from torch import nn

from registry.contract import FactoryParams, factory
from zoo.common.flows import pfgmpp_denoise, pfgmpp_noise
from zoo.common.gmm import TOY_MIXTURES, GaussianMixture, build_mixture
from zoo.common.mlp_diffusion import MLPDenoiser

DValue = Annotated[int, Field(ge=1, le=10_000_000)] | Literal["inf"]

#: 8 modes on a circle of radius 2, variance 0.02 (the note's suggested 2-D law, section 6)
RING8 = {"weights": [1.0] * 8, "means": [[2 * math.cos(2 * math.pi * k / 8), 2 * math.sin(2 * math.pi * k / 8)] for k in range(8)],
         "variances": [0.02] * 8}


def as_D(D: Any) -> float:
    """``"inf"`` / ``None`` / ``math.inf`` -> ``inf``; a positive integer -> float."""
    if D is None or D == "inf" or (isinstance(D, float) and math.isinf(D)):
        return math.inf
    D = float(D)
    if D < 1:
        raise ValueError(f"D must be an integer >= 1 or 'inf', got {D}")
    return D


def make_mixture(name: str) -> GaussianMixture:
    if name == "ring8":
        return GaussianMixture(RING8["weights"], RING8["means"], variances=RING8["variances"])
    return build_mixture(name)


class AnalyticPFGMPP(nn.Module):
    """The exact PFGM++ teacher of a Gaussian mixture at a fixed ``D``: ``denoise(x, sigma)`` = E[y | x] under the kernel.

    Also exposes the data law (``gmm``: ``sample``, ``log_prob``) for metrics, ``prior(n, sigma_max)`` (the heavy-tailed
    PFGM++ prior ``x_T = kernel sample around 0 at r_max = sigma_max sqrt(D)``) and ``sigma_data``. ``calls`` counts
    denoiser evaluations (NFE accounting).
    """

    def __init__(self, mixture: str = "gmm3", D: Any = 128, nodes: int = 201):
        super().__init__()
        self.gmm = make_mixture(mixture)
        self.mixture, self.D, self.nodes = mixture, as_D(D), nodes
        self.calls = 0

    @property
    def dim(self) -> int:
        return self.gmm.dim

    @property
    def sigma_data(self) -> float:
        """Per-coordinate data standard deviation (EDM's ``sigma_d``): ``sqrt(tr Cov / N)`` of the mixture."""
        g = self.gmm
        w = g.log_weights.exp()
        mean = (w[:, None] * g.means).sum(0)
        spread = (w * (g.evals.sum(-1) + ((g.means - mean) ** 2).sum(-1))).sum()  # E||y - E y||^2
        return float((spread / g.dim).sqrt())

    def denoise(self, x: torch.Tensor, sigma: Any) -> torch.Tensor:
        """Exact PFGM++ posterior mean (float64) at ``sigma`` (scalar or ``(B,)``; ``r = sigma sqrt(D)``), differentiable in ``x``."""
        self.calls += 1
        sig = sigma if torch.is_tensor(sigma) else float(sigma)
        return pfgmpp_denoise(self.gmm, x.double(), sig, self.D, nodes=self.nodes)

    def prior(self, n: int, sigma_max: float, generator: torch.Generator | None = None) -> torch.Tensor:
        return pfgmpp_noise(n, self.dim, sigma_max, self.D, generator)


class TeacherConfig(FactoryParams):
    """``config`` of :func:`analytic_pfgmpp`."""

    mixture: Literal[tuple(sorted(TOY_MIXTURES) + ["ring8"])] = "gmm3"  # type: ignore[valid-type]
    D: DValue = 128
    nodes: int = Field(201, ge=33, le=4001, description="log-w trapezoid nodes of the exact denoiser")


@factory(params=TeacherConfig)
def analytic_pfgmpp(mixture: str = "gmm3", D: Any = 128, nodes: int = 201) -> AnalyticPFGMPP:
    """Factory for specs (``source: zoo``): the exact PFGM++ teacher of a named toy mixture at ``D``."""
    return AnalyticPFGMPP(mixture, D, nodes).eval()


def edm_coefficients(sigma: torch.Tensor, sigma_d: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``c_skip, c_out, c_in, c_noise`` of EDM (Karras et al. 2022, Table 1), shaped ``(B, 1)`` (c_noise ``(B,)``)."""
    s = sigma.reshape(-1, 1)
    c_skip = sigma_d**2 / (s**2 + sigma_d**2)
    c_out = s * sigma_d / (s**2 + sigma_d**2).sqrt()
    c_in = 1 / (s**2 + sigma_d**2).sqrt()
    return c_skip, c_out, c_in, sigma.reshape(-1).log() / 4


class EDMField(nn.Module):
    """A learned field ``f(x, sigma)`` with EDM preconditioning around an :class:`MLPDenoiser` (float32).

    Used both as the fake field ``f_psi`` and, evaluated at the fixed ``sigma_init``, as the one-step generator
    ``G_theta(z) = f_theta(z, sigma_init)`` (the SiD / IPFM generator parameterisation).
    """

    def __init__(self, dim: int, sigma_data: float, width: int = 128, layers: int = 3):
        super().__init__()
        self.sigma_data = float(sigma_data)
        self.net = MLPDenoiser(dim, 0, width, layers, time_dim=32)

    def forward(self, x: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
        sig = torch.as_tensor(sigma, dtype=torch.float32).reshape(-1).expand(x.shape[0])
        c_skip, c_out, c_in, c_noise = edm_coefficients(sig, self.sigma_data)
        xf = x.float()
        return c_skip * xf + c_out * self.net(c_in * xf, 250.0 * c_noise)
