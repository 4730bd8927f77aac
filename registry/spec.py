"""The spec schema: Pydantic v2 models, strict, ``extra="forbid"``, frozen.

A spec is data. Code is named only by ``"package.module:attr"`` strings, resolved later by
:mod:`registry.resolve` against an allowlist. ``zoo schema`` exports :func:`json_schema`.
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

NAME_RE = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
TARGET_RE = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$"
MODULE_RE = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$"
SHA256_RE = r"^[0-9a-f]{64}$"
WEIGHT_SUFFIXES = (".safetensors", ".pt", ".pth", ".ckpt")
REVISION_RE = r"^[0-9a-f]{40}$"
#: A hub repository id as ``huggingface_hub.utils.validate_repo_id`` accepts it: ``name`` or ``owner/name`` of
#: ``[A-Za-z0-9_.-]``, not starting or ending with ``-``/``.``, no ``--`` or ``..``, at most 96 characters.
HUB_ID_RE = r"^(?!.*(?:--|\.\.))(?:[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?/)?[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$"
HUB_ID_MAX = 96
#: A distribution name (PEP 508 / PEP 503), the keys of ``requires``.
PACKAGE_RE = r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$"


def is_hub_id(ref: Any) -> bool:
    """Whether ``ref`` is a valid hub repository id (:data:`HUB_ID_RE`)."""
    import re

    return isinstance(ref, str) and len(ref) <= HUB_ID_MAX and re.fullmatch(HUB_ID_RE, ref) is not None


def _hub_id(value: str | None) -> str | None:
    """Validator of a ``hub:`` field: a hub repository id."""
    if value is not None and not is_hub_id(value):
        raise ValueError(f"expected a hub repository id (owner/name: letters, digits, _ . -), got {value[:100]!r}")
    return value


HubId = Annotated[str, AfterValidator(_hub_id)]


def _requirements(value: dict[str, str]) -> dict[str, str]:
    """Validator of ``requires``: each key a distribution name, each value a version specifier (PEP 440), so that
    together they are a plain PEP 508 requirement (no extras, markers or URLs)."""
    import re

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    for name, spec in value.items():
        if not re.fullmatch(PACKAGE_RE, name):
            raise ValueError(f"{name[:100]!r} is not a package name (PEP 508: letters, digits, . _ -)")
        try:
            SpecifierSet(spec)
            req = Requirement(f"{name}{spec}")
        except (InvalidSpecifier, InvalidRequirement):
            raise ValueError(f"{name}: {spec[:100]!r} is not a version specifier (e.g. \">=1.2,<2\")") from None
        if req.url or req.marker or req.extras:
            raise ValueError(f"{name}: {spec[:100]!r} must be a version specifier only")
    return value

Name = Annotated[str, Field(pattern=NAME_RE, description="kebab-case identifier")]
Target = Annotated[str, Field(pattern=TARGET_RE, description='"package.module:attr", resolved against the allowlist')]
DType = Literal["float32", "float16", "bfloat16", "float64"]
#: the dtype names a spec declares (``hardware.<variant>.dtypes``) and a caller may ask for
DTYPE_NAMES: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64")
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


def tiny_sizes(value: Any) -> Any:
    """Validator of ``tiny.config``: every integer within :data:`registry.limits.TINY_CONFIG_INT`, lists,
    strings and entries within the default caps (the product is bounded when the checkpoint is built)."""
    from .limits import TINY_CONFIG_INT, check_tree

    check_tree(value, "", ints=TINY_CONFIG_INT)
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

    config: Annotated[dict[str, Any], AfterValidator(refuse_code_keys), AfterValidator(tiny_sizes)] = Field(
        description="kwargs of the config (transformers: must contain model_type); keys that point at code "
        "(auto_map, *_class, custom_pipelines, ...) are refused; integers at most 65536 and at most 20M parameters "
        "in all (registry.limits)"
    )
    model_class: str | None = Field(
        None, description="class used to create the tiny model, when it differs from the loading class"
    )


def normalized_file(rel: str) -> str:
    """A spec-relative file name as the spec's declarations are compared (``./weights//x`` -> ``weights/x``)."""
    import posixpath

    return posixpath.normpath(rel.replace("\\", "/"))


