"""The torch-free params module of CoDiLA: the models its specs fill, read by ``zoo validate`` (see registry.declare)."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import FactoryParams, Options, ProcedureParams
from zoo.common.params import TARGETS as COMMON
from zoo.common.params import DenoiserDecodingParams, MaskedLMSize, Qwen2Size, TextSamplerCli, sized

# ----------------------------------------------------------------------------- procedures (sampler, recipe)

class CoDiLASamplerParams(DenoiserDecodingParams):
    schedule: Literal["static", "dynamic", "verify"] = "static"
    block_size: int = Field(4, ge=1, le=64, description="B: tokens per local-AR block (paper: 2, 4, 8)")
    entropy_threshold: float = Field(0.5, ge=0, le=100, description="dynamic: tau on the block entropy h(k) (nats)")
    candidate_window_blocks: int = Field(10, ge=1, le=4096, description="blocks of the fixed grid considered per step (paper: 10)")
    dynamic_candidate: Literal["anchor", "grid"] = Field("anchor", description=(
        "dynamic: the candidate block — 'anchor': the run of masked positions from the most confident one (k = 1 is "
        "confidence decoding token for token); 'grid': the window's grid block of smallest h(B), as static"))
    conditioning: Literal["soft", "topk"] = "soft"
    topk: int = Field(1, ge=1, le=1024, description="conditioning=topk: entries kept per marginal")
    boundary_tokens: list[str] = Field(default_factory=lambda: ["<think>", "</think>"], max_length=2,
                                       description="AR tokens around the soft embeddings ([] = the no-tags ablation)")
    ar_temperature: float = Field(1.0, ge=0, le=100, description="local-AR sampling temperature (0 = greedy)")
    dlm_temperature: float = Field(1.0, ge=0, le=100, description="temperature of the DLM's own proposals (dynamic k=1, verify)")
    tokens_per_step: int = Field(2, ge=1, le=4096, description="verify: tokens committed per DLM forward")
    verify_penalty: float = Field(0.1, ge=0, le=1, description="verify: confidence factor on AR/DLM disagreement")
    marginals_allow_eos: bool = Field(True, description="EOS keeps its marginal mass (Dream pads answers with EOS)")
    vocab_limit: int | None = Field(None, ge=1, le=10_000_000, description="DLM vocabulary shared with the AR (Dream: 151667)")
    dlm_role: str = Field("dlm", min_length=1)
    local_ar_role: str = Field("local_ar", min_length=1)


class TrainLocalARParams(ProcedureParams):
    steps: int = Field(500, ge=1, le=1_000_000)
    batch_size: int = Field(128, ge=1, le=65536)
    lr: float = Field(3e-3, gt=0, le=1.0)
    max_block_size: int = Field(4, ge=1, le=64, description="blocks of 1..B positions are masked together")
    block_grid: int = Field(1, ge=1, le=64, description="block starts are multiples of this (the decoding grid)")
    conditioning: Literal["soft", "topk"] = "soft"
    topk: int = Field(1, ge=1, le=1024)
    boundary_tokens: list[str] = Field(default_factory=lambda: ["<think>", "</think>"], max_length=2)
    marginals_allow_eos: bool = True
    mask_token_id: int | None = Field(None, ge=0, le=10_000_000)
    dlm_role: str = Field("dlm", min_length=1)
    local_ar_role: str = Field("local_ar", min_length=1)


# ----------------------------------------------------------------------------- toy models (toy)

DLM_CONFIG = dict(d_model=64, n_layers=2, n_heads=4, d_ff=128, max_len=16)
AR_CONFIG = dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=32)


class ToyDLMConfig(sized(MaskedLMSize, DLM_CONFIG)):
    """``config`` of :func:`build_dlm`: the size fields of :class:`~zoo.common.toy_lm.MaskedLMSize` (its bounds)
    with this toy's defaults, and the task."""

    task: Literal["xor", "trap", "stretch"] = "xor"


