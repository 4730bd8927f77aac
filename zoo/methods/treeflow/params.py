"""The torch-free params module of treeflow / ForestFlow: the models its specs fill, read by ``zoo validate`` (see registry.declare)."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import FactoryParams, Options, ProcedureParams

# ----------------------------------------------------------------------------- procedure (procedures)

class TabularFlowGenerationParams(ProcedureParams):
    dataset: Literal["iris", "wine", "breast_cancer"] = "iris"
    mode: Literal["per_level", "global", "warm_start"] = Field(
        "per_level", description="per_level: ForestFlow (public code); global / warm_start: treeflow readings [inferred]")
    n_t: int = Field(50, ge=2, le=1000, description="noise levels (ForestFlow: 50)")
    duplicate_K: int = Field(100, ge=1, le=10_000, description="data duplications, each with fresh noise (ForestFlow: 100)")
    eps: float = Field(1e-3, ge=0, lt=1)
    n_estimators: int = Field(100, ge=1, le=5000, description="rounds per level (warm_start: of the first level)")
    max_depth: int = Field(7, ge=1, le=16)
    eta: float = Field(0.3, gt=0, le=1.0)
    global_trees: int = Field(400, ge=1, le=100_000, description="global: rounds of the single booster")
    warm_trees: int = Field(20, ge=1, le=5000, description="warm_start: new rounds per later level")
    label_conditional: bool = True
    split_seed: int = Field(0, ge=0, le=2**31 - 1)
    use_cache: bool = Field(True, description="fetch/store the fitted boosters as run-time artefacts")


# ----------------------------------------------------------------------------- metric checks (metrics)

class TreeMetricParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.treeflow.metrics.w1_test` and
    :func:`~zoo.methods.treeflow.metrics.discriminator_auc` (one benchmark row: dataset, mode and its sizes)."""

    dataset: str
    mode: str
    n_t: int
    K: int
    n_estimators: int = 100
    max_depth: int = 7
    global_trees: int = 400
    warm_trees: int = 20


# ----------------------------------------------------------------------------- benchmark (benchmark)

class BenchOptions(Options):
    n_t: int = Field(20, ge=2, le=1000, description="noise levels (ForestFlow's default is 50)")
    K: int = Field(30, ge=1, le=10_000, description="duplications (ForestFlow's default is 100)")
    datasets: list[Literal["iris", "wine", "breast_cancer"]] = Field(["iris", "wine"], min_length=1, max_length=3,
                                                                      description="scikit-learn datasets")
    n_estimators: int = Field(50, ge=1, le=5000, description="rounds per level (ForestFlow: 100)")
    max_depth: int = Field(6, ge=1, le=16, description="tree depth (ForestFlow: 7)")
    global_trees: int = Field(400, ge=1, le=100_000, description="rounds of the single global booster")
    warm_trees: int = Field(20, ge=1, le=5000, description="new rounds per level after the first (warm_start)")
    quick: ClassVar[dict[str, Any]] = {"n_t": 10, "K": 10, "n_estimators": 20, "global_trees": 100, "warm_trees": 10}


# ----------------------------------------------------------------------------- what treeflow registers

TARGETS = {
    "TabularFlowGeneration": declare.procedure(TabularFlowGenerationParams),
    "metrics:w1_test": declare.metric_check(TreeMetricParams),
    "metrics:discriminator_auc": declare.metric_check(TreeMetricParams),
    "benchmark:run": declare.benchmark(BenchOptions),
}
