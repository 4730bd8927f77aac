"""The one object every hook the engine calls can reach: :class:`Context`.

Benchmarks and trainers receive it as their first argument (``fn(ctx, opts)``), invariants that
need models take it as their only argument (``fn(ctx)``; zero-argument invariants keep working),
procedures find it as ``self.ctx`` and metric checks as ``pipeline.ctx``. It knows the spec and the
spec file it was loaded from, so method code never computes a path into a checkout and never copies
a sha256 out of a spec::

    pipe = ctx.pipeline("toy")                       # built once per (variant, params)
    dit = ctx.models("toy")["dit"]                   # the pipeline's built roles
    path = ctx.spec_file("weights/x.safetensors")    # verified against the spec's own declaration
    ctx.report(table); fig.savefig(ctx.figure("x.png")); ctx.write_json("rows.json", rows)

Importing this module is cheap (no torch): building happens in :mod:`registry.build` on first use.
"""
from __future__ import annotations

import json
import os
import sys
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .build import (Pipeline, ZooWarning, build_models, check_requires, choose_variant, dtype_name, make_procedure,
                    missing_roles)
from .errors import BuildError, HardwareError, Location, ParamError, ZooError
from .hardware import Machine, detect, device_problem
from .loader import load_spec_file, locate, origin_dir
from .saved import verify_folder

if TYPE_CHECKING:
    from .spec import Spec


@dataclass(frozen=True)
class DeclaredFile:
    """A shipped file a spec declares: the resolved path, its sha256, the declaring field and its spelling."""

    path: Path
    sha256: str
    field: str
    rel: str


def declared_files(spec: "Spec", file: str | os.PathLike[str] | None) -> dict[Path, DeclaredFile]:
    """Every file ``spec`` declares with a sha256 (``weights:`` of zoo/timm sources, ``{file:, sha256:}``
    values of a ``transform_config``), by resolved path; a name inherited through ``extends`` resolves
    against the parent file that wrote it."""
    from .spec import normalized_file

    if file is None:
        return {}
    fname = str(file)
    base = Path(fname).resolve().parent
    out: dict[Path, DeclaredFile] = {}
    for rel, (sha, field) in spec.declared_files().items():
        parts = tuple(field.split("."))
        key = parts + (("file",) if ".transform_config." in field else ())
        folder = origin_dir(fname, key, base)
        path = (folder / rel).resolve()
        out.setdefault(path, DeclaredFile(path, sha, field, normalized_file(rel)))
    return out


