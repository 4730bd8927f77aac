"""Turn a validated spec into a pipeline: pick the variant that fits, build every model role
through its library, verify shipped weights, instantiate the procedures.

Heavy libraries are imported here, and only here (plus in method code).
"""
from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import BuildError, HardwareError, Location, ParamError, RequirementError, RunError, ZooError
from .errors import validation_error  # noqa: F401 - re-exported
from .files import check_folder_links, local_path, outside_paths_allowed  # noqa: F401 - re-exported
from .hardware import Machine, default_device, detect, device_problem, fits, offline
from .limits import SEED_MAX, check_seed  # noqa: F401 - re-exported
from .hub import remote_code_disabled  # noqa: F401 - re-exported (the builder's consent rule lives in registry.hub)
from .loader import locate, source_dir
from .resolve import library_class, resolve
from .saved import save as save_folder
from .calls import _call_model, _default_caps, call_factory, check_kwargs, factory_kwargs, one_line as _one_line, procedure_params, validated_kwargs  # noqa: F401 - re-exported
from .sources.base import BuildRequest, in_declared_dtype as _in_declared_dtype, is_model_class as _is_model_class  # noqa: F401 - re-exported
from .sources.base import load_state_strict, place as _place, torch_dtype as _torch_dtype  # noqa: F401 - re-exported
from .schema import refuse_consent_keys
from .spec import DTYPE_NAMES, ModelSource, Spec
from .weights import sha256_file  # noqa: F401 - re-exported (lint, conformance, tools)




def dtype_name(dtype: Any, where: str = "dtype") -> str | None:
    """A caller's dtype as its name: ``None``, a name (``"float32"``, ``"torch.float32"``) or a
    ``torch.dtype`` (``torch.float32``); anything else is a one-line ParamError. Never imports torch."""
    if dtype is None:
        return None
    if type(dtype).__name__ == "dtype" and type(dtype).__module__ == "torch":
        name = str(dtype).removeprefix("torch.")
    elif isinstance(dtype, str):
        name = dtype.removeprefix("torch.")
    else:
        raise ParamError(f"expected a dtype ({', '.join(DTYPE_NAMES)}, or torch.float32 ...), got {dtype!r}", Location(field=where))
    if name not in DTYPE_NAMES:
        raise ParamError(f"expected one of {', '.join(DTYPE_NAMES)} (a name or a torch.dtype), got {dtype!r}", Location(field=where))
    return name


# ----------------------------------------------------------------------------- requirements
def check_requires(spec: Spec, file: str | None = None) -> None:
    """Check ``requires`` (package -> specifier) before importing anything the spec names: the first unmet
    one is a one-line :class:`RequirementError` naming the package, the optional extra that installs it and
    the pip command (:mod:`registry.requirements`)."""
    from .requirements import unmet

    for missing in unmet(spec):
        raise RequirementError(f"{spec.name} {missing.reason()}", locate(file, f"requires.{missing.package}"))


# ----------------------------------------------------------------------------- variants
class VariantStatusError(HardwareError):
    """The variant is ``needs-training`` or ``declared-only`` (``hardware.<variant>.status``)."""


def offline_gaps(spec: Spec, variant: str, spec_dir: Path, file: str | None = None) -> str | None:
    """Files ``variant`` would fetch that are not on this machine, when offline (else None).
    With the spec's ``file``, each source's local paths resolve where they were written
    (:func:`registry.loader.source_dir`)."""
    if not offline():
        return None
    from .weights import missing_offline

    gaps = [m for r in spec.roles_of(variant)
            if (m := missing_offline(spec.models[r].variants[variant], source_dir(file, r, variant, spec_dir)))]
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
            gap = None if refusal else offline_gaps(spec, v, spec_dir or Path.cwd(), file)
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


def config_files(source: Any, loc: Location, spec_dir: Path | None, allow_outside: bool | None = None) -> dict[str, Path]:
    """The ``{file:, sha256:}`` values of a source's ``transform_config``, resolved against the spec file that wrote
    them (inside its folder tree unless the caller allows more) and verified, as absolute paths by key."""
    from .loader import origin_dir
    from .weights import verified_file

    out: dict[str, Path] = {}
    for key, ref in source.config_files().items():
        field = f"{loc.field}.transform_config.{key}" if loc.field else f"transform_config.{key}"
        where = locate(loc.file, field)
        fallback = spec_dir if spec_dir is not None else (Path(loc.file).resolve().parent if loc.file else None)
        if fallback is None:
            raise BuildError(f"transform_config.{key} names a file, but the source has no spec file to resolve it against", where)
        base = origin_dir(loc.file, tuple(field.split(".")) + ("file",), fallback)
        out[key] = verified_file(ref.file, ref.sha256, base, where, allow_outside, "file")
    return out


