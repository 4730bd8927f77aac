"""The spec schema: Pydantic v2 models, strict, ``extra="forbid"``, frozen.

A spec is data. Code is named only by ``"package.module:attr"`` strings, resolved later by
:mod:`registry.resolve` against an allowlist. ``zoo schema`` exports :func:`json_schema`.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_RE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
TARGET_RE = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$"
MODULE_RE = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$"
SHA256_RE = r"^[0-9a-f]{64}$"
REVISION_RE = r"^[0-9a-f]{40}$"

Name = Annotated[str, Field(pattern=NAME_RE, description="kebab-case identifier")]
Target = Annotated[str, Field(pattern=TARGET_RE, description='"package.module:attr", resolved against the allowlist')]
DType = Literal["float32", "float16", "bfloat16", "float64"]
Accelerator = Literal["cpu", "cuda", "mps", "any"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Paper(Strict):
    venue: str
    arxiv: str | None = Field(None, pattern=r"^\d{4}\.\d{4,5}(v\d+)?$")
    code: str | None = Field(None, pattern=r"^https?://")
    url: str | None = Field(None, pattern=r"^https?://")
    authors: list[str] = []


class TinyCheckpoint(Strict):
    """How the conformance harness makes a tiny local checkpoint of the same model type, so the
    ``full`` variant's loading path can be tested offline (``save_pretrained`` then the same builder)."""

    config: dict[str, Any] = Field(description="kwargs of the config (transformers: must contain model_type)")
    model_class: str | None = Field(
        None, description="class used to create the tiny model, when it differs from the loading class"
    )


class HubSource(Strict):
    """A model role loaded with ``from_pretrained`` from transformers or diffusers."""

    source: Literal["transformers", "diffusers"]
    model_class: str = Field(description="class in the library, e.g. AutoModelForCausalLM, UNet2DModel")
    id: str | None = Field(None, description="hub id (needs revision) or local directory")
    revision: str | None = Field(None, pattern=REVISION_RE, description="pinned 40-hex commit of a hub id")
    allow_unpinned: bool = False
    subfolder: str | None = None
    dtype: DType | None = None
    trust_remote_code: bool = False
    tiny: TinyCheckpoint | None = None

    @model_validator(mode="after")
    def _pinned(self) -> "HubSource":
        if self.id is None:
            raise ValueError("id: a hub id or a local directory is required")
        looks_remote = "/" in self.id and not self.id.startswith((".", "/", "~"))
        if looks_remote and self.revision is None and not self.allow_unpinned:
            raise ValueError(f"revision: hub id {self.id!r} needs a pinned 40-hex revision (or allow_unpinned: true)")
        return self


class TimmSource(Strict):
    """A model role created with ``timm.create_model``."""

    source: Literal["timm"]
    model_name: str
    pretrained: bool = False
    weights: str | None = Field(None, description="local safetensors file, relative to the spec file")
    sha256: str | None = Field(None, pattern=SHA256_RE)
    kwargs: dict[str, Any] = {}
    dtype: DType | None = None


class ZooSource(Strict):
    """A model role built by a factory in an allowed package, optionally loading safetensors."""

    source: Literal["zoo"]
    factory: Target
    config: dict[str, Any] = {}
    weights: str | None = Field(None, description="safetensors file, relative to the spec file")
    sha256: str | None = Field(None, pattern=SHA256_RE)
    dtype: DType | None = None

    @model_validator(mode="after")
    def _hash(self) -> "ZooSource":
        if self.weights is not None and self.sha256 is None:
            raise ValueError("sha256: local weights need their sha256")
        if self.weights is not None and not self.weights.endswith(".safetensors"):
            raise ValueError("weights: only .safetensors files may ship with a spec")
        return self


ModelSource = Annotated[Union[HubSource, TimmSource, ZooSource], Field(discriminator="source")]


class ModelRole(Strict):
    kind: str = Field(description="free-form role kind, e.g. causal-lm, masked-diffusion-lm, unet, tokenizer")
    description: str | None = None
    variants: dict[Name, ModelSource]


class ProcedureSpec(Strict):
    target: Target
    params: dict[str, Any] = {}
    variant_params: dict[Name, dict[str, Any]] = Field(
        {}, description="per-variant overrides of params, e.g. {full: {train_steps: 2000}}"
    )
    description: str | None = None


class HardwareTarget(Strict):
    accelerator: Accelerator = "cpu"
    min_memory_gb: float = Field(0.0, ge=0)
    dtypes: list[DType] = ["float32"]
    gpus: int = Field(1, ge=1, description="GPUs needed; >1 builds with accelerate device_map='auto'")
    tested_on: str | None = None


