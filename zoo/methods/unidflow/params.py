"""The torch-free params module of the ``unidflow`` method: the models its specs fill, read by ``zoo validate``
without importing torch (see :mod:`registry.declare`); the implementation modules import these very classes."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from registry.limits import Rows
from zoo.common.out_files import JsonPath


COLOURS = ("red", "green", "blue", "yellow")
SIZES = ("1", "2", "3")
BUCKETS = ("tl", "tr", "bl", "br")

#: the caption words by slot (colour, size, bucket), as :func:`zoo.methods.unidflow.world.tokenizer` spells them
CAPTION_WORDS = (COLOURS, tuple(f"s{s}" for s in SIZES), BUCKETS)


def caption_words(text: str) -> list[str]:
    """``"red s2 tl"`` -> its 3 words, each checked against its slot's vocabulary (ValueError naming the bad word);
    torch-free, so ``--caption`` is checked before anything runs (:func:`~zoo.methods.unidflow.procedures.parse_caption`
    maps the words to ids)."""
    words = text.split()
    if len(words) != 3:
        raise ValueError(f"a caption is 3 words (colour size bucket, e.g. 'red s2 tl'), got {text!r}")
    for w, allowed in zip(words, CAPTION_WORDS):
        if w not in allowed:
            raise ValueError(f"caption word {w!r} is not one of {list(allowed)}")
    return words


class UniDFlowSamplerParams(ProcedureParams):
    task: Literal["understand", "generate", "edit"] = "generate"
    steps: int = Field(16, ge=1, le=64, description="DFM steps (the last one unmasks every remaining target position)")
    temperature: float = Field(1.0, ge=0.0, le=10.0, description="draw temperature; 0 = argmax")
    alpha: float | None = Field(None, ge=0.0, le=1.0, description="fixed router output (None: the learned router)")
    model_role: Literal["model", "reference", "stage1", "shared"] = Field(
        "model", description="which trained model runs: the final one, the stage-II reference, after stage I, or the shared-adapter ablation")


class UniDFlowSamplerCli(CliInputs):
    caption: str | None = Field(None, max_length=200, description="generate: a caption such as 'red s2 tl' (colour, size s1-s3, "
                                "corner tl/tr/bl/br), drawn n times; default: n captions of the world")
    n: Rows = Field(8, description="rows to sample")
    out: JsonPath | None = Field(None, description="JSON: every row's caption, grid and rule check (.json added when missing)")

    @field_validator("caption")
    @classmethod
    def _caption(cls, v: str | None) -> str | None:
        if v is not None:
            caption_words(v)  # a bad word is one --caption line, before anything runs
        return v


class ToyConfig(FactoryParams):
    """``config`` of :func:`build_unidflow` (bounded: the toy runs on a CPU)."""

    d_model: int = Field(64, ge=8, le=512)
    n_layers: int = Field(2, ge=1, le=8)
    n_heads: int = Field(4, ge=1, le=16)
    d_ff: int = Field(128, ge=8, le=2048)
    rank: int = Field(8, ge=1, le=64)
    router_hidden: int = Field(32, ge=1, le=512)
    shared: bool = False


class ToyOptions(Options):
    """The shipped toy checkpoints' recipe."""

    pretrain_steps: int = Field(1500, ge=0, le=1_000_000, description="stage 0: the stand-in backbone")
    stage1_steps: int = Field(600, ge=0, le=1_000_000)
    stage2_steps: int = Field(2400, ge=0, le=1_000_000)
    router_steps: int = Field(300, ge=0, le=1_000_000, description="router-only calibration on all tasks at the end of stage II")
    router_lr: float = Field(0.05, gt=0, le=10.0, description="router calibration learning rate (the router is tiny)")
    dpo_steps: int = Field(200, ge=0, le=1_000_000)
    batch_size: int = Field(64, ge=1, le=4096)
    dpo_batch_size: int = Field(32, ge=1, le=4096)
    lr_backbone: float = Field(3e-3, gt=0, le=10.0)
    lr: float = Field(5e-3, gt=0, le=10.0, description="stages I and II")
    dpo_lr: float = Field(3e-4, gt=0, le=10.0)
    beta: float = Field(0.1, gt=0, le=100.0, description="mRef-DPO β")
    evaluate: bool = Field(False, description="print the rule-checked metrics after each saved stage")
    quiet: bool = Field(False, description="no progress bars")


class BenchOptions(Options):
    per_caption: int = Field(16, ge=1, le=4096, description="generation samples per caption (36 captions)")
    seeds: int = Field(8, ge=1, le=256, description="base seeds averaged for generation (spec: 8)")
    caption_seeds: int = Field(4, ge=1, le=256, description="base seeds averaged for caption accuracy (spec: 4)")
    margin_seeds: int = Field(16, ge=1, le=256, description="pair seeds averaged for the preference margin (spec: 16)")
    interference_seeds: list[int] = Field(default_factory=list, max_length=16, description=(
        "run only the fair interference study: for each training seed, decoupled vs joint-shared (1:2:1) vs "
        "sequential-shared stage II from the shipped stage-I state; writes unidflow-interference.json"))
    interference_steps: int = Field(300, ge=1, le=100_000, description="stage-II adapter steps per arm (equal for all arms)")
    interference_router_steps: int = Field(300, ge=0, le=100_000, description=(
        "decoupled arm: router-only calibration steps after its adapter steps (adapters frozen; the shipped recipe's 300)"))
    interference_eval_seeds: int = Field(4, ge=1, le=64, description="draw seeds averaged per arm for captions and generation")
    quick: ClassVar[dict[str, Any]] = {"per_caption": 4, "seeds": 2, "caption_seeds": 2, "margin_seeds": 2}


# ----------------------------------------------------------------------------- metric checks (metrics)


class CaptionAccuracyParams(FactoryParams):
    role: str = "model"
    seeds: int = 4


class UnderstandingDropParams(FactoryParams):
    after: str = "model"
    before: str = "stage1"
    seeds: int = 4


class FaithfulnessParams(FactoryParams):
    role: str = "model"
    per_caption: int = 16
    seeds: int = 8


class DiversityParams(FactoryParams):
    role: str = "model"
    per_caption: int = 16
    seeds: int = 8


class EditAccuracyParams(FactoryParams):
    role: str = "model"


class PreferenceMarginParams(FactoryParams):
    role: str = "model"
    seeds: int = 16


class DpoTvToOptimumParams(FactoryParams):
    objective: str = "surrogate"
    V: int = 4
    beta: float = 0.5
    seed: int = 0


TARGETS = {
    "UniDFlowSampler": declare.procedure(UniDFlowSamplerParams, cli=UniDFlowSamplerCli),
    "build_unidflow": declare.factory(ToyConfig),
    "train_toy": declare.trainer(ToyOptions),
    "benchmark:run": declare.benchmark(BenchOptions),
    "caption_accuracy": declare.metric_check(CaptionAccuracyParams),
    "understanding_drop": declare.metric_check(UnderstandingDropParams),
    "faithfulness": declare.metric_check(FaithfulnessParams),
    "diversity": declare.metric_check(DiversityParams),
    "edit_accuracy": declare.metric_check(EditAccuracyParams),
    "preference_margin": declare.metric_check(PreferenceMarginParams),
    "dpo_tv_to_optimum": declare.metric_check(DpoTvToOptimumParams),
}
