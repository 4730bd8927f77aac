"""ASGD generalisation via on-average model stability (Xie & Lei, ICML 2026, poster 62429; abstract
only): a vectorised asynchronous-SGD simulator, coupled runs on neighbouring datasets, and the
stability / generalisation-gap sweeps the spec ``asgd-stability`` gates on."""
from .analysis import StabilityOutput, StabilityReport, format_report, plot_report, slope_with_se
from .simulator import Problem, StabilityResult, delay_pmf, make_schedule, participation_weights, run_coupled, sgd_reference

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
