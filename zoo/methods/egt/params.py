"""The torch-free params module of EGT, read by ``zoo validate`` (see :mod:`registry.declare`)."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from zoo.common.out_files import OutPath

# ----------------------------------------------------------------------------- the procedures (procedures)


class GaussianFairnessParams(ProcedureParams):
    algorithm: Literal["erm", "proportion", "minmax", "group-dro"] = Field(
        "minmax", description="minmax: back-propagate the worst EMA group; group-dro: exponentiated-gradient weights; "
                              "erm: frequency-weighted loss; proportion: group-balanced loss and equal model frequencies")
    loss: Literal["exact", "sampled"] = Field("exact", description="per-group loss: closed-form KL, or minibatch NLL minus the known entropy H(P_a)")
    p_b: float = Field(0.1, gt=0, lt=1, description="proportion of the hard group B")
    steps: int = Field(3000, ge=0, le=200_000)
    lr: float = Field(0.02, gt=0, le=10.0, description="SGD learning rate")
    ema_decay: float = Field(0.9, ge=0, lt=1, description="min–max: decay of the per-group loss EMA")
    eta_q: float = Field(0.1, gt=0, le=100.0, description="group-dro: exponentiated-gradient step size")
    batch: int = Field(64, ge=1, le=100_000, description="sampled loss: draws per group per step")
    record_every: int = Field(10, ge=1, le=100_000)
    mc_samples: int = Field(20_000, ge=2, le=10_000_000, description="Monte-Carlo draws for TV and JS")
    proportion_samples: int = Field(20_000, ge=1, le=10_000_000, description="draws from the model's joint sampler for the measured group frequencies")


class GaussianFairnessCli(CliInputs):
    out: OutPath = "egt-gaussian.png"


class DigitsFairnessParams(ProcedureParams):
    algorithm: Literal["erm", "minmax", "group-dro"] = "minmax"
    steps: int = Field(300, ge=0, le=100_000)
    lr: float = Field(2e-4, gt=0, le=1.0, description="Adam learning rate (the peak one with schedule=cosine)")
    schedule: Literal["constant", "cosine"] = Field(
        "cosine", description="Adam step: constant lr, or cosine decay from lr to 0 over the steps (SGDR eq. 5, one cycle)")
    batch_per_group: int = Field(12, ge=1, le=1024, description="minibatch rows per group (erm: the same total, uniform); min–max "
                                                                "back-propagates only the worst digit's rows of each timestep bin, about batch_per_group per step")
    ema_decay: float = Field(0.9, ge=0, lt=1, description="min–max: decay of the per-(group, timestep-bin) loss EMA")
    bins: int = Field(4, ge=1, le=1000, description="min–max: timestep bins")
    eta_q: float = Field(0.01, gt=0, le=100.0, description="group-dro: exponentiated-gradient step")
    label_dropout: float = Field(0.1, ge=0, le=1, description="probability of the null class label (the DiT's CFG training)")
    n_t: int = Field(20, ge=1, le=1000, description="held-out loss: stratified timesteps per test image")
    per_class: int = Field(50, ge=1, le=10_000, description="recall: samples per class")
    num_inference_steps: int = Field(20, ge=1, le=1000, description="recall: DDIM steps")
    record_every: int = Field(10, ge=1, le=100_000)


class DigitsFairnessCli(CliInputs):
    out: OutPath = "egt-digits.png"


class MixtureDDPMFairnessParams(ProcedureParams):
    algorithm: Literal["erm", "minmax", "group-dro"] = "minmax"
    select_on: Literal["excess", "raw"] = Field("excess", description="min–max: pick the worst group by the EMA of the excess (offset-free) or raw loss")
    pretrain_steps: int = Field(3000, ge=0, le=100_000)
    pretrain_lr: float = Field(2e-3, gt=0, le=1.0)
    steps: int = Field(1500, ge=0, le=100_000)
    lr: float = Field(5e-4, gt=0, le=1.0)
    batch: int = Field(128, ge=2, le=100_000, description="draws per group per step")
    width: int = Field(64, ge=4, le=4096, description="MLP width (small = capacity coupling between groups)")
    bins: int = Field(5, ge=1, le=1000)
    ema_decay: float = Field(0.9, ge=0, lt=1)
    eta_q: float = Field(1.0, gt=0, le=1000.0)
    p_b: float = Field(0.1, gt=0, lt=1)
    n_eval: int = Field(4000, ge=1, le=10_000_000)
    record_every: int = Field(50, ge=1, le=100_000)


class MixtureDDPMFairnessCli(CliInputs):
    out: OutPath = "egt-ddpm.png"


# ----------------------------------------------------------------------------- the benchmark (benchmark)


class BenchOptions(Options):
    digits: bool = Field(True, description="the digits DiT proxy (--no-digits skips it)")
    ddpm: bool = Field(True, description="the mixture DDPM of note §6b (--no-ddpm skips it)")
    digits_steps: int = Field(300, ge=1, le=100_000, description="Adam steps per digits fine-tuning")
    digits_seeds: list[int] = Field([1, 2, 3], min_length=1, max_length=32, description=(
        "digits: fine-tuning seeds (each also seeds its held-out noise and recall samples); every arm runs on each, "
        "the report pairs arm and erm by seed"))
    digits_lr: float = Field(2e-4, gt=0, le=1.0, description="digits: Adam (peak) learning rate, every arm")
    digits_schedule: Literal["constant", "cosine"] = Field("cosine", description="digits: Adam step schedule, every arm (cosine: decay to 0)")
    digits_batch_per_group: int = Field(12, ge=1, le=1024, description=(
        "digits: erm and group-dro rows per digit per step (10 x this, all back-propagated)"))
    digits_minmax_batch_per_group: int = Field(120, ge=1, le=1024, description=(
        "digits: min–max rows per digit per step; it back-propagates the worst digit's rows of each timestep bin, "
        "about this many (120 = erm's 10 x 12)"))
    digits_per_class: int = Field(50, ge=1, le=10_000, description="digits recall: samples per class")
    gaussian_steps: int = Field(3000, ge=1, le=100_000, description="SGD steps per Gaussian fine-tuning (the note's 3000)")
    ddpm_pretrain_steps: int = Field(3000, ge=0, le=100_000, description="mixture DDPM: ERM pretraining steps")
    ddpm_steps: int = Field(1500, ge=0, le=100_000, description="mixture DDPM: fine-tuning steps")
    quick: ClassVar[dict[str, Any]] = {"digits_steps": 30, "digits_seeds": [1], "digits_per_class": 10, "ddpm_pretrain_steps": 1000, "ddpm_steps": 500}


# ----------------------------------------------------------------------------- metric checks (metrics)


class GaussianStatParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.egt.metrics.gaussian_stat`."""

    recipe: str
    stat: str
    which: str = "after"
    group: int | None = None


class DigitsStatParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.egt.metrics.digits_stat`."""

    recipe: str
    stat: str
    which: str = "after"
    seed: int = Field(0, ge=0, description="the recipe's seed (fine-tuning draws, held-out noise, recall samples)")


class RecipeStatParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.egt.metrics.ddpm_stat`."""

    recipe: str
    stat: str
    which: str = "after"


TARGETS = {
    "GaussianFairness": declare.procedure(GaussianFairnessParams, cli=GaussianFairnessCli),
    "DigitsFairness": declare.procedure(DigitsFairnessParams, cli=DigitsFairnessCli),
    "MixtureDDPMFairness": declare.procedure(MixtureDDPMFairnessParams, cli=MixtureDDPMFairnessCli),
    "benchmark:run": declare.benchmark(BenchOptions),
    "metrics:gaussian_stat": declare.metric_check(GaussianStatParams),
    "metrics:digits_stat": declare.metric_check(DigitsStatParams),
    "metrics:ddpm_stat": declare.metric_check(RecipeStatParams),
}
