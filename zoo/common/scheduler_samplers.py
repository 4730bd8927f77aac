"""Scheduler samplers as zoo procedures: the base :class:`SchedulerSampler` (a diffusers scheduler + the one
pipeline loop, :func:`zoo.common.scheduler_loop.run_scheduler`) and thin procedures around diffusers' own
schedulers (DDIM, DPM-Solver++, UniPC). The ``ddim``, ``dpm-solver-pp`` and ``unipc`` specs sample with them
(through :mod:`zoo.methods.diffusers_baselines`); F-DPMSolver subclasses :class:`SchedulerSampler` and uses the
three as its benchmark's baselines.

The loop is exactly what diffusers pipelines do (``DiTPipeline`` / SD pipelines)::

    scheduler.set_timesteps(N)
    for t in scheduler.timesteps:
        model_input = scheduler.scale_model_input(x, t)
        out = model(model_input, t).sample
        x = scheduler.step(out, t, x).prev_sample

so that a sampler's behaviour here is its behaviour inside a pipeline. The model is any
``UNet2DModel``-style callable (``forward(sample, timestep).sample``); the toy variant uses the exact
Gaussian mixture ``zoo.common.gmm.AnalyticDiffusionModel``.

References: DDIM, Song et al., arXiv 2010.02502 (eq. 12 with eta = 0); DPM-Solver++(2M), Lu et al.,
arXiv 2211.01095 (Alg. 2); UniPC, Zhao et al., arXiv 2302.04867 (UniP-2 + UniC, B(h) = e^h - 1 "bh2").
Configurations are diffusers' defaults except ``timestep_spacing="trailing"`` (start at t = T - 1 like
F-DPMSolver; Lin et al. arXiv 2305.08891 Table 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

import torch
from pydantic import Field

from registry.contract import CliInputs, Procedure, ProcedureParams, seed_list
from registry.limits import Bound, Rows, Seeds
from registry.results import ImageOutput
from zoo.common.params import DDIMSamplerParams, DPMSolverPPSamplerParams, MultistepParams as _MultistepParams, SamplerCli, SchedulerSamplerParams, UniPCSamplerParams, VPParams as _VPParams  # noqa: F401 - the torch-free models (registry.declare)
from zoo.common.out_files import OutPath
from zoo.common.scheduler_loop import run_scheduler

__all__ = ["DiffusionOutput", "SchedulerSampler", "DDIMSampler", "DPMSolverPPSampler", "UniPCSampler", "sample_shape", "vp_config"]


@dataclass
class DiffusionOutput(ImageOutput):
    """What every scheduler sampler returns: ``samples``, a tensor (N, C, H, W) of images in [-1, 1]
    (``.images`` / ``.pil_images`` views) or (N, d) points for the analytic toy (no image views);
    ``out.samples``, ``out["samples"]`` and ``out[0]`` are the same tensor."""

    @property
    def images(self) -> Any:
        if self.samples.dim() != 4:
            raise ValueError(f"samples of shape {tuple(self.samples.shape)} are not images (N, C, H, W); use .samples")
        return super().images


def sample_shape(model: Any) -> tuple[int, ...]:
    """Per-row sample shape of a denoiser: ``(C, H, W)`` for image models, ``(d,)`` for the analytic mixture."""
    cfg = model.config
    size = getattr(cfg, "sample_size", None)
    if size is not None:
        hw = (size, size) if isinstance(size, int) else tuple(size)
        return (cfg.in_channels, *hw)
    gmm = getattr(model, "gmm", None)
    if gmm is None:
        raise ValueError("cannot infer the sample shape of this model (no sample_size, no gmm)")
    return (gmm.dim,)


class SchedulerSampler(Procedure):
    """Base class: a deterministic ODE sampler = a diffusers scheduler + the pipeline loop.

    Inputs: ``noise`` (``x_T``, shape ``(B, *sample_shape)``) or ``batch_size`` (noise drawn from the
    seed). Output: the final sample tensor ``(B, *sample_shape)`` in the model's dtype.

    ``seed`` may be a list of ``batch_size`` seeds (``per_row_seeds``): row j's noise is then the first
    row drawn from ``seeds[j]``, i.e. the noise of ``self(seed=seeds[j], batch_size=1)``; the loop itself is
    deterministic, so row j equals that one-row call. ``population_inputs(a, b)`` is ``batch_size = b - a``
    (unconditional samples: what ``zoo sample`` writes).
    """

    kind = "sampler"
    batch_independent: ClassVar[bool] = True
    per_row_seeds: ClassVar[bool] = True
    CliInputs = SamplerCli

    Params = SchedulerSamplerParams

    def __init__(self, models, params, device="cpu", dtype=None):
        super().__init__(models, params, device, dtype)
        self.model = self.models["denoiser"]
        self.scheduler = self.make_scheduler()

    # subclasses ------------------------------------------------------------
    def make_scheduler(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def nfe(self) -> int:
        """Model calls of one run (``len(timesteps)``)."""
        self.scheduler.set_timesteps(self.params.num_inference_steps)
        return len(self.scheduler.timesteps)

    def noise_range(self) -> tuple[float, float]:
        """EDM noise levels ``(sigma_start, sigma_end)`` the run integrates between (for the exact reference)."""
        raise NotImplementedError

    # the contract ------------------------------------------------------------
    @property
    def _dtype(self) -> torch.dtype:
        return getattr(self.model, "dtype", None) or torch.float32

    def draw_noise(self, batch_size: int, seed: int | Sequence[int]) -> torch.Tensor:
        """``x_T`` of ``batch_size`` rows from one generator seeded ``seed``, or (a list) row j from ``seed[j]``."""
        seeds = seed_list(seed, batch_size)
        if seeds is not None:
            return torch.cat([self.draw_noise(1, s) for s in seeds]) if seeds else self.draw_noise(0, 0)
        g = torch.Generator().manual_seed(int(seed))
        return torch.randn((batch_size, *sample_shape(self.model)), generator=g, dtype=torch.float64).to(self._dtype)

    @torch.no_grad()
    def __call__(self, *, seed: Seeds = 0, noise: Annotated[torch.Tensor, Bound("rows")] | None = None, batch_size: Rows = 4,
                 progress: bool = False) -> DiffusionOutput:
        x_T = self.draw_noise(batch_size, seed) if noise is None else noise.to(self._dtype)
        return DiffusionOutput(samples=run_scheduler(self.scheduler, self.model, x_T.to(self.device), self.params.num_inference_steps, progress=progress))

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"noise": self.draw_noise(batch_size, seed=12345)}

    def native(self) -> Any:
        """A ``diffusers.DDPMPipeline`` with this sampler's UNet and scheduler (a copy: the pipeline's
        runs never disturb this one): ``native(batch_size=B, generator=torch.Generator().manual_seed(s),
        num_inference_steps=N, output_type="latent").images`` equals ``self(seed=s, batch_size=B).samples``
        with the same N. Only for image UNets (the analytic toy has no image shape); see
        :mod:`zoo.common.scheduler_native`."""
        import copy

        from .scheduler_native import SchedulerPipeline

        if getattr(getattr(self.model, "config", None), "sample_size", None) is None:
            raise ValueError(f"{type(self).__name__}: no native diffusers pipeline for a non-image model ({type(self.model).__name__})")
        return SchedulerPipeline(unet=self.model, scheduler=copy.deepcopy(self.scheduler))

    def population_inputs(self, start: int, stop: int) -> dict[str, Any]:
        return {"batch_size": stop - start}

    def input_rows(self, inputs):
        return [{**inputs, "noise": inputs["noise"][i : i + 1]} for i in range(inputs["noise"].shape[0])]

    def output_rows(self, outputs):
        return [DiffusionOutput(samples=outputs.samples[i : i + 1]) for i in range(outputs.samples.shape[0])]

    def run_cli(self, inputs, seed: int) -> str:
        from .scheduler_report import cli_report

        return cli_report(self, inputs or self.CliInputs(), seed)


def vp_config(model: Any) -> dict[str, Any]:
    """The training schedule of the denoiser as diffusers scheduler kwargs (``num_train_timesteps``, ``beta_*``,
    ``prediction_type``), where it declares one (the analytic model does; ``UNet2DModel`` declares none)."""
    cfg = getattr(model, "config", {})
    keys = ("num_train_timesteps", "beta_start", "beta_end", "beta_schedule")
    out = {k: cfg[k] for k in keys if cfg.get(k) is not None}  # UNet2DModel has num_train_timesteps: None
    if cfg.get("prediction_type") is not None:
        out["prediction_type"] = cfg["prediction_type"]
    return out


def _sigma_of(alpha_bar: float) -> float:
    return math.sqrt((1 - alpha_bar) / alpha_bar) if alpha_bar < 1 else 0.0


class DDIMSampler(SchedulerSampler):
    """diffusers ``DDIMScheduler`` (eta = 0): ``x_{k+1} = alpha_{k+1} x0hat_k + sigma_{k+1} epsilonhat_k``."""

    Params = DDIMSamplerParams

    def make_scheduler(self):
        from diffusers import DDIMScheduler

        return DDIMScheduler(**vp_config(self.model), timestep_spacing=self.params.timestep_spacing, set_alpha_to_one=self.params.set_alpha_to_one, clip_sample=False)

    def noise_range(self):
        s = self.scheduler
        s.set_timesteps(self.params.num_inference_steps)
        ab = s.alphas_cumprod.double()
        t0, tl = int(s.timesteps[0]), int(s.timesteps[-1])
        prev = tl - s.config.num_train_timesteps // s.num_inference_steps
        ab_end = float(ab[prev]) if prev >= 0 else float(s.final_alpha_cumprod)
        return _sigma_of(float(ab[t0])), _sigma_of(ab_end)


class _MultistepSampler(SchedulerSampler):
    """diffusers multistep schedulers keep their noise levels in ``scheduler.sigmas``."""

    def noise_range(self):
        self.scheduler.set_timesteps(self.params.num_inference_steps)
        sig = self.scheduler.sigmas.double()
        return float(sig[0]), float(sig[-1])


class DPMSolverPPSampler(_MultistepSampler):
    """diffusers ``DPMSolverMultistepScheduler(algorithm_type="dpmsolver++")``: DPM-Solver++(2M)."""

    Params = DPMSolverPPSamplerParams

    def make_scheduler(self):
        from diffusers import DPMSolverMultistepScheduler

        p = self.params
        return DPMSolverMultistepScheduler(
            **vp_config(self.model), algorithm_type="dpmsolver++", solver_order=p.solver_order, lower_order_final=p.lower_order_final,
            final_sigmas_type=p.final_sigmas_type, timestep_spacing=p.timestep_spacing,
        )


class UniPCSampler(_MultistepSampler):
    """diffusers ``UniPCMultistepScheduler`` (UniP-2 predictor + UniC corrector, ``bh2``, x0-prediction)."""

    Params = UniPCSamplerParams

    def make_scheduler(self):
        from diffusers import UniPCMultistepScheduler

        p = self.params
        return UniPCMultistepScheduler(
            **vp_config(self.model), solver_order=p.solver_order, lower_order_final=p.lower_order_final, solver_type=p.solver_type,
            final_sigmas_type=p.final_sigmas_type, timestep_spacing=p.timestep_spacing,
        )