def apply_transform(model: Any, source: Any, loc: Location, spec_dir: Path | None = None,
                    allow_outside: bool | None = None) -> Any:
    """``transform(model, **transform_config)`` (resolved as kind ``transform``) after loading; each
    ``{file:, sha256:}`` value is passed as its verified path (:func:`config_files`)."""
    if getattr(source, "transform", None) is None:
        return model
    from .contract import transform_params

    tloc = locate(loc.file, f"{loc.field}.transform")
    fn = resolve(source.transform, tloc, kind="transform")
    at = lambda f: locate(loc.file, f"{loc.field}.{f}" if loc.field else f)  # noqa: E731
    config = {**source.transform_config, **config_files(source, loc, spec_dir, allow_outside)}
    kwargs = validated_kwargs(_call_model(transform_params, fn, source.transform, tloc), config, at,
                              "transform_config")
    try:
        out = fn(model, **kwargs)
    except ZooError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the transform
        raise BuildError(f"transform {source.transform} failed: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}", tloc) from None
    return model if out is None else out


def derive_role(parent: Any, source: ModelSource, *, loc: Location | None = None, spec_dir: Path | None = None,
                allow_outside: bool | None = None) -> Any:
    """A derived role (``source: role``): the kind's :meth:`~registry.sources.base.SourceKind.derive` of the parent's
    built model."""
    loc = loc or Location()
    return source.derive(parent, _request(source, loc, spec_dir or Path.cwd(), device="cpu", dtype=None,
                                          allow_outside_paths=allow_outside))


def build_model(
    source: ModelSource,
    *,
    spec_dir: Path,
    device: str = "cpu",
    dtype: str | None = None,
    trust_remote_code: bool = False,
    loc: Location | None = None,
    multi_gpu: bool = False,
    allow_outside_paths: bool | None = None,
    hub_file_at: Path | None = None,
) -> Any:
    """Build one model role from its source (the same path for shipped and tiny test checkpoints): the kind's own
    :meth:`~registry.sources.base.SourceKind.build` with this request.

    ``trust_remote_code`` and ``allow_outside_paths`` are the caller's consent; nothing in
    ``source`` can grant them (consent keys in ``config`` are refused by the schema and here).
    ``hub_file_at`` stands in for a ``source: zoo`` role's hub file (the conformance loading-path check)."""
    return source.build(_request(source, loc or Location(), spec_dir, device=device, dtype=_torch_dtype(dtype or getattr(source, "dtype", None)),
                                 trust_remote_code=trust_remote_code, multi_gpu=multi_gpu,
                                 allow_outside_paths=allow_outside_paths, hub_file_at=hub_file_at))


