"""The exact two-time flow-map model of a Gaussian mixture (the toy's stand-in for FLUX + flow-map LoRA).

Paper convention t: 0 (noise) -> 1 (data), rectified-flow interpolant ``x_t = (1 - t) x0 + t x1``
(``/work/shared/methods/gaussian-mixture-testbed.md`` section 1b). The flow map ``X_{t,s}`` of
``dx/du = b_u(x)`` comes from :func:`zoo.common.flows.rf_flow_map` (closed form for one Gaussian, float64
Dormand-Prince otherwise) and is exposed through the same **two-time interface** as the authors' flow-map
network (github.com/jrrhuang/fmrg, ``flux_two_timestep/``): the mean velocity
``u(x, t, s) = (X_{t,s}(x) - x) / (s - t)`` with ``u(x, t, t) = b_t(x)`` (Boffi, Albergo & Vanden-Eijnden,
"flow map matching", arXiv 2406.07507, eq. for the Lagrangian map), so ``X_{t,s}(x) = x + (s - t) u(x, t, s)``.
Every call of :meth:`mean_velocity` is one network function evaluation (NFE) and is counted.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from registry.contract import factory
from zoo.common.flows import rf_flow_map, rf_velocity
from zoo.common.gmm import GaussianMixture, build_mixture

from .params import ExactFlowMapConfig

__all__ = ["ExactFlowMapModel", "exact_flow_map_model", "has_two_time_interface"]


def has_two_time_interface(model: Any) -> bool:
    """True when ``model`` advertises the two-time flow-map interface (``two_time = True`` and a callable
    ``mean_velocity(x, t, s)``), the requirement of FMRG's ``flow_map*`` modes (method note section 8)."""
    return bool(getattr(model, "two_time", False)) and callable(getattr(model, "mean_velocity", None))


class ExactFlowMapModel(nn.Module):
    """Exact rectified-flow flow map of a :class:`~zoo.common.gmm.GaussianMixture` with the two-time interface.

    ``mean_velocity(x, t, s)`` (one NFE, differentiable through autograd: the closed form for one Gaussian,
    the Dormand-Prince steps otherwise), ``flow_map(x, t, s)`` (= ``x + (s - t) u``), ``velocity(x, t)``,
    ``log_prob(x)`` (exact data log-density), ``nfe`` (calls since :meth:`reset_nfe`).
    """

    two_time = True

    def __init__(self, gmm: GaussianMixture, rtol: float = 1e-8, atol: float = 1e-8):
        super().__init__()
        self.gmm = gmm
        self.rtol, self.atol = float(rtol), float(atol)
        self.nfe = 0
        self.register_parameter("_anchor", nn.Parameter(torch.zeros((), dtype=torch.float64), requires_grad=False))

    @property
    def dtype(self) -> torch.dtype:
        return torch.float64

    @property
    def dim(self) -> int:
        return self.gmm.dim

    def reset_nfe(self) -> None:
        self.nfe = 0

    def velocity(self, x: torch.Tensor, t: float) -> torch.Tensor:
        """Instantaneous velocity ``b_t(x)`` (one NFE)."""
        self.nfe += 1
        return rf_velocity(self.gmm, x, t)

    def mean_velocity(self, x: torch.Tensor, t: float, s: float) -> torch.Tensor:
        """``u(x, t, s) = (X_{t,s}(x) - x) / (s - t)``; ``u(x, t, t) = b_t(x)``. One NFE."""
        t, s = float(t), float(s)
        if s == t:
            return self.velocity(x, t)
        self.nfe += 1
        return (rf_flow_map(self.gmm, x, t, s, rtol=self.rtol, atol=self.atol) - x) / (s - t)

    def flow_map(self, x: torch.Tensor, t: float, s: float) -> torch.Tensor:
        """``X_{t,s}(x) = x + (s - t) u(x, t, s)`` (one NFE)."""
        return x + (float(s) - float(t)) * self.mean_velocity(x, t, s)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Exact data log-density ``log p(x)`` (the on-manifold score of the benchmark)."""
        return self.gmm.log_prob(x, 0.0)

    def forward(self, x: torch.Tensor, t: float, s: float) -> torch.Tensor:
        return self.mean_velocity(x, t, s)


@factory(params=ExactFlowMapConfig)
def exact_flow_map_model(mixture: str = "gmm3", rtol: float = 1e-8, atol: float = 1e-8, **explicit: Any) -> ExactFlowMapModel:
    """Factory for specs (``source: zoo``): a named toy mixture of :mod:`zoo.common.gmm` (or explicit
    ``weights/means/variances``) as an exact two-time flow-map model."""
    explicit = {k: v for k, v in explicit.items() if v is not None}
    gmm = build_mixture(mixture, **explicit) if explicit else build_mixture(mixture)
    return ExactFlowMapModel(gmm, rtol=rtol, atol=atol).eval()
