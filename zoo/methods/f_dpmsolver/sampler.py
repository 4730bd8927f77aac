"""The F-DPMSolver sampler procedures (spec ``f-dpmsolver``): :class:`FDPMSolverScheduler` in the
diffusers pipeline loop of :func:`zoo.common.scheduler_loop.run_scheduler`, and the half-sum
``(DDIM + F-DDIM) / 2`` on the same grid.

Defaults follow the paper's code (https://github.com/Na-Li66/F-DPMSolver, ``sampler.py`` / ``run.sh``):
order-1 look-ahead ("F-DDIM"), ``e_0 := x_T`` (N model calls for N steps), the LDM grid
``round(linspace(0, T-1, N+1))`` reversed (``timestep_spacing="linspace"``), or the EDM Karras grid
(``use_karras_sigmas``, sigma 80 -> 0.002, rho 7).
"""
from __future__ import annotations

from typing import Annotated, Any

import torch

from registry.limits import Bound, Rows, Seeds
from zoo.common.scheduler_loop import run_scheduler
from zoo.common.scheduler_samplers import DiffusionOutput, SchedulerSampler, vp_config

from .params import BoundedFloat, FDPMSolverSamplerParams  # noqa: F401 - moved to the params module (BoundedFloat re-exported)
from .scheduler import FDPMSolverScheduler, _to_eps_x0


def model_data_mean(model: Any) -> float | list[float]:
    """The data mean of a model that knows it: a ``data_mean`` attribute (the digits UNet), or the analytic mixture's
    exact mean ``sum_k pi_k mu_k``."""
    if getattr(model, "data_mean", None) is not None:
        return model.data_mean
    gmm = getattr(model, "gmm", None)
    if gmm is None:
        raise ValueError("first_eps='mean' needs data_mean (this model does not know its data law; pass the data mean)")
    return [float(v) for v in (gmm.log_weights.exp()[:, None] * gmm.means).sum(0)]


def grid_ddim(model: Any, scheduler: FDPMSolverScheduler, x_T: torch.Tensor) -> torch.Tensor:
    """DDIM (eta = 0; Song et al. arXiv 2010.02502 eq. 12) on the F-DPMSolver grid ``t_0 > ... > t_N`` of a scheduler
    whose ``set_timesteps`` was called: N model calls at ``t_0 ... t_{N-1}`` (the authors' DDIM baseline protocol: same
    grid, same end level ``sigma(t_N) > 0``). x0 and eps are frozen at the left end of each step."""
    a, s, ts = scheduler.grid_alphas, scheduler.grid_vp_sigmas, scheduler.grid_timesteps
    cdt = torch.float64 if x_T.dtype == torch.float64 else torch.float32
    x = x_T.to(cdt)
    for k in range(len(a) - 1):
        out = model(x.to(x_T.dtype), ts[k]).sample.to(cdt)
        eps, x0 = _to_eps_x0(out, x, a[k], s[k], scheduler.config.prediction_type)
        x = a[k + 1] * x0 + s[k + 1] * eps
    return x.to(x_T.dtype)


class FDPMSolverSampler(SchedulerSampler):
    """F-DPMSolver / F-DDIM (arXiv 2512.24927, section 4 of the method note) on any ``UNet2DModel``-style denoiser."""

    Params = FDPMSolverSamplerParams

    def make_scheduler(self) -> FDPMSolverScheduler:
        p = self.params
        mean = 0.0
        if p.first_eps == "mean":
            mean = p.data_mean if p.data_mean is not None else model_data_mean(self.model)
        return FDPMSolverScheduler(
            **vp_config(self.model), solver_order=p.solver_order, first_eps=p.first_eps, data_mean=mean, timestep_spacing=p.timestep_spacing,
            use_karras_sigmas=p.use_karras_sigmas, sigma_min=p.sigma_min, sigma_max=p.sigma_max, rho=p.rho,
        )

    def noise_range(self) -> tuple[float, float]:
        self.scheduler.set_timesteps(self.params.num_inference_steps)
        sig = self.scheduler.grid_sigmas
        return float(sig[0]), float(sig[-1])


class FDPMHalfSumSampler(FDPMSolverSampler):
    """``(DDIM + F-DDIM) / 2`` on the same grid: the leading errors of the two first-order samplers have opposite signs
    and nearly equal size (method note section 6), so their average is second order (error ratio ~0.25 per doubling of
    N; invariant ``half-sum-second-order``). Our construction from the paper's error analysis, not a sampler of the
    paper. Costs 2N model calls for N steps (two trajectories: DDIM at t_0 ... t_{N-1}, F-DDIM at t_1 ... t_N; one more
    with first_eps="evaluate")."""

    calls_per_step = 2

    def native(self) -> Any:
        """No single diffusers pipeline runs two trajectories and averages them."""
        raise ValueError("the half-sum sampler has no native diffusers pipeline (it averages two trajectories); use f-ddim's")

    def nfe(self) -> int:
        self.scheduler.set_timesteps(self.params.num_inference_steps)
        return 2 * self.params.num_inference_steps + (1 if self.params.first_eps == "evaluate" else 0)

    @torch.no_grad()
    def __call__(self, *, seed: Seeds = 0, noise: Annotated[torch.Tensor, Bound("rows")] | None = None, batch_size: Rows = 4, progress: bool = False) -> DiffusionOutput:
        x_T = (self.draw_noise(batch_size, seed) if noise is None else noise.to(self._dtype)).to(self.device)
        f = run_scheduler(self.scheduler, self.model, x_T, self.params.num_inference_steps, progress=progress)
        d = grid_ddim(self.model, self.scheduler, x_T)
        return DiffusionOutput(samples=0.5 * (f + d))
