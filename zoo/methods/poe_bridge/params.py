"""The torch-free params module of PoE-Bridge: the models its specs fill, read by ``zoo validate`` (see registry.declare)."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from registry import declare
from registry.contract import Options, ProcedureParams
from zoo.common.params import TARGETS as COMMON
from zoo.common.params import MaskedLMSize, Qwen2Size, TextSamplerCli, TopPOrder, sized

# ----------------------------------------------------------------------------- samplers (sampler, baselines)


class PoEBridgeSamplerParams(ProcedureParams):
    mixture_weight: float = Field(0.3, ge=0, le=1, description="PoE weight w on the DLM (0: AR, 1: DLM)")
    n_lanes: int = Field(4, ge=1, le=64, description="K parallel draft lanes")
    n_low_temp: int = Field(1, ge=1, le=64, description="lanes at the low temperature (n_low)")
    temp_low: float = Field(0.2, gt=0, le=100)
    temp_high: float = Field(0.7, gt=0, le=100)
    anneal_temp: bool = True
    verify_window: int = Field(32, ge=1, le=4096, description="V: positions verified per AR forward")
    max_lookahead: int = Field(256, ge=1, le=4096, description="M: masked positions per DLM forward")
    top_p: float = Field(0.95, gt=0, le=1, description="nucleus truncation of the drafts")
    top_p_order: TopPOrder = Field(
        "after_temperature", description="nucleus of the tempered draft law (this project) or of the untempered "
        "DLM logits, then tempered ('before_temperature', the repository's order)")
    lane_choice: Literal["multinomial_exact", "argmax_logit_diff"] = Field(
        "multinomial_exact", description="paper's importance resampling, or the repository's best-of-K"
    )
    length_normalize: bool = Field(True, description="argmax_logit_diff: mean instead of sum (repo default)")
    accept_with_truncated_q: bool = True
    stage1: Literal["speculative", "none"] = Field(
        "speculative", description="'none': the no-bridge baseline, direct D -> A importance sampling of whole "
        "drafted windows (every draft kept, lanes weighed by p_A / q)")
    max_new_tokens: int | None = Field(None, ge=1, le=4096, description="None: the target's generation_config, else 256")
    vocab_limit: int | None = Field(None, ge=1, le=10_000_000, description="shared vocabulary prefix (Dream: 151667)")
    chat_template: bool = True
    mask_token_id: int | None = Field(None, ge=0, le=10_000_000)
    shift_logits: bool | None = Field(None, description="None: infer (True for Dream)")
    proposal_role: str = Field("proposal", min_length=1, description="model role of the masked-diffusion LM")
    target_role: str = Field("target", min_length=1, description="model role of the causal LM")

    @model_validator(mode="after")
    def _consistent(self):
        if self.n_low_temp > self.n_lanes:
            raise ValueError("n_low_temp must be <= n_lanes")
        if self.temp_low > self.temp_high:
            raise ValueError("temp_low must be <= temp_high")
        if self.verify_window > self.max_lookahead:
            raise ValueError("verify_window must be <= max_lookahead")
        return self


class ARDecodingParams(ProcedureParams):
    max_new_tokens: int | None = Field(None, ge=1, le=4096, description="None: the model's generation_config, else 256")
    temperature: float = Field(0.0, ge=0, le=100)
    top_p: float = Field(1.0, gt=0, le=1)
    chat_template: bool = True
    target_role: str = Field("target", min_length=1, description="model role of the causal LM")


# ----------------------------------------------------------------------------- toy models (toy)

TOY_MAX_NEW_TOKENS = 40  # answer (33 tokens for 3 digits) + EOS padding, the DLM's training length
AR_CONFIG = dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=64)
DLM_CONFIG = dict(d_model=64, n_layers=2, n_heads=4, d_ff=192, max_len=64)


class ToyARConfig(sized(Qwen2Size, AR_CONFIG)):
    """``config`` of :func:`build_ar`: the size fields of :class:`~zoo.common.toy_lm.Qwen2Size` (its bounds) with this
    toy's defaults, and the task's."""

    task: Literal["steps", "columns"] = Field("steps", description="toy task (:func:`toy_tokenizer`)")
    digits: int = Field(3, ge=1, le=64)
    max_new_tokens: int = Field(TOY_MAX_NEW_TOKENS, ge=1, le=4096,
                                description="answer region (answer + EOS padding): the generation length the model reads")
    init_seed: int = Field(0, ge=0, le=2**31 - 1, description="seed of the random initialisation (training; loaded weights replace it)")


class ToyDLMQwen2Config(ToyARConfig):
    """``config`` of :func:`build_dlm_qwen2`: the AR target's fields and the read-out convention."""

    shift_logits: bool = Field(False, description="Dream's convention: output i-1 predicts token i (for a DLM "
                               "initialised from the AR target, as Dream-7B is from Qwen2.5-7B)")


class ToyDLMConfig(sized(MaskedLMSize, DLM_CONFIG)):
    """``config`` of :func:`build_dlm`: the size fields of :class:`~zoo.common.toy_lm.MaskedLMSize` with this toy's
    defaults, and the digits."""

    digits: int = Field(3, ge=1, le=9)