class SpecFile(Strict):
    """A file shipped beside the spec, as a value of ``transform_config``: the engine resolves it against the
    spec file that wrote it (inside that file's folder tree), verifies its sha256 exactly like ``weights:``, and
    calls the transform with the verified absolute :class:`pathlib.Path` in its place."""

    doc_example: ClassVar[str] = """
transform_config: {packed: {file: weights/my-method-packed.safetensors, sha256: <64-hex>}, bits: 4}
"""

    file: str = Field(description="path relative to the spec file (inside its folder tree)")
    sha256: str = Field(pattern=SHA256_RE, description="sha256 of the file; the engine refuses any other bytes")

    @field_validator("file")
    @classmethod
    def _relative(cls, v: str) -> str:
        if not v or v.startswith(("/", "~")) or ".." in v.replace("\\", "/").split("/"):
            raise ValueError(f"expected a path relative to the spec file without '..', got {v!r}")
        return v


class Transformable(Strict):
    """Fields every source shares: a post-load transform (see docs/writing-a-method.md)."""

    transform: Target | None = Field(
        None, description='"pkg.module:fn" registered as a transform, called as fn(model, **transform_config) after loading; returns the model (or None: changed in place)'
    )
    transform_config: ConsentFree = Field(
        {}, description="keyword arguments of the transform, validated against its params model (consent keys "
        "refused); a value {file: <relative path>, sha256: <64-hex>} is a shipped file (SpecFile): resolved and "
        "verified like weights:, passed as a pathlib.Path"
    )

    @model_validator(mode="after")
    def _transform_config(self) -> "Transformable":
        if self.transform_config and self.transform is None:
            raise ValueError("transform_config: given without a transform")
        for key, value in self.transform_config.items():
            if isinstance(value, dict) and "file" in value:
                try:
                    SpecFile.model_validate(value)
                except ValidationError as exc:
                    err = exc.errors(include_url=False)[0]
                    where = ".".join(str(p) for p in err["loc"])
                    msg = err["msg"].removeprefix("Value error, ")
                    raise ValueError(f"transform_config.{key}{'.' + where if where else ''}: {msg} "
                                     "(a file entry is {file: <relative path>, sha256: <64-hex>})") from None
        return self

    def config_files(self) -> dict[str, SpecFile]:
        """The ``transform_config`` entries that are shipped files, by key."""
        return {k: SpecFile.model_validate(v) for k, v in self.transform_config.items() if isinstance(v, dict) and "file" in v}


class HubFile(Strict):
    """One weights file inside a hub repository, fetched with ``huggingface_hub.hf_hub_download``
    (``local_files_only`` when offline) and verified against its sha256."""

    doc_example: ClassVar[str] = """
weights: {hub: owner/repo, revision: 0123456789abcdef0123456789abcdef01234567,
          filename: ckpt/model_ema.pt, sha256: <64-hex>}
convert: "my_plugin.convert:from_upstream"   # @registry.contract.converter(inverse=...)
"""

    hub: HubId = Field(description="hub repository id, e.g. owner/repo")
    revision: str | None = Field(None, pattern=REVISION_RE, description="pinned 40-hex commit")
    filename: str = Field(description="path of the file inside the repository (.safetensors, .pt, .pth, .ckpt)")
    sha256: str | None = Field(None, pattern=SHA256_RE)
    repo_type: Literal["model", "dataset", "space"] = "model"
    allow_unpinned: bool = Field(
        False, description="accept a file whose revision and sha256 could not be pinned (the default branch, unverified); "
        "say why in a comment"
    )

    @model_validator(mode="after")
    def _pinned(self) -> "HubFile":
        missing = [k for k in ("revision", "sha256") if getattr(self, k) is None]
        if missing and not self.allow_unpinned:
            raise ValueError(f"{'/'.join(missing)}: a hub file needs a pinned 40-hex revision and its sha256 (or allow_unpinned: true)")
        return self

    @field_validator("filename")
    @classmethod
    def _format(cls, v: str) -> str:
        if not v.endswith(WEIGHT_SUFFIXES) or v.startswith("/") or ".." in v.split("/"):
            raise ValueError(f"expected a relative path ending in {', '.join(WEIGHT_SUFFIXES)}, got {v!r}")
        return v


