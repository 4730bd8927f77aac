"""Turn a validated spec into a pipeline: pick the variant that fits, build every model role
through its library, verify shipped weights, instantiate the procedures.

Heavy libraries are imported here, and only here (plus in method code).
"""
from __future__ import annotations

import inspect
import os
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import BuildError, HardwareError, Location, ParamError, RequirementError, SpecError, ZooError
from .hardware import Machine, default_device, detect, fits, offline
from .loader import locate
from .resolve import library_class, resolve
from .spec import HubSource, ModelSource, RoleSource, Spec, TimmSource, ZooSource
from .weights import sha256_file  # noqa: F401 - re-exported (lint, conformance, tools)


def remote_code_disabled() -> bool:
    return os.environ.get("ZOO_DISABLE_REMOTE_CODE", "") not in ("", "0", "false")


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
class VariantStatusError(HardwareError):
    """The variant is ``needs-training`` or ``declared-only`` (``hardware.<variant>.status``)."""


def offline_gaps(spec: Spec, variant: str, spec_dir: Path) -> str | None:
    """Files ``variant`` would fetch that are not on this machine, when offline (else None)."""
    if not offline():
        return None
    from .weights import missing_offline

    gaps = [m for r in spec.roles_of(variant) if (m := missing_offline(spec.models[r].variants[variant], spec_dir))]
    return f"offline and not in the local cache: {', '.join(gaps)}" if gaps else None


def choose_variant(spec: Spec, variant: str | None, device: str | None, machine: Machine, file: str | None = None,
                   *, sampler: str | None = None, spec_dir: Path | None = None,
                   skipped: list[str] | None = None) -> tuple[str, str]:
    """``(variant, device)``; errors name what is needed and what would run here instead.

    With no ``variant``: the first declared variant that fits the hardware, is runnable and,
    when offline, has its hub files in the local cache; the others are appended to ``skipped``
    with the reason. An explicit non-runnable variant is refused (a ``needs-training`` one
    builds only for the recipe that produces its weights)."""
    here = [v for v in spec.variants if fits(spec.hardware[v], machine, device)[0]]
    if variant is not None:
        if variant not in spec.variants:
            raise HardwareError(
                f"variant {variant!r} is not declared; declared: {', '.join(spec.variants)}",
                locate(file, "variants"),
            )
        hw = spec.hardware[variant]
        refusal = hw.refusal(variant)
        if refusal and not (hw.status == "needs-training" and sampler == hw.recipe):
            raise VariantStatusError(refusal, locate(file, f"hardware.{variant}.status"))
        ok, why = fits(hw, machine, device)
        if not ok:
            avail = ", ".join(here) if here else "none"
            raise HardwareError(
                f"variant {variant} {why}; available here: {avail}", locate(file, f"hardware.{variant}")
            )
        chosen = variant
    else:
        reasons: list[str] = []
        passed_over: list[str] = []  # fits the hardware, but not runnable or not available offline
        chosen = None
        for v in spec.variants:
            ok, why = fits(spec.hardware[v], machine, device)
            if not ok:
                reasons.append(f"{v} {why}")
                continue
            refusal = spec.hardware[v].refusal(v)
            gap = None if refusal else offline_gaps(spec, v, spec_dir or Path.cwd())
            if refusal or gap:
                passed_over.append(refusal.removeprefix("variant ") if refusal else f"{v} {gap}")
                continue
            chosen = v
            break
        if chosen is None:
            raise HardwareError(f"no variant of {spec.name} can run here: {'; '.join(reasons + passed_over)}", Location(file))
        if skipped is not None:
            skipped.extend(passed_over)
    return chosen, device or default_device(spec.hardware[chosen], machine)


# ----------------------------------------------------------------------------- models
_cache: dict[tuple[Any, ...], Any] = {}
_cache_lock = threading.Lock()


def _torch_dtype(name: str | None) -> Any:
    if name is None:
        return None
    import torch

    return getattr(torch, name)


def _load_weights(module: Any, source: ZooSource, spec_dir: Path, loc: Location) -> None:
    """Weights of a factory-built role: a local file or a hub file, read safely (safetensors,
    or torch.load(weights_only=True)), verified, converted, loaded strictly."""
    from .weights import convert_state, load_into, read_state, weights_path

    assert source.weights is not None
    wloc = locate(loc.file, f"{loc.field}.weights")
    path, hub_sha = weights_path(source.weights, spec_dir, wloc)
    state = read_state(path, hub_sha or source.sha256, wloc, locate(loc.file, f"{loc.field}.sha256") if hub_sha is None else wloc)
    state = convert_state(state, source.convert, locate(loc.file, f"{loc.field}.convert") if source.convert else wloc)
    load_into(module, state, path.name, wloc)


def apply_transform(model: Any, source: Any, loc: Location) -> Any:
    """``transform(model, **transform_config)`` (resolved as kind ``transform``) after loading."""
    if getattr(source, "transform", None) is None:
        return model
    tloc = locate(loc.file, f"{loc.field}.transform")
    fn = resolve(source.transform, tloc, kind="transform")
    try:
        out = fn(model, **source.transform_config)
    except ZooError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the transform
        raise BuildError(f"transform {source.transform} failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}", tloc) from None
    return model if out is None else out


def derive_role(parent: Any, source: RoleSource, *, loc: Location | None = None) -> Any:
    """A ``from_role`` role: a deep copy of the parent's built model (unless ``share``), transformed."""
    import copy

    loc = loc or Location()
    obj = parent if source.share else copy.deepcopy(parent)
    return apply_transform(obj, source, loc)


