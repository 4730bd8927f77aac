"""Turn a validated spec into a pipeline: pick the variant that fits, build every model role
through its library, verify shipped weights, instantiate the procedures.

Heavy libraries are imported here, and only here (plus in method code).
"""
from __future__ import annotations

import hashlib
import inspect
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import BuildError, HardwareError, Location, ParamError, RequirementError, SpecError
from .hardware import Machine, default_device, detect, fits, offline
from .loader import locate
from .resolve import library_class, resolve
from .spec import HubSource, ModelSource, Spec, TimmSource, ZooSource


def remote_code_disabled() -> bool:
    return os.environ.get("ZOO_DISABLE_REMOTE_CODE", "") not in ("", "0", "false")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ----------------------------------------------------------------------------- requirements
def check_requires(spec: Spec, file: str | None = None) -> None:
    """Check ``requires`` (package -> specifier) before importing anything the spec names."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    for pkg, rng in spec.requires.items():
        loc = locate(file, f"requires.{pkg}")
        try:
            spec_set = SpecifierSet(rng)
        except InvalidSpecifier:
            raise SpecError(f"invalid version specifier {rng!r}", loc) from None
        try:
            have = version(pkg)
        except PackageNotFoundError:
            raise RequirementError(f"package {pkg!r} is required ({rng}) but not installed: pip install '{pkg}{rng}'", loc) from None
        if not spec_set.contains(have, prereleases=True):
            raise RequirementError(f"{pkg} {have} is installed but the spec requires {rng}: pip install '{pkg}{rng}'", loc)


# ----------------------------------------------------------------------------- variants
def choose_variant(spec: Spec, variant: str | None, device: str | None, machine: Machine, file: str | None = None) -> tuple[str, str]:
    """``(variant, device)``; errors name what is needed and what would run here instead."""
    here = [v for v in spec.variants if fits(spec.hardware[v], machine, device)[0]]
    if variant is not None:
        if variant not in spec.variants:
            raise HardwareError(
                f"variant {variant!r} is not declared; declared: {', '.join(spec.variants)}",
                locate(file, "variants"),
            )
        ok, why = fits(spec.hardware[variant], machine, device)
        if not ok:
            avail = ", ".join(here) if here else "none"
            raise HardwareError(
                f"variant {variant} {why}; available here: {avail}", locate(file, f"hardware.{variant}")
            )
        chosen = variant
    else:
        if not here:
            why = "; ".join(f"{v} {fits(spec.hardware[v], machine, device)[1]}" for v in spec.variants)
            raise HardwareError(f"no variant of {spec.name} fits this machine: {why}", Location(file))
        chosen = here[0]
    return chosen, device or default_device(spec.hardware[chosen], machine)


# ----------------------------------------------------------------------------- models
_cache: dict[tuple[Any, ...], Any] = {}
_cache_lock = threading.Lock()


def _torch_dtype(name: str | None) -> Any:
    if name is None:
        return None
    import torch

    return getattr(torch, name)


def _load_safetensors(module: Any, path: Path, sha256: str | None, loc: Location, sha_loc: Location) -> None:
    if not path.is_file():
        raise BuildError(f"weights file {path} does not exist (run the tools/ script that produces it)", loc)
    actual = sha256_file(path)
    if sha256 is not None and actual != sha256:
        raise BuildError(f"sha256 mismatch for {path.name}: expected {sha256}, file has {actual}", sha_loc)
    from safetensors.torch import load_file

    state = load_file(str(path))
    if not hasattr(module, "load_state_dict"):
        raise BuildError(f"factory returned {type(module).__name__}, which cannot take weights", loc)
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0:2]
        raise BuildError(f"weights {path.name} do not match the model: {' '.join(first)}", loc) from None


def _place(obj: Any, device: str, dtype: Any) -> Any:
    if hasattr(obj, "to") and hasattr(obj, "parameters"):
        obj = obj.to(device=device) if dtype is None else obj.to(device=device, dtype=dtype)
        if hasattr(obj, "eval"):
            obj.eval()
    return obj


def build_model(
    source: ModelSource,
    *,
    spec_dir: Path,
    device: str = "cpu",
    dtype: str | None = None,
    trust_remote_code: bool = False,
    loc: Location | None = None,
    multi_gpu: bool = False,
) -> Any:
    """Build one model role from its source (the same path for shipped and tiny test checkpoints)."""
    loc = loc or Location()
    want_dtype = _torch_dtype(dtype or source.dtype)
    if isinstance(source, ZooSource):
        factory = resolve(source.factory, locate(loc.file, f"{loc.field}.factory"))
        try:
            obj = factory(**source.config)
        except TypeError as exc:
            raise BuildError(f"factory {source.factory} rejected config: {exc}", loc) from None
        if source.weights is not None:
            _load_safetensors(obj, spec_dir / source.weights, source.sha256, locate(loc.file, f"{loc.field}.weights"), locate(loc.file, f"{loc.field}.sha256"))
        return _place(obj, device, want_dtype)
    if isinstance(source, TimmSource):
        import timm

        kwargs = dict(source.kwargs)
        if source.weights is not None:
            path = spec_dir / source.weights
            if not path.is_file():
                raise BuildError(f"weights file {path} does not exist", loc)
            if source.sha256 and sha256_file(path) != source.sha256:
                raise BuildError(f"sha256 mismatch for {path.name}", loc)
            kwargs["pretrained_cfg_overlay"] = {"file": str(path)}
        try:
            model = timm.create_model(source.model_name, pretrained=source.pretrained or source.weights is not None, **kwargs)
        except Exception as exc:  # noqa: BLE001 - timm raises many types; report one line
            raise BuildError(f"timm could not create {source.model_name!r}: {exc}", loc) from None
        return _place(model, device, want_dtype)
    assert isinstance(source, HubSource)
    cls = library_class(source.source, source.model_class, loc)
    if source.trust_remote_code and not trust_remote_code:
        raise BuildError(
            f"{source.id} needs remote code: pass trust_remote_code=True (the spec allows it; you must too)", loc
        )
    if source.trust_remote_code and remote_code_disabled():
        raise BuildError(f"{source.id} needs remote code, which ZOO_DISABLE_REMOTE_CODE forbids", loc)
    kwargs: dict[str, Any] = {}
    if source.revision:
        kwargs["revision"] = source.revision
    if source.subfolder:
        kwargs["subfolder"] = source.subfolder
    if offline() or Path(source.id or "").expanduser().is_dir():
        kwargs["local_files_only"] = True
    if want_dtype is not None:
        params = inspect.signature(cls.from_pretrained).parameters
        kwargs["torch_dtype" if source.source == "diffusers" and "dtype" not in params else "dtype"] = want_dtype
    if source.source == "transformers":
        kwargs["trust_remote_code"] = bool(source.trust_remote_code and trust_remote_code)
    if multi_gpu:
        kwargs["device_map"] = "auto"
    try:
        model = cls.from_pretrained(os.path.expanduser(source.id or ""), **kwargs)
    except (OSError, ValueError, EnvironmentError) as exc:
        msg = " ".join(str(exc).split())[:300]
        where = "offline (HF_HUB_OFFLINE is set) " if offline() else ""
        raise BuildError(f"could not load {source.id} {where}with {source.model_class}: {msg}", loc) from None
    return model if multi_gpu else _place(model, device, None)


# ----------------------------------------------------------------------------- procedures
def make_procedure(
    spec: Spec,
    name: str,
    models: Mapping[str, Any],
    device: str,
    dtype: str | None,
    overrides: Mapping[str, Any] | None = None,
    file: str | None = None,
    variant: str | None = None,
) -> Any:
    """Instantiate a sampler/recipe with its params: spec ``params``, then the spec's
    ``variant_params`` of ``variant``, then the caller's ``overrides``."""
    section, proc = spec.procedure(name)
    cls = resolve(proc.target, locate(file, f"{section}.{name}.target"))
    params_cls = getattr(cls, "Params", None)
    if params_cls is None:
        raise BuildError(f"{proc.target} has no Params model (see registry.contract.Procedure)")
    overrides = dict(overrides or {})
    try:
        params = params_cls(**{**proc.params, **proc.variant_params.get(variant or "", {}), **overrides})
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in err["loc"])
        from_caller = bool(err["loc"]) and err["loc"][0] in overrides
        where = Location(None, None, None, f"parameter {field}") if from_caller else locate(
            file, f"{section}.{name}.params.{field}"
        )
        if err["type"] == "extra_forbidden":
            msg = f"unknown parameter of {name}; expected one of: {', '.join(params_cls.model_fields)}"
        else:
            msg = f"{err['msg']} (got {err.get('input')!r})"
        raise ParamError(msg, where) from None
    return cls(models=models, params=params, device=device, dtype=_torch_dtype(dtype))


