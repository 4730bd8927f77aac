"""The torch-free params module of the diffusers scheduler baselines, read by ``zoo validate`` (see
:mod:`registry.declare`): the samplers and the analytic toy are zoo.common's, so are their declarations."""
from __future__ import annotations

from zoo.common.params import TARGETS as COMMON

TARGETS = {
    "SchedulerSampler": COMMON["SchedulerSampler"],
    "DDIMSampler": COMMON["DDIMSampler"],
    "DPMSolverPPSampler": COMMON["DPMSolverPPSampler"],
    "UniPCSampler": COMMON["UniPCSampler"],
    "invariants:analytic_model": COMMON["analytic_model"],
}
