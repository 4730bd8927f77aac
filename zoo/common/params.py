"""The torch-free params module of ``zoo.common``: the models the shared samplers, factories, trainers and
benchmarks are filled with, read by ``zoo validate`` without importing torch (see :mod:`registry.declare`). The
implementation modules import these very classes."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, create_model, model_validator
from pydantic.fields import FieldInfo

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from registry.limits import Rows
from zoo.common.out_files import OutPath

# ----------------------------------------------------------------------------- scheduler samplers (scheduler_samplers)


class SamplerCli(CliInputs):
    nfe: int | None = Field(None, ge=1, le=1000, description="number of model evaluations (default: the spec's num_inference_steps)")
    n: Rows = Field(2000, description="number of samples")
    out: OutPath | None = Field(None, description="PNG path (.png added when missing): samples over the true density (2-D toy) or an image grid")


class SchedulerSamplerParams(ProcedureParams):
    num_inference_steps: int = Field(10, ge=1, le=1000)


class VPParams(ProcedureParams):
    num_inference_steps: int = Field(10, ge=1, le=1000)
    timestep_spacing: Literal["linspace", "leading", "trailing"] = "trailing"


class DDIMSamplerParams(VPParams):
    set_alpha_to_one: bool = True


class MultistepParams(VPParams):
    solver_order: int = Field(2, ge=1, le=3)
    lower_order_final: bool = True
    final_sigmas_type: Literal["zero", "sigma_min"] = "zero"


class DPMSolverPPSamplerParams(MultistepParams):
    pass


class UniPCSamplerParams(MultistepParams):
    solver_type: Literal["bh1", "bh2"] = "bh2"


# ----------------------------------------------------------------------------- the exact toy mixtures (gmm)

TOY_MIXTURES: dict[str, dict[str, Any]] = {
    # the two laws of the independent check in methods/f-dpmsolver.md section 6
    "gaussian": {"weights": [1.0], "means": [[1.0, 0.5]], "variances": [0.25]},
    "gmm3": {"weights": [0.5, 0.3, 0.2], "means": [[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]], "variances": [0.3, 0.3, 0.3]},
}


class AnalyticModelConfig(FactoryParams):
    """``config`` of :func:`analytic_model`: bounded sizes (a 1e12-step schedule would allocate terabytes)."""

    mixture: Literal["gaussian", "gmm3"] = "gmm3"
    prediction_type: Literal["epsilon", "v_prediction", "sample"] = "epsilon"
    num_train_timesteps: int = Field(1000, ge=2, le=100_000)
    beta_start: float = Field(1e-4, gt=0, lt=1)
    beta_end: float = Field(0.02, gt=0, lt=1)
    beta_schedule: Literal["linear", "scaled_linear", "squaredcos_cap_v2"] = "linear"
    weights: list[float] | None = Field(None, min_length=1, max_length=64)
    means: list[list[float]] | None = Field(None, min_length=1, max_length=64)
    variances: list[float] | None = Field(None, min_length=1, max_length=64)
    covs: list[list[list[float]]] | None = Field(None, min_length=1, max_length=64)


# ----------------------------------------------------------------------------- the PFGM++ teacher (pfgmpp)

DValue = Annotated[int, Field(ge=1, le=10_000_000)] | Literal["inf"]


class TeacherConfig(FactoryParams):
    """``config`` of :func:`analytic_pfgmpp`."""

    mixture: Literal[tuple(sorted(TOY_MIXTURES) + ["ring8"])] = "gmm3"  # type: ignore[valid-type]
    D: DValue = 128
    nodes: int = Field(201, ge=33, le=4001, description="log-w trapezoid nodes of the exact denoiser")


# ----------------------------------------------------------------------------- the digits DiT / UNet (digits, digits_bench)

NUM_CLASSES = 10


class DigitsDiTConfig(FactoryParams):
    """``config`` of :func:`build_digits_dit` in a spec: overrides of :data:`DIGITS_DIT`, bounded."""

    num_attention_heads: int = Field(2, ge=1, le=16)
    attention_head_dim: int = Field(32, ge=1, le=128)
    in_channels: int = Field(1, ge=1, le=8)
    out_channels: int = Field(1, ge=1, le=16)
    num_layers: int = Field(2, ge=1, le=12)
    sample_size: int = Field(8, ge=2, le=64)
    patch_size: int = Field(2, ge=1, le=8)
    num_embeds_ada_norm: int = Field(NUM_CLASSES, ge=1, le=1000)


UNetBlock = Literal["DownBlock2D", "AttnDownBlock2D", "UpBlock2D", "AttnUpBlock2D"]


class DigitsUNetConfig(FactoryParams):
    """``config`` of :func:`build_digits_unet`: overrides of :data:`DIGITS_UNET`, bounded."""

    sample_size: int = Field(8, ge=4, le=256)
    in_channels: int = Field(1, ge=1, le=16)
    out_channels: int = Field(1, ge=1, le=16)
    layers_per_block: int = Field(1, ge=1, le=8)
    block_out_channels: list[int] = Field([16, 32], min_length=1, max_length=6)
    down_block_types: list[UNetBlock] = Field(["DownBlock2D", "AttnDownBlock2D"], min_length=1, max_length=6)
    up_block_types: list[UNetBlock] = Field(["AttnUpBlock2D", "UpBlock2D"], min_length=1, max_length=6)
    norm_num_groups: int = Field(8, ge=1, le=64)


class DDPMTrainOptions(Options):
    """The shipped digits checkpoints' recipe: DDPM epsilon loss, AdamW (no weight decay) + one-cycle, gradient
    clipping 1, EMA 0.999; the defaults are the DiT's, the UNet's are in its spec entry."""

    steps: int = Field(4000, ge=1, le=100_000)
    batch: int = Field(128, ge=1, le=4096)
    lr: float = Field(1e-3, gt=0, le=1.0)


class DigitsSamplerParams(ProcedureParams):
    role: Literal["dit", "unet"] = Field("dit", description="dit: class-conditional; unet: unconditional")
    num_inference_steps: int = Field(50, ge=1, le=1000)
    guidance_scale: float = Field(1.0, ge=0.0, le=20.0, description="classifier-free guidance (DiT only)")
    per_class: int = Field(10, ge=1, le=10_000, description="samples per class when no labels are given")


class DitBenchOptions(Options):
    """``zoo bench digits`` options."""

    per_class: int = Field(50, ge=1, le=1000, description="samples of every digit class per setting")
    quick: ClassVar[dict[str, Any]] = {"per_class": 5}


# ----------------------------------------------------------------------------- masked-DLM decoding (masked_dlm)


class TextSamplerCli(CliInputs):
    prompt: str | None = None  # None: the tokenizer's first example prompt, else unconditional
    unconditional: bool = False  # BOS-only generation, num_samples rows
    num_samples: Rows = 1


class DenoiserDecodingParams(ProcedureParams):
    """Parameters every masked-DLM decoder shares (:class:`ConfidenceDecoding`, CoDiLA's sampler): output
    length, nucleus, EOS stop, chat template, and how the denoiser is read (mask id, Dream shift)."""

    max_new_tokens: int | None = Field(None, ge=1, le=4096, description="None: the model's default, else 256")
    top_p: float = Field(1.0, gt=0, le=1)
    stop_at_eos: bool = True
    chat_template: bool = True
    mask_token_id: int | None = Field(None, ge=0, le=10_000_000)
    shift_logits: bool | None = None


class ConfidenceDecodingParams(DenoiserDecodingParams):
    tokens_per_step: int = Field(2, ge=1, le=4096, description="tokens unmasked per denoiser forward (paper baseline: 2)")
    block_length: int | None = Field(None, ge=1, le=4096, description="semi-AR block length (None: one block)")
    alg: Literal["low_confidence", "maskgit_plus", "topk_margin", "entropy"] = "entropy"
    temperature: float = Field(0.0, ge=0, le=100)
    proposal_role: str = Field("proposal", min_length=1, description="model role of the masked-diffusion LM")

    @model_validator(mode="after")
    def _block(self):
        if self.block_length is not None and self.max_new_tokens is not None and self.block_length > self.max_new_tokens:
            raise ValueError("block_length must be <= max_new_tokens")
        return self


# ----------------------------------------------------------------------------- sparse autoencoders (sae)

Arch = Literal["relu", "topk", "batchtopk"]
DecInit = Literal["uniform", "gaussian"]


class SAEConfig(FactoryParams):
    """``config`` of an SAE factory; sizes bounded (each matrix has ``d_in * n_features`` floats)."""

    d_in: int = Field(384, ge=1, le=65_536)
    n_features: int = Field(256, ge=1, le=262_144)
    arch: Arch = "topk"
    k: int = Field(8, ge=1, le=4096)

    @model_validator(mode="after")
    def _size(self) -> "SAEConfig":
        if self.d_in * self.n_features > 1 << 30:
            raise ValueError(f"d_in * n_features = {self.d_in * self.n_features} exceeds 2**30 weights per matrix")
        if self.k > self.n_features:
            raise ValueError(f"k = {self.k} exceeds n_features = {self.n_features}")
        return self


class SeededSAEConfig(SAEConfig):
    seed: int = Field(0, ge=0, le=2**63 - 1)
    dec_init: DecInit = "uniform"


# ----------------------------------------------------------------------------- discrete sampling (discrete)

TopPOrder = Literal["after_temperature", "before_temperature"]


# ----------------------------------------------------------------------------- toy LM sizes (toy_lm)

WIDTH, FFN, LAYERS, HEADS, POSITIONS = 1024, 4096, 16, 32, 4096

#: one row per dimension, the same bounds for both architectures:
#: (TinyMaskedLM field, its default, Qwen2Config field, its default, lower bound, upper bound, what it is)
SIZES: tuple[tuple[str | None, int | None, str, int, int, int, str], ...] = (
    ("d_model", 64, "hidden_size", 64, 8, WIDTH, "model width"),
    ("d_ff", 128, "intermediate_size", 192, 8, FFN, "feed-forward (MLP) width"),
    ("n_layers", 2, "num_hidden_layers", 2, 1, LAYERS, "layers"),
    ("n_heads", 4, "num_attention_heads", 4, 1, HEADS, "attention heads"),
    (None, None, "num_key_value_heads", 2, 1, HEADS, "key/value heads (grouped-query attention)"),
    ("max_len", 64, "max_position_embeddings", 64, 8, POSITIONS, "longest sequence (positions)"),
)


def _size_model(name: str, doc: str, qwen2: bool) -> type[FactoryParams]:
    fields = {}
    for m_name, m_default, q_name, q_default, low, high, what in SIZES:
        field, default = (q_name, q_default) if qwen2 else (m_name, m_default)
        if field is not None:
            fields[field] = (int, Field(default, ge=low, le=high, description=what))
    return create_model(name, __base__=FactoryParams, __doc__=doc, __module__=__name__, **fields)  # type: ignore[call-overload]


MaskedLMSize = _size_model("MaskedLMSize", "Size fields of :class:`~zoo.common.masked_dlm.TinyMaskedLM` (bounded: the "
                           "toys run on a CPU).", qwen2=False)
Qwen2Size = _size_model("Qwen2Size", "Size fields of a tiny ``Qwen2ForCausalLM`` (``transformers.Qwen2Config`` names; "
                        "the bounds of :class:`MaskedLMSize`).", qwen2=True)


def sized(model: type[FactoryParams], defaults: Mapping[str, Any]) -> type[FactoryParams]:
    """``model`` with the defaults ``defaults`` (a toy's own sizes; each key a field of ``model``): the same fields,
    bounds and descriptions. Subclass the result to add the toy's own fields."""
    unknown = sorted(set(defaults) - set(model.model_fields))
    if unknown:
        raise ValueError(f"sized({model.__name__}): {unknown} are not size fields; fields: {', '.join(model.model_fields)}")
    fields = {k: (model.model_fields[k].annotation, FieldInfo.merge_field_infos(model.model_fields[k], default=v))
              for k, v in defaults.items()}
    return create_model(f"{model.__name__}Sized", __base__=model, __module__=model.__module__, **fields)  # type: ignore[call-overload]


# ----------------------------------------------------------------------------- what zoo.common registers

_SCHEDULER = dict(cli=SamplerCli)

TARGETS = {
    "build_minilm_encoder": declare.factory(),
    "DigitsSampler": declare.procedure(DigitsSamplerParams),
    "build_digits_dit": declare.factory(DigitsDiTConfig),
    "build_digits_unet": declare.factory(DigitsUNetConfig),
    "train_digits_dit": declare.trainer(DDPMTrainOptions),
    "train_digits_unet": declare.trainer(DDPMTrainOptions),
    "digits_bench:run": declare.benchmark(DitBenchOptions),
    "analytic_model": declare.factory(AnalyticModelConfig),
    "TextSampler": declare.procedure(cli=TextSamplerCli),
    "ConfidenceDecoding": declare.procedure(ConfidenceDecodingParams, cli=TextSamplerCli),
    "analytic_pfgmpp": declare.factory(TeacherConfig),
    "build_sae": declare.factory(SeededSAEConfig),
    "toy_nfe": declare.metric_check(),
    "toy_path_error": declare.metric_check(),
    "SchedulerSampler": declare.procedure(SchedulerSamplerParams, **_SCHEDULER),
    "DDIMSampler": declare.procedure(DDIMSamplerParams, **_SCHEDULER),
    "DPMSolverPPSampler": declare.procedure(DPMSolverPPSamplerParams, **_SCHEDULER),
    "UniPCSampler": declare.procedure(UniPCSamplerParams, **_SCHEDULER),
}