def _request(source: ModelSource, loc: Location, spec_dir: Path, **kwargs: Any) -> BuildRequest:
    """The :class:`~registry.sources.base.BuildRequest` for ``source`` at ``loc``: its fields located in the spec
    file, its transform applied by :func:`apply_transform`."""
    return BuildRequest(spec_dir=spec_dir, loc=loc,
                        transform=lambda model: apply_transform(model, source, loc, spec_dir, kwargs.get("allow_outside_paths")),
                        sub=lambda name: locate(loc.file, f"{loc.field}.{name}" if loc.field else name), **kwargs)


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
    ctx: Any = None,
) -> Any:
    """Instantiate a sampler/recipe with its params: spec ``params``, then the spec's
    ``params_by_variant`` of ``variant``, then the caller's ``overrides``; ``ctx`` becomes its ``self.ctx``."""
    section, proc = spec.procedure(name)
    cls = resolve(proc.target, locate(file, f"{section}.{name}.target"), kind="procedure")
    params_cls = getattr(cls, "Params", None)
    if params_cls is None:
        raise BuildError(f"{proc.target} has no Params model (see registry.contract.Procedure)")
    overrides = dict(overrides or {})
    spec_values = {**proc.params, **proc.params_by_variant.get(variant or "", {})}
    params = procedure_params(params_cls, spec_values, overrides,
                              lambda f: locate(file, f"{section}.{name}.params" + (f".{f}" if f else "")), name)
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
    try:
        proc = cls(models=roles, params=params, device=device, dtype=_torch_dtype(dtype))
    except ZooError:
        raise
    except Exception as exc:  # noqa: BLE001 - one line naming the procedure, never a traceback
        raise BuildError(f"{proc.target} could not be built with these params: {_one_line(exc)}",
                         locate(file, f"{section}.{name}")) from exc
    proc.ctx = ctx
    return proc


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
    procedures: dict[str, Any]  # name -> built procedure, samplers and recipes alike
    default: str
    file: str | None = None
    unavailable: dict[str, str] = field(default_factory=dict)  # procedure -> why it is not built here
    skipped: list[str] = field(default_factory=list)  # variants passed over by the automatic choice, with why
    ctx: Any = field(default=None, repr=False)  # the registry.context.Context it was built with (metric checks: pipeline.ctx)
    _memo: dict[Any, Any] = field(default_factory=dict, repr=False)

    @property
    def samplers(self) -> dict[str, Any]:
        """Deprecated alias of :attr:`procedures` (it always held recipes too), for one release: the same dict."""
        warnings.warn("Pipeline.samplers is deprecated, use Pipeline.procedures (the same dict: samplers and recipes)",
                      DeprecationWarning, stacklevel=2)
        return self.procedures

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the default procedure; any failure is one line (:class:`RunError`) naming it. ``seed`` is an int, or
        a list with one seed per row for a procedure that declares ``per_row_seeds``."""
        if "seed" in kwargs:
            seed = kwargs["seed"]
            if isinstance(seed, (list, tuple)):
                if not getattr(self.procedure, "per_row_seeds", False):
                    raise ParamError(f"a list of seeds (one per row) needs a sampler that declares per_row_seeds; "
                                     f"{self.default} takes one integer seed", Location(field="seed"))
                for s in seed:
                    check_seed(s)
            else:
                check_seed(seed)
        return self._guard(lambda: self.procedures[self.default](*args, **kwargs))

    def run_cli(self, inputs: Any, seed: int) -> str:
        """What ``zoo run`` prints: the default procedure's ``run_cli``, failures as one line."""
        check_seed(seed, "--seed")
        return self._guard(lambda: self.procedures[self.default].run_cli(inputs, seed))

    def _guard(self, fn: Any) -> Any:
        try:
            return fn()
        except ZooError:
            raise
        except Exception as exc:  # noqa: BLE001 - a user-caused failure is one line; the cause stays chained
            raise RunError(f"{self.spec.name} ({self.default}) failed: {_one_line(exc)}", Location(self.file)) from exc

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
            fn = resolve(check, kind="metric_check")
            return float(fn(self, **check_kwargs(fn, params)))

        return self.memo(key, run)

    @property
    def procedure(self) -> Any:
        return self.procedures[self.default]

    @property
    def native(self) -> Any:
        """The library object users already know for the default procedure (e.g. a diffusers
        pipeline with the method's scheduler installed, a transformers model's ``generate()`` with the
        method's cache and logits processors), from the procedure's ``native()`` contract hook
        (:meth:`registry.contract.Procedure.native`); the same built models, nothing reloaded.
        One-line :class:`RunError` when it has none."""
        make = getattr(self.procedure, "native", None)
        if make is None:
            raise RunError(f"{self.spec.name} ({self.default}) has no native library object", Location(self.file))
        return self._guard(make)

    def save_pretrained(self, directory: str | os.PathLike[str], *, variant: str | None = None,
                        replace: Mapping[str, Any] | None = None, verify: bool = True) -> Path:
        """Write this pipeline to ``directory`` so that ``zoo.load(directory)`` builds it back: the resolved spec of
        the built variant (``pipeline.yaml``), every role's weights as safetensors with their sha256 (transformers /
        diffusers roles as their own ``save_pretrained`` folders), the procedures' effective parameters, the default
        procedure, device and dtype (``zoo-pipeline.json``, with every file's sha256). ``replace={role: weights}``
        saves new weights for a factory-built role (e.g. a training recipe's output) and ``variant=`` names the
        saved variant; ``verify`` reloads the folder and compares it bit for bit first. See :mod:`registry.saved`."""
        return save_folder(self, directory, variant=variant, replace=replace, verify=verify)

    def to(self, *args: Any, device: Any = None, dtype: Any = None) -> "Pipeline":
        """Move (and cast) every model role, like ``DiffusionPipeline.to``: ``pipe.to("cuda")``,
        ``pipe.to(torch.float64)``, ``pipe.to("cpu", "float32")``, ``pipe.to(device=..., dtype=...)``; returns
        this pipeline. The device must exist here and the dtype must be one the variant declares (the same
        one-line errors as ``zoo.load``). Roles shared with other pipelines through the build cache are copied
        first (those pipelines keep theirs); the procedures are re-made on the moved models with the same
        parameters."""
        import copy

        for arg in args:
            is_dtype = (type(arg).__name__ == "dtype" and type(arg).__module__ == "torch") or (
                isinstance(arg, str) and arg.removeprefix("torch.") in DTYPE_NAMES)
            if is_dtype and dtype is None:
                dtype = arg
            elif not is_dtype and device is None:
                device = arg
            else:
                raise ParamError(f"to(): unexpected argument {arg!r}; pass a device, a dtype, or both", Location(field="to"))
        name = dtype_name(dtype)
        dev = str(device) if device is not None else self.device
        if device is not None and (problem := device_problem(dev, detect())):
            raise HardwareError(problem, Location(field="device"))
        hw = self.spec.hardware[self.variant]
        if name is not None and name not in hw.dtypes:
            raise HardwareError(f"dtype {name} not declared for variant {self.variant} (declared: {', '.join(hw.dtypes)})",
                                locate(self.file, f"hardware.{self.variant}.dtypes"))
        with _cache_lock:
            cached = {id(v) for v in _cache.values()}
        memo: dict[int, Any] = {}  # one memo: roles that share an object (source: role, share: true) still share it
        models = {r: copy.deepcopy(m, memo) if id(m) in cached else m for r, m in self.models.items()}
        want = _torch_dtype(name)
        for role, obj in models.items():
            if hasattr(obj, "to") and hasattr(obj, "parameters"):
                models[role] = obj.to(device=dev) if want is None else obj.to(device=dev, dtype=want)
        overrides = {n: p.params.model_dump(exclude_unset=True) for n, p in self.procedures.items()}
        self.models, self.device, self.dtype = models, dev, name if name is not None else self.dtype
        self.procedures = {n: make_procedure(self.spec, n, models, dev, self.dtype, overrides[n], self.file, self.variant)
                           for n in self.procedures}
        self._memo.clear()
        return self

    def __repr__(self) -> str:
        return (
            f"<zoo pipeline {self.spec.name} variant={self.variant} device={self.device} "
            f"models={sorted(self.models)} procedures={sorted(self.procedures)} default={self.default}>"
        )


