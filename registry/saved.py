"""Saved pipelines: :meth:`registry.build.Pipeline.save_pretrained` writes a folder that ``zoo.load(folder)``
builds back into the same pipeline (same models bit for bit, same parameters, so the same samples for a seed).

A saved folder is a spec folder plus a manifest::

    pipeline.yaml          the resolved spec (``extends`` applied) of the one variant that was built: every
                           role's current weights as a source of this folder, the procedures' effective params
    weights/<role>.safetensors   factory-built (``source: zoo``) and timm roles: ``weights`` + ``sha256``
    models/<role>/         transformers / diffusers roles (models, tokenizers): their own ``save_pretrained``
                           folder (safetensors), loaded back with ``from_pretrained`` as a local id
    zoo-pipeline.json      format, spec name, variant, default procedure, device, dtype, and the sha256 of
                           every other file

Roles derived from another role (``source: role``) are saved as that declaration and re-derived from the
saved parent. A saved folder is untrusted input when loaded, under the rules of any spec folder and more:
the manifest must list exactly the files present, each matching its sha256; only data files (``.yaml``,
``.json``, ``.safetensors``, ``.txt``, ``.model``) and no symlinks may be present (no ``.py``, ``.bin``,
``.pt``: nothing that runs code or unpickles); no JSON file may name code (``auto_map``, ``custom_pipeline``,
``trust_remote_code``); the spec is validated and resolved through the allowlist like any other; and
nothing in the folder grants consent (remote code is never enabled for a saved pipeline).
"""
from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator

from .errors import BuildError, Location, ParamError, SpecError, ZooError
from .files import folder_in_place
from .schema import NAME_RE, SHA256_RE, DType, Strict
from .sources.base import SaveRequest
from .schema import DTYPE_NAMES

if TYPE_CHECKING:
    from .build import Pipeline

MANIFEST = "zoo-pipeline.json"
SPEC_FILE = "pipeline.yaml"
FORMAT = 1
#: file types a saved folder may hold: data only (a ``.model`` is a sentencepiece protobuf)
DATA_SUFFIXES = (".yaml", ".json", ".safetensors", ".txt", ".model")
#: keys that make transformers/diffusers import code named by a config file; refused anywhere in a saved JSON file
CODE_KEYS = frozenset({"auto_map", "custom_pipeline", "custom_pipelines", "_custom_pipeline", "trust_remote_code"})
MAX_FILES = 4096
MAX_JSON_BYTES = 64 << 20


Sha256 = Annotated[str, Field(pattern=SHA256_RE)]


class Manifest(Strict):
    """``zoo-pipeline.json``: what was saved and the sha256 of every file."""

    format: Literal[1]
    name: str = Field(pattern=NAME_RE)
    spec: Literal["pipeline.yaml"]
    variant: str = Field(pattern=NAME_RE)
    default: str = Field(pattern=NAME_RE)
    device: str = Field(max_length=32)
    dtype: DType | None = None
    zoo_version: str = Field(max_length=64)
    files: dict[str, Sha256] = Field(max_length=MAX_FILES, description="path relative to the folder -> sha256")

    @field_validator("files")
    @classmethod
    def _relative(cls, files: dict[str, str]) -> dict[str, str]:
        for rel in files:
            parts = rel.split("/")
            if not rel or rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in parts) or not rel.isprintable():
                raise ValueError(f"expected a relative path inside the folder, got {rel!r}")
        return files