class Adapter(Strict):
    """A PEFT adapter (e.g. LoRA) loaded onto a transformers/diffusers model with peft."""

    doc_example: ClassVar[str] = """
adapters:
  - {hub: owner/style-lora, revision: <40-hex>, weight_name: adapter_model.safetensors,
     adapter_name: style, sha256: <64-hex>}
  - {path: adapters/mine, adapter_name: mine, sha256: <64-hex>}   # relative to the spec file
"""

    hub: HubId | None = Field(None, description="hub repository id of the adapter (needs revision)")
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

    doc_example: ClassVar[str] = """
lm: {source: transformers, model_class: AutoModelForCausalLM, id: Qwen/Qwen2.5-0.5B, revision: <40-hex>,
     tiny: {config: {model_type: qwen2, hidden_size: 16, num_hidden_layers: 1, num_attention_heads: 2,
                     num_key_value_heads: 1, intermediate_size: 32, vocab_size: 64}},
     transform: "my_plugin.patch:install_processors", transform_config: {kind: flash}}
tokenizer: {source: transformers, model_class: AutoTokenizer, id: Qwen/Qwen2.5-0.5B, revision: <40-hex>,
            tiny: {config: {vocab: [the, zoo, model]}}}   # a word-level tokenizer for the offline check
"""

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
    adapters: list[Adapter] = Field([], description="PEFT adapters loaded onto the model, in order")

    @model_validator(mode="after")
    def _pinned(self) -> "HubSource":
        if self.id is None:
            raise ValueError("id: a hub id or a local directory is required")
        if looks_remote(self.id) and not is_hub_id(self.id):
            raise ValueError(f"id: {self.id[:100]!r} is neither a hub repository id (owner/name) nor a local folder "
                             "(./x, ../x, /x or ~/x)")
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


def _timm_size(key: str, value: Any) -> None:
    """The caps of one timm keyword (:mod:`registry.limits`): classes, channels, image sides, rates in [0, 1]."""
    from .limits import SPEC_STR, TIMM_IMG_SIZE, TIMM_IN_CHANS, TIMM_NUM_CLASSES, check_tree

    caps = {"num_classes": TIMM_NUM_CLASSES, "in_chans": TIMM_IN_CHANS, "img_size": TIMM_IMG_SIZE}
    if key in caps:
        check_tree(value, f"kwargs.{key}", ints=caps[key])
    elif key in ("drop_rate", "drop_path_rate"):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise ValueError(f"kwargs.{key}: expected a rate in [0, 1], got {value!r}")
    else:
        check_tree(value, f"kwargs.{key}", strings=SPEC_STR)


class TimmSource(Transformable):
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
            _timm_size(key, value)
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


class ZooSource(Transformable):
    """A model role built by a registered factory (``@registry.contract.factory``) of an allowed
    package, optionally loading weights: a local file or one file of a hub repository, mapped to
    the factory's keys by ``convert``."""

    doc_example: ClassVar[str] = """
dit:   # the paper's checkpoint: paper-sized config, one hub file, a converter with its inverse
  source: zoo
  factory: "my_plugin.model:build_dit"
  config: {depth: 28, width: 1152}
  weights: {hub: owner/repo, revision: <40-hex>, filename: ckpt/model_ema.pt, sha256: <64-hex>}
  convert: "my_plugin.convert:from_upstream"
  tiny_config: {depth: 2, width: 16}   # the conformance loading-path check builds this instead
"""

    source: Literal["zoo"]
    factory: Target
    config: ConsentFree = Field({}, description="keyword arguments of the factory, validated against its params model")
    weights: str | HubFile | None = Field(
        None, description="a local .safetensors file relative to the spec file, or a hub file {hub, revision, filename, sha256} "
        "(.safetensors, or .pt/.pth/.ckpt read with torch.load(weights_only=True))"
    )
    sha256: str | None = Field(None, pattern=SHA256_RE)
    convert: Target | None = Field(
        None, description='"pkg.module:fn" registered as a converter: fn(state_dict) -> state_dict with the factory\'s keys'
    )
    dtype: DType | None = None
    allow_nonfinite: bool = Field(False, description="accept NaN/inf in the weights (refused by default)")
    tiny_config: ConsentFree | None = Field(
        None, description="hub-file weights only: factory config overrides (merged over `config`) that give a tiny model "
        "with the same key layout and converter; the conformance loading-path check builds the factory at this config, "
        "maps its state back by the converter's inverse and loads it through the real code, for any variant status "
        "(without it, a declared-only variant's hub-file check is SKIP); validated like `config`"
    )

    @model_validator(mode="after")
    def _hash(self) -> "ZooSource":
        if isinstance(self.weights, str):
            if self.sha256 is None:
                raise ValueError("sha256: local weights need their sha256")
            if not self.weights.endswith(".safetensors"):
                raise ValueError("weights: only .safetensors files may ship with a spec (a hub file, {hub, filename, ...}, "
                                 "may be .pt/.pth/.ckpt, read with torch.load(weights_only=True))")
        elif isinstance(self.weights, HubFile) and self.sha256 is not None:
            raise ValueError("sha256: a hub file carries its own sha256 (weights.sha256)")
        if self.convert is not None and self.weights is None:
            raise ValueError("convert: given without weights")
        if self.tiny_config is not None and not isinstance(self.weights, HubFile):
            raise ValueError("tiny_config: only a role whose weights are a hub file ({hub, filename, ...}) has a tiny "
                             "loading-path check (local weights are checked as shipped)")
        return self

    def tiny_factory_config(self) -> dict[str, Any]:
        """The factory config of the tiny loading-path check: ``config`` with ``tiny_config`` merged over it."""
        return {**self.config, **(self.tiny_config or {})}


