"""Floating-point networks with AD represent (almost) all float functions and their gradients
(Hwang et al., ICML 2026, arXiv 2605.01702): this project's explicit construction whose values and
``torch.autograd`` input gradients match arbitrary target tables bit-exactly on a float grid."""
from .analysis import ExactnessOutput, ExactnessReport, format_report, measure, plot_report, random_targets
from .construction import GATES, UNSUPPORTED_GATES, ConstructionError, ExactNetwork, build_network, exact_match, float_grid, values_and_grads

__all__ = [
    "GATES",
    "UNSUPPORTED_GATES",
    "ConstructionError",
    "ExactNetwork",
    "ExactnessOutput",
    "ExactnessReport",
    "build_network",
    "exact_match",
    "float_grid",
    "format_report",
    "measure",
    "plot_report",
    "random_targets",
    "values_and_grads",
]
