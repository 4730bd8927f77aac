"""DiScoFormer (Ilin & Sushko, arXiv 2511.05924): an equivariant set transformer mapping a sample set and query
points to log-density and score, trained on random Gaussian mixtures with exact targets; Gaussian KDE and
score-debiased KDE as baselines; the exact cross-attention construction of a Gaussian KDE (Props 3.3-3.6)."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = [
    "CrossAttention",
    "DensityScoreOutput",
    "DiScoFormer",
    "DiScoFormerConfig",
    "DiScoFormerEstimator",
    "KDEAttentionBlock",
    "KDEEstimator",
    "SDKDEEstimator",
    "Task",
    "build_discoformer",
    "estimate_errors",
    "gaussian_kde",
    "kde_attention_block",
    "kde_log_density_score",
    "random_gmm",
    "sample_tasks",
    "scott_factor",
    "sd_kde",
    "sdkde_factor",
    "whiten",
]

__getattr__, __dir__ = lazy_exports(__name__, {
    "CrossAttention": ".attention",
    "Task": ".data",
    "random_gmm": ".data",
    "sample_tasks": ".data",
    "DensityScoreOutput": ".estimator",
    "DiScoFormerEstimator": ".estimator",
    "KDEEstimator": ".estimator",
    "SDKDEEstimator": ".estimator",
    "estimate_errors": ".estimator",
    "KDEAttentionBlock": ".kde",
    "gaussian_kde": ".kde",
    "kde_attention_block": ".kde",
    "kde_log_density_score": ".kde",
    "scott_factor": ".kde",
    "sd_kde": ".kde",
    "sdkde_factor": ".kde",
    "whiten": ".kde",
    "DiScoFormer": ".model",
    "DiScoFormerConfig": ".model",
    "build_discoformer": ".model",
})

if TYPE_CHECKING:
    from .attention import CrossAttention
    from .data import Task, random_gmm, sample_tasks
    from .estimator import DensityScoreOutput, DiScoFormerEstimator, KDEEstimator, SDKDEEstimator, estimate_errors
    from .kde import KDEAttentionBlock, gaussian_kde, kde_attention_block, kde_log_density_score, scott_factor, sd_kde, sdkde_factor, whiten
    from .model import DiScoFormer, DiScoFormerConfig, build_discoformer
