"""The spec schema's atoms: patterns, field types, consent/code-key rules and the small models every part of a
spec shares (:class:`Strict`, :class:`Transformable`, :class:`HubFile`, :class:`Adapter`, ...). The source kinds
(:mod:`registry.sources`) and :mod:`registry.spec` build on this module; it imports nothing of the engine but
:mod:`registry.limits`.
"""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

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


def looks_remote(model_id: str) -> bool:
    """A hub id (``org/name`` or org-less ``gpt2``) unless it is written as a path (``./``, ``../``,
    ``/``, ``~``, or ``.``): ambiguous bare names are hub ids and need a pinned revision."""
    return not (model_id in (".", "..") or model_id.startswith(("./", "../", "/", "~", ".\\", "..\\")))


#: The ``timm.create_model`` keyword arguments a spec may set: architecture shape only. Anything
#: that names a file, a URL or a pretrained config (``checkpoint_path``, ``pretrained_cfg_overlay``,