def build_models(spec: Spec, *, file: str | Path | None, variant: str, device: str, dtype: str | None = None,
                 roles: list[str] | None = None, trust_remote_code: bool = False, use_cache: bool = True,
                 allow_outside_paths: bool | None = None,
                 _chain: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, tuple[Any, ...]]]:
    """The built roles of ``variant`` (all, or ``roles`` and the roles they derive from) and their cache keys,
    from the process-wide cache where possible. A ``from_spec`` role is built by the named spec's own
    declaration (its file, folder and sha256) under that spec's cache key, so specs sharing a checkpoint share
    one built model."""
    fname = str(file) if file else None
    spec_dir = Path(file).resolve().parent if file else Path.cwd()
    order = spec.build_order(variant)
    if roles is not None:
        needed: set[str] = set()
        stack = list(roles)
        while stack:
            r = stack.pop()
            if r in needed:
                continue
            needed.add(r)
            parent_role = spec.models[r].variants[variant].derived_from()
            if parent_role is not None:
                stack.append(parent_role)
        order = [r for r in order if r in needed]
    multi_gpu = spec.hardware[variant].gpus > 1
    models: dict[str, Any] = {}
    keys: dict[str, tuple[Any, ...]] = {}
    for role in order:
        source = spec.models[role].variants[variant]
        loc = locate(fname, f"models.{role}.variants.{variant}")
        parent: tuple[Any, ...] = ()
        parent_obj: Any = None
        derived = source.derived_from() is not None or source.foreign() is not None
        if source.foreign() is not None:
            parent_obj, parent_key = _foreign_role(spec, source, variant, device, dtype, loc, trust_remote_code, use_cache,
                                                   allow_outside_paths, (*_chain, spec.name))
            parent = (parent_key,)
        elif derived:
            parent_obj, parent_key = models[source.derived_from()], keys[source.derived_from()]
            parent = (parent_key,)
        key = (fname, spec.name, role, variant, device, dtype, source.model_dump_json(), *parent)
        keys[role] = key
        with _cache_lock:
            cached = _cache.get(key) if use_cache else None
        if cached is None:
            if derived:
                cached = derive_role(parent_obj, source, loc=loc, spec_dir=spec_dir, allow_outside=allow_outside_paths)
            else:
                cached = build_model(source, spec_dir=source_dir(fname, role, variant, spec_dir), device=device, dtype=dtype,
                                     trust_remote_code=trust_remote_code, loc=loc, multi_gpu=multi_gpu,
                                     allow_outside_paths=allow_outside_paths)
            if use_cache:
                with _cache_lock:
                    _cache[key] = cached
        models[role] = cached
    return models, keys