class Context:
    """What the engine hands a hook: the spec, its file, the run's seed / quick flag / output folder,
    and the spec's models and files.

    Made by the engine (``zoo.load`` / ``build_pipeline``, ``zoo bench``, ``zoo train``, the
    conformance harness); method code only reads it. ``out_dir`` is ``None`` except in ``zoo bench``
    and ``zoo train`` runs (writing anywhere else is an error); ``seed`` is the run's ``--seed``
    (0 elsewhere); ``quick`` is ``zoo bench --quick``.
    """

    def __init__(self, spec: "Spec", file: str | os.PathLike[str] | None = None, *, variant: str | None = None,
                 device: str | None = None, dtype: str | None = None, seed: int = 0, quick: bool = False,
                 out_dir: str | os.PathLike[str] | None = None, use_cache: bool = True, trust_remote_code: bool = False,
                 report_name: str | None = None, echo: Any = None):
        self.spec = spec
        self.file = Path(file).resolve() if file is not None else None
        self.variant = variant
        self.device = device
        self.dtype = dtype
        self.seed = seed
        self.quick = quick
        self.out_dir = Path(out_dir).resolve() if out_dir is not None else None
        self.use_cache = use_cache
        self.trust_remote_code = trust_remote_code
        self.report_name = report_name
        self._echo = echo  # where report() prints (default stdout)
        self._pipelines: dict[tuple[str | None, str], "Pipeline"] = {}
        self._verified: dict[tuple[Path, str], tuple[int, int]] = {}
        self._reported = False
        self.written: list[Path] = []  # every output path handed out, in order (the runners list them)

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        return (f"<zoo context {self.spec.name} variant={self.variant} seed={self.seed} quick={self.quick} "
                f"out_dir={self.out_dir}>")

    # ------------------------------------------------------------------ models
    def pipeline(self, variant: str | None = None, **params: Any) -> "Pipeline":
        """The spec's pipeline of ``variant`` (default: this context's variant, else the first that fits),
        built once per (variant, params) on this context's device and dtype; ``params`` override the default
        procedure's parameters as in ``zoo.load``."""
        v = variant if variant is not None else self.variant
        key = (v, json.dumps(params, sort_keys=True, default=repr))
        if key not in self._pipelines:
            pipe = build_pipeline(self.spec, file=self.file, variant=v, device=self.device, dtype=self.dtype,
                                  params=params, use_cache=self.use_cache, trust_remote_code=self.trust_remote_code, ctx=self)
            self._pipelines[key] = pipe
            self._pipelines.setdefault((pipe.variant, key[1]), pipe)
        return self._pipelines[key]

    def adopt(self, pipe: "Pipeline", params: Mapping[str, Any] | None = None) -> None:
        """Remember ``pipe`` (built by the engine with this context) as this context's pipeline of its variant."""
        key = json.dumps(dict(params or {}), sort_keys=True, default=repr)
        self._pipelines.setdefault((pipe.variant, key), pipe)
        if self.variant is None or self.variant == pipe.variant:
            self._pipelines.setdefault((None, key), pipe)

    def load_saved(self, directory: str | os.PathLike[str], **kw: Any) -> "Pipeline":
        """:func:`load_saved` (the pipeline saved in ``directory``), for code below this module that holds a context:
        :mod:`registry.saved` reloads a folder it just wrote through the pipeline's context."""
        return load_saved(directory, **kw)

    def models(self, variant: str | None = None, roles: Iterable[str] | None = None) -> Any:
        """The built roles of ``variant`` (a :class:`~registry.contract.Roles` mapping). With ``roles``, only
        those roles (and the roles they derive from) are built, without building the rest of the pipeline,
        e.g. a trainer that needs the FP model but not the quantised files it is about to rewrite."""
        if roles is None:
            return self.pipeline(variant).models
        from .contract import Roles

        v, device = choose_variant(self.spec, variant if variant is not None else self.variant, self.device, detect(),
                                   str(self.file) if self.file else None, spec_dir=self.file.parent if self.file else None)
        wanted = list(roles)
        unknown = [r for r in wanted if r not in self.spec.models or v not in self.spec.models[r].variants]
        if unknown:
            raise BuildError(f"role {unknown[0]!r} has no source for variant {v} (roles: {', '.join(self.spec.roles_of(v))})",
                             Location(str(self.file) if self.file else None, None, None, "models"))
        built, _ = build_models(self.spec, file=self.file, variant=v, device=device, dtype=self.dtype,
                                roles=wanted, use_cache=self.use_cache, trust_remote_code=self.trust_remote_code)
        return Roles({r: built[r] for r in wanted}, variant=v)

    # ------------------------------------------------------------------ the spec's files
    def spec_file(self, relative_path: str, sha256: str | None = None) -> Path:
        """A file shipped beside the spec, resolved against the spec file (inside its folder tree, as for
        ``weights:``) and verified: with ``sha256=None`` against the spec's own declaration of that file (a
        ``weights:`` or ``{file:, sha256:}`` entry naming it; an undeclared file is an error), else against
        ``sha256``. Returns the absolute path; any problem is one :class:`~registry.errors.BuildError` line."""
        from .files import local_path
        from .weights import sha256_file

        where = Location(str(self.file) if self.file else None, None, None, f"spec file {relative_path}")
        if self.file is None:
            raise BuildError("this spec was not loaded from a file, so it has no files beside it", where)
        path = local_path(relative_path, self.file.parent, where, None, "spec file")
        declared = declared_files(self.spec, self.file).get(path)
        if sha256 is None:
            if declared is None:
                raise BuildError(f"{relative_path!r} is not a file {self.spec.name} declares (declare it with its sha256 as "
                                 "a weights: entry or a {file:, sha256:} value of a transform_config)", where)
            sha256 = declared.sha256
        elif declared is not None and declared.sha256 != sha256:
            raise BuildError(f"{relative_path!r}: the caller's sha256 {sha256} differs from the spec's {declared.sha256} "
                             f"({declared.field})", where)
        if not path.is_file():
            raise BuildError(f"spec file {path} does not exist", where)
        st = path.stat()
        stamp = (st.st_mtime_ns, st.st_size)
        if self._verified.get((path, sha256)) != stamp:
            actual = sha256_file(path)
            if actual != sha256:
                raise BuildError(f"sha256 mismatch for {path.name}: expected {sha256}, file has {actual}", where)
            self._verified[(path, sha256)] = stamp
        return path

    @property
    def cache_dir(self) -> Path:
        """This spec's folder for derived run-time artefacts: ``$ZOO_CACHE_DIR/<spec>`` (default ``~/.cache/zoo``),
        created on first use; never for files the spec declares."""
        from .files import cache_dir

        return cache_dir(self.spec.name)

    # ------------------------------------------------------------------ outputs
    def path(self, name: str) -> Path:
        """``out_dir / name`` (parents created): the one way a hook writes a file. ``name`` is relative and stays
        inside the output folder; a context without an output folder (``zoo.load``, conformance) refuses."""
        if self.out_dir is None:
            raise ZooError(f"{self.spec.name}: this run has no output folder (only `zoo bench` and `zoo train` give one); "
                           f"cannot write {name!r}")
        rel = Path(name)
        if not name or rel.is_absolute() or ".." in rel.parts or name.startswith("~"):
            raise ZooError(f"output name {name!r}: expected a file name inside the output folder (no '..', not absolute)")
        out = self.out_dir / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if out not in self.written:
            self.written.append(out)
        return out

    def figure(self, name: str) -> Path:
        """The path to save a figure to (``fig.savefig(ctx.figure("robuq.png"))``), inside the output folder."""
        return self.path(name)

    def write_text(self, name: str, text: str) -> Path:
        """Write ``text`` to ``out_dir / name``."""
        path = self.path(name)
        path.write_text(text if text.endswith("\n") else text + "\n")
        return path

    def write_json(self, name: str, obj: Any) -> Path:
        """Write ``obj`` as JSON (tensors and arrays as lists, paths as strings) to ``out_dir / name``."""
        path = self.path(name)
        path.write_text(json.dumps(jsonable(obj), indent=1) + "\n")
        return path

    def report(self, text: str) -> None:
        """The run's human-readable result (its table): printed (on stderr under ``zoo bench --json``, whose stdout
        is the JSON document) and, in a ``zoo bench`` run, saved as ``<spec>-bench.md`` in the output folder."""
        print(text, file=self._echo or sys.stdout, flush=True)
        if self.report_name is not None and self.out_dir is not None:
            path = self.path(self.report_name)
            with open(path, "a" if self._reported else "w") as f:  # a fresh file per run, then appended to
                f.write(text if text.endswith("\n") else text + "\n")
            self._reported = True


