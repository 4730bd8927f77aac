"""The torch-free params module of the ``sae_feature_death`` method: the models its specs fill, read by
``zoo validate`` without importing torch (see :mod:`registry.declare`); the implementation modules import these
very classes."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs as BaseCliInputs, Options, ProcedureParams
from zoo.common.out_files import OutPath
from zoo.common.params import TARGETS as COMMON


Preprocess = Literal["none", "mean", "geometric_median", "pca_whiten", "layernorm"]


DEFAULT_MAGNITUDES = (0.0, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)


class FeatureDeathReportParams(ProcedureParams):
    layer: int = Field(3, ge=0, le=128, description="hidden_states index (0 = embeddings)")
    n_docs: int = Field(300, ge=1, le=100_000, description="documents of lee_background.cor to encode")
    max_length: int = Field(128, ge=8, le=8192, description="tokens per document")
    max_tokens: int = Field(20_000, ge=64, le=10_000_000, description="eval tokens (N_eval of the closed forms)")
    n_features: int = Field(3072, ge=8, le=262_144, description="SAE width F (8 x d for MiniLM)")
    k: int = Field(32, ge=1, le=4096, description="TopK k")
    outlier_dim: int = Field(0, ge=0, le=100_000)
    magnitudes: tuple[float, ...] = Field(DEFAULT_MAGNITUDES, min_length=1, max_length=32)
    preprocessings: tuple[Preprocess, ...] = Field(("mean", "geometric_median", "pca_whiten", "layernorm"), max_length=16)
    sae_seed: int = Field(0, ge=0, le=2**63 - 1)
    dec_init: Literal["uniform", "gaussian"] = Field(
        "uniform", description="decoder init: the authors' nn.Linear (kaiming-uniform) init, or isotropic "
                               "gaussian columns (the closed forms' assumption)")


class FeatureDeathReportCli(BaseCliInputs):
    out: OutPath = "sae-feature-death.png"
    layer: int | None = Field(None, ge=0, le=128)
    max_tokens: int | None = Field(None, ge=64, le=10_000_000)
    magnitudes: str | None = None  # comma-separated


class StreamSurveyParams(ProcedureParams):
    n_docs: int = Field(300, ge=1, le=100_000)
    max_length: int = Field(128, ge=8, le=8192)
    max_tokens: int = Field(8192, ge=64, le=10_000_000, description="eval tokens per stream")
    n_features: int = Field(3072, ge=8, le=262_144, description="SAE width F (the same for every stream)")
    k: int = Field(32, ge=1, le=4096)
    preprocessings: tuple[Preprocess, ...] = Field(("mean", "pca_whiten"), max_length=16)
    streams: tuple[str, ...] | None = Field(None, max_length=1024, description="module names; None: every BERT sub-layer output")
    sae_seed: int = Field(0, ge=0, le=2**63 - 1)
    dec_init: Literal["uniform", "gaussian"] = "uniform"


class CentredTrainingParams(ProcedureParams):
    layer: int = Field(3, ge=0, le=128)
    n_docs: int = Field(300, ge=1, le=100_000)
    max_length: int = Field(128, ge=8, le=8192)
    n_train: int = Field(30_000, ge=64, le=10_000_000)
    n_eval: int = Field(6_000, ge=64, le=10_000_000)
    n_features: int = Field(768, ge=8, le=262_144)
    k: int = Field(8, ge=1, le=4096)
    steps: int = Field(1800, ge=1, le=1_000_000)
    batch_size: int = Field(256, ge=1, le=65_536)
    lr: float = Field(1e-3, gt=0, le=10)
    auxk_alpha: float = Field(1 / 32, ge=0, le=100, description="AuxK coefficient for the '+auxk' runs")
    auxk_dead_tokens: int = Field(25_600, ge=1, le=10**9, description="tokens without firing before AuxK counts a latent dead")
    outlier_dim: int = Field(0, ge=0, le=100_000)
    magnitudes: tuple[float, ...] = Field((0.0, 40.0, 160.0), min_length=1, max_length=32)
    b_dec_inits: tuple[Literal["zeros", "mean", "geometric_median", "zeros+auxk"], ...] = Field(("zeros", "mean"), min_length=1, max_length=8)
    dec_init: Literal["uniform", "gaussian"] = Field("uniform", description="decoder init (see FeatureDeathReport)")


class BenchOptions(Options):
    tokens: int = Field(20_000, ge=64, le=1_000_000, description="eval tokens for the init-death table")
    layer: int = Field(3, ge=0, le=6, description="MiniLM hidden_states index")
    features: int = Field(3072, ge=8, le=65_536, description="SAE width F (3072 = 8 x 384)")
    k: int = Field(32, ge=1, le=4096, description="TopK k")
    dec_init: Literal["uniform", "gaussian"] = Field("uniform", description="SAE decoder init: the authors' nn.Linear "
                                                     "kaiming-uniform or isotropic gaussian columns (the closed forms' assumption)")
    streams: bool = Field(False, description="also survey the 37 native sub-layer streams (~3-5 min)")
    stream_tokens: int = Field(8192, ge=64, le=1_000_000, description="tokens per stream for --streams")
    report: bool = Field(True, description="the injected-outlier table on layer 3 (--no-report skips it)")
    train: bool = Field(False, description="also run the training-dynamics table (~12 min on 1 thread)")
    steps: int = Field(1800, ge=1, le=100_000, description="training steps")
    inits: list[Literal["zeros", "mean", "zeros+auxk", "geometric_median"]] = Field(
        ["zeros", "mean", "zeros+auxk"], min_length=1, max_length=8, description="b_dec inits to train")
    magnitudes: list[Annotated[float, Field(ge=0, le=1e4)]] = Field([0.0, 40.0, 160.0], min_length=1, max_length=16,
                                                                   description="injected outlier magnitudes to train at")
    quick: ClassVar[dict[str, Any]] = {"tokens": 4096, "stream_tokens": 2048, "steps": 100}


TARGETS = {
    "FeatureDeathReport": declare.procedure(FeatureDeathReportParams, cli=FeatureDeathReportCli),
    "StreamSurvey": declare.procedure(StreamSurveyParams),
    "CentredTraining": declare.procedure(CentredTrainingParams),
    "benchmark:run": declare.benchmark(BenchOptions),
    "build_minilm": declare.factory(),
    "build_minilm_encoder": COMMON["build_minilm_encoder"],
    **{name: declare.metric_check() for name in (
        "demo_dead_total", "demo_dead_relu", "streams_spearman_gamma_total_death", "ffn_out_l5_dead_after_centring",
        "ffn_out_l6_dead_after_centring", "ffn_out_l5_l6_dead_after_whitening", "gamma_native", "dead_total_m40",
        "dead_relu_m40", "dead_total_mean_centred_max", "trained_dead_zeros_m160", "trained_dead_mean_m160")},
}
