"""Trees and flows: ForestFlow (Jolicoeur-Martineau et al., AISTATS 2024, arXiv 2309.09968), the public
baseline (one XGBoost regressor per noise level and class), and treeflow (Ramachandran & Sra, ICML 2026,
arXiv 2605.00414; no public code) read as a single booster over (x_t, t) or boosters warm-started
across noise levels [inferred]. Specs: ``forestflow``, ``treeflow``."""
from .evaluate import DATASETS, discriminator_auc, evaluate, load_split, utility
from .flow import FlowConfig, TreeFlow, XGBConfig, euler, fit_artifact_path, fit_key, interpolate, levels
from .procedures import GenerationOutput, TabularFlowGeneration

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
