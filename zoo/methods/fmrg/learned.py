"""A *learned*, imperfect velocity and two-time flow map of the toy mixture (spec ``fmrg``, variant ``learned``).

On the exact testbed DPS is handed the exact Tweedie denoiser, so the flow map's advantage (a better
look-ahead than Tweedie's one-step estimate) cannot exist. Here both arms use one learned generative model:

* ``vel``: the velocity ``u_theta(x, t)`` (MLP (x, t) -> 64 -> 64 -> 2, SiLU), trained by flow matching
  (Lipman et al., arXiv 2210.02747; Liu et al., arXiv 2209.03003) on fresh draws of the mixture with the
  rectified-flow interpolant ``x_t = (1 - t) x0 + t x1`` (t = 0 noise, t = 1 data), loss ``|u_theta(x_t, t) - (x1 - x0)|^2``.
  DPS's Tweedie endpoint is ``x1_hat = x + (1 - t) u_theta(x, t)``.
* ``fmap``: the two-time mean velocity ``u_phi(x, t, s)`` (MLP (x, t, s) -> 64 -> 64 -> 2), the flow map
  ``X_phi(x, t, s) = x + (s - t) u_phi(x, t, s)`` (the parameterisation of the authors' FLUX flow-map LoRA,
  github.com/jrrhuang/fmrg ``flux_two_timestep/``; Boffi, Albergo & Vanden-Eijnden, "flow map matching",
  arXiv 2406.07507), distilled by regression onto Dormand-Prince solutions of the *learned* ODE
  ``dx/dt = u_theta(x, t)`` (:func:`zoo.methods.fmrg.train.train_pair`). FMRG's look-ahead is ``X_phi(x, t, 1)``.

The model has the same two-time interface as :class:`~zoo.methods.fmrg.model.ExactFlowMapModel`
(``two_time``, ``mean_velocity``, ``velocity``, ``flow_map``, ``nfe``), so every sampler of the package runs on it
unchanged; ``log_prob`` is the *true* mixture's log-density (evaluation only) and ``ode`` integrates the learned
velocity (the distillation target and the ceiling (b) of the card).
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from registry.contract import factory
from zoo.common.gmm import _dopri5, build_mixture

from .params import LearnedFlowMapConfig

__all__ = ["LearnedFlowMapModel", "learned_flow_map_model"]


def _mlp(d_in: int, width: int, d_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, width), nn.SiLU(), nn.Linear(width, width), nn.SiLU(), nn.Linear(width, d_out)).double()


def _time_col(t: Any, x: torch.Tensor) -> torch.Tensor:
    tt = torch.as_tensor(t, dtype=x.dtype, device=x.device)
    return (tt.expand(x.shape[0]) if tt.ndim == 0 else tt.reshape(x.shape[0]))[:, None]


class LearnedFlowMapModel(nn.Module):
    """Learned velocity ``vel`` and two-time flow map ``fmap`` (float64 MLPs) with the two-time interface."""

    two_time = True

    def __init__(self, mixture: str = "gmm3", width: int = 64):
        super().__init__()
        # the true data law, for log_prob (evaluation) and the 'mode' reward only; kept out of the state dict
        object.__setattr__(self, "gmm", build_mixture(mixture))
        d = self.gmm.dim
        self.vel = _mlp(d + 1, width, d)
        self.fmap = _mlp(d + 2, width, d)
        self.nfe = 0

    @property
    def dtype(self) -> torch.dtype:
        return torch.float64

    @property
    def dim(self) -> int:
        return self.gmm.dim

    def reset_nfe(self) -> None:
        self.nfe = 0

    def _vel(self, x: torch.Tensor, t: Any) -> torch.Tensor:
        return self.vel(torch.cat([x, _time_col(t, x)], dim=1))

    def velocity(self, x: torch.Tensor, t: float) -> torch.Tensor:
        """Learned instantaneous velocity ``u_theta(x, t)`` (one NFE)."""
        self.nfe += 1
        return self._vel(x, t)

    def mean_velocity(self, x: torch.Tensor, t: float, s: float) -> torch.Tensor:
        """Learned mean velocity ``u_phi(x, t, s)``, ``X_phi(x, t, s) = x + (s - t) u_phi``; at ``s = t`` the
        learned velocity (the tangent condition). One NFE."""
        if float(s) == float(t):
            return self.velocity(x, t)
        self.nfe += 1
        return self.fmap(torch.cat([x, _time_col(t, x), _time_col(s, x)], dim=1))

    def flow_map(self, x: torch.Tensor, t: float, s: float) -> torch.Tensor:
        """``X_phi(x, t, s)`` (one NFE)."""
        return x + (float(s) - float(t)) * self.mean_velocity(x, t, s)

    @torch.no_grad()
    def ode(self, x: torch.Tensor, t: float, s: float, rtol: float = 1e-7, atol: float = 1e-7) -> torch.Tensor:
        """Dormand-Prince 5(4) solution of the learned ODE ``dx/du = u_theta(x, u)`` from ``t`` to ``s`` (not counted as NFE)."""
        return _dopri5(lambda u, y: self._vel(y, u), float(t), float(s), x.to(torch.float64), rtol, atol)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """Log-density of the *true* mixture (the benchmark's on-manifold score)."""
        return self.gmm.log_prob(x, 0.0)

    def forward(self, x: torch.Tensor, t: float, s: float) -> torch.Tensor:
        return self.mean_velocity(x, t, s)


@factory(params=LearnedFlowMapConfig)
def learned_flow_map_model(mixture: str = "gmm3", width: int = 64) -> LearnedFlowMapModel:
    """Factory for specs (``source: zoo``, the weights from ``zoo train fmrg``): an untrained
    :class:`LearnedFlowMapModel` the engine fills from the shipped safetensors; inference only (no parameter grads)."""
    return LearnedFlowMapModel(mixture, width).requires_grad_(False).eval()
