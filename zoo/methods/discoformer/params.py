"""The torch-free params module of DiScoFormer: the models its specs fill, read by ``zoo validate`` (see registry.declare)."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams

# ----------------------------------------------------------------------------- estimators (estimator)

class EstimatorCli(CliInputs):
    mixture_seed: int = Field(0, ge=0, le=2**31 - 1, description="seed of the random Gaussian mixture to estimate")
    n_context: int = Field(256, ge=2, le=100_000, description="sample-set size")
    n_query: int = Field(256, ge=1, le=100_000, description="query points (drawn from the same mixture)")


class DiScoFormerEstimatorParams(ProcedureParams):
    max_query_chunk: int = Field(4096, ge=1, le=1_000_000, description="queries per forward pass (memory; results do not depend on it)")
    ttt_steps: int = Field(0, ge=0, le=100, description="test-time-training steps on the consistency loss of the context (paper: 4)")
    ttt_lr: float = Field(1e-4, gt=0, le=1.0, description="gradient-descent step size of test-time training")


class KDEEstimatorParams(ProcedureParams):
    factor: float | None = Field(None, gt=0, le=100, description="bandwidth factor h (None: Scott's rule)")
    eps: float = Field(1e-4, ge=0, le=1.0, description="whitening ridge relative to tr(cov)/d")
    dim: int = Field(2, ge=1, le=128, description="dimension of the example inputs / zoo run mixture")


class SDKDEEstimatorParams(ProcedureParams):
    score_source: Literal["kde", "discoformer"] = "kde"
    factor: float | None = Field(None, gt=0, le=100, description="bandwidth factor (None: n^(-1/(d+8)))")
    eps: float = Field(1e-4, ge=0, le=1.0)
    dim: int = Field(2, ge=1, le=128, description="dimension of the example inputs / zoo run mixture")


# ----------------------------------------------------------------------------- factory (model)

class DiScoFormerConfig(FactoryParams):
    """``config`` of :func:`build_discoformer` (bounded sizes)."""

    dim: int = Field(2, ge=1, le=128, description="data dimension d")
    d_model: int = Field(64, ge=4, le=1024)
    n_heads: int = Field(4, ge=1, le=32)
    n_layers: int = Field(2, ge=1, le=24)
    ffn_mult: int = Field(2, ge=1, le=8)
    eps: float = Field(1e-4, ge=0, le=1.0, description="whitening ridge, relative to tr(cov)/d")
    score_mode: Literal["head", "autograd"] = "head"
    self_attention: bool = True


# ----------------------------------------------------------------------------- metric checks (metrics)

class RelativeScoreMSEParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.discoformer.metrics.relative_score_mse`."""

    estimator: str = "discoformer"
    n: int = 256
    tasks: int = 32


class LogDensityMSEParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.discoformer.metrics.log_density_mse`."""

    estimator: str = "discoformer"
    n: int = 256
    tasks: int = 32


class ScoreMSERatioParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.discoformer.metrics.score_mse_ratio`."""

    baseline: str = "kde"
    n: int = 256
    tasks: int = 32


class LearnedSymmetryParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.discoformer.metrics.learned_symmetry`."""

    what: str = "rotation_rel_score_mse"
    n: int = 256
    tasks: int = 16


# ----------------------------------------------------------------------------- trainer (train), benchmark (benchmark)

class ToyTrainOptions(Options):
    """One DiScoFormer toy: its data dimension and step count (the shipped files use 2500 steps)."""

    dim: int = Field(2, ge=1, le=5, description="data dimension of the random mixtures")
    steps: int = Field(2500, ge=1, le=100_000, description="AdamW steps (one batch of fresh mixtures each)")


class BenchOptions(Options):
    dims: list[Annotated[int, Field(ge=1, le=2)]] = Field([1, 2], min_length=1, max_length=2,
                                                          description="data dimensions, 1 and/or 2 (one trained toy each)")
    ns: list[Annotated[int, Field(ge=2, le=65536)]] = Field([64, 256, 1024], min_length=1, max_length=8,
                                                            description="sample-set sizes")
    tasks: int = Field(48, ge=1, le=10_000, description="held-out mixtures per (d, n)")
    quick: ClassVar[dict[str, Any]] = {"tasks": 12, "ns": [64, 256]}


# ----------------------------------------------------------------------------- what discoformer registers

TARGETS = {
    "DiScoFormerEstimator": declare.procedure(DiScoFormerEstimatorParams, cli=EstimatorCli),
    "KDEEstimator": declare.procedure(KDEEstimatorParams, cli=EstimatorCli),
    "SDKDEEstimator": declare.procedure(SDKDEEstimatorParams, cli=EstimatorCli),
    "build_discoformer": declare.factory(DiScoFormerConfig),
    "relative_score_mse": declare.metric_check(RelativeScoreMSEParams),
    "log_density_mse": declare.metric_check(LogDensityMSEParams),
    "score_mse_ratio": declare.metric_check(ScoreMSERatioParams),
    "learned_symmetry": declare.metric_check(LearnedSymmetryParams),
    "train_toy": declare.trainer(ToyTrainOptions),
    "benchmark:run": declare.benchmark(BenchOptions),
}
