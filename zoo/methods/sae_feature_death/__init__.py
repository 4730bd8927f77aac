"""SAE feature death from activation outliers (Simon, Adams & Zou, ICML 2026, arXiv 2605.31518).

Diagnostics (gamma, effective rank, closed-form death predictions, dead-by-pathway accounting,
preprocessing fixes) and two procedures: :class:`FeatureDeathReport` (analysis) and
:class:`CentredTraining` (training dynamics)."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = [
    "CentredTraining",
    "CentredTrainingOutput",
    "DeathCounts",
    "FeatureDeathOutput",
    "FeatureDeathReport",
    "StreamSurvey",
    "StreamSurveyOutput",
    "dead_by_pathway",
    "effective_rank",
    "format_report",
    "format_survey",
    "gamma",
    "plot_report",
    "predicted_dead_by_relu",
    "predicted_dead_by_topk",
    "preprocess",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "CentredTraining": ".analysis",
    "CentredTrainingOutput": ".analysis",
    "FeatureDeathOutput": ".analysis",
    "FeatureDeathReport": ".analysis",
    "StreamSurvey": ".analysis",
    "StreamSurveyOutput": ".analysis",
    "format_report": ".analysis",
    "format_survey": ".analysis",
    "plot_report": ".analysis",
    "DeathCounts": ".diagnostics",
    "dead_by_pathway": ".diagnostics",
    "effective_rank": ".diagnostics",
    "gamma": ".diagnostics",
    "predicted_dead_by_relu": ".diagnostics",
    "predicted_dead_by_topk": ".diagnostics",
    "preprocess": ".diagnostics",
})

if TYPE_CHECKING:
    from .analysis import (
        CentredTraining,
        CentredTrainingOutput,
        FeatureDeathOutput,
        FeatureDeathReport,
        StreamSurvey,
        StreamSurveyOutput,
        format_report,
        format_survey,
        plot_report,
    )
    from .diagnostics import (
        DeathCounts,
        dead_by_pathway,
        effective_rank,
        gamma,
        predicted_dead_by_relu,
        predicted_dead_by_topk,
        preprocess,
    )
