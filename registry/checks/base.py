"""What every conformance check family shares: the :class:`Check` record, :class:`Skipped`, the spec under check
(:class:`SpecUnderCheck`), the pipelines and contexts the checks of one spec file share, the family registry
(:func:`family`, :data:`FAMILIES`) and the comparisons the contract checks use.

A family is a function ``SpecUnderCheck -> list[Check]`` registered with :func:`family`; ``checks_for`` (in
:mod:`registry.checks`) runs every registered family in registration order. A new check is a function in the
family module it belongs to; a new family is a new module that registers itself (and is imported by
``registry/checks/__init__.py``)."""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..catalog import Entry
from ..errors import Skipped  # noqa: F401 - re-exported: checks raise it
from ..spec import Spec




@dataclass
class Check:
    spec: str
    id: str
    fn: Callable[[], None]
    slow: bool = False



@dataclass(frozen=True)
class Target:
    """Where the CPU variants run during a check: ``cpu`` here, ``cuda`` (and bf16) on a GPU box."""

    device: str = "cpu"
    dtype: str | None = None


@dataclass
class SpecUnderCheck:
    """One valid spec file as the check families see it: what the caller asked for (``slow``, ``target``, the
    consent ``allow_remote_code_stub``) and what is known before anything runs (``missing``: the unmet optional
    requirements, every check but ``validates``/``requires`` is then SKIP; ``cpu``: the variants meant for a CPU)."""

    entry: Entry
    slow: bool = False
    target: Target = field(default_factory=Target)
    allow_remote_code_stub: bool = False
    missing: str = ""

    @property
    def spec(self) -> Spec:
        assert self.entry.spec is not None
        return self.entry.spec

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def file(self) -> str:
        return str(self.entry.path)

    @property
    def cpu(self) -> list[str]:
        return cpu_variants(self.spec)

    def check(self, suffix: str, fn: Callable[[], None], slow: bool = False) -> Check:
        """A check of this spec with id ``<name>::<suffix>``."""
        return Check(self.name, f"{self.name}::{suffix}", fn, slow)

    def pipeline(self, variant: str) -> Any:
        return pipeline(self.entry, variant, self.target)


Family = Callable[[SpecUnderCheck], "list[Check]"]
#: the registered check families, in the order their checks are listed and run
FAMILIES: list[Family] = []


def family(fn: Family) -> Family:
    """Register a check family (a function ``SpecUnderCheck -> list[Check]``)."""
    FAMILIES.append(fn)
    return fn


# ----------------------------------------------------------------------------- shared state
#: check id -> (spec, metric, value, spec file, device) of the last metric re-measurement
measured: dict[str, tuple[Spec, Any, float, str, str]] = {}

#: (spec file, device, dtype) -> the Context those checks (and invariants taking ctx) share
_contexts: dict[tuple[str, str, str | None], Any] = {}


def context_for(entry: Entry, target: Target = Target()) -> Any:
    """The :class:`~registry.context.Context` the checks of ``entry`` share on ``target`` (one per spec file and
    target): its pipelines are built once, and invariants taking ``ctx`` get it (variant: the first runnable CPU one)."""
    from ..context import Context

    assert entry.spec is not None
    key = (str(entry.path), target.device, target.dtype)
    ctx = _contexts.get(key)
    if ctx is None or ctx.spec is not entry.spec:
        runnable = runnable_cpu_variants(entry.spec)
        ctx = Context(entry.spec, entry.path, variant=runnable[0] if runnable else None, device=target.device, dtype=target.dtype)
        _contexts[key] = ctx
    return ctx


def pipeline(entry: Entry, variant: str, target: Target = Target()) -> Any:
    """The pipeline of ``variant`` the checks of ``entry`` share (built once by their context, which is renewed when
    the spec at that path changes, so an edited spec is never checked against the pipeline of its old text)."""
    return context_for(entry, target).pipeline(variant)


def cpu_variants(spec: Spec) -> list[str]:
    return [v for v in spec.variants if spec.hardware[v].accelerator in ("cpu", "any")]


