"""What a method's code offers the engine: procedures (samplers, analyses, training recipes),
model factories, metric checks and named invariants.

Nothing a spec names is callable unless its author opted in: a spec's ``"package.module:attr"``
string resolves (:func:`registry.resolve.resolve`) only to an object registered here for the
kind the spec field asks for. Procedures opt in by subclassing :class:`Procedure`; factories,
metric checks, converters and transforms by a decorator::

    @factory                                  # config validated against the signature
    def build_affine(dim: Annotated[int, Field(ge=1, le=4096)] = 2) -> Affine: ...

    @metric_check
    def sample_mean_abs(pipeline) -> float: ...

This module is the whole method-facing API. It imports neither torch nor Hypothesis, so
``import registry`` stays cheap; method code imports what it needs itself.

A *procedure* is a class named by a spec entry (``samplers:`` or ``recipes:``)::

    class MySampler(Procedure):
        class Params(ProcedureParams):          # typed, validated hyper-parameters
            steps: int = Field(10, ge=1)
        batch_independent = True                # opt in to the batch-independence check
        mutates_models = False                  # True: the builder hands uncached copies (training)

        def __init__(self, models, params, device, dtype): ...
        def __call__(self, *, seed=0, **inputs): ...        # the method itself
        def example_inputs(self, batch_size): ...           # a cheap call, for conformance
        def input_rows(self, inputs): ...                   # only if batch_independent
        def output_rows(self, outputs): ...                 # only if batch_independent
        def population_inputs(self, start, stop): ...       # rows start..stop-1 of `zoo sample`
        per_row_seeds = True                    # opt in: seed may be a list, one per row

The engine builds ``models`` (a mapping role -> built object) and validates ``params`` from
the spec merged with the caller's overrides, then instantiates the class once per pipeline.

Built roles are cached process-wide and shared by every pipeline of the process: a procedure
must never change ``self.models[...]`` in place unless it sets ``mutates_models = True`` (the
builder then hands it private copies) or takes copies itself with :func:`private_copies`.
Conformance checks that the cached weights are bit-identical after every procedure call.

Populations and per-row seeds (``zoo sample``, :mod:`registry.sampling`). Row ``i`` of a population drawn
with base seed ``S`` is the one-row call ``proc(seed=row_seed(S, i), **proc.population_inputs(i, i + 1))``:
its value depends on ``(S, i)`` alone, never on the batch, the shard or the process that made it. A
procedure that can draw several such rows in one call sets ``per_row_seeds = True``: its ``__call__`` then
also takes ``seed`` as a list of ints, one per row of the call, and row ``j`` of
``proc(seed=seeds, **proc.population_inputs(a, b))`` equals the one-row call with ``seeds[j]`` (bit for bit
where its arithmetic is row-exact; conformance checks it exactly). An ``int`` seed keeps its old meaning.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, overload, runtime_checkable

if TYPE_CHECKING:
    from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationInfo, create_model, field_validator

from .files import cache_dir  # noqa: F401 - method-facing
from .limits import SEED_MAX, Batch, Bound, Frames, Length, Rows, Seeds, Sequences, Steps, Width  # noqa: F401 - method-facing: per-call sizes


class StrictScalars(BaseModel):
    """Base of the models a spec or a caller fills: no boolean for a number, no number for a boolean, no
    numeric string (``steps: true`` is refused, not read as 1: :func:`registry.inputs.strict_problem`)."""

    @field_validator("*", mode="before")
    @classmethod
    def _zoo_strict_scalars(cls, value: Any, info: ValidationInfo) -> Any:
        from .inputs import strict_field_check

        return strict_field_check(cls, info.field_name, value) if info.field_name else value


class ProcedureParams(StrictScalars):
    """Base for a procedure's parameters: unknown keys are errors, values are validated, strictly
    about booleans vs numbers (only ``CliInputs`` parse the command line's strings)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class CliInputs(BaseModel):
    """Base for the ``zoo run NAME --key value`` options of a procedure (strings are coerced).

    An option that overrides a spec parameter (``--nfe`` for ``num_inference_steps``) defaults to
    ``None`` = "not given", so the spec's value (and ``--param``) stand unless the user passes it.
    """

    model_config = ConfigDict(extra="forbid")


class Procedure:
    """Base class of every sampler, analysis and training recipe a spec can name.

    Subclasses set ``Params`` and implement ``__call__`` and ``example_inputs``.
    ``kind`` is informational ("sampler", "analysis", "training"); what the conformance
    harness checks is chosen by the spec section and by ``batch_independent``.
    """

    Params: ClassVar[type[ProcedureParams]] = ProcedureParams
    CliInputs: ClassVar[type[CliInputs] | None] = None
    batch_independent: ClassVar[bool] = False
    mutates_models: ClassVar[bool] = False
    #: the :class:`~registry.context.Context` of the pipeline that built it (set by the engine after
    #: ``__init__``; ``None`` for a procedure constructed by hand)
    ctx: Any = None

    def __init__(self, models: Mapping[str, Any], params: ProcedureParams, device: Any = "cpu", dtype: Any = None):
        self.models = models.copy() if isinstance(models, Roles) else Roles(models)
        self.params = params
        self.device = device
        self.dtype = dtype

    def __call__(self, *, seed: int = 0, **inputs: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        """Keyword inputs for a cheap, representative call (used by conformance checks)."""
        return {}

    def input_rows(self, inputs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Split batched ``inputs`` into one single-row input dict per row."""
        raise NotImplementedError(f"{type(self).__name__} declares batch_independent but has no input_rows")

    def output_rows(self, outputs: Any) -> list[Any]:
        """Split a batched result into per-row results (same order as ``input_rows``)."""
        raise NotImplementedError(f"{type(self).__name__} declares batch_independent but has no output_rows")

    #: ``__call__`` also accepts ``seed`` as a list of ints, one per row of the call; row ``j`` of
    #: ``self(seed=seeds, **self.population_inputs(a, b))`` equals the one-row call
    #: ``self(seed=seeds[j], **self.population_inputs(a + j, a + j + 1))``: bit for bit where the batched arithmetic
    #: is row-exact (conformance check ``per-row-seeds`` compares exactly, on the spec's first runnable CPU variant);
    #: a batched network may round row ``j`` differently, which ``zoo sample`` allows for by making the batch size part
    #: of a batched run (``--exact`` draws one row per call). Parse the seed with :func:`seed_list`.
    per_row_seeds: ClassVar[bool] = False

    def population_inputs(self, start: int, stop: int) -> dict[str, Any]:
        """Keyword inputs of one call drawing rows ``start .. stop - 1`` of this procedure's population:
        what ``zoo sample`` writes (e.g. ``{"batch_size": stop - start}`` for an unconditional sampler, or
        prompt ``i % P`` of a fixed list for row ``i``). Row ``i``'s input may depend on ``i``, never on
        ``start``/``stop`` otherwise; its randomness comes only from the seed the caller passes. A
        procedure without a population cannot be used by ``zoo sample`` (the default raises)."""
        raise NotImplementedError(f"{type(self).__name__} defines no population_inputs (registry.contract.Procedure)")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for attr, base in (("Params", ProcedureParams), ("CliInputs", CliInputs)):
            model = cls.__dict__.get(attr)
            if model is not None and not (isinstance(model, type) and issubclass(model, base)):
                raise TypeError(f"{cls.__qualname__}.{attr} must subclass registry.contract.{base.__name__}")
        _REGISTRY.setdefault("procedure", set()).add(cls)  # subclassing is the opt-in
        call = cls.__dict__.get("__call__")
        if call is not None and not getattr(call, "_zoo_overrides", False):
            cls.__call__ = _accepting_overrides(call)  # type: ignore[method-assign]

    def with_params(self, **overrides: Any) -> "Procedure":
        """This procedure with some ``Params`` changed, validated by the same model as the spec's
        (a bad value is a :class:`~registry.errors.ParamError` naming the parameter). The built
        models are reused, never rebuilt or reloaded; the procedure object is re-made (its
        scheduler or grid may depend on the params) and remembered per distinct override."""
        if not overrides:
            return self
        try:
            key: Any = tuple(sorted(overrides.items()))
            hash(key)
        except TypeError:
            key = None
        memo = self.__dict__.setdefault("_zoo_with_params", {})
        if key is not None and key in memo:
            return memo[key]
        from pydantic import ValidationError

        from .errors import validation_error
        from .errors import Location

        params_cls = type(self.params)
        try:
            params = params_cls.model_validate({**dict(self.params), **overrides})
        except ValidationError as exc:
            where = lambda f: Location(None, None, None, f"parameter {f}")  # noqa: E731
            err = validation_error(exc, params_cls, where, set(overrides))
            raise type(err)(err.message.replace("unknown parameter;", f"unknown parameter of {type(self).__name__};", 1),
                            err.location) from None
        models = self.models
        if self.mutates_models:
            models = private_copies(models)
        clone = type(self)(models=models, params=params, device=self.device, dtype=self.dtype, **self.clone_kwargs())
        clone.ctx = self.ctx
        if key is not None:
            if len(memo) >= 8:
                memo.pop(next(iter(memo)))
            memo[key] = clone
        return clone

    def with_models(self, models: Mapping[str, Any]) -> "Procedure":
        """This procedure (same params, device, dtype and context) on other models for some of its roles, e.g.
        another training seed's checkpoints of the same architecture; the roles not given stay as they are. A
        role the procedure does not have is a one-line ``ValueError`` naming it. Nothing is built, cached or
        remembered: each call makes a new procedure."""
        unknown = [r for r in models if r not in self.models]
        if unknown:
            raise ValueError(f"{type(self).__name__}.with_models: role {unknown[0]!r} is not one of this procedure's "
                             f"roles ({', '.join(self.models) or 'none'})")
        roles = self.models.copy() if isinstance(self.models, Roles) else Roles(self.models)
        roles.update(models)
        clone = type(self)(models=roles, params=self.params, device=self.device, dtype=self.dtype, **self.clone_kwargs())
        clone.ctx = self.ctx
        return clone

    def clone_kwargs(self) -> dict[str, Any]:
        """Extra constructor keywords a subclass takes beyond models/params/device/dtype (e.g. a
        caller-supplied cache factory), carried over to the procedures :meth:`with_params` makes."""
        return {}

    def native(self) -> Any:
        """The library object users already know for this procedure, on the same built models, whose
        result equals this procedure's for the same seed (e.g. a diffusers pipeline with the method's
        scheduler installed, or a transformers model's ``generate()`` with the method's cache and logits
        processors); ``pipe.native`` returns the default procedure's. Override it where one exists; the
        default has none (a ``ValueError``, one line through ``pipe.native``)."""
        raise ValueError(f"{type(self).__name__} has no native library object")

    def run_cli(self, inputs: BaseModel | None, seed: int) -> str:
        """What ``zoo run`` does: run once and return the text to print (may write files)."""
        result = self(seed=seed, **self.example_inputs(1))
        return summarize(result)


#: Row seeds of a population: ``row_seed(S, i) = S * ROW_SEED_STRIDE + i``. A prime, so base seeds ``S`` and
#: ``S + 1`` give disjoint row-seed ranges for populations of at most ``ROW_SEED_STRIDE`` rows.
ROW_SEED_STRIDE = 1_000_003
#: ``--seed`` / ``seed=`` range: what every RNG the methods use accepts (torch takes < 2**64,
#: numpy's SeedSequence any non-negative int; 2**63 - 1 keeps int64 conversions safe).


def row_seed(seed: int, i: int) -> int:
    """Seed of row ``i`` of a population drawn with base seed ``seed``: ``seed * 1_000_003 + i`` (row ``i``
    of base seed 0 is seed ``i``); ``zoo sample`` and :func:`zoo.common.rows.independent_rows` both use it."""
    if seed < 0 or i < 0:
        raise ValueError(f"row_seed: expected seed >= 0 and row index >= 0, got seed={seed}, i={i}")
    out = int(seed) * ROW_SEED_STRIDE + int(i)
    if out > SEED_MAX:
        raise ValueError(f"row_seed: seed {seed} and row {i} give {out} > 2**63 - 1")
    return out


def seed_list(seed: Any, n: int, who: str = "seed") -> list[int] | None:
    """For a ``per_row_seeds`` procedure: ``seed`` as a list of ``n`` ints when the caller passed a list or
    tuple (a ``ValueError`` naming ``who`` when its length is not ``n`` or an entry is not an int in
    ``[0, 2**63 - 1]``), ``None`` when it is a single int (the procedure's own single-seed behaviour)."""
    if not isinstance(seed, (list, tuple)):
        return None
    if len(seed) != n:
        raise ValueError(f"{who}: {len(seed)} seeds for {n} rows (one seed per row)")
    for s in seed:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= SEED_MAX:
            raise ValueError(f"{who}: expected integers in [0, 2**63 - 1], got {s!r}")
    return [int(s) for s in seed]


def _accepting_overrides(call: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a procedure's ``__call__`` so keyword arguments naming ``Params`` fields (and not the
    call's own inputs) are per-call overrides: ``pipe(seed=0, num_inference_steps=20)`` or
    ``pipe.procedures["x"](..., **params)`` runs :meth:`Procedure.with_params` of them. The call's own
    inputs are validated first against ``__call__``'s annotations (:func:`registry.inputs.check_call`:
    strict types, bounds, the per-call size limits of :mod:`registry.limits`), so a size above its
    limit is one ``ParamError`` before anything is allocated."""
    import functools

    sig = inspect.signature(call).parameters
    own = {n for n, p in sig.items() if p.kind is not p.VAR_KEYWORD} - {"self"}
    open_kwargs = any(p.kind is p.VAR_KEYWORD for p in sig.values())

    @functools.wraps(call)
    def wrapper(self: Procedure, *args: Any, **kwargs: Any) -> Any:
        fields = getattr(type(self.params), "model_fields", {})
        unknown = [k for k in kwargs if k not in fields and k not in own]
        if unknown and not open_kwargs:
            from .errors import Location, ParamError

            raise ParamError(f"unknown parameter or input of {type(self).__name__}; parameters: "
                             f"{', '.join(fields) or 'none'}; inputs: {', '.join(sorted(own)) or 'none'}",
                             Location(None, None, None, f"parameter {unknown[0]}"))
        overrides = {k: kwargs.pop(k) for k in [k for k in kwargs if k in fields and k not in own]}
        from .inputs import check_call

        check_call(type(self).__name__, call, self, args, kwargs)
        target = self.with_params(**overrides) if overrides else self
        return call(target, *args, **kwargs)

    wrapper._zoo_overrides = True  # type: ignore[attr-defined]
    return wrapper


class Roles(dict):  # type: ignore[type-arg]
    """role -> built model for one variant. A role with no source for that variant (roles may
    cover a subset of variants) raises a one-line ``BuildError`` naming role, variant and
    procedure instead of a bare ``KeyError``; ``.get`` and ``in`` behave as for a dict."""

    def __init__(self, *args: Any, variant: str | None = None, procedure: str | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.variant, self.procedure = variant, procedure

    def __missing__(self, role: str) -> Any:
        from .errors import BuildError

        raise BuildError(
            f"role {role!r} has no source for variant {self.variant or '?'}"
            + (f" (needed by procedure {self.procedure})" if self.procedure else "")
        )

    def copy(self) -> "Roles":
        return Roles(self, variant=self.variant, procedure=self.procedure)


def private_copies(models: Mapping[str, Any], roles: "list[str] | None" = None) -> Roles:
    """Deep copies of ``models`` (of ``roles`` only, when given; the others stay shared) that a
    training recipe may change freely without touching the process-wide cache::

        self.models = private_copies(self.models, ["sae"])   # then train self.models["sae"]
    """
    import copy

    out = models.copy() if isinstance(models, Roles) else Roles(models)
    for role in (list(models) if roles is None else roles):
        out[role] = copy.deepcopy(models[role])
    return out


def summarize(value: Any, limit: int = 100) -> str:
    """A short description of a result for printing: a typed output as one line per field (name, shape /
    dtype, a short summary), never a truncated tensor repr (:func:`registry.results.summarize`)."""
    from .results import summarize as impl

    return impl(value, limit)


def cached_artifact(key_parts: "list[Any] | tuple[Any, ...]", produce: Callable[[], Any], fmt: str, *,
                    namespace: str = "artifacts", use_cache: bool = True) -> Any:
    """Run-time artefacts fitted once and cached on disk in safe formats (safetensors, JSON,
    pickle-free ``.npy``), keyed by configuration and data hash, written atomically; see
    :mod:`registry.artifacts`."""
    from .artifacts import cached_artifact as impl

    return impl(key_parts, produce, fmt, namespace=namespace, use_cache=use_cache)  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- invariants

InvariantFn = Callable[..., None]
_INVARIANTS: dict[tuple[str, str], InvariantFn] = {}


def required_arity(fn: Callable[..., Any]) -> int:
    """How many arguments ``fn`` needs (positional parameters without a default; Hypothesis' ``@given``
    removes the ones it fills), so the engine can call ``fn()`` or ``fn(ctx)``."""
    params = inspect.signature(fn).parameters.values()
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def invariant(name: str) -> Callable[[InvariantFn], InvariantFn]:
    """Register a property check under ``name``: ``fn()``, or ``fn(ctx)`` when it needs the spec's models or
    files (a :class:`~registry.context.Context`: ``ctx.models("toy")["dit"]``; the engine inspects the arity).

    The function is usually a Hypothesis test (``@given(...)`` fills the parameters after ``ctx``) stating
    the invariant in its docstring; it raises ``AssertionError`` on violation. Names are scoped by the module
    that registers them, so two methods may both register ``seeded-determinism``.
    """

    def deco(fn: InvariantFn) -> InvariantFn:
        key = (fn.__module__, name)
        if key in _INVARIANTS and _INVARIANTS[key] is not fn:
            raise ValueError(f"invariant {name!r} registered twice in {fn.__module__}")
        if required_arity(fn) > 1:
            raise TypeError(f"invariant {name!r} ({fn.__qualname__}) needs {required_arity(fn)} arguments; "
                            "an invariant takes none or one (ctx)")
        _INVARIANTS[key] = fn
        fn.zoo_invariant = name  # type: ignore[attr-defined]
        return fn

    return deco


def call_invariant(fn: InvariantFn, ctx: Any) -> None:
    """Run an invariant: ``fn(ctx)`` if it takes the context, else ``fn()``."""
    if required_arity(fn) == 1:
        fn(ctx)
    else:
        fn()


def registered_invariants(module_prefix: str) -> dict[str, InvariantFn]:
    """Invariants registered by modules at or under ``module_prefix``."""
    return {
        name: fn
        for (module, name), fn in _INVARIANTS.items()
        if module == module_prefix or module.startswith(module_prefix + ".")
    }


# ----------------------------------------------------------------------------- registration
#: What a spec field may name, by kind: ``factory`` (``models.*.variants.*.factory``), ``procedure``
#: (``samplers/recipes.*.target``), ``metric_check`` (``metrics[].check``), ``converter`` and
#: ``transform`` (the weight-conversion engine), ``benchmark`` (``bench:``, run by ``zoo bench``), ``trainer``
#: (``training.<name>.trainer``, run by ``zoo train``).
KINDS = ("factory", "procedure", "metric_check", "converter", "transform", "benchmark", "trainer")
_REGISTRY: dict[str, set[Any]] = {k: set() for k in KINDS}
_FACTORY_PARAMS: dict[Any, type[BaseModel]] = {}
F = TypeVar("F", bound=Callable[..., Any])


class FactoryParams(StrictScalars):
    """Base of a factory's ``config`` model: unknown keys are errors, values are validated (strictly
    about booleans vs numbers and numeric strings, as :class:`ProcedureParams`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True, arbitrary_types_allowed=True)


def register(kind: str, obj: F) -> F:
    """Record ``obj`` as something a spec may name under ``kind`` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; kinds: {', '.join(KINDS)}")
    if not callable(obj):
        raise TypeError(f"only callables can be registered as a {kind}, got {type(obj).__name__}")
    _REGISTRY[kind].add(obj)
    return obj


def registered(kind: str) -> list[Any]:
    """Everything registered so far for ``kind`` (what the imported modules registered)."""
    return list(_REGISTRY.get(kind, ()))


def is_registered(obj: Any, kind: str) -> bool:
    """True if ``obj`` was registered (or, for procedures, subclassed :class:`Procedure`) for ``kind``."""
    try:
        return obj in _REGISTRY.get(kind, ())
    except TypeError:  # unhashable
        return False


def _params_from_signature(fn: Callable[..., Any], skip: int = 0, what: str = "@factory") -> type[BaseModel]:
    """A :class:`FactoryParams` model of ``fn``'s keyword parameters (annotations and defaults,
    ``Annotated[int, Field(le=...)]`` bounds included), after the first ``skip`` parameters (a transform's
    model, a metric check's pipeline). ``*args``/``**kwargs`` cannot be validated."""
    import types
    import typing

    # PEP 563 string annotations, resolved in the factory's module; the return annotation is
    # ignored (it may name a class defined further down the module).
    shim = types.SimpleNamespace(
        __annotations__={k: v for k, v in getattr(fn, "__annotations__", {}).items() if k != "return"},
        __globals__=getattr(fn, "__globals__", {}),
    )
    try:
        hints = typing.get_type_hints(shim, globalns=shim.__globals__, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - NameError, TypeError, ...
        raise TypeError(f"{what} {fn.__qualname__}: cannot resolve its annotations ({exc}); pass {what}(params=Model)") from None
    fields: dict[str, Any] = {}
    for name, p in list(inspect.signature(fn).parameters.items())[skip:]:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(
                f"{what} {fn.__qualname__}: *args/**kwargs cannot be validated; pass {what}(params=Model)"
            )
        if p.kind is p.POSITIONAL_ONLY:
            raise TypeError(f"{what} {fn.__qualname__}: parameter {name} is positional-only")
        ann = Any if p.annotation is p.empty else hints.get(name, p.annotation)
        fields[name] = (ann, ... if p.default is p.empty else p.default)
    model = create_model(f"{fn.__name__}_config", __base__=FactoryParams, **fields)
    model.__zoo_derived__ = True  # type: ignore[attr-defined] - registry.declare: derived, not a params module's class
    return model


def _check_signature(fn: Callable[..., Any], model: type[BaseModel], skip: int, what: str) -> None:
    """A callable declared with ``params=Model`` receives the validated values as keyword arguments: its keyword
    parameters after the first ``skip`` must be exactly the model's fields (or it takes ``**kwargs``), so the model
    (kept torch-free in the package's params module, :mod:`registry.declare`) cannot drift from the signature."""
    params = list(inspect.signature(fn).parameters.values())[skip:]
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    names = {p.name for p in params if p.kind is not p.VAR_POSITIONAL}
    fields = set(model.model_fields)
    if names != fields:
        extra, missing = sorted(fields - names), sorted(names - fields)
        raise TypeError(f"{what} {fn.__qualname__}: params model {model.__qualname__} does not match the signature"
                        + (f"; fields the function does not take: {', '.join(extra)}" if extra else "")
                        + (f"; parameters the model lacks: {', '.join(missing)}" if missing else ""))


@overload
def factory(fn: F) -> F: ...
@overload
def factory(*, params: type[BaseModel]) -> Callable[[F], F]: ...
def factory(fn: Any = None, *, params: type[BaseModel] | None = None) -> Any:
    """Register a model factory (``source: zoo``). The spec's ``config`` is validated before the
    call against ``params`` (a :class:`FactoryParams` model), or a model derived from the
    signature; the factory then receives the validated values as keyword arguments."""

    def deco(f: F) -> F:
        if params is not None and not (isinstance(params, type) and issubclass(params, FactoryParams)):
            raise TypeError("@factory(params=...) needs a registry.contract.FactoryParams subclass")
        model = params if params is not None else _params_from_signature(f)
        if params is not None:
            _check_signature(f, params, 0, "@factory")
        if model.model_config.get("extra") != "forbid":
            raise TypeError(f"@factory {f.__qualname__}: params model must forbid extra keys (subclass FactoryParams)")
        _FACTORY_PARAMS[f] = model
        return register("factory", f)

    return deco(fn) if fn is not None else deco


def factory_params(fn: Any) -> type[BaseModel]:
    """The config model of a registered factory."""
    return _FACTORY_PARAMS[fn]


_CALL_PARAMS: dict[Any, type[BaseModel]] = {}


def _registering(kind: str, fn: Any, params: type[BaseModel] | None) -> Any:
    """``@kind`` / ``@kind(params=Model)``: register ``fn`` for ``kind``, with its declared params model."""
    if params is not None and not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise TypeError(f"@{kind}(params=...) needs a pydantic model class")
    if params is not None and params.model_config.get("extra") != "forbid":
        raise TypeError(f"@{kind}(params=...): the model must forbid extra keys (subclass FactoryParams)")

    def deco(f: F) -> F:
        if params is not None:
            _check_signature(f, params, 1, f"@{kind}")
            _CALL_PARAMS[f] = params
        return register(kind, f)

    return deco(fn) if fn is not None else deco


def _call_params(fn: Any, kind: str) -> type[BaseModel]:
    """The params model of a registered metric check or transform: declared with ``params=``, else derived
    from its signature after the first parameter (the pipeline / the model) on first use."""
    model = _CALL_PARAMS.get(fn)
    if model is None:
        model = _params_from_signature(fn, skip=1, what=f"@{kind}")
        _CALL_PARAMS[fn] = model
    return model


@overload
def metric_check(fn: F) -> F: ...
@overload
def metric_check(*, params: type[BaseModel]) -> Callable[[F], F]: ...
def metric_check(fn: Any = None, *, params: type[BaseModel] | None = None) -> Any:
    """Register a metric check: ``fn(pipeline, **check_params) -> float``, re-run by conformance. A spec's
    ``check_params`` are validated before the call by ``params`` (a :class:`FactoryParams` model) or a model
    derived from the signature after ``pipeline``; sizes without a declared bound are held to
    :mod:`registry.limits`' default caps."""

    return _registering("metric_check", fn, params)


def check_params_model(fn: Any) -> type[BaseModel]:
    """The ``check_params`` model of a registered metric check."""
    return _call_params(fn, "metric_check")


def converter(fn: Any = None, *, inverse: Callable[[Any], Any] | None = None) -> Any:
    """Register a weight converter ``fn(state_dict) -> state_dict`` (a spec's ``convert:``): it maps
    a checkpoint's keys/layout to the factory's. ``inverse`` maps the factory's state dict back to
    the checkpoint's layout; the conformance loading-path check needs it (``@converter(inverse=f)``)."""

    def deco(f: F) -> F:
        if inverse is not None:
            f.inverse = inverse  # type: ignore[attr-defined]
        return register("converter", f)

    return deco(fn) if fn is not None else deco


@overload
def transform(fn: F) -> F: ...
@overload
def transform(*, params: type[BaseModel]) -> Callable[[F], F]: ...
def transform(fn: Any = None, *, params: type[BaseModel] | None = None) -> Any:
    """Register a post-load transform ``fn(model, **transform_config) -> model | None`` (a spec's
    ``transform:``): quantise, patch an embedder, install attention processors. ``transform_config`` is
    validated before the call by ``params`` (a :class:`FactoryParams` model: the place to declare a field of a
    special type, e.g. a file inside the spec's folder) or a model derived from the signature after ``model``;
    consent keys are refused and sizes without a declared bound are held to :mod:`registry.limits`' caps."""

    return _registering("transform", fn, params)


def transform_params(fn: Any) -> type[BaseModel]:
    """The ``transform_config`` model of a registered transform."""
    return _call_params(fn, "transform")


class Options(StrictScalars):
    """Base of a benchmark's or trainer's options (``@benchmark(options=...)``, ``@trainer(options=...)``): each
    field is a ``zoo bench NAME --field-name VALUE`` option (values validated by the model: bound every size).
    ``quick`` holds the values ``--quick`` gives the fields the user left unset (a reduced run that still
    prints the table). Field names may not shadow the engine's flags (``quick``, ``json``, ``out_dir``, ``seed``,
    ``help``). Strict like every params model (a spec's ``training: {params: {steps: true}}`` is refused); the
    strings of ``zoo bench`` flags are parsed by the harness first."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
    quick: ClassVar[dict[str, Any]] = {}


#: the flags ``zoo bench`` gives every benchmark (an options field of these names is refused)
ENGINE_FLAGS = frozenset({"quick", "json", "out_dir", "seed", "help"})


def _hook_options(kind: str, fn: Callable[..., Any], options: type[BaseModel] | None) -> type[BaseModel]:
    """Check a hook's options model (a pydantic model that forbids extra keys, no engine flag names, valid quick values)."""
    model = options if options is not None else Options
    where = f"@{kind} {fn.__qualname__}"
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{where}: options must be a pydantic model class (subclass registry.contract.Options)")
    if model.model_config.get("extra") != "forbid":
        raise TypeError(f"{where}: the options model must forbid extra keys (subclass registry.contract.Options)")
    clash = sorted(set(model.model_fields) & ENGINE_FLAGS)
    if clash:
        raise TypeError(f"{where}: option {clash[0]!r} shadows an engine flag (the engine gives {', '.join(sorted(ENGINE_FLAGS))}; "
                        "read ctx.seed / ctx.quick instead)")
    quick = getattr(model, "quick", {}) or {}
    unknown = sorted(set(quick) - set(model.model_fields))
    if unknown:
        raise TypeError(f"{where}: quick names {unknown[0]!r}, which is not an option ({', '.join(model.model_fields) or 'none'})")
    model(**quick)  # the quick values validate
    if required_arity(fn) != 2:
        raise TypeError(f"{where}: expected fn(ctx, opts), got {required_arity(fn)} required argument(s)")
    return model


def benchmark(fn: Any = None, *, options: type[BaseModel] | None = None) -> Any:
    """Register a method's benchmark (a spec's ``bench:``), run by ``zoo bench NAME``::

        class BenchOptions(Options):
            per_class: int = Field(30, ge=1, le=1000, description="samples per digit")
            quick: ClassVar[dict[str, Any]] = {"per_class": 5}

        @benchmark(options=BenchOptions)
        def run(ctx, opts) -> dict:              # ctx: registry.context.Context, opts: a BenchOptions
            rows = ...                           # ctx.pipeline("toy"), ctx.seed, ctx.quick
            ctx.report(table(rows))              # the table (printed, and saved as <spec>-bench.md)
            plot(rows, ctx.figure("x.png"))      # every file through ctx, inside --out-dir
            return {"rows": rows}                # the engine writes it as <spec>-bench.json

    The engine gives every benchmark ``--quick``, ``--json``, ``--out-dir``, ``--seed`` and ``--help`` and
    the options' fields as flags. ``@benchmark`` on a ``main(argv) -> int`` (the older shape) still
    registers it; ``zoo bench`` then passes ``[--quick] [args]`` through unchanged."""

    def deco(f: F) -> F:
        f.zoo_options = _hook_options("benchmark", f, options)  # type: ignore[attr-defined]
        return register("benchmark", f)

    if fn is not None:
        if required_arity(fn) == 2:  # bare @benchmark on fn(ctx, opts): no options
            return deco(fn)
        fn.zoo_options = None  # bare @benchmark on main(argv): the older shape, kept until every benchmark is converted
        return register("benchmark", fn)
    return deco


def trainer(fn: Any = None, *, options: type[BaseModel] | None = None) -> Any:
    """Register how a shipped file is made (a spec's ``training.<name>.trainer``), run by ``zoo train NAME``::

        @trainer                                   # or @trainer(options=SomeOptions); the spec's params fill them
        def train_toy(ctx, opts) -> None:
            g = setup_deterministic(0)             # byte-for-byte reproducible: one thread, fixed seeds
            model = ...                            # ctx.models("toy", roles=["dit"]): fresh, uncached copies
            save_checkpoint(model, ctx.path("my-method-toy.safetensors"))   # under the produced file's base name

    It writes each file its spec entry ``produces`` into ``ctx.out_dir`` under the file's base name;
    ``zoo train NAME --check`` then compares their sha256 with the spec's declarations."""

    def deco(f: F) -> F:
        f.zoo_options = _hook_options("trainer", f, options)  # type: ignore[attr-defined]
        return register("trainer", f)

    return deco(fn) if fn is not None else deco


@runtime_checkable
class Context(Protocol):
    """What every hook the engine calls can reach (method code: ``from registry.contract import Context`` for type
    hints): the interface of :class:`registry.context.Context`, which the engine makes and hands over. Declared here,
    beside the other things method code implements against, so the contract does not import the engine above it."""

    spec: Any
    file: "Path | None"
    variant: str | None
    seed: int
    quick: bool
    out_dir: "Path | None"

    @property
    def name(self) -> str: ...
    @property
    def cache_dir(self) -> "Path": ...
    def pipeline(self, variant: str | None = None, **params: Any) -> Any: ...
    def models(self, variant: str | None = None, roles: "Iterable[str] | None" = None) -> Any: ...
    def spec_file(self, relative_path: str, sha256: str | None = None) -> "Path": ...
    def path(self, name: str) -> "Path": ...
    def figure(self, name: str) -> "Path": ...
    def write_text(self, name: str, text: str) -> "Path": ...
    def write_json(self, name: str, obj: Any) -> "Path": ...
    def report(self, text: str) -> None: ...
