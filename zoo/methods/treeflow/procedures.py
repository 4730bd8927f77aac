"""The ``forestflow`` / ``treeflow`` recipe: fit a tree flow on a scikit-learn dataset's training split,
sample, and measure (exact W1 to held-out rows, discriminator AUC, utility, fit + sample wall time)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from registry.contract import Procedure
from registry.results import ProcedureOutput

from .evaluate import evaluate, load_split
from .flow import FlowConfig, XGBConfig
from .params import TabularFlowGenerationParams


@dataclass
class GenerationOutput(ProcedureOutput):
    """What :class:`TabularFlowGeneration` returns (wall times are not part of it: seeded runs must be
    identical; ``zoo bench treeflow`` times fit and sampling) (attribute, key and index access, ``to_tuple()``).

    * ``dataset`` / ``mode`` -- what was fitted; ``n_t`` / ``K`` -- noise levels and duplications;
    * ``w1_test`` / ``w1_train`` -- exact W1 between generated rows and the held-out / training rows
      (min-max scale of the training split, label one-hot appended; equal sizes);
    * ``auc`` -- 5-fold random-forest real-vs-fake ROC AUC on held-out rows (0.5 = indistinguishable);
    * ``utility`` / ``utility_real`` -- test accuracy of a logistic regression trained on generated /
      real training rows;
    * ``samples`` / ``labels`` -- the generated training-size table (original units, rounded) and its labels;
    * ``config`` -- the :class:`~.flow.FlowConfig` used.
    """

    dataset: str
    mode: str
    n_t: int
    K: int
    w1_test: float
    w1_train: float
    auc: float
    utility: float
    utility_real: float
    samples: np.ndarray
    labels: np.ndarray
    config: dict[str, Any]


class TabularFlowGeneration(Procedure):
    """ForestFlow (``mode: per_level``, the public baseline) or a treeflow reading (``global``,
    ``warm_start``; inferred, see :mod:`.flow`) on iris / wine / breast_cancer. Returns :class:`GenerationOutput`."""

    kind = "analysis"

    Params = TabularFlowGenerationParams

    def config(self, seed: int = 0) -> FlowConfig:
        p = self.params
        return FlowConfig(mode=p.mode, n_t=p.n_t, duplicate_K=p.duplicate_K, eps=p.eps, label_conditional=p.label_conditional,
                          global_trees=p.global_trees, warm_trees=p.warm_trees, seed=seed,
                          xgb=XGBConfig(n_estimators=p.n_estimators, max_depth=p.max_depth, eta=p.eta))

    def __call__(self, *, seed: int = 0, progress: bool = False) -> GenerationOutput:
        p = self.params
        cfg = self.config(seed)
        res = evaluate(load_split(p.dataset, p.split_seed), cfg, seed=seed, use_cache=p.use_cache, progress=progress)
        return GenerationOutput(**{k: res[k] for k in ("dataset", "mode", "n_t", "K", "w1_test", "w1_train", "auc", "utility",
                                                       "utility_real")},
                                samples=res["samples"], labels=res["labels"], config=cfg.model_dump(mode="json"))

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"n_t": 3, "duplicate_K": 2, "n_estimators": 4, "max_depth": 3, "global_trees": 8, "warm_trees": 2, "use_cache": False}

    def run_cli(self, inputs: Any, seed: int) -> str:
        out = self(seed=seed, progress=True)
        return "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items() if k not in ("config", "samples", "labels"))

