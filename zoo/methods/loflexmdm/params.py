"""The torch-free params module of LoFlexMDM / FlexMDM, read by ``zoo validate`` (see :mod:`registry.declare`)."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from registry.limits import Rows

# ----------------------------------------------------------------------------- the τ-leaping sampler (sampler)


class TauLeapingParams(ProcedureParams):
    max_steps: int = Field(64, ge=1, le=4096, description="τ-leaping steps before the final argmax fill (paper: 1024)")
    confidence: Literal["top_prob", "prob_diff", "entropy", "rates", "top_rate"] | None = Field(
        None, description="move each step's events to the most confident masked slots (LoFlexMDM paper best: top_prob)")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus filter of K_θ (paper: 0.5 / 0.9 / 1.0)")
    top_k: int | None = Field(None, ge=1, le=100_000, description="top-k filter of K_θ (star graphs: 1)")
    count_1: bool = Field(False, description="a slot unmasks only if its Poisson count is exactly 1")
    model_role: str = Field("model", min_length=1)


class TauLeapingCli(CliInputs):
    num_samples: Rows = 8


# ----------------------------------------------------------------------------- the model factory (model)


class ModelConfig(FactoryParams):
    """``config`` of :func:`build_model`."""

    task: Literal["checksum", "brackets", "chain", "bracket-safe"] = Field(
        "checksum", description="toy task (its tokenizer), or bracket-safe (the paper's molecules: pass vocab_size; no tokenizer offline)")
    vocab_size: int | None = Field(None, ge=8, le=1_000_000, description="bracket-safe only: the SAFE tokenizer's vocabulary size")
    scalar_fn: Literal["softplus", "exp"] = Field("softplus", description="rate head: softplus(s)(max-min)+min, or exp(s)+min (SAFE configs)")
    schedule: Literal["kumaraswamy", "linear"] = Field("kumaraswamy", description="linear = FlexMDM (a = b = 1, no aux network)")
    a: float = Field(1.0, gt=0, le=10, description="Kumaraswamy shape a shared by all positions (paper best: 1)")
    fix_b_um: float | None = Field(1.0, gt=0, le=100, description="fix b_um for θ and φ (paper best: 1.0); null = learned")
    size: Literal["toy", "medium", "tiny-aux", "xtiny-aux"] = "toy"
    min_rate_phi: float = Field(1.01, ge=0, le=100)
    max_rate: float = Field(100.0, gt=0, le=1000)
    insertion_head: Literal["multiplier", "survival"] = Field(
        "multiplier", description="multiplier: θ's b_in is the rate head's output (the paper); survival: times (1 - t^a)^b_ref, "
                                  "so the implied remaining insertions vanish at t = 1 (a departure, see LoFlexMDMModel.insertion_survival)")
    length_conditioning: bool = Field(False, description="toy tasks only: the generator's adaLN condition also embeds the current row "
                                                         "length (a departure for the 2-layer toy, which cannot count; see the card)")


# ----------------------------------------------------------------------------- the benchmark (benchmark)

StepBudget = Annotated[int, Field(ge=1, le=4096)]


class BenchOptions(Options):
    samples: int = Field(2000, ge=1, le=100_000, description="unconditional samples per row (one generator, seeded by --seed)")
    steps: list[StepBudget] = Field([8, 16, 32, 64], min_length=1, max_length=16, description="tau-leaping step budgets")
    tv_steps: list[StepBudget] = Field([1024], max_length=8, description="extra step budgets for the plain and oracle rows "
                                       "(length-TV bar; quick: none)")
    tasks: list[Literal["checksum", "brackets", "chain"]] = Field(
        ["checksum", "brackets", "chain"], min_length=1, max_length=3,
        description="checksum and brackets (the control toys, where no order helps), chain (the order toy)")
    chain_seeds: list[Annotated[int, Field(ge=0, le=1000)]] = Field(
        [0, 1, 2], min_length=1, max_length=16,
        description="training seeds of the chain-task comparison (0 = the shipped toy-chain weights; others are trained with "
                    "the same recipe on first use, 4.5-7 CPU min per model measured under load, and cached)")
    bayes_samples: int = Field(1000, ge=1, le=100_000, description="draws per exact-posterior (Bayes generator) row (chain task)")
    fd_samples: int = Field(4096, ge=1, le=100_000,
                            description="draws per batch (12 batches) of the finite differences of the loss in phi's multipliers (chain task)")
    quick: ClassVar[dict[str, Any]] = {"samples": 256, "steps": [8, 16], "tv_steps": [], "chain_seeds": [0], "bayes_samples": 256,
                                       "fd_samples": 512}


# ----------------------------------------------------------------------------- the toys' trainer (train, training)

# the shipped toys' recipe (docs/methods/loflexmdm.md, "The toys")
RECIPE = {"steps": 4800, "batch_size": 128, "lr": 3e-3, "aux_lr": 1e-3, "time_weight": "hazard", "insertion_head": "multiplier",
          "length_conditioning": True}


class ToyOptions(Options):
    """The shipped toys' recipe (:data:`~zoo.methods.loflexmdm.training.RECIPE`); ``method`` and ``task`` name the checkpoint."""

    method: Literal["loflexmdm", "flexmdm"] = Field("loflexmdm", description="loflexmdm (learned φ, Kumaraswamy) or flexmdm (linear, no φ); the spec entry names it (a wrong one writes another file than the entry produces, which zoo train reports)")
    task: Literal["checksum", "brackets", "chain"] = Field("checksum", description="the toy task (tasks.TASKS); the spec entry names it")
    steps: int = Field(RECIPE["steps"], ge=1, le=1_000_000, description="optimizer steps")
    batch_size: int = Field(RECIPE["batch_size"], ge=1, le=65_536, description="exact draws of the task law per step")
    lr: float = Field(RECIPE["lr"], gt=0, le=1.0, description="generator learning rate (one-cycle peak)")
    aux_lr: float = Field(RECIPE["aux_lr"], gt=0, le=1.0, description="aux network φ learning rate")
    time_weight: Literal["unit", "hazard"] = Field(RECIPE["time_weight"], description="θ's time weighting (hazard = the paper's)")
    insertion_head: Literal["multiplier", "survival"] = Field(RECIPE["insertion_head"], description="θ's insertion head")
    length_conditioning: bool = Field(RECIPE["length_conditioning"], description="the row-length embedding in θ's adaLN condition")


