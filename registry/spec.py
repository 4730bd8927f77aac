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
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt")
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


class Transformable(Strict):
    """Fields every source shares: a post-load transform (see docs/writing-a-method.md)."""

    transform: Target | None = Field(
        None, description='"pkg.module:fn" registered as a transform, called as fn(model, **transform_config) after loading; returns the model (or None: changed in place)'
    )
    transform_config: dict[str, Any] = Field({}, description="keyword arguments of the transform")

    @model_validator(mode="after")
    def _transform_config(self) -> "Transformable":
        if self.transform_config and self.transform is None:
            raise ValueError("transform_config: given without a transform")
        return self


class HubFile(Strict):
    """One weights file inside a hub repository, fetched with ``huggingface_hub.hf_hub_download``
    (``local_files_only`` when offline) and verified against its sha256."""

    hub: str = Field(description="hub repository id, e.g. owner/repo")
    revision: str = Field(pattern=REVISION_RE, description="pinned 40-hex commit")
    filename: str = Field(description="path of the file inside the repository (.safetensors, .pt, .pth, .ckpt)")
    sha256: str = Field(pattern=SHA256_RE)
    repo_type: Literal["model", "dataset", "space"] = "model"

    @field_validator("filename")
    @classmethod
    def _format(cls, v: str) -> str:
        if not v.endswith(WEIGHT_SUFFIXES) or v.startswith("/") or ".." in v.split("/"):
            raise ValueError(f"expected a relative path ending in {', '.join(WEIGHT_SUFFIXES)}, got {v!r}")
        return v


