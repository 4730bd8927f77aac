"""Baselines that are diffusers' own schedulers (DDIM, DPM-Solver++, UniPC) as zoo procedures."""
from .sampler import DDIMSampler, DPMSolverPPSampler, SchedulerSampler, UniPCSampler, run_scheduler

__all__ = ["DDIMSampler", "DPMSolverPPSampler", "SchedulerSampler", "UniPCSampler", "run_scheduler"]