_FOREIGN: dict[str, tuple[Path, tuple[int, int], Spec]] = {}


def spec_by_name(name: str, loc: Location) -> tuple[Spec, Path]:
    """The validated spec the catalog knows as ``name`` (built-ins, ``zoo.specs`` plugins, ``ZOO_SPECS_PATH``) and
    its file, re-read when the file changed; one located line when there is none or it does not validate."""
    from .errors import SpecError, SpecErrors
    from .loader import find_spec_by_name, load_spec_file

    path = find_spec_by_name(name)
    if path is None:
        raise BuildError(f"no spec named {name!r} in the catalog (built-ins, zoo.specs plugins, ZOO_SPECS_PATH)", loc)
    try:
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
    except OSError as exc:
        raise BuildError(f"spec {name!r} ({path}) cannot be read: {exc}", loc) from None
    hit = _FOREIGN.get(name)
    if hit is not None and hit[0] == path and hit[1] == stamp:
        return hit[2], path
    try:
        other = load_spec_file(path)
    except (SpecError, SpecErrors) as exc:
        raise BuildError(f"spec {name!r} ({path}) does not validate: {' '.join(str(exc).split())[:300]}", loc) from None
    _FOREIGN[name] = (path, stamp, other)
    return other, path


def _foreign_role(spec: Spec, source: ModelSource, variant: str, device: str, dtype: str | None, loc: Location,
                  trust_remote_code: bool, use_cache: bool, allow_outside_paths: bool | None,
                  chain: tuple[str, ...]) -> tuple[Any, tuple[Any, ...]]:
    """``(model, cache key)`` of role ``from_role`` of spec ``from_spec`` at ``from_variant`` (default: ``variant``):
    the source's :meth:`~registry.sources.base.SourceKind.foreign` reference."""
    ref = source.foreign()
    assert ref is not None
    from_spec, role, from_variant = ref
    if from_spec in chain:
        raise BuildError(f"from_spec cycle: {' -> '.join((*chain, from_spec))}", locate(loc.file, f"{loc.field}.from_spec"))
    other, other_file = spec_by_name(from_spec, locate(loc.file, f"{loc.field}.from_spec"))
    v = from_variant or variant
    if role not in other.models or v not in other.models[role].variants:
        raise BuildError(f"spec {other.name!r} has no role {role!r} with a {v} variant "
                         f"(roles of {v}: {', '.join(other.roles_of(v)) if v in other.variants else 'none: no such variant'})",
                         locate(loc.file, f"{loc.field}.from_role"))
    refusal = other.hardware[v].refusal(v)
    if refusal:
        raise BuildError(f"spec {other.name!r}: {refusal}", locate(loc.file, f"{loc.field}.from_spec"))
    built, keys = build_models(other, file=other_file, variant=v, device=device, dtype=dtype, roles=[role],
                               trust_remote_code=trust_remote_code, use_cache=use_cache,
                               allow_outside_paths=allow_outside_paths, _chain=chain)
    return built[role], keys[role]


class ZooWarning(UserWarning):
    """Something the caller should know that is not an error (a variant passed over)."""