class Adapter(Strict):
    """A PEFT adapter (e.g. LoRA) loaded onto a transformers/diffusers model with peft."""

    hub: str | None = Field(None, description="hub repository id of the adapter (needs revision)")
    path: str | None = Field(None, description="local adapter folder, relative to the spec file")
    revision: str | None = Field(None, pattern=REVISION_RE)
    weight_name: str = Field("adapter_model.safetensors", description="the adapter's weights file (safetensors)")
    adapter_name: str = Field("default", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
    sha256: str = Field(pattern=SHA256_RE, description="sha256 of the weights file")

    @model_validator(mode="after")
    def _where(self) -> "Adapter":
        if (self.hub is None) == (self.path is None):
            raise ValueError("give exactly one of hub or path")
        if self.hub is not None and self.revision is None:
            raise ValueError(f"revision: adapter {self.hub!r} needs a pinned 40-hex revision")
        if not self.weight_name.endswith(".safetensors") or "/" in self.weight_name:
            raise ValueError("weight_name: adapters load from a .safetensors file name only")
        return self


class HubSource(Transformable):
    """A model role loaded with ``from_pretrained`` from transformers or diffusers
    (also tokenizers and processors: ``model_class: AutoTokenizer``)."""

    source: Literal["transformers", "diffusers"]
    model_class: str = Field(description="class in the library, e.g. AutoModelForCausalLM, UNet2DModel")
    id: str | None = Field(None, description="hub id (needs revision) or local directory")
    revision: str | None = Field(None, pattern=REVISION_RE, description="pinned 40-hex commit of a hub id")
    allow_unpinned: bool = False
    subfolder: str | None = None
    dtype: DType | None = None
    trust_remote_code: bool = False
    tiny: TinyCheckpoint | None = None
    adapters: list[Adapter] = Field([], description="PEFT adapters loaded onto the model, in order")

    @model_validator(mode="after")
    def _pinned(self) -> "HubSource":
        if self.id is None:
            raise ValueError("id: a hub id or a local directory is required")
        looks_remote = "/" in self.id and not self.id.startswith((".", "/", "~"))
        if looks_remote and self.revision is None and not self.allow_unpinned:
            raise ValueError(f"revision: hub id {self.id!r} needs a pinned 40-hex revision (or allow_unpinned: true)")
        return self


class TimmSource(Transformable):
    """A model role created with ``timm.create_model``."""

    source: Literal["timm"]
    model_name: str
    pretrained: bool = False
    weights: str | None = Field(None, description="local safetensors file, relative to the spec file")
    sha256: str | None = Field(None, pattern=SHA256_RE)
    kwargs: dict[str, Any] = {}
    dtype: DType | None = None


class ZooSource(Transformable):
    """A model role built by a factory in an allowed package, optionally loading weights:
    a local file or one file of a hub repository, mapped to the factory's keys by ``convert``."""

    source: Literal["zoo"]
    factory: Target
    config: dict[str, Any] = {}
    weights: str | HubFile | None = Field(
        None, description="a local .safetensors (or .pt/.pth/.ckpt, read with weights_only) file relative to the spec file, or {hub, revision, filename, sha256}"
    )
    sha256: str | None = Field(None, pattern=SHA256_RE)
    convert: Target | None = Field(
        None, description='"pkg.module:fn" registered as a converter: fn(state_dict) -> state_dict with the factory\'s keys'
    )
    dtype: DType | None = None

    @model_validator(mode="after")
    def _hash(self) -> "ZooSource":
        if isinstance(self.weights, str):
            if self.sha256 is None:
                raise ValueError("sha256: local weights need their sha256")
            if not self.weights.endswith(WEIGHT_SUFFIXES):
                raise ValueError(f"weights: expected a file ending in {', '.join(WEIGHT_SUFFIXES)}")
        elif isinstance(self.weights, HubFile) and self.sha256 is not None:
            raise ValueError("sha256: a hub file carries its own sha256 (weights.sha256)")
        if self.convert is not None and self.weights is None:
            raise ValueError("convert: given without weights")
        return self


class RoleSource(Transformable):
    """A role derived from another role of the same variant: a deep copy of that role's built
    model, passed through ``transform`` (e.g. a quantised copy of the full-precision model)."""

    source: Literal["role"]
    from_role: str = Field(description="the role whose built model is copied")
    share: bool = Field(False, description="hand the transform the parent's object itself instead of a deep copy (it must not mutate it)")


ModelSource = Annotated[Union[HubSource, TimmSource, ZooSource, RoleSource], Field(discriminator="source")]


class ModelRole(Strict):
    kind: str = Field(description="free-form role kind, e.g. causal-lm, masked-diffusion-lm, unet, tokenizer")
    description: str | None = None
    variants: dict[Name, ModelSource] = Field(
        description="variant -> source; a role may have sources for only some variants (e.g. a training-only network)"
    )


class ProcedureSpec(Strict):
    target: Target
    params: dict[str, Any] = {}
    variant_params: dict[Name, dict[str, Any]] = Field(
        {}, description="per-variant overrides of params, e.g. {full: {train_steps: 2000}}"
    )
    roles: list[str] | None = Field(
        None, description="the model roles this procedure uses (default: all); building it on a variant lacking one is an error"
    )
    produces: str | None = Field(
        None, description="a training recipe's output role: conformance reloads what it returns into that role's factory (strict)"
    )
    description: str | None = None


class HardwareTarget(Strict):
    status: Literal["runnable", "needs-training", "declared-only"] = Field(
        "runnable",
        description="runnable; needs-training (weights come from `recipe`); declared-only (cannot be built: say why in `reason`)",
    )
    recipe: Name | None = Field(None, description="needs-training: the recipe that produces the missing weights")
    reason: str | None = Field(None, description="why the variant is not runnable (gated model, no released weights, dataset offline)")
    accelerator: Accelerator = "cpu"
    min_memory_gb: float = Field(0.0, ge=0)
    dtypes: list[DType] = ["float32"]
    gpus: int = Field(1, ge=1, description="GPUs needed; >1 builds with accelerate device_map='auto'")
    tested_on: str | None = None

    @model_validator(mode="after")
    def _status(self) -> "HardwareTarget":
        if self.status == "needs-training" and self.recipe is None:
            raise ValueError("recipe: a needs-training variant names the recipe that produces its weights")
        if self.status == "declared-only" and not self.reason:
            raise ValueError("reason: a declared-only variant says why it cannot be built")
        if self.status == "runnable" and self.recipe is not None:
            raise ValueError("recipe: only a needs-training variant names a recipe")
        return self

    def refusal(self, variant: str) -> str | None:
        """One line saying why ``variant`` cannot be loaded as is (None when runnable)."""
        if self.status == "needs-training":
            why = f" ({self.reason})" if self.reason else ""
            return f"variant {variant} is needs-training{why}: its weights are produced by recipe {self.recipe!r} (load it with sampler={self.recipe!r} / zoo run --variant {variant} --sampler {self.recipe})"
        if self.status == "declared-only":
            return f"variant {variant} is declared-only: {self.reason}"
        return None


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
            unknown = [v for v in model.variants if v not in self.variants]
            if unknown:
                raise ValueError(f"models.{role}.variants: unknown variant(s) {', '.join(unknown)} (declared: {', '.join(self.variants)})")
        for v in self.variants:
            self.build_order(v)  # from_role: known roles, no cycles
            hw = self.hardware[v]
            if hw.recipe is not None and hw.recipe not in self.recipes:
                raise ValueError(f"hardware.{v}.recipe: {hw.recipe!r} is not a recipe (have: {', '.join(self.recipes) or 'none'})")
        for section in (self.samplers, self.recipes):
            for pname, proc in section.items():
                unknown = [v for v in proc.variant_params if v not in self.variants]
                if unknown:
                    raise ValueError(f"{pname}.variant_params: unknown variant(s) {', '.join(unknown)}")
                for role in [*(proc.roles or []), *([proc.produces] if proc.produces else [])]:
                    if role not in self.models:
                        raise ValueError(f"{pname}: unknown role {role!r} (roles: {', '.join(self.models) or 'none'})")
        for m in self.metrics:
            if m.variant not in self.variants:
                raise ValueError(f"metrics: {m.name!r} refers to unknown variant {m.variant!r}")
        return self

    def roles_of(self, variant: str) -> list[str]:
        """Roles with a source for ``variant``."""
        return [r for r, m in self.models.items() if variant in m.variants]

    def build_order(self, variant: str) -> list[str]:
        """Roles of ``variant`` so that every ``from_role`` parent comes before its child;
        a ``from_role`` naming a role absent from the variant, or a cycle, is an error."""
        order: list[str] = []
        state: dict[str, int] = {}

        def visit(role: str, path: list[str]) -> None:
            if state.get(role) == 2:
                return
            if state.get(role) == 1:
                cycle = path[path.index(role):] + [role]
                raise ValueError(f"models.{role}.variants.{variant}.from_role: cycle {' -> '.join(cycle)}")
            state[role] = 1
            src = self.models[role].variants[variant]
            if isinstance(src, RoleSource):
                parent = src.from_role
                if parent not in self.models or variant not in self.models[parent].variants:
                    raise ValueError(f"models.{role}.variants.{variant}.from_role: role {parent!r} has no source for variant {variant}")
                visit(parent, path + [role])
            state[role] = 2
            order.append(role)

        for role in self.roles_of(variant):
            visit(role, [])
        return order

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

