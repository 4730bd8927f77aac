"""ASGD generalisation via on-average model stability (Xie & Lei, ICML 2026, poster 62429; abstract
only): a vectorised asynchronous-SGD simulator, coupled runs on neighbouring datasets, and the
stability / generalisation-gap sweeps the spec ``asgd-stability`` gates on."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = [
    "Problem",
    "StabilityOutput",
    "StabilityReport",
    "StabilityResult",
    "delay_pmf",
    "format_report",
    "make_schedule",
    "participation_weights",
    "plot_report",
    "run_coupled",
    "sgd_reference",
    "slope_with_se",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "StabilityOutput": ".analysis",
    "StabilityReport": ".analysis",
    "format_report": ".analysis",
    "plot_report": ".analysis",
    "slope_with_se": ".analysis",
    "Problem": ".simulator",
    "StabilityResult": ".simulator",
    "delay_pmf": ".simulator",
    "make_schedule": ".simulator",
    "participation_weights": ".simulator",
    "run_coupled": ".simulator",
    "sgd_reference": ".simulator",
})

if TYPE_CHECKING:
    from .analysis import StabilityOutput, StabilityReport, format_report, plot_report, slope_with_se
    from .simulator import Problem, StabilityResult, delay_pmf, make_schedule, participation_weights, run_coupled, sgd_reference