# ----------------------------------------------------------------------------- metric checks (metrics)

CHECK_SAMPLES = 256


class SampledCheckParams(FactoryParams):
    """``check_params`` of the sampled checks :func:`~zoo.methods.loflexmdm.metrics.validity`,
    :func:`~zoo.methods.loflexmdm.metrics.length_tv_check` and :func:`~zoo.methods.loflexmdm.metrics.check_digit_accuracy`."""

    sampler: str = "tau-leaping"
    n: int = CHECK_SAMPLES
    steps: int | None = None


class InsertionRatioParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.loflexmdm.metrics.determined_insertion_ratio` and
    :func:`~zoo.methods.loflexmdm.metrics.checksum_insertion_ratio`."""

    n: int = 512


class OrderCeilingParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.loflexmdm.metrics.order_ceiling`."""

    n: int = 500
    steps: int = 16


TARGETS = {
    "TauLeaping": declare.procedure(TauLeapingParams, cli=TauLeapingCli),
    "build_model": declare.factory(ModelConfig),
    "model:from_upstream": declare.converter(),
    "benchmark:run": declare.benchmark(BenchOptions),
    "train:train_task": declare.trainer(ToyOptions),
    "metrics:validity": declare.metric_check(SampledCheckParams),
    "metrics:length_tv_check": declare.metric_check(SampledCheckParams),
    "metrics:check_digit_accuracy": declare.metric_check(SampledCheckParams),
    "metrics:determined_insertion_ratio": declare.metric_check(InsertionRatioParams),
    "metrics:checksum_insertion_ratio": declare.metric_check(InsertionRatioParams),
    "metrics:order_ceiling": declare.metric_check(OrderCeilingParams),
}
