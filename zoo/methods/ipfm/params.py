"""The torch-free params module of IPFM, read by ``zoo validate`` (see :mod:`registry.declare`)."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from registry.limits import Bound, Rows
from zoo.common.out_files import OutPath, SamplesCli
from zoo.common.params import DValue

# ----------------------------------------------------------------------------- the distillation procedure (distill)

#: training steps of one call; 0 trains nothing
CallSteps = Annotated[int, Field(ge=0), Bound("steps")]


class IPFMDistillParams(ProcedureParams):
    loss: Literal["ipfm", "sid"] = "ipfm"
    alpha: float = Field(0.5, ge=0.0, le=2.0, description="SiD's alpha (ignored by ipfm, which equals 2 x SiD at alpha = 1/2)")
    D: DValue | None = Field(None, description="override the teacher's D (None: the teacher role's)")
    steps: int = Field(400, ge=0, le=200_000)
    batch: int = Field(256, ge=2, le=65_536)
    lr: float = Field(3e-4, gt=0, le=1.0)
    sigma_init: float = Field(2.5, gt=0, le=1e3)
    fake_iters: int = Field(2, ge=1, le=16)
    fake_warmup: int = Field(0, ge=0, le=100_000)
    fake_lr: float | None = Field(None, gt=0, le=1.0, description="fake-field learning rate (None: lr)")
    init_steps: int = Field(600, ge=0, le=100_000, description="regression steps of the learned teacher copy both networks start from")
    width: int = Field(64, ge=4, le=4096)
    layers: int = Field(3, ge=1, le=16)
    eval_every: int = Field(50, ge=1, le=200_000)
    eval_n: int = Field(2000, ge=16, le=1_000_000)
    ema: float = Field(0.99, ge=0.0, le=0.99999, description="EMA decay of the returned generator (0: none)")
    teacher_field: Literal["exact", "learned"] = Field(
        "exact", description="exact: the analytic PFGM++ field is f_phi; learned: a frozen network copy of it (the paper's "
                             "network teacher; generator and fake start from its weights)")
    teacher_steps: int = Field(600, ge=1, le=100_000, description="regression steps of the learned teacher (teacher_field: learned)")
    gen_sigma: Literal["tmax", "lognormal", "loguniform"] = Field(
        "tmax", description="generator-step noise-level law: tmax = SiD's / the IPFM code's t_max = 800 rule; lognormal = "
                            "EDM's ln sigma ~ N(-1.2, 1.2^2), the fake fit's; loguniform on [0.002, 24.4] (an ablation)")


class IPFMDistillCli(CliInputs):
    steps: CallSteps | None = Field(None, description="generator steps (default: the spec's steps)")
    n: Rows = Field(2000, description="one-step samples drawn from the trained generator")
    out: OutPath | None = Field(None, description="PNG: the samples over the data density (.png added when missing)")


# ----------------------------------------------------------------------------- the shipped generator (toy)


class BuildGeneratorConfig(FactoryParams):
    """``config`` of :func:`~zoo.methods.ipfm.toy.build_generator`."""

    mixture: Literal["gmm3", "gaussian", "ring8"] = "gmm3"
    width: Annotated[int, Field(ge=4, le=4096)] = 64
    layers: Annotated[int, Field(ge=1, le=16)] = 3


class OneStepSamplerParams(ProcedureParams):
    sigma_init: float = Field(2.5, gt=0, le=1e3, description="the generator's input noise level (SiD / IPFM: 2.5)")


# ----------------------------------------------------------------------------- the benchmark (benchmark)


class BenchOptions(Options):
    D: list[Annotated[str, Field(pattern=r"^([1-9][0-9]{0,6}|inf)$")]] = Field(
        ["4", "16", "128", "inf"], min_length=1, max_length=8, description="D values (integers or inf)")
    steps: int = Field(800, ge=1, le=100_000, description="generator steps per run")
    threshold: float = Field(0.25, gt=0, le=100.0, description="SW2 threshold for the steps-to-quality column")
    n: int = Field(2000, ge=16, le=100_000, description="samples per evaluation")
    sid: bool = Field(True, description="the SiD baselines at D = inf (--no-sid skips them)")
    bands_seeds: list[Annotated[int, Field(ge=0, le=10_000)]] = Field(
        [], max_length=32, description="run the D = 16 vs D = inf convergence study over these training seeds instead of the "
                                       "table (learned teacher, fresh evaluation draws; ipfm-bands.png / ipfm-study.json)")
    plateau_seeds: list[Annotated[int, Field(ge=0, le=10_000)]] = Field(
        [], max_length=32, description="run the plateau ablations at D = 16 over these training seeds instead of the table "
                                       "(capacity, fake-fit iterations, generator noise-level law, exact teacher; ipfm-plateau.png)")
    study_steps: int = Field(400, ge=1, le=100_000, description="generator steps per run of the bands / plateau studies")
    study_eval_every: int = Field(25, ge=1, le=100_000, description="evaluation interval of the studies (fresh draws each)")
    final_draws: int = Field(4, ge=1, le=64, description="fresh evaluation draws averaged for a study run's final SW2")
    quick: ClassVar[dict[str, Any]] = {"D": ["16", "inf"], "steps": 100, "n": 1000, "sid": False}


# ----------------------------------------------------------------------------- the generator trainer (train)


class GeneratorOptions(Options):
    """The shipped generator's distillation recipe (the spec entry's ``params``)."""

    loss: Literal["ipfm", "sid"] = Field("ipfm", description="ipfm (the shipped file) or sid")
    steps: int = Field(400, ge=1, le=100_000, description="generator steps")
    init_steps: int = Field(600, ge=0, le=100_000, description="teacher-copy regression steps before distillation")
    progress: bool = Field(True, description="tqdm progress bar")


# ----------------------------------------------------------------------------- metric checks (metrics)


class DistilledStatParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.ipfm.metrics.distilled_stat`."""

    recipe: str = "ipfm"
    stat: str = "sw2"


class ShippedStatParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.ipfm.metrics.shipped_stat`."""

    stat: str = "sw2"
    n: int = 2000


TARGETS = {
    "IPFMDistill": declare.procedure(IPFMDistillParams, cli=IPFMDistillCli),
    "toy:OneStepSampler": declare.procedure(OneStepSamplerParams, cli=SamplesCli),
    "toy:build_generator": declare.factory(BuildGeneratorConfig),
    "benchmark:run": declare.benchmark(BenchOptions),
    "train:train_generator": declare.trainer(GeneratorOptions),
    "metrics:distilled_stat": declare.metric_check(DistilledStatParams),
    "metrics:shipped_stat": declare.metric_check(ShippedStatParams),
}
