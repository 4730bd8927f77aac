"""The torch-free params module of PROBE, read by ``zoo validate`` (see :mod:`registry.declare`)."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from zoo.common.out_files import OutPath

# ----------------------------------------------------------------------------- the procedures (procedures)


class DetectorEvalParams(ProcedureParams):
    n_eval: int = Field(360, ge=2, le=360, description="real test digits and fakes per generator")


class ProbeRecipeParams(ProcedureParams):
    lambda_prec: float = Field(10.0, ge=0, le=1e4, description="λ of L_prec (the note's [assumption] stand-in; paper: unpublished)")
    use_buffer: bool = Field(True, description="stage 2 on the buffer too (false: the no-buffer baseline)")
    critic: bool = Field(True, description="false: detector-blind ablation (LoRA pulled toward a fixed random direction)")
    stage1_steps: int = Field(100, ge=0, le=10_000)
    lr: float = Field(3e-4, gt=0, le=1.0, description="stage-1 Adam learning rate (LoRA tensors only)")
    batch: int = Field(32, ge=1, le=1024, description="stage-1 batch (and buffer snapshot size)")
    buffer_every: int = Field(10, ge=1, le=10_000, description="stage-1 steps between buffer snapshots")
    rank: int = Field(4, ge=1, le=64, description="LoRA rank")
    stage2_steps: int = Field(300, ge=0, le=100_000)
    stage2_lr: float = Field(1e-3, gt=0, le=1.0, description="stage-2 AdamW learning rate")
    n_eval: int = Field(360, ge=2, le=360, description="real test digits and fakes per generator")
    n_original: int = Field(1437, ge=2, le=1437, description="original (seen) fakes and real train digits used in stage 2")
    buffer_band: tuple[Annotated[float, Field(ge=0.0, le=1.0)], Annotated[float, Field(ge=0.0, le=1.0)]] | None = Field(
        None, max_length=2, description="[lo, hi]: keep only snapshot samples whose frozen-detector P(fake) is in the band (null: all)")
    buffer_size: int | None = Field(None, ge=1, le=100_000, description="at most this many buffer samples; stage 1 stops once full (null: no cap)")
    buffer_batch: int | None = Field(None, ge=1, le=4096, description="samples per buffer snapshot (null: batch)")

    @model_validator(mode="after")
    def _band_ordered(self) -> "ProbeRecipeParams":
        if self.buffer_band is not None and not self.buffer_band[0] < self.buffer_band[1]:
            raise ValueError(f"buffer_band needs lo < hi, got {list(self.buffer_band)}")
        return self


class ProbeRecipeCli(CliInputs):
    out: OutPath = "probe-buffer.png"


# ----------------------------------------------------------------------------- the benchmark (benchmark)


class BenchOptions(Options):
    seeds: list[int] = Field([0, 1, 2], min_length=1, max_length=32, description="training seeds of every arm")
    n_eval: int = Field(360, ge=1, le=360, description="real test digits and fakes per generator")
    stage1_steps: int = Field(100, ge=0, le=10_000)
    stage2_steps: int = Field(300, ge=1, le=100_000)
    stage2_lr: float | None = Field(None, gt=0, le=1.0, description="stage-2 learning rate for every arm (default: the spec's)")
    arms: list[Literal["probe", "probe-no-buffer", "probe-lambda0", "probe-no-critic", "probe-band",
                       "probe-band-unsteered"]] | None = Field(None, max_length=6, description="subset of arms (default all)")
    quick: ClassVar[dict[str, Any]] = {"seeds": [0, 1], "n_eval": 120, "stage1_steps": 20, "stage2_steps": 60}


# ----------------------------------------------------------------------------- the detector trainer (train)


class DetectorOptions(Options):
    steps: int = Field(600, ge=1, le=100_000)
    lr: float = Field(2e-3, gt=0, le=1.0)


# ----------------------------------------------------------------------------- metric checks (metrics)


class DetectorBaccOnParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.probe.metrics.detector_bacc_on`."""

    generator: str
    n_eval: int = 360


class ProbeStatParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.probe.metrics.probe_stat`."""

    recipe: str
    stat: str
    which: str = "after"


TARGETS = {
    "DetectorEval": declare.procedure(DetectorEvalParams),
    "ProbeRecipe": declare.procedure(ProbeRecipeParams, cli=ProbeRecipeCli),
    "benchmark:run": declare.benchmark(BenchOptions),
    "train:train_shipped_detector": declare.trainer(DetectorOptions),
    "metrics:detector_bacc_on": declare.metric_check(DetectorBaccOnParams),
    "metrics:probe_stat": declare.metric_check(ProbeStatParams),
}