# ----------------------------------------------------------------------------- trainers (train)


class ScheduleOptions(Options):
    """What every recipe here shares: batch size, peak learning rate, the task's number of digits."""

    batch_size: int = Field(64, ge=1, le=4096)
    lr: float = Field(3e-3, gt=0, le=1.0, description="peak learning rate of the one-cycle schedule")
    digits: int = Field(3, ge=1, le=64)


class PairOptions(ScheduleOptions):
    """A model pair's recipe (defaults: the ``toy`` pair; the spec's ``training:`` params set the others)."""

    ar_steps: int = Field(2000, ge=1, le=100_000, description="AR optimiser steps")
    dlm_steps: int = Field(1400, ge=1, le=100_000, description="DLM optimiser steps (toy: fewer, the weaker proposal)")


class EqualOptions(ScheduleOptions):
    """The ``toy-equal`` proposal's recipe."""

    steps: int = Field(1400, ge=1, le=100_000, description="DLM optimiser steps")


class LongOptions(PairOptions):
    """The ``toy-long`` pair's recipe (steps, batch and digits: the spec's ``training:`` params; the architecture: the
    ``toy-long`` variant's config in the spec)."""

    max_new_tokens: int = Field(64, ge=1, le=1024, description="answer region")
    max_position_embeddings: int = Field(128, ge=2, le=4096)
    ar_curriculum: float = Field(0.0, ge=0, lt=1, description="length curriculum of the AR: fraction of its steps over "
                                 "which the active operand digits ramp from curriculum_start to all (0: none)")
    curriculum_start: int = Field(3, ge=1, le=64, description="active operand digits at the curriculum's first step")
    dlm_init: Literal["ar", "random"] = Field("ar", description="DLM initialisation: the trained AR's weights "
                          "with Dream's shift-by-one read-out (ar, as Dream-7B from Qwen2.5-7B) or random")


# ----------------------------------------------------------------------------- benchmark (benchmark)

Variant = Literal["toy", "toy-equal", "toy-long"]


class BenchOptions(Options):
    problems: int = Field(64, ge=1, le=256, description="held-out toy problems (seed i for problem i; training skips the first 256)")
    verify_window: int | None = Field(None, ge=1, le=256, description="override V for all PoE rows")
    repeats: int = Field(5, ge=1, le=100, description="timing rounds (round-robin over the rows); each row keeps its fastest round")
    sweep_w: bool = Field(False, description="also print the PoE-weight ablation table (needs the toy variant)")
    variants: list[Variant] = Field(["toy", "toy-equal", "toy-long"], min_length=1, max_length=3,
                                    description="model pairs (spec variants)")
    train_seeds: list[int] = Field([], max_length=8, description="toy-long once per training seed instead of once: "
                                   "seed 0 is the shipped pair, other seeds are trained by the spec's toy-long recipe "
                                   "into <out-dir>/toy-long-seed<N>/ (reused on a re-run with the same --out-dir), then "
                                   "the spread (mean +- sd) of the accuracies and speedups")
    train_recipe: list[str] = Field([], max_length=16, description="KEY=VALUE overrides of the spec's toy-long recipe "
                                    "for --train-seeds (LongOptions fields, e.g. ar_steps=1600 ar_curriculum=0.4); with "
                                    "any, seed 0 is trained too instead of read from the shipped pair")
    device: str = Field("cpu", pattern=r"^(cpu|cuda(:[0-9]+)?)$", description="torch device of the models (cuda: the paper's "
                        "regime; the cost line then times forwards by synchronised wall clock)")
    quick: ClassVar[dict[str, Any]] = {"problems": 8, "repeats": 1, "variants": ["toy"]}


# ----------------------------------------------------------------------------- what poe_bridge registers

TARGETS = {
    "PoEBridgeSampler": declare.procedure(PoEBridgeSamplerParams, cli=TextSamplerCli),
    "ARDecoding": declare.procedure(ARDecodingParams, cli=TextSamplerCli),
    "TextSampler": COMMON["TextSampler"],
    "ConfidenceDecoding": COMMON["ConfidenceDecoding"],
    "build_ar": declare.factory(ToyARConfig),
    "build_dlm": declare.factory(ToyDLMConfig),
    "build_dlm_qwen2": declare.factory(ToyDLMQwen2Config),
    "train_toy": declare.trainer(PairOptions),
    "train_equal": declare.trainer(EqualOptions),
    "train_long": declare.trainer(LongOptions),
    "benchmark:run": declare.benchmark(BenchOptions),
    "toy_accuracy": declare.metric_check(),
    "tokens_per_ar_forward": declare.metric_check(),
    "dlm_forwards_per_problem": declare.metric_check(),
    "toy_accuracy_vs_ar": declare.metric_check(),
    "forward_count_speedup_vs_dlm_decoding": declare.metric_check(),
    "direct_is_accuracy": declare.metric_check(),
}
