"""The spec schema: Pydantic v2 models, strict, ``extra="forbid"``, frozen.

A spec is data. Code is named only by ``"package.module:attr"`` strings, resolved later by
:mod:`registry.resolve` against an allowlist. ``zoo schema`` exports :func:`json_schema`. The schema's atoms
live in :mod:`registry.schema` and the model source kinds in :mod:`registry.sources` (both re-exported here);
:data:`ModelSource` is the union of the registered kinds, rebuilt when a kind is registered.
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import AfterValidator, BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from . import sources
from .schema import *  # noqa: F401,F403 - the atoms are part of this module's public surface
from .schema import (MODULE_RE, NAME_RE, PACKAGE_RE, SHA256_RE, TARGET_RE, Accelerator, ConsentFree, DType, Name, Paper,
                     Strict, Target, _requirements, normalized_file)
from .sources import HubSource, RoleSource, SourceKind, TimmSource, ZooSource, ZooTiny  # noqa: F401 - re-exported
from .sources.timm import TIMM_KWARGS  # noqa: F401 - re-exported


def _source_union() -> Any:
    kinds = sources.kinds()
    inner = kinds[0] if len(kinds) == 1 else Union[tuple(kinds)]  # noqa: UP007 - a runtime-built union
    return Annotated[inner, Field(discriminator="source")]


#: Every registered source kind, discriminated by its ``source:`` tag (see :func:`registry.sources.register`).
ModelSource = _source_union()



class ModelRole(Strict):
    """A model role: one source per variant; a role may cover only some variants."""

    doc_example: ClassVar[str] = """
teacher:   # a training-only network: only the variant that trains has it
  kind: causal-lm
  variants: {train: {source: zoo, factory: "my_plugin.toy:build_teacher"}}
"""

    kind: str = Field(description="free-form role kind, e.g. causal-lm, masked-diffusion-lm, unet, tokenizer")
    description: str | None = None
    variants: dict[Name, ModelSource] = Field(
        description="variant -> source; a role may have sources for only some variants (e.g. a training-only network)"
    )


class ProcedureSpec(Strict):
    """A sampler or recipe: the Procedure class, its params, the roles it uses, what it produces."""

    doc_example: ClassVar[str] = """
recipes:
  distill: {target: "my_plugin:Distill", roles: [teacher, student]}   # fails to build on a variant without teacher
  train-sae: {target: "my_plugin:TrainSAE", produces: sae, params: {steps: 10}}
"""

    target: Target
    params: ConsentFree = {}
    params_by_variant: dict[Name, ConsentFree] = Field(
        {}, description="per-variant overrides of params, e.g. {full: {train_steps: 2000}}"
    )
    roles: list[str] | None = Field(
        None, description="the model roles this procedure uses (default: all); building it on a variant lacking one is an error"
    )
    produces: str | None = Field(
        None, description="a training recipe's output role: conformance reloads what it returns into that role's factory (strict)"
    )
    description: str | None = None


class TrainingSpec(Strict):
    """How a shipped file is made: a registered trainer (``@registry.contract.trainer``) and the files of this spec
    it writes. ``zoo train NAME [--check] [--out-dir D]`` runs it; ``--check`` compares each written file's sha256
    with the spec's declaration of that file (the ``weights:`` or ``{file:, sha256:}`` entry naming it)."""

    doc_example: ClassVar[str] = """
training:
  toy: {trainer: "my_plugin.train:train_toy", produces: [weights/my-method-toy.safetensors], params: {steps: 800}}
"""

    trainer: Target = Field(description='"pkg.module:fn" registered as a trainer: fn(ctx, opts) writes its files into ctx.out_dir')
    produces: list[str] = Field(
        min_length=1, max_length=64,
        description="the files it writes, as this spec names them (each must be declared by a weights: or a "
        "{file:, sha256:} entry of this spec); written to the output folder under their base names",
    )
    params: ConsentFree = Field({}, description="the trainer's options (validated by its options model)")
    description: str | None = None
    elsewhere: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_+./-]{1,200}$")],
                    dict[str, Annotated[str, Field(pattern=SHA256_RE)]]] = Field(
        {}, max_length=16,
        description="digests this recipe was measured to write on a CPU whose kernels round differently from the machine "
        "that made the shipped files, keyed by the kernel signature `zoo train --check` prints: there, --check accepts "
        "them (and says so) instead of the spec's sha256; elsewhere only the spec's sha256 counts",
    )

    @model_validator(mode="after")
    def _elsewhere_names_produced_files(self) -> "TrainingSpec":
        for sig, files in self.elsewhere.items():
            stray = sorted(set(files) - set(self.produces))
            if stray:
                raise ValueError(f"elsewhere.{sig} names {stray[0]!r}, which this entry does not produce")
        return self