class ToyARConfig(sized(Qwen2Size, AR_CONFIG)):
    """``config`` of :func:`build_local_ar`: the size fields of :class:`~zoo.common.toy_lm.Qwen2Size` with this
    toy's defaults, and the task."""

    task: Literal["xor", "trap", "stretch"] = "xor"


# ----------------------------------------------------------------------------- metric checks (metrics)

CHECK_SAMPLES = 128


class ValidityParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.codila.metrics.validity`."""

    sampler: str = "codila-static"
    n: int = CHECK_SAMPLES


class WordValidityParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.codila.metrics.word_validity`."""

    sampler: str = "dlm-parallel"
    n: int = CHECK_SAMPLES


class TokensPerDLMForwardParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.codila.metrics.tokens_per_dlm_forward`."""

    sampler: str = "codila-static"
    n: int = CHECK_SAMPLES


class BlockTokenLossGapParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.codila.metrics.block_token_loss_gap`."""

    n: int = 1024
    block: int = 2
    seed: int = 0


# ----------------------------------------------------------------------------- trainer (train), benchmark (benchmark)

class ToyTrainOptions(Options):
    """The shipped toy checkpoints' recipe."""

    task: Literal["xor", "trap", "stretch"] = Field("xor", description="toy task (zoo.methods.codila.tasks)")
    top1: bool = Field(True, description="also train the top-1-conditioned AR (the Theorem 3.3 ablation)")
    dlm_steps: int = Field(600, ge=1, le=100_000, description="DLM training steps")
    ar_steps: int = Field(500, ge=1, le=100_000, description="local-AR training steps (each of the two ARs)")
    batch_size: int = Field(128, ge=1, le=4096, description="DLM batch size")
    lr: float = Field(3e-3, gt=0, le=1.0, description="DLM learning rate")
    ar_batch_size: int = Field(64, ge=1, le=4096)
    ar_lr: float = Field(5e-3, gt=0, le=1.0)


class BenchOptions(Options):
    samples: int = Field(512, ge=1, le=65_536, description="unconditional samples per row (one generator, seeded)")
    taus: list[Annotated[float, Field(ge=0, le=100)]] = Field([0.5, 0.75, 1.0, 1.4], min_length=1, max_length=16,
                                                            description="dynamic-schedule entropy thresholds (nats)")
    stretch_seeds: list[Annotated[int, Field(ge=0, le=10_000)]] = Field(
        [0, 1, 2], max_length=8, description="toy-stretch training seeds (0 = the shipped checkpoints, others trained "
        "with the shipped recipe and cached); [] skips the stretch study")
    stretch_taus: list[Annotated[float, Field(ge=0, le=100)]] = Field(
        [0.1, 0.5, 0.75, 1.0, 1.5], min_length=1, max_length=16, description="toy-stretch: dynamic-schedule thresholds (nats)")
    quick: ClassVar[dict[str, Any]] = {"samples": 64, "taus": [0.5, 0.75, 1.0], "stretch_seeds": [0], "stretch_taus": [0.5, 1.5]}


# ----------------------------------------------------------------------------- what codila registers

TARGETS = {
    "CoDiLASampler": declare.procedure(CoDiLASamplerParams, cli=TextSamplerCli),
    "TrainLocalAR": declare.procedure(TrainLocalARParams),
    "TextSampler": COMMON["TextSampler"],
    "ConfidenceDecoding": COMMON["ConfidenceDecoding"],
    "build_dlm": declare.factory(ToyDLMConfig),
    "build_local_ar": declare.factory(ToyARConfig),
    "validity": declare.metric_check(ValidityParams),
    "word_validity": declare.metric_check(WordValidityParams),
    "tokens_per_dlm_forward": declare.metric_check(TokensPerDLMForwardParams),
    "block_token_loss_gap": declare.metric_check(BlockTokenLossGapParams),
    "train_toy": declare.trainer(ToyTrainOptions),
    "benchmark:run": declare.benchmark(BenchOptions),
}
