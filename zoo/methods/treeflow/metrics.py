"""Metric checks for ``specs/forestflow.yaml`` and ``specs/treeflow.yaml``: ``fn(pipeline, **check_params) -> float``,
re-measuring what ``zoo bench treeflow`` reports (fit on the 70 % split, seed 0, uncached)."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from .evaluate import evaluate, load_split
from .flow import FlowConfig, XGBConfig
from .params import TreeMetricParams


def _run(dataset: str, mode: str, n_t: int, K: int, n_estimators: int, max_depth: int, global_trees: int, warm_trees: int) -> dict[str, Any]:
    cfg = FlowConfig(mode=mode, n_t=n_t, duplicate_K=K, global_trees=global_trees, warm_trees=warm_trees,
                     xgb=XGBConfig(n_estimators=n_estimators, max_depth=max_depth))
    return evaluate(load_split(dataset), cfg, seed=0, use_cache=False)


@metric_check(params=TreeMetricParams)
def w1_test(pipeline: Any, dataset: str, mode: str, n_t: int, K: int, n_estimators: int = 100, max_depth: int = 7,
            global_trees: int = 400, warm_trees: int = 20) -> float:
    """Exact W1 between generated rows and the held-out 30 % (training min-max scale, label one-hot)."""
    return _run(dataset, mode, n_t, K, n_estimators, max_depth, global_trees, warm_trees)["w1_test"]


@metric_check(params=TreeMetricParams)
def discriminator_auc(pipeline: Any, dataset: str, mode: str, n_t: int, K: int, n_estimators: int = 100, max_depth: int = 7,
                      global_trees: int = 400, warm_trees: int = 20) -> float:
    """5-fold random-forest real-vs-fake ROC AUC on the held-out rows (0.5: indistinguishable)."""
    return _run(dataset, mode, n_t, K, n_estimators, max_depth, global_trees, warm_trees)["auc"]
