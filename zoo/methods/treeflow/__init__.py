"""Trees and flows: ForestFlow (Jolicoeur-Martineau et al., AISTATS 2024, arXiv 2309.09968), the public
baseline (one XGBoost regressor per noise level and class), and treeflow (Ramachandran & Sra, ICML 2026,
arXiv 2605.00414; no public code) read as a single booster over (x_t, t) or boosters warm-started
across noise levels [inferred]. Specs: ``forestflow``, ``treeflow``."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = [
    "DATASETS",
    "FlowConfig",
    "GenerationOutput",
    "TabularFlowGeneration",
    "TreeFlow",
    "XGBConfig",
    "discriminator_auc",
    "euler",
    "evaluate",
    "fit_artifact_path",
    "fit_key",
    "interpolate",
    "levels",
    "load_split",
    "utility",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "DATASETS": ".evaluate",
    "discriminator_auc": ".evaluate",
    "evaluate": ".evaluate",
    "load_split": ".evaluate",
    "utility": ".evaluate",
    "FlowConfig": ".flow",
    "TreeFlow": ".flow",
    "XGBConfig": ".flow",
    "euler": ".flow",
    "fit_artifact_path": ".flow",
    "fit_key": ".flow",
    "interpolate": ".flow",
    "levels": ".flow",
    "GenerationOutput": ".procedures",
    "TabularFlowGeneration": ".procedures",
})

if TYPE_CHECKING:
    from .evaluate import DATASETS, discriminator_auc, evaluate, load_split, utility
    from .flow import FlowConfig, TreeFlow, XGBConfig, euler, fit_artifact_path, fit_key, interpolate, levels
    from .procedures import GenerationOutput, TabularFlowGeneration
