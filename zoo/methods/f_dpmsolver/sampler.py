"""The F-DPMSolver sampler procedure (spec ``f-dpmsolver``): :class:`FDPMSolverScheduler` in the
diffusers pipeline loop of :func:`zoo.methods.diffusers_baselines.sampler.run_scheduler`.

Defaults follow the paper's code (https://github.com/Na-Li66/F-DPMSolver, ``sampler.py`` / ``run.sh``):
order-1 look-ahead ("F-DDIM"), ``e_0 := x_T`` (N model calls for N steps), the LDM grid
``round(linspace(0, T-1, N+1))`` reversed (``timestep_spacing="linspace"``), or the EDM Karras grid
(``use_karras_sigmas``, sigma 80 -> 0.002, rho 7).
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from registry.contract import ProcedureParams
from zoo.methods.diffusers_baselines.sampler import SchedulerSampler, _vp_config

from .scheduler import FDPMSolverScheduler


class FDPMSolverSampler(SchedulerSampler):
    """F-DPMSolver / F-DDIM (arXiv 2512.24927, section 4 of the method note) on any ``UNet2DModel``-style denoiser."""

    class Params(ProcedureParams):
        num_inference_steps: int = Field(10, ge=1, le=1000, description="N steps (= N model calls with first_eps=approx)")
        solver_order: int = Field(1, ge=1, le=3, description="look-ahead predictor order p (1 = F-DDIM)")
        first_eps: Literal["approx", "evaluate"] = "approx"
        timestep_spacing: Literal["linspace", "leading", "trailing"] = "linspace"
        use_karras_sigmas: bool = False
        sigma_min: float | None = Field(None, ge=1e-6, le=1e4, description="floor 1e-6: log(sigma) must stay finite")
        sigma_max: float | None = Field(None, ge=1e-6, le=1e4)
        rho: float = Field(7.0, gt=0, le=100)

        @model_validator(mode="after")
        def _range(self):
            if self.sigma_min is not None and self.sigma_max is not None and self.sigma_min >= self.sigma_max:
                raise ValueError("sigma_min must be < sigma_max")
            return self

    def make_scheduler(self) -> FDPMSolverScheduler:
        p = self.params
        return FDPMSolverScheduler(
            **_vp_config(self.model), solver_order=p.solver_order, first_eps=p.first_eps, timestep_spacing=p.timestep_spacing,
            use_karras_sigmas=p.use_karras_sigmas, sigma_min=p.sigma_min, sigma_max=p.sigma_max, rho=p.rho,
        )

    def noise_range(self) -> tuple[float, float]:
        self.scheduler.set_timesteps(self.params.num_inference_steps)
        sig = self.scheduler.grid_sigmas
        return float(sig[0]), float(sig[-1])
