"""The torch-free params module of the ``robuq`` method: the models its specs fill, read by ``zoo validate`` without
importing torch (see :mod:`registry.declare`); the implementation modules import these very classes."""
from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from zoo.common.out_files import OutPath


class QuantDigitsSamplerParams(ProcedureParams):
    role: str = Field("dit", description="the model role to sample from (FP or a quantised derived role)")
    num_inference_steps: int = Field(20, ge=1, le=1000)
    guidance_scale: float = Field(1.0, ge=0.0, le=20.0)
    per_class: int = Field(10, ge=1, le=10_000, description="samples per class when no labels are given")


class QuantDigitsSamplerCli(CliInputs):
    per_class: int | None = Field(None, ge=1, le=10_000, description="samples per digit (default: the spec's per_class)")
    out: OutPath | None = Field(None, description="PNG: one row of samples per digit (.png added when missing)")


class QATDigitsParams(ProcedureParams):
    role: str = Field("dit-w158a3", description="the quantised role to fine-tune (a private copy)")
    steps: int = Field(300, ge=0, le=100_000)
    lr: float = Field(2e-4, gt=0, le=1.0)
    batch: int = Field(64, ge=1, le=4096)
    n_eval: int = Field(360, ge=1, le=360)


class DiTLatentSamplerParams(ProcedureParams):
    role: str = Field("dit", description="the DiT role (FP, or a quantised derived role)")
    num_inference_steps: int = Field(50, ge=1, le=1000)
    guidance_scale: float = Field(4.0, ge=0.0, le=20.0)
    vae_scale: float = Field(0.18215, gt=0, le=10.0, description="SD-VAE latent scaling factor")


class QATOptions(Options):
    """The shipped checkpoints' QAT recipe."""

    steps: int = Field(250, ge=0, le=100_000, description="QAT steps per setting")
    batch: int = Field(64, ge=1, le=4096)
    lr: float = Field(2e-4, gt=0, le=1.0)
    ampn_warmup: int = Field(100, ge=0, le=100_000, description="AMPN: QAT steps before measuring sensitivities")


class BenchOptions(Options):
    per_class: int = Field(30, ge=1, le=1000, description="samples per digit")
    steps: int = Field(20, ge=1, le=1000, description="DDIM steps")
    outlier_seeds: list[int] = Field([], max_length=16, description=(
        "also run the injected-outlier study with these injection channel-choice seeds (e.g. 0 1 2): W1.58A4 PTQ with vs "
        "without Hadamard on the FP DiT with function-preserving outlier channels; writes robuq-outliers.json/.png"))
    outlier_scales: list[float] = Field([10.0, 30.0], min_length=1, max_length=8,
                                        description="outlier-study channel scales s (> 0; the consumer's input columns get 1/s)")
    outlier_channels: int = Field(2, ge=1, le=64, description="outlier-study channels per (block, site)")
    outlier_sites: list[Literal["v_out", "adaln_attn", "adaln_ff"]] = Field(
        ["v_out", "adaln_attn", "adaln_ff"], min_length=1,
        description="outlier-study injection sites: v_out (to_v rows / to_out.0 columns), adaln_attn (adaLN msa / to_q,k,v "
                    "columns), adaln_ff (adaLN mlp / ff.net.0.proj columns)")
    outlier_qat_steps: int = Field(0, ge=0, le=100_000, description=(
        "outlier study: also QAT each W1.58A4 arm for this many steps (the shipped recipe: AdamW 2e-4, batch 64, data seed 0; "
        "0 = PTQ only) and report its held-out eps-MSE"))
    quick: ClassVar[dict[str, Any]] = {"per_class": 5, "steps": 10}


# ----------------------------------------------------------------------------- transform (procedures), metric checks (metrics)


class QuantizeDitParams(FactoryParams):
    a_bits: int | None = 4
    hadamard: bool = True
    block: int | None = None
    lowrank_rank: int = 8
    weight: str = "ternary"
    adaln: bool = True
    ampn_avg_bits: float | None = None
    ampn_choices: list[int] | None = None
    calib_size: int = 64
    calib_seed: int = 0
    packed: Path | None = None
    attention_bits: int | None | Literal["auto"] = "auto"
    a_clip: str = "minmax"


class AttnErrorParams(FactoryParams):
    bits: int
    role: str = "dit"


class ActErrorParams(FactoryParams):
    bits: int
    hadamard: bool
    role: str = "dit"


class OutlierOperatorParams(FactoryParams):
    scale: float = Field(gt=0)
    hadamard: bool
    term: Literal["weight_rel", "weight_out", "act_out", "layer_out"] = "layer_out"
    seed: int = 0
    n_channels: int = Field(2, ge=1, le=64)
    role: str = "dit"


class OutlierEpsParams(FactoryParams):
    scale: float = Field(gt=0)
    arm: Literal["hadamard", "plain", "hadamard_minus_plain"]
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    n_channels: int = Field(2, ge=1, le=64)
    role: str = "dit"


class PackedSizeRatioParams(FactoryParams):
    role: str
    fp_role: str = "dit"


class SampleStatParams(FactoryParams):
    sampler: str
    stat: str
    per_class: int = 20


TARGETS = {
    "QuantDigitsSampler": declare.procedure(QuantDigitsSamplerParams, cli=QuantDigitsSamplerCli),
    "QATDigits": declare.procedure(QATDigitsParams),
    "DiTLatentSampler": declare.procedure(DiTLatentSamplerParams),
    "quantize_dit": declare.transform(QuantizeDitParams),
    "train_qat": declare.trainer(QATOptions),
    "benchmark:run": declare.benchmark(BenchOptions),
    "attn_error": declare.metric_check(AttnErrorParams),
    "act_error": declare.metric_check(ActErrorParams),
    "packed_size_ratio": declare.metric_check(PackedSizeRatioParams),
    "outlier_operator_error": declare.metric_check(OutlierOperatorParams),
    "outlier_eps_mse": declare.metric_check(OutlierEpsParams),
    "sample_stat": declare.metric_check(SampleStatParams),
}
