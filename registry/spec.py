"""The spec schema: Pydantic v2 models, strict, ``extra="forbid"``, frozen.

A spec is data. Code is named only by ``"package.module:attr"`` strings, resolved later by
:mod:`registry.resolve` against an allowlist. ``zoo schema`` exports :func:`json_schema`.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

NAME_RE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
TARGET_RE = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$"
MODULE_RE = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$"
SHA256_RE = r"^[0-9a-f]{64}$"
REVISION_RE = r"^[0-9a-f]{40}$"

Name = Annotated[str, Field(pattern=NAME_RE, description="kebab-case identifier")]
Target = Annotated[str, Field(pattern=TARGET_RE, description='"package.module:attr", resolved against the allowlist')]
DType = Literal["float32", "float16", "bfloat16", "float64"]
Accelerator = Literal["cpu", "cuda", "mps", "any"]


#: Keys that grant consent or switch a loader to code/pickle/network. A spec can never pass them to
#: code (factory ``config``, procedure ``params``, metric ``check_params``, timm ``kwargs``): consent
#: comes from the caller (``trust_remote_code=True``), never from the spec's own arguments.
CONSENT_KEYS = frozenset({
    "trust_remote_code", "allow_remote_code", "remote_code", "weights_only", "allow_pickle", "use_safetensors",
    "local_files_only", "allow_unpinned", "use_auth_token", "custom_pipeline", "custom_pipelines",
    "auto_map", "code_revision", "checkpoint_path", "pretrained_cfg_overlay", "pretrained_cfg", "cache_dir",
    "force_download", "proxies",
})
#: Keys of a ``tiny.config`` that would make transformers/diffusers import code: ``auto_map``
#: (transformers' remote code), ``custom_pipeline(s)`` (diffusers' community code), the
#: ``*_class``/``*_class_name`` keys that name a class to import (``tokenizer_class``,
#: ``processor_class``, diffusers' ``_class_name``) and ``architectures``.
CODE_KEY_SUFFIXES = ("_class", "_class_name", "auto_map", "custom_pipeline", "custom_pipelines")
CODE_KEYS = frozenset({"architectures", "auto_map", "custom_pipeline", "custom_pipelines", "_name_or_path"})


def _walk_keys(value: Any, path: str = "") -> list[tuple[str, str]]:
    """``(dotted path, key)`` of every mapping key at any depth of ``value``."""
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            p = f"{path}.{k}" if path else str(k)
            out.append((p, str(k)))
            out.extend(_walk_keys(v, p))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_walk_keys(v, f"{path}.{i}" if path else str(i)))
    return out


def refuse_consent_keys(value: Any) -> Any:
    """Validator: no consent/loader-switch key (:data:`CONSENT_KEYS`) at any depth."""
    for path, key in _walk_keys(value):
        if key.lower() in CONSENT_KEYS:
            raise ValueError(
                f"{path}: {key!r} cannot be set by a spec (consent comes from the caller, e.g. "
                f"zoo.load(..., trust_remote_code=True), and only for a hub source that declares it)"
            )
    return value


def refuse_code_keys(value: Any) -> Any:
    """Validator of ``tiny.config``: no key that points transformers/diffusers at code."""
    refuse_consent_keys(value)
    for path, key in _walk_keys(value):
        k = key.lower()
        if k in CODE_KEYS or k.endswith(CODE_KEY_SUFFIXES):
            raise ValueError(f"{path}: {key!r} points at code; a tiny checkpoint is plain config only")
    return value


ConsentFree = Annotated[dict[str, Any], AfterValidator(refuse_consent_keys)]


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

    config: Annotated[dict[str, Any], AfterValidator(refuse_code_keys)] = Field(
        description="kwargs of the config (transformers: must contain model_type); keys that point at code "
        "(auto_map, *_class, custom_pipelines, ...) are refused"
    )
    model_class: str | None = Field(
        None, description="class used to create the tiny model, when it differs from the loading class"
    )


class HubSource(Strict):
    """A model role loaded with ``from_pretrained`` from transformers or diffusers."""

    source: Literal["transformers", "diffusers"]
    model_class: str = Field(description="class in the library, e.g. AutoModelForCausalLM, UNet2DModel")
    id: str | None = Field(
        None, description="hub id (needs revision, with or without an org) or a local directory starting with ./, ../, / or ~ "
        "(relative paths resolve against the spec's folder and must stay inside it)"
    )
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
        if looks_remote(self.id) and self.revision is None and not self.allow_unpinned:
            raise ValueError(f"revision: hub id {self.id!r} needs a pinned 40-hex revision (or allow_unpinned: true)")
        return self


def looks_remote(model_id: str) -> bool:
    """A hub id (``org/name`` or org-less ``gpt2``) unless it is written as a path (``./``, ``../``,
    ``/``, ``~``, or ``.``): ambiguous bare names are hub ids and need a pinned revision."""
    return not (model_id in (".", "..") or model_id.startswith(("./", "../", "/", "~", ".\\", "..\\")))


#: The ``timm.create_model`` keyword arguments a spec may set: architecture shape only. Anything
#: that names a file, a URL or a pretrained config (``checkpoint_path``, ``pretrained_cfg_overlay``,
#: ``pretrained_cfg``, ``cache_dir``) is refused.
TIMM_KWARGS = frozenset({"num_classes", "in_chans", "global_pool", "drop_rate", "drop_path_rate", "img_size"})


class TimmSource(Strict):
    """A model role created with ``timm.create_model``, architecture only; weights come from a local
    safetensors file with its sha256 (``pretrained: true`` downloads unpinned weights: it needs
    ``allow_unpinned: true`` and a network, and is refused offline)."""

    source: Literal["timm"]
    model_name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    pretrained: bool = False
    allow_unpinned: bool = False
    weights: str | None = Field(None, description="local safetensors file, relative to the spec file (needs sha256)")
    sha256: str | None = Field(None, pattern=SHA256_RE)
    kwargs: dict[str, Any] = Field({}, description=f"only {', '.join(sorted(TIMM_KWARGS))}; scalar values")
    dtype: DType | None = None
    allow_nonfinite: bool = Field(False, description="accept NaN/inf in the weights (refused by default)")

    @model_validator(mode="after")
    def _safe(self) -> "TimmSource":
        bad = sorted(set(self.kwargs) - TIMM_KWARGS)
        if bad:
            raise ValueError(f"kwargs: {', '.join(bad)} not allowed for timm (allowed: {', '.join(sorted(TIMM_KWARGS))})")
        for key, value in self.kwargs.items():
            ok = isinstance(value, (bool, int, float, str)) or (
                isinstance(value, list) and len(value) <= 4 and all(isinstance(v, int) for v in value))
            if not ok:
                raise ValueError(f"kwargs.{key}: expected a number, a string or a short list of ints, got {type(value).__name__}")
        if self.weights is not None:
            if self.sha256 is None:
                raise ValueError("sha256: local weights need their sha256")
            if not self.weights.endswith(".safetensors"):
                raise ValueError("weights: only .safetensors files may ship with a spec")
            if self.pretrained:
                raise ValueError("pretrained: give either pretrained: true or local weights, not both")
        if self.pretrained and not self.allow_unpinned:
            raise ValueError("pretrained: timm downloads unpinned weights; ship weights + sha256, or set allow_unpinned: true")
        return self


class ZooSource(Strict):
    """A model role built by a registered factory (``@registry.contract.factory``) of an allowed
    package, optionally loading safetensors."""

    source: Literal["zoo"]
    factory: Target
    config: ConsentFree = Field({}, description="keyword arguments of the factory, validated against its params model")
    weights: str | None = Field(None, description="safetensors file, relative to the spec file")
    sha256: str | None = Field(None, pattern=SHA256_RE)
    dtype: DType | None = None
    allow_nonfinite: bool = Field(False, description="accept NaN/inf in the weights (refused by default)")

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
    params: ConsentFree = {}
    variant_params: dict[Name, ConsentFree] = Field(
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
    check_params: ConsentFree = Field({}, description="keyword arguments of the check, e.g. {nfe: 6}")
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