class Metric(Strict):
    name: str
    dataset: str
    variant: Name
    kind: Literal["reported", "reproduced"]
    value: float
    unit: str | None = None
    higher_is_better: bool | None = None
    tolerance: float | None = Field(None, ge=0)
    command: str | None = Field(None, description="the command that reproduces the number")
    check: Target | None = Field(None, description="callable(pipeline, **check_params) -> float re-checked by conformance")
    check_params: dict[str, Any] = Field({}, description="keyword arguments of the check, e.g. {nfe: 6}")
    slow: bool = Field(False, description="too slow for the default conformance run")
    setting: dict[str, Any] = Field({}, description="conditions the number holds under, e.g. {nfe: 10, lanes: 4}")
    source: str | None = Field(None, description="where a reported number comes from (table, figure)")
    notes: str | None = None

    @model_validator(mode="after")
    def _reproduced(self) -> "Metric":
        if self.kind == "reproduced":
            if self.command is None:
                raise ValueError("command: a reproduced metric needs the command that reproduces it")
            if self.tolerance is None:
                raise ValueError("tolerance: a reproduced metric needs a tolerance")
        return self


class Spec(Strict):
    """One method (or baseline) of the zoo."""

    name: Name
    title: str
    summary: str | None = None
    paper: Paper | None = None
    license: str | None = None
    citation: str | None = None
    task: str = Field(pattern=NAME_RE)
    tags: list[str] = []
    implementation: Annotated[str, Field(pattern=MODULE_RE)] = Field(
        description="the method's package (holds its procedures and registers its invariants)"
    )
    requires: dict[str, str] = Field({}, description='package -> version specifier, e.g. {diffusers: ">=0.31"}')
    models: dict[str, ModelRole] = {}
    samplers: dict[Name, ProcedureSpec] = {}
    recipes: dict[Name, ProcedureSpec] = Field(
        {}, description="analyses and training recipes: methods with no sampler declare these instead"
    )
    default: Name = Field(description="the procedure a loaded pipeline calls (a key of samplers or recipes)")
    variants: list[Name] = Field(description="variant names, in order of preference")
    hardware: dict[Name, HardwareTarget]
    metrics: list[Metric] = []
    invariants: list[str] = []
    bench: Target | None = Field(
        None, description="the method's benchmark, main(argv: list[str]) -> int, run by `zoo bench NAME [--quick] [args]`"
    )
    docs: str | None = None

    @field_validator("invariants")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        dupes = sorted({x for x in v if v.count(x) > 1})
        if dupes:
            raise ValueError(f"listed twice: {', '.join(dupes)}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> "Spec":
        procedures = set(self.samplers) | set(self.recipes)
        if not procedures:
            raise ValueError("samplers/recipes: declare at least one sampler or recipe")
        both = set(self.samplers) & set(self.recipes)
        if both:
            raise ValueError(f"recipes: {sorted(both)} also declared under samplers")
        if self.default not in procedures:
            raise ValueError(f"default: {self.default!r} is not a sampler or recipe (have: {', '.join(sorted(procedures))})")
        missing_hw = [v for v in self.variants if v not in self.hardware]
        if missing_hw:
            raise ValueError(f"hardware: no hardware target for variant(s) {', '.join(missing_hw)}")
        extra_hw = [v for v in self.hardware if v not in self.variants]
        if extra_hw:
            raise ValueError(f"hardware: {', '.join(extra_hw)} not listed in variants")
        for role, model in self.models.items():
            absent = [v for v in self.variants if v not in model.variants]
            if absent:
                raise ValueError(f"models.{role}.variants: no source for variant(s) {', '.join(absent)}")
        for section in (self.samplers, self.recipes):
            for pname, proc in section.items():
                unknown = [v for v in proc.variant_params if v not in self.variants]
                if unknown:
                    raise ValueError(f"{pname}.variant_params: unknown variant(s) {', '.join(unknown)}")
        for m in self.metrics:
            if m.variant not in self.variants:
                raise ValueError(f"metrics: {m.name!r} refers to unknown variant {m.variant!r}")
        return self

    def procedure(self, name: str) -> tuple[str, ProcedureSpec]:
        """``(section, spec)`` of a sampler or recipe."""
        if name in self.samplers:
            return "samplers", self.samplers[name]
        return "recipes", self.recipes[name]


def json_schema() -> dict[str, Any]:
    schema = Spec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "Zoo method spec"
    return schema