class RoleSource(Transformable):
    """A role derived from another role of the same variant: a deep copy of that role's built
    model, passed through ``transform`` (e.g. a quantised copy of the full-precision model)."""

    doc_example: ClassVar[str] = """
models:
  dit: {kind: dit, variants: {toy: {source: zoo, factory: "my_plugin.toy:build_dit"}}}
  dit-int8:
    kind: dit
    variants:
      toy: {source: role, from_role: dit, transform: "my_plugin.quant:quantise", transform_config: {bits: 8}}
  unet:   # another spec's declaration of a shared checkpoint, built (and cached) once for both
    kind: unet
    variants:
      toy: {source: role, from_spec: digits, from_role: unet, share: true}
"""

    source: Literal["role"]
    from_role: str = Field(description="the role whose built model is copied")
    from_spec: Name | None = Field(
        None, description="the catalogued spec that declares `from_role` (default: this spec); its declaration (factory, "
        "weights, sha256, folder) builds the model, so a checkpoint several specs use is declared once"
    )
    from_variant: Name | None = Field(None, description="with from_spec: that spec's variant (default: this variant's name)")
    share: bool = Field(False, description="hand the transform the parent's object itself instead of a deep copy (it must not mutate it)")

    @model_validator(mode="after")
    def _foreign(self) -> "RoleSource":
        if self.from_variant is not None and self.from_spec is None:
            raise ValueError("from_variant: only with from_spec (a role of this spec has this variant)")
        return self


ModelSource = Annotated[Union[HubSource, TimmSource, ZooSource, RoleSource], Field(discriminator="source")]


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
    variant_params: dict[Name, ConsentFree] = Field(
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
    variant_defaults: dict[Name, Name] = Field(
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
        for section in (self.samplers, self.recipes):
            for pname, proc in section.items():
                unknown = [v for v in proc.variant_params if v not in self.variants]
                if unknown:
                    raise ValueError(f"{pname}.variant_params: unknown variant(s) {', '.join(unknown)}")
                for role in [*(proc.roles or []), *([proc.produces] if proc.produces else [])]:
                    if role not in self.models:
                        raise ValueError(f"{pname}: unknown role {role!r} (roles: {', '.join(self.models) or 'none'})")
        for v, pname in self.variant_defaults.items():
            if v not in self.variants:
                raise ValueError(f"variant_defaults: unknown variant {v!r} (declared: {', '.join(self.variants)})")
            if pname not in procedures:
                raise ValueError(f"variant_defaults.{v}: {pname!r} is not a sampler or recipe (have: {', '.join(sorted(procedures))})")
        for v in self.variants:  # a loadable variant's default must run on it (declared-only ones never load)
            if self.hardware[v].status == "declared-only":
                continue
            pname = self.default_for(v)
            lacking = [r for r in (self.procedure(pname)[1].roles or []) if r not in self.roles_of(v)]
            if lacking:
                where = f"variant_defaults.{v}" if v in self.variant_defaults else "default"
                raise ValueError(f"{where}: {pname!r} needs role {lacking[0]!r}, which has no source for variant {v} "
                                 f"(name a procedure that runs there in variant_defaults.{v})")
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
                weights = getattr(src, "weights", None)
                if isinstance(weights, str) and getattr(src, "sha256", None):
                    out.setdefault(normalized_file(weights), (src.sha256, f"{at}.weights"))  # type: ignore[union-attr]
                for key, ref in src.config_files().items():
                    out.setdefault(normalized_file(ref.file), (ref.sha256, f"{at}.transform_config.{key}"))
        return out

    def default_for(self, variant: str) -> str:
        """The procedure a pipeline of ``variant`` calls when the caller names none."""
        return self.variant_defaults.get(variant, self.default)

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
            if isinstance(src, RoleSource) and src.from_spec is None:
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