@dataclass
class Pipeline:
    """A built method: call it to run its default procedure."""

    spec: Spec
    variant: str
    device: str
    dtype: str | None
    models: dict[str, Any]
    samplers: dict[str, Any]
    default: str
    file: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.samplers[self.default](*args, **kwargs)

    @property
    def procedure(self) -> Any:
        return self.samplers[self.default]

    def __repr__(self) -> str:
        return (
            f"<zoo pipeline {self.spec.name} variant={self.variant} device={self.device} "
            f"models={sorted(self.models)} samplers={sorted(self.samplers)} default={self.default}>"
        )


def build_pipeline(
    spec: Spec,
    *,
    file: str | Path | None = None,
    variant: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    sampler: str | None = None,
    trust_remote_code: bool = False,
    machine: Machine | None = None,
    params: Mapping[str, Any] | None = None,
    use_cache: bool = True,
) -> Pipeline:
    fname = str(file) if file else None
    spec_dir = Path(file).parent if file else Path.cwd()
    check_requires(spec, fname)
    machine = machine or detect()
    chosen, dev = choose_variant(spec, variant, device, machine, fname)
    hw = spec.hardware[chosen]
    if dtype is not None and dtype not in hw.dtypes and dtype != "float32":
        raise HardwareError(f"dtype {dtype} not declared for variant {chosen} (declared: {', '.join(hw.dtypes)})", locate(fname, f"hardware.{chosen}.dtypes"))
    default = sampler or spec.default
    if default not in spec.samplers and default not in spec.recipes:
        raise ParamError(f"sampler {default!r} is not declared; declared: {', '.join([*spec.samplers, *spec.recipes])}")
    models: dict[str, Any] = {}
    for role, model in spec.models.items():
        source = model.variants[chosen]
        loc = locate(fname, f"models.{role}.variants.{chosen}")
        key = (fname, spec.name, role, chosen, dev, dtype, source.model_dump_json())
        with _cache_lock:
            cached = _cache.get(key) if use_cache else None
        if cached is None:
            cached = build_model(source, spec_dir=spec_dir, device=dev, dtype=dtype, trust_remote_code=trust_remote_code, loc=loc, multi_gpu=hw.gpus > 1)
            if use_cache:
                with _cache_lock:
                    _cache[key] = cached
        models[role] = cached
    procs = {}
    for name in [*spec.samplers, *spec.recipes]:
        procs[name] = make_procedure(spec, name, models, dev, dtype, params if name == default else None, fname, chosen)
    return Pipeline(spec, chosen, dev, dtype, models, procs, default, fname)