def _is_model_class(cls: type) -> bool:
    """Whether a transformers/diffusers class loads weights (vs a tokenizer, processor or scheduler)."""
    name = cls.__name__
    return not any(t in name for t in ("Tokenizer", "Processor", "FeatureExtractor", "Scheduler"))


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
            _load_weights(obj, source, spec_dir, loc)
        return _place(apply_transform(obj, source, loc), device, want_dtype)
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
        return _place(apply_transform(model, source, loc), device, want_dtype)
    if isinstance(source, RoleSource):
        raise BuildError(f"role derived from {source.from_role!r}: built by build_pipeline (derive_role)", loc)
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
    is_model = _is_model_class(cls)
    if want_dtype is not None and is_model:
        params = inspect.signature(cls.from_pretrained).parameters
        kwargs["torch_dtype" if source.source == "diffusers" and "dtype" not in params else "dtype"] = want_dtype
    if source.source == "transformers":
        kwargs["trust_remote_code"] = bool(source.trust_remote_code and trust_remote_code)
    if multi_gpu and is_model:
        kwargs["device_map"] = "auto"
    try:
        model = cls.from_pretrained(os.path.expanduser(source.id or ""), **kwargs)
    except (OSError, ValueError, EnvironmentError) as exc:
        msg = " ".join(str(exc).split())[:300]
        where = "offline (HF_HUB_OFFLINE is set) " if offline() else ""
        raise BuildError(f"could not load {source.id} {where}with {source.model_class}: {msg}", loc) from None
    if source.adapters:
        from .weights import load_adapters

        model = load_adapters(model, list(source.adapters), source.source, spec_dir, loc)
    model = apply_transform(model, source, loc)
    return model if (multi_gpu or not is_model) else _place(model, device, None)


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
    from .contract import Roles, private_copies

    missing = missing_roles(spec, name, variant, models)
    if missing:
        raise BuildError(
            f"procedure {name} needs role {missing[0]!r}, which has no source for variant {variant}",
            locate(file, f"{section}.{name}.roles"),
        )
    roles = Roles(models, variant=variant, procedure=name)
    if getattr(cls, "mutates_models", False):
        roles = private_copies(roles)
    return cls(models=roles, params=params, device=device, dtype=_torch_dtype(dtype))


def missing_roles(spec: Spec, name: str, variant: str | None, models: Mapping[str, Any]) -> list[str]:
    """Roles procedure ``name`` declares (``roles:``) that the built variant lacks."""
    _, proc = spec.procedure(name)
    return [r for r in (proc.roles or []) if r not in models]


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
    unavailable: dict[str, str] = field(default_factory=dict)  # procedure -> why it is not built here
    skipped: list[str] = field(default_factory=list)  # variants passed over by the automatic choice, with why
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.samplers[self.default](*args, **kwargs)

    def memo(self, key: Any, produce: Any) -> Any:
        """``produce()`` once per pipeline and ``key``: metric checks that share an evaluation
        (the same fitted topics, the same sample batch) compute it once."""
        if key not in self._memo:
            self._memo[key] = produce()
        return self._memo[key]

    def evaluate(self, check: str, **params: Any) -> float:
        """A metric check ``fn(pipeline, **params)``, resolved and memoised by check and params."""
        import json

        key = ("metric", check, json.dumps(params, sort_keys=True, default=repr))

        def run() -> float:
            return float(resolve(check, kind="metric check")(self, **params))

        return self.memo(key, run)

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
    skipped: list[str] = []
    chosen, dev = choose_variant(spec, variant, device, machine, fname, sampler=sampler, spec_dir=spec_dir, skipped=skipped)
    if skipped:
        warnings.warn(f"{spec.name}: using variant {chosen}; skipped {'; '.join(skipped)}", ZooWarning, stacklevel=2)
    hw = spec.hardware[chosen]
    if dtype is not None and dtype not in hw.dtypes and dtype != "float32":
        raise HardwareError(f"dtype {dtype} not declared for variant {chosen} (declared: {', '.join(hw.dtypes)})", locate(fname, f"hardware.{chosen}.dtypes"))
    default = sampler or spec.default
    if default not in spec.samplers and default not in spec.recipes:
        raise ParamError(f"sampler {default!r} is not declared; declared: {', '.join([*spec.samplers, *spec.recipes])}")
    models: dict[str, Any] = {}
    keys: dict[str, tuple[Any, ...]] = {}
    for role in spec.build_order(chosen):
        source = spec.models[role].variants[chosen]
        loc = locate(fname, f"models.{role}.variants.{chosen}")
        parent = (keys[source.from_role],) if isinstance(source, RoleSource) else ()
        key = (fname, spec.name, role, chosen, dev, dtype, source.model_dump_json(), *parent)
        keys[role] = key
        with _cache_lock:
            cached = _cache.get(key) if use_cache else None
        if cached is None:
            if isinstance(source, RoleSource):
                cached = derive_role(models[source.from_role], source, loc=loc)
            else:
                cached = build_model(source, spec_dir=spec_dir, device=dev, dtype=dtype, trust_remote_code=trust_remote_code, loc=loc, multi_gpu=hw.gpus > 1)
            if use_cache:
                with _cache_lock:
                    _cache[key] = cached
        models[role] = cached
    procs, unavailable = {}, {}
    for name in [*spec.samplers, *spec.recipes]:
        missing = missing_roles(spec, name, chosen, models)
        if missing and name != default:
            unavailable[name] = f"needs role {missing[0]!r}, which has no source for variant {chosen}"
            continue
        procs[name] = make_procedure(spec, name, models, dev, dtype, params if name == default else None, fname, chosen)
    return Pipeline(spec, chosen, dev, dtype, models, procs, default, fname, unavailable, skipped)


class ZooWarning(UserWarning):
    """Something the caller should know that is not an error (a variant passed over)."""