def runnable_cpu_variants(spec: Spec) -> list[str]:
    return [v for v in cpu_variants(spec) if spec.hardware[v].status == "runnable"]


def procedure_variant(spec: Spec, pname: str) -> tuple[str | None, str]:
    """The first runnable CPU variant with every role ``pname`` declares, or ``(None, why)``."""
    from ..build import missing_roles

    runnable = runnable_cpu_variants(spec)
    for v in runnable:
        if not missing_roles(spec, pname, v, {r: None for r in spec.roles_of(v)}):
            return v, ""
    if not runnable:
        return None, "no runnable CPU variant"
    return None, f"no runnable CPU variant has the roles {pname} needs ({', '.join(spec.procedure(pname)[1].roles or [])})"


# ----------------------------------------------------------------------------- comparisons
def assert_same(a: Any, b: Any, *, exact: bool = True, path: str = "result") -> None:
    """Recursive equality for results: bitwise when ``exact``, else allclose(1e-5, 1e-6)."""
    import numpy as np

    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None  # type: ignore[assignment]
    if torch is not None and isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), f"{path}: tensor vs {type(b).__name__}"
        assert a.shape == b.shape, f"{path}: shapes {tuple(a.shape)} vs {tuple(b.shape)}"
        assert a.dtype == b.dtype, f"{path}: dtypes {a.dtype} vs {b.dtype}"
        if exact or not a.is_floating_point():
            assert torch.equal(a, b), f"{path}: tensors differ (max |diff| {(a.double() - b.double()).abs().max().item():.3g})"
        else:
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), f"{path}: max |diff| {(a - b).abs().max().item():.3g}"
        return
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.shape == b.shape, f"{path}: array shape/type differs"
        ok = np.array_equal(a, b, equal_nan=True) if exact or a.dtype.kind not in "fc" else np.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True)
        assert ok, f"{path}: arrays differ"
        return
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            assert_same(a[k], b[k], exact=exact, path=f"{path}[{k!r}]")
        return
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: sequences differ in type or length"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, exact=exact, path=f"{path}[{i}]")
        return
    if isinstance(a, float) and not exact:
        assert abs(a - b) <= 1e-6 + 1e-5 * abs(b), f"{path}: {a} vs {b}"
        return
    if hasattr(a, "__dataclass_fields__") or (hasattr(a, "__dict__") and not callable(a) and type(a).__module__ != "builtins"):
        assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
        assert_same(vars(a), vars(b), exact=exact, path=path)
        return
    assert a == b, f"{path}: {a!r} != {b!r}"


def snapshot_models(models: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Copies of every built role's tensors (``state_dict``), to detect in-place changes."""
    out: dict[str, dict[str, Any]] = {}
    for role, obj in models.items():
        state = getattr(obj, "state_dict", None)
        if callable(state):
            try:
                out[role] = {k: v.detach().clone() for k, v in state().items() if hasattr(v, "detach")}
            except TypeError:  # a state_dict() that needs arguments: not a torch module
                continue
    return out


def assert_models_unchanged(before: dict[str, dict[str, Any]], models: dict[str, Any], what: str) -> None:
    """The cached roles are bit-identical to ``before`` (a procedure trained them in place otherwise)."""
    import torch

    after = snapshot_models(models)
    for role, state in before.items():
        for k, v in state.items():
            w = after.get(role, {}).get(k)
            if w is None or w.shape != v.shape or w.dtype != v.dtype or not torch.equal(w, v):
                raise AssertionError(
                    f"{what} changed the cached weights of role {role!r} ({k}) in place; every later pipeline of "
                    f"the process would see them: set mutates_models = True or use registry.contract.private_copies"
                )


def spec_source(entry: Entry, role: str, variant: str) -> Any:
    assert entry.spec is not None
    return entry.spec.models[role].variants.get(variant)


def has_submodule(package: str, sub: str) -> bool:
    try:
        return importlib.util.find_spec(f"{package}.{sub}") is not None
    except ModuleNotFoundError:
        return False
