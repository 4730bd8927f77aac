"""Floating-point networks with AD represent (almost) all float functions and their gradients
(Hwang et al., ICML 2026, arXiv 2605.01702): this project's explicit construction whose values and
``torch.autograd`` input gradients match arbitrary target tables bit-exactly on a float grid."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

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

__getattr__, __dir__ = lazy_exports(__name__, {
    "ExactnessOutput": ".analysis",
    "ExactnessReport": ".analysis",
    "format_report": ".analysis",
    "measure": ".analysis",
    "plot_report": ".analysis",
    "random_targets": ".analysis",
    "GATES": ".construction",
    "UNSUPPORTED_GATES": ".construction",
    "ConstructionError": ".construction",
    "ExactNetwork": ".construction",
    "build_network": ".construction",
    "exact_match": ".construction",
    "float_grid": ".construction",
    "values_and_grads": ".construction",
})

if TYPE_CHECKING:
    from .analysis import ExactnessOutput, ExactnessReport, format_report, measure, plot_report, random_targets
    from .construction import GATES, UNSUPPORTED_GATES, ConstructionError, ExactNetwork, build_network, exact_match, float_grid, values_and_grads