def is_saved(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder holding a saved pipeline's manifest."""
    p = Path(path).expanduser()
    return p.is_dir() and os.path.lexists(p / MANIFEST)


# ----------------------------------------------------------------------------- saving
def save(pipe: "Pipeline", directory: str | os.PathLike[str], *, variant: str | None = None,
         replace: Mapping[str, Any] | None = None, verify: bool = True) -> Path:
    """Write ``pipe`` to ``directory`` (see the module docstring); returns the folder.

    ``variant`` names the saved variant (default: the built one). ``replace`` maps a role to new weights
    for it (a module, a state dict, or a recipe output with ``state_dict()``, e.g. a training recipe's
    result), saved instead of the built role: the folder then loads as a variant holding the trained
    weights, its ``reproduced`` metrics dropped (they measured other weights). With ``verify`` (default)
    the folder is loaded back through :func:`load` and every role compared bit for bit and every
    procedure's parameters for equality before it replaces ``directory``; ``verify=False`` skips that
    (a model too large to hold twice). Written into a temporary sibling and renamed into place: an
    existing saved pipeline at ``directory`` is replaced whole, anything else there is refused; missing parent
    folders are created."""
    import re

    target = Path(directory).expanduser().absolute()
    if target.exists() and not (target.is_dir() and (not any(target.iterdir()) or is_saved(target))):
        raise ZooError(f"{target} exists and is neither empty nor a saved pipeline; refusing to overwrite it",
                       Location(field="save_pretrained"))
    target.parent.mkdir(parents=True, exist_ok=True)  # as diffusers' save_pretrained does
    name = variant or pipe.variant
    if not re.fullmatch(NAME_RE, name):
        raise ParamError(f"expected a lower-case name (letters, digits, -), got {name!r}", Location(field="variant"))
    replace = dict(replace or {})
    unknown = sorted(set(replace) - set(pipe.models))
    if unknown:
        raise ParamError(f"role {unknown[0]!r} is not a role of this pipeline; roles: {', '.join(sorted(pipe.models))}",
                         Location(field="replace"))
    with folder_in_place(target, ".saving") as tmp:
        data = _saved_spec(pipe, tmp, name, replace)
        import yaml

        (tmp / SPEC_FILE).write_text(yaml.safe_dump(data, sort_keys=False, width=110, allow_unicode=True))
        manifest = {"format": FORMAT, "name": pipe.spec.name, "spec": SPEC_FILE, "variant": name, "default": pipe.default,
                    "device": pipe.device, "dtype": pipe.dtype, "zoo_version": _zoo_version(),
                    "files": {rel: _sha256(tmp / rel) for rel in _files(tmp)}}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if verify:
            _verify_round_trip(pipe, tmp, replace)
    return target


def _saved_spec(pipe: "Pipeline", folder: Path, name: str, replace: dict[str, Any]) -> dict[str, Any]:
    spec, v = pipe.spec, pipe.variant
    data = spec.model_dump(mode="json", exclude_defaults=True)
    for key in ("extends", "docs", "default_by_variant", "inherit_metrics", "training"):  # training: names files the folder does not hold
        data.pop(key, None)
    hw = spec.hardware[v].model_dump(mode="json", exclude_defaults=True)
    if replace and hw.get("status") == "needs-training":  # the trained weights are what it needed
        for key in ("status", "recipe", "reason"):
            hw.pop(key, None)
    data["variants"], data["hardware"] = [name], {name: hw}
    models = {}
    for role, model in spec.models.items():
        if v not in model.variants or role not in pipe.models:
            continue
        entry = model.model_dump(mode="json", exclude_defaults=True)
        entry["variants"] = {name: _saved_source(role, model.variants[v], pipe.models[role], replace.get(role), folder)}
        models[role] = entry
    data["models"] = models
    for section in ("samplers", "recipes"):
        out = {}
        for pname, proc in getattr(spec, section).items():
            if pname not in pipe.procedures:
                continue  # not built on this variant (its roles have no source here)
            entry = proc.model_dump(mode="json", exclude_defaults=True)
            entry.pop("params_by_variant", None)
            params = pipe.procedures[pname].params.model_dump(mode="json", exclude_unset=True)
            entry.pop("params", None)
            if params:
                entry["params"] = params
            out[pname] = entry
        if out or section in data:
            data[section] = out
    data["default"] = pipe.default
    metrics = [dict(m, variant=name) for m in data.get("metrics", [])
               if m["variant"] == v and not (replace and m["kind"] == "reproduced")]
    if metrics:
        data["metrics"] = metrics
    else:
        data.pop("metrics", None)
    return data


def _saved_source(role: str, src: Any, obj: Any, replacement: Any, folder: Path) -> dict[str, Any]:
    """The saved folder's source of one role, writing its files under ``folder``: the kind's own
    :meth:`~registry.sources.base.SourceKind.saved`."""
    from .weights import save_state

    keep = {k: v for k, v in src.model_dump(mode="json", exclude_defaults=True).items() if k in ("transform", "transform_config")}

    def write_state() -> dict[str, Any]:
        state = _state(obj if replacement is None else replacement, role)
        if not state:
            if replacement is not None:
                raise ParamError(f"replace: the value for {role!r} holds no tensors", Location(field="replace"))
            return {}
        rel = f"weights/{role}.safetensors"
        (folder / "weights").mkdir(exist_ok=True)
        save_state(state, folder / rel)
        out = {"weights": rel, "sha256": _sha256(folder / rel)}
        dtype = _float_dtype(state)
        if dtype is not None:
            out["dtype"] = dtype
        return out

    return src.saved(SaveRequest(role=role, obj=obj, replacement=replacement, keep=keep, folder=folder, write_state=write_state,
                                 float_dtype=lambda o: _float_dtype(_state(o, role, strict=False))))


def _state(obj: Any, role: str, strict: bool = True) -> dict[str, Any]:
    """A role's tensors as independent, contiguous CPU tensors (tied weights become two copies, as
    safetensors needs); ``{}`` for an object without a state dict. A non-tensor entry is refused (``strict``)."""
    import torch

    if callable(getattr(obj, "state_dict", None)):  # a module, or a recipe output offering its weights
        state = dict(obj.state_dict())
    elif isinstance(obj, Mapping):
        state = dict(obj)
    else:
        return {}
    out = {}
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            if strict:
                raise BuildError(f"role {role!r}: state entry {key!r} is a {type(value).__name__}, not a tensor; "
                                 "it cannot be saved as safetensors", Location(field=f"models.{role}"))
            continue
        out[str(key)] = value.detach().to("cpu").clone().contiguous()
    return out


def _float_dtype(state: Mapping[str, Any]) -> str | None:
    """The one floating dtype of a state's tensors, as a spec dtype name (None when mixed or none)."""
    names = {str(v.dtype).removeprefix("torch.") for v in state.values() if v.is_floating_point()}
    return next(iter(names)) if len(names) == 1 and next(iter(names)) in DTYPE_NAMES else None


def _verify_round_trip(pipe: "Pipeline", folder: Path, replace: dict[str, Any]) -> None:
    """Load ``folder`` as a user would and compare it with ``pipe`` (and the replacements)."""
    import torch

    loaded = pipe.ctx.load_saved(folder, device=pipe.device, use_cache=False)  # the builder is above this module
    replaced_tree = set(replace)
    for role in pipe.spec.build_order(pipe.variant):  # roles derived from a replaced role are re-derived: skip them
        parent = pipe.spec.models[role].variants[pipe.variant].derived_from()
        if parent is not None and parent in replaced_tree:
            replaced_tree.add(role)
    for role, obj in pipe.models.items():
        if role in replaced_tree and role not in replace:
            continue
        want = _state(replace.get(role, obj), role, strict=False)
        got = _state(loaded.models[role], role, strict=False)
        if set(want) != set(got):
            diff = sorted(set(want) ^ set(got))
            raise BuildError(f"role {role!r} does not reload as saved: tensors {', '.join(diff[:3])} differ in name "
                             "(a transform that renames parameters?)", Location(field=f"models.{role}"))
        for key, w in want.items():
            g = got[key]
            if w.dtype != g.dtype or w.shape != g.shape or not torch.equal(w, g):
                raise BuildError(f"role {role!r} does not reload as saved: tensor {key} comes back "
                                 f"{'with other values' if w.dtype == g.dtype and w.shape == g.shape else f'as {g.dtype} {tuple(g.shape)}'} "
                                 f"(was {w.dtype} {tuple(w.shape)}); pass verify=False to keep the folder anyway",
                                 Location(field=f"models.{role}"))
    for pname, proc in pipe.procedures.items():
        if loaded.procedures[pname].params != proc.params:
            raise BuildError(f"procedure {pname} does not reload with its parameters", Location(field=pname))


# ----------------------------------------------------------------------------- loading
def verify_folder(directory: str | os.PathLike[str]) -> Manifest:
    """Check a saved folder as untrusted input (module docstring); the manifest, or one located error."""
    from .files import read_spec_bytes

    root = Path(directory).expanduser().absolute()
    mpath = root / MANIFEST
    if os.path.islink(mpath):
        raise SpecError("the manifest is a symlink; a saved pipeline holds regular files only", Location(str(mpath)))
    raw = read_spec_bytes(mpath, limit=1 << 20)
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise SpecError(f"not JSON: {exc}", Location(str(mpath))) from None
    try:
        man = Manifest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        raise SpecError(f"{err['msg']} (got {str(err.get('input'))[:80]!r})", Location(str(mpath), None, None, field)) from None
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for d in dirnames:
            if os.path.islink(os.path.join(dirpath, d)):
                raise SpecError("a symlink; a saved pipeline holds regular files only", Location(os.path.join(dirpath, d)))
        for f in filenames:
            p = Path(dirpath) / f
            rel = p.relative_to(root).as_posix()
            if rel == MANIFEST:
                continue
            if not stat.S_ISREG(os.lstat(p).st_mode):
                raise SpecError("not a regular file (a symlink, FIFO or device); a saved pipeline holds regular files only", Location(str(p)))
            if not f.endswith(DATA_SUFFIXES):
                raise SpecError(f"a saved pipeline holds data files only ({', '.join(DATA_SUFFIXES)}): no code, no pickles",
                                Location(str(p)))
            found[rel] = p
            if len(found) > MAX_FILES:
                raise SpecError(f"more than {MAX_FILES} files", Location(str(root)))
    for rel in sorted(set(found) - set(man.files)):
        raise SpecError(f"not listed in {MANIFEST}; a saved pipeline holds exactly the files its manifest lists", Location(str(found[rel])))
    for rel in sorted(set(man.files) - set(found)):
        raise SpecError(f"{rel} is listed but missing", Location(str(mpath), None, None, f"files.{rel}"))
    if SPEC_FILE not in man.files:
        raise SpecError(f"{SPEC_FILE} is not listed", Location(str(mpath), None, None, "files"))
    for rel, p in sorted(found.items()):
        actual = _sha256(p)
        if actual != man.files[rel]:
            raise SpecError(f"sha256 mismatch: the manifest says {man.files[rel]}, the file has {actual}", Location(str(p)))
        if rel.endswith(".json"):
            _refuse_code_keys(p)
    return man


def _refuse_code_keys(path: Path) -> None:
    from .files import read_spec_bytes

    try:
        data = json.loads(read_spec_bytes(path, limit=MAX_JSON_BYTES))
    except ValueError as exc:
        raise SpecError(f"not JSON: {exc}", Location(str(path))) from None
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            bad = sorted(k for k in node if k in CODE_KEYS and node[k] not in (None, False, {}, []))
            if bad:
                raise SpecError(f"{bad[0]} names code to run; a saved pipeline holds none", Location(str(path), None, None, bad[0]))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def _sha256(path: Path) -> str:
    from .weights import sha256_file

    return sha256_file(path)


def _zoo_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("zoo-icml2026")
    except PackageNotFoundError:
        return "unknown"
