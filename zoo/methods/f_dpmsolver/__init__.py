"""F-DPMSolver (arXiv 2512.24927): forward-value first-order diffusion sampler as a diffusers scheduler."""
from .sampler import FDPMHalfSumSampler, FDPMSolverSampler
from .scheduler import FDPMSolverScheduler, fdpm_sample

__all__ = ["FDPMSolverScheduler", "FDPMSolverSampler", "FDPMHalfSumSampler", "fdpm_sample"]