class HardwareTarget(Strict):
    """Where a variant runs, and whether it can run at all (``status``)."""

    doc_example: ClassVar[str] = """
hardware:
  full:  {accelerator: cuda, min_memory_gb: 24, status: needs-training, recipe: train-sae,
          reason: "the paper released no SAE weights"}
  paper: {accelerator: cuda, status: declared-only, reason: "gated model; ImageNet is not available offline"}
  toy:   {accelerator: cpu}
"""

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
    requires: Annotated[dict[str, str], AfterValidator(_requirements)] = Field(
        {}, description='package -> version specifier, e.g. {diffusers: ">=0.31"} (PEP 508 name, PEP 440 specifier)')
    models: dict[str, ModelRole] = {}
    samplers: dict[Name, ProcedureSpec] = {}
    recipes: dict[Name, ProcedureSpec] = Field(
        {}, description="analyses and training recipes: methods with no sampler declare these instead"
    )
    default: Name = Field(description="the procedure a loaded pipeline calls (a key of samplers or recipes)")
    default_by_variant: dict[Name, Name] = Field(
        {}, description="variant -> the procedure a pipeline of that variant calls instead of `default` "
        "(for a variant whose roles the default cannot run on, e.g. a paper-scale pipeline with other roles)"
    )
    variants: list[Name] = Field(description="variant names, in order of preference")
    hardware: dict[Name, HardwareTarget]
    metrics: list[Metric] = []
    inherit_metrics: Literal["reported", "all", "none"] = Field(
        "reported", description="with `extends:` and no `metrics:` of its own, which of the parent's metrics this spec "
        "inherits: `reported` (default: the paper's numbers; the parent's reproduced metrics measured the parent's "
        "configuration, which a child changes), `all` (a child that changes nothing they measure) or `none`; "
        "a `metrics:` list in the child replaces the parent's whatever this says"
    )
    invariants: list[str] = []
    bench: Target | None = Field(
        None, description="the method's benchmark, @benchmark(options=Model) fn(ctx, opts) -> dict, run by "
        "`zoo bench NAME [--quick] [--json] [--out-dir D] [--seed N] [options]` (older: main(argv) -> int)"
    )
    training: dict[Name, TrainingSpec] = Field(
        {}, description="how the shipped files are made: name -> trainer and the files it produces (`zoo train NAME`)"
    )
    docs: str | None = Field(
        None, description="the method's card (Markdown), relative to this spec file's folder, e.g. ../docs/methods/NAME.md",
        max_length=300,
    )

    @field_validator("docs")
    @classmethod
    def _card(cls, v: str | None) -> str | None:
        if v is not None and (not v.endswith(".md") or v.startswith("/") or any(c in v for c in "\\:\x00")):
            raise ValueError(f"expected a relative path to a Markdown card (e.g. ../docs/methods/NAME.md), got {v!r}")
        return v

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
        for sname, section in (("samplers", self.samplers), ("recipes", self.recipes)):
            for pname, proc in section.items():
                unknown = [v for v in proc.params_by_variant if v not in self.variants]
                if unknown:
                    raise ValueError(f"{sname}.{pname}.params_by_variant: unknown variant(s) {', '.join(unknown)}")
                for role in [*(proc.roles or []), *([proc.produces] if proc.produces else [])]:
                    if role not in self.models:
                        raise ValueError(f"{pname}: unknown role {role!r} (roles: {', '.join(self.models) or 'none'})")
        for v, pname in self.default_by_variant.items():
            if v not in self.variants:
                raise ValueError(f"default_by_variant: unknown variant {v!r} (declared: {', '.join(self.variants)})")
            if pname not in procedures:
                raise ValueError(f"default_by_variant.{v}: {pname!r} is not a sampler or recipe (have: {', '.join(sorted(procedures))})")
        for v in self.variants:  # a loadable variant's default must run on it (declared-only ones never load)
            if self.hardware[v].status == "declared-only":
                continue
            pname = self.default_for(v)
            lacking = [r for r in (self.procedure(pname)[1].roles or []) if r not in self.roles_of(v)]
            if lacking:
                where = f"default_by_variant.{v}" if v in self.default_by_variant else "default"
                raise ValueError(f"{where}: {pname!r} needs role {lacking[0]!r}, which has no source for variant {v} "
                                 f"(name a procedure that runs there in default_by_variant.{v})")
        for m in self.metrics:
            if m.variant not in self.variants:
                raise ValueError(f"metrics: {m.name!r} refers to unknown variant {m.variant!r}")
        declared = self.declared_files()
        seen: dict[str, str] = {}
        for tname, entry in self.training.items():
            for rel in entry.produces:
                if normalized_file(rel) not in declared:
                    raise ValueError(f"training.{tname}.produces: {rel!r} is not a file this spec declares (a weights: "
                                     "entry or a {file:, sha256:} value of a transform_config); declare it with its sha256")
                base = normalized_file(rel).rsplit("/", 1)[-1]
                if base in seen:
                    raise ValueError(f"training.{tname}.produces: {rel!r} has the same file name as {seen[base]!r} "
                                     "(produced files are written under their base names)")
                seen[base] = rel
        return self

    def declared_files(self) -> dict[str, tuple[str, str]]:
        """Every shipped file the spec declares with its sha256: normalised relative path -> ``(sha256, field)``
        (``weights:`` of a zoo/timm source, ``{file:, sha256:}`` values of a ``transform_config``)."""
        out: dict[str, tuple[str, str]] = {}
        for role, model in self.models.items():
            for variant, src in model.variants.items():
                at = f"models.{role}.variants.{variant}"
                for fname, (rel, sha) in src.local_files().items():
                    if sha:
                        out.setdefault(normalized_file(rel), (sha, f"{at}.{fname}"))
                for key, ref in src.config_files().items():
                    out.setdefault(normalized_file(ref.file), (ref.sha256, f"{at}.transform_config.{key}"))
        return out

    def default_for(self, variant: str) -> str:
        """The procedure a pipeline of ``variant`` calls when the caller names none."""
        return self.default_by_variant.get(variant, self.default)

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
            parent = src.derived_from()
            if parent is not None:
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



# ----------------------------------------------------------------------------- a kind registered later
def _rebuild_source_union() -> None:
    """Re-make :data:`ModelSource` from the registered kinds and rebuild the models that hold it (a kind registered
    by a plugin or a test after this module was imported validates from then on)."""
    global ModelSource
    ModelSource = _source_union()
    old = ModelRole.model_fields["variants"]
    ModelRole.model_fields["variants"] = FieldInfo.merge_field_infos(old, FieldInfo.from_annotation(dict[Name, ModelSource]))
    ModelRole.model_rebuild(force=True)
    Spec.model_rebuild(force=True)


sources.on_change(_rebuild_source_union)
