"""DiScoFormer (Ilin & Sushko, arXiv 2511.05924): an equivariant set transformer mapping a sample set and query
points to log-density and score, trained on random Gaussian mixtures with exact targets; Gaussian KDE and
score-debiased KDE as baselines; the exact cross-attention construction of a Gaussian KDE (Props 3.3-3.6)."""
from .attention import CrossAttention
from .data import Task, random_gmm, sample_tasks
from .estimator import DensityScoreOutput, DiScoFormerEstimator, KDEEstimator, SDKDEEstimator, estimate_errors
from .kde import KDEAttentionBlock, gaussian_kde, kde_attention_block, kde_log_density_score, scott_factor, sd_kde, sdkde_factor, whiten
from .model import DiScoFormer, DiScoFormerConfig, build_discoformer

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
