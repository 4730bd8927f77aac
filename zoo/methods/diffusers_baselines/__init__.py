"""Baselines that are diffusers' own schedulers (DDIM, DPM-Solver++, UniPC) as zoo procedures.

The samplers themselves live in :mod:`zoo.common.scheduler_samplers` (F-DPMSolver uses them too, as its
benchmark's baselines); this package is the ``ddim``, ``dpm-solver-pp`` and ``unipc`` specs' implementation:
their procedures (re-exported here, the specs' ``target:``) and their invariants."""
from typing import TYPE_CHECKING

from zoo.common.deprecation import install_aliases
from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
    from zoo.common.scheduler_samplers import DDIMSampler, DPMSolverPPSampler, SchedulerSampler, UniPCSampler

__all__ = ["DDIMSampler", "DPMSolverPPSampler", "SchedulerSampler", "UniPCSampler"]

#: Public names that moved (deprecated aliases until zoo 0.2; a plain literal, read statically by the public-names
#: test and the static index): the samplers, the scoring helpers and the native pipeline moved to zoo.common on
#: their second use (F-DPMSolver's sampler, metrics and benchmark), and the loop became zoo.common's one loop.
__deprecated_aliases__ = {
    "": {"run_scheduler": "zoo.common.scheduler_loop:run_scheduler"},
    "sampler": {
        "DDIMSampler": "zoo.common.scheduler_samplers:DDIMSampler",
        "DPMSolverPPSampler": "zoo.common.scheduler_samplers:DPMSolverPPSampler",
        "DiffusionOutput": "zoo.common.scheduler_samplers:DiffusionOutput",
        "SchedulerSampler": "zoo.common.scheduler_samplers:SchedulerSampler",
        "UniPCSampler": "zoo.common.scheduler_samplers:UniPCSampler",
        "run_scheduler": "zoo.common.scheduler_loop:run_scheduler",
        "sample_shape": "zoo.common.scheduler_samplers:sample_shape",
    },
    "report": {
        "as_procedure": "zoo.common.scheduler_report:as_procedure",
        "cli_report": "zoo.common.scheduler_report:cli_report",
        "evaluate": "zoo.common.scheduler_report:evaluate",
        "exact_endpoint": "zoo.common.scheduler_report:exact_endpoint",
        "toy_nfe": "zoo.common.scheduler_report:toy_nfe",
        "toy_path_error": "zoo.common.scheduler_report:toy_path_error",
        "with_steps": "zoo.common.scheduler_report:with_steps",
    },
    "native": {"SchedulerPipeline": "zoo.common.scheduler_native:SchedulerPipeline"},
}
__getattr__, __dir__ = lazy_exports(__name__, {
    "DDIMSampler": "zoo.common.scheduler_samplers", "DPMSolverPPSampler": "zoo.common.scheduler_samplers",
    "SchedulerSampler": "zoo.common.scheduler_samplers", "UniPCSampler": "zoo.common.scheduler_samplers",
}, fallback=install_aliases(__name__, __deprecated_aliases__))
