"""Metric checks of ``specs/discoformer.yaml``: ``fn(pipeline, **check_params) -> float``.

Each evaluates the pipeline's trained DiScoFormer (role ``estimator``) and the KDE baselines on the same fixed
held-out random mixtures (:func:`zoo.methods.discoformer.evaluation.compare`, seed ``EVAL_SEED``); the
comparison is computed once per pipeline and parameter set (``Pipeline.memo``)."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from .evaluation import compare, symmetry_errors
from .params import LearnedSymmetryParams, LogDensityMSEParams, RelativeScoreMSEParams, ScoreMSERatioParams


def _compare(pipeline: Any, n: int, tasks: int) -> dict[str, dict[str, float]]:
    model = pipeline.models["estimator"]
    return pipeline.memo(("discoformer-compare", n, tasks), lambda: compare(model, model.dim, n, tasks))


@metric_check(params=RelativeScoreMSEParams)
def relative_score_mse(pipeline: Any, estimator: str = "discoformer", n: int = 256, tasks: int = 32) -> float:
    """Pooled relative score MSE ``sum |S_hat - S|^2 / sum |S|^2`` of ``estimator`` (discoformer, kde, sd-kde,
    sd-kde+discoformer, sd-kde+oracle) on ``tasks`` held-out mixtures with ``n`` samples each."""
    return _compare(pipeline, n, tasks)[estimator]["rel_score_mse"]


@metric_check(params=LogDensityMSEParams)
def log_density_mse(pipeline: Any, estimator: str = "discoformer", n: int = 256, tasks: int = 32) -> float:
    """Mean squared log-density error of ``estimator`` on the same held-out mixtures."""
    return _compare(pipeline, n, tasks)[estimator]["log_density_mse"]


@metric_check(params=ScoreMSERatioParams)
def score_mse_ratio(pipeline: Any, baseline: str = "kde", n: int = 256, tasks: int = 32) -> float:
    """Relative score MSE of ``baseline`` divided by DiScoFormer's (> 1: DiScoFormer is more accurate)."""
    r = _compare(pipeline, n, tasks)
    return r[baseline]["rel_score_mse"] / r["discoformer"]["rel_score_mse"]


@metric_check(params=LearnedSymmetryParams)
def learned_symmetry(pipeline: Any, what: str = "rotation_rel_score_mse", n: int = 256, tasks: int = 16) -> float:
    """The trained model's rotation-equivariance or consistency error (``evaluation.symmetry_errors`` key)."""
    model = pipeline.models["estimator"]
    return pipeline.memo(("discoformer-symmetry", n, tasks), lambda: symmetry_errors(model, model.dim, n, tasks))[what]