def jsonable(obj: Any) -> Any:
    """``obj`` with tensors / arrays / numpy scalars as lists and numbers, paths as strings, tuples and sets as lists,
    mapping keys as strings; anything else JSON cannot hold as its ``str``."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, Mapping):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    tolist = getattr(obj, "tolist", None)  # torch tensors, numpy arrays and scalars
    if callable(tolist):
        return jsonable(tolist())
    if hasattr(obj, "model_dump"):  # pydantic models (options)
        return jsonable(obj.model_dump())
    if hasattr(obj, "__dataclass_fields__"):
        return {k: jsonable(getattr(obj, k)) for k in obj.__dataclass_fields__}
    return str(obj)


# ----------------------------------------------------------------------------- building a pipeline
def build_pipeline(
    spec: Spec,
    *,
    file: str | Path | None = None,
    variant: str | None = None,
    device: str | None = None,
    dtype: Any = None,
    sampler: str | None = None,
    trust_remote_code: bool = False,
    machine: Machine | None = None,
    params: Mapping[str, Any] | None = None,
    use_cache: bool = True,
    allow_outside_paths: bool | None = None,
    ctx: Any = None,
) -> Pipeline:
    """Build ``spec``'s pipeline (see :func:`zoo.load`). ``ctx`` is the :class:`~registry.context.Context`
    its procedures and metric checks see (``self.ctx``, ``pipeline.ctx``); by default a new one for this
    spec, file, variant, device and dtype."""
    fname = str(file) if file else None
    spec_dir = Path(file).resolve().parent if file else Path.cwd()
    dtype = dtype_name(dtype)
    check_requires(spec, fname)
    machine = machine or detect()
    if device is not None and (problem := device_problem(str(device), machine)):
        raise HardwareError(problem, Location(field="device"))
    skipped: list[str] = []
    chosen, dev = choose_variant(spec, variant, device, machine, fname, sampler=sampler, spec_dir=spec_dir, skipped=skipped)
    if skipped:
        warnings.warn(f"{spec.name}: using variant {chosen}; skipped {'; '.join(skipped)}", ZooWarning, stacklevel=2)
    hw = spec.hardware[chosen]
    if dtype is not None and dtype not in hw.dtypes:  # refused before any model is built
        raise HardwareError(f"dtype {dtype} not declared for variant {chosen} (declared: {', '.join(hw.dtypes)})", locate(fname, f"hardware.{chosen}.dtypes"))
    default = sampler or spec.default_for(chosen)
    if default not in spec.samplers and default not in spec.recipes:
        raise ParamError(f"sampler {default!r} is not declared; declared: {', '.join([*spec.samplers, *spec.recipes])}")
    if ctx is None:
        ctx = Context(spec, file, variant=chosen, device=device, dtype=dtype, use_cache=use_cache,
                      trust_remote_code=trust_remote_code)
    models, _ = build_models(spec, file=file, variant=chosen, device=dev, dtype=dtype, trust_remote_code=trust_remote_code,
                             use_cache=use_cache, allow_outside_paths=allow_outside_paths)
    procs, unavailable = {}, {}
    for name in [*spec.samplers, *spec.recipes]:
        missing = missing_roles(spec, name, chosen, models)
        if missing and name != default:
            unavailable[name] = f"needs role {missing[0]!r}, which has no source for variant {chosen}"
            continue
        procs[name] = make_procedure(spec, name, models, dev, dtype, params if name == default else None, fname, chosen, ctx)
    pipe = Pipeline(spec, chosen, dev, dtype, models, procs, default, fname, unavailable, skipped, ctx)
    ctx.adopt(pipe, params)
    return pipe


def load_saved(directory: str | os.PathLike[str], *, variant: str | None = None, device: Any = None, dtype: Any = None,
         sampler: str | None = None, params: Mapping[str, Any] | None = None, use_cache: bool = True) -> "Pipeline":
    """Build the pipeline saved in ``directory`` (checked by :func:`verify_folder` first): its variant, its default
    procedure and dtype unless the caller asks otherwise, on ``device`` (default: what the variant needs)."""
    root = Path(directory).expanduser().absolute()
    man = verify_folder(root)
    if variant is not None and variant != man.variant:
        raise HardwareError(f"variant {variant!r}: this folder holds the saved variant {man.variant!r} only", Location(str(root)))
    spec_path = root / man.spec
    spec = load_spec_file(spec_path)
    return build_pipeline(spec, file=spec_path, variant=man.variant, device=device,
                          dtype=dtype if dtype is not None else man.dtype, sampler=sampler or man.default,
                          params=params, use_cache=use_cache)
