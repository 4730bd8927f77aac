"""What every source kind shares: the base class a kind subclasses, the registry of kinds, the request objects the
engine hands a kind (to build, lint, check, save), and the model-placing helpers each kind's build uses.

A source kind is one pydantic model with a ``source: Literal[...]`` tag (its schema fragment) whose methods say how
that kind is built, what it would fetch offline, what ``zoo validate`` lints, how conformance checks its loading
path and how a saved pipeline writes it. The engine calls these methods and never branches on the kind
(``tests/test_source_kinds.py`` adds a kind in a few lines). The requests carry the engine's services as callables,
so a kind imports nothing above this layer (docs/architecture.md).
"""
from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..errors import BuildError, Location
from ..schema import Transformable


class SourceKind(Transformable):
    """Base of every ``models.<role>.variants.<variant>`` source. Subclasses declare ``source: Literal["name", ...]``
    and override :meth:`build`; the other hooks have safe defaults."""

    #: fields whose values are paths relative to the spec file that wrote them (an ``extends`` parent's folder when
    #: inherited): ``weights``, a local ``id``, ...
    path_fields: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def tags(cls) -> tuple[str, ...]:
        """The ``source:`` values this kind answers to (the ``Literal`` of its ``source`` field)."""
        ann = cls.model_fields["source"].annotation
        return tuple(typing.get_args(ann))

    def build(self, req: "BuildRequest") -> Any:
        """The built model (placed on ``req.device``), the same path for shipped and tiny checkpoints."""
        raise NotImplementedError(f"source kind {type(self).__name__} has no build")

    def derived_from(self) -> str | None:
        """The role of the same spec and variant this role is derived from (built after it), or None."""
        return None

    def derive(self, parent: Any, req: "BuildRequest") -> Any:
        """This role built from its parent's built model (kinds whose :meth:`derived_from` or :meth:`foreign` is set)."""
        raise NotImplementedError(f"source kind {type(self).__name__} derives from no role")

    def foreign(self) -> tuple[str, str, str | None] | None:
        """``(spec, role, variant)`` of another catalogued spec whose declaration builds this role, or None."""
        return None

    def missing_offline(self, spec_dir: Path) -> str | None:
        """What building this source would fetch that is not on this machine (None: everything is local)."""
        return None

    def local_files(self) -> dict[str, tuple[str, str | None]]:
        """``field -> (relative path, sha256)`` of the local files this source reads (``zoo validate`` checks they
        exist inside the spec's tree and hash as declared)."""
        return {}

    def lint(self, req: "LintRequest") -> None:
        """Static checks beyond the schema (``zoo validate``): report problems with ``req.problem(field, message)``."""

    def loading_path_check(self, req: "LoadingPathRequest") -> Callable[[], None] | None:
        """The conformance check that this source's *real* loading path works offline on a tiny checkpoint (raise
        :class:`registry.errors.Skipped` with the reason when it cannot run), or None when the build check covers it."""
        return None

    def tiny_checkpoint(self, workdir: Path) -> "SourceKind":
        """A tiny local checkpoint of the same model type saved under ``workdir``, and this source reading it (the
        conformance loading-path check); kinds without one refuse."""
        raise AssertionError(f"source kind {self.source!r} makes no tiny checkpoint")

    def with_local_weights(self, path: str, sha256: str) -> "SourceKind | None":
        """This source reading the given local safetensors file instead of its own weights (a recipe's output
        reloaded by conformance), or None when the kind takes no weights file."""
        return None

    def saved(self, req: "SaveRequest") -> dict[str, Any]:
        """The source a saved pipeline's spec holds for this role, writing its files through ``req``."""
        if req.replacement is not None:
            from ..errors import ParamError

            raise ParamError(f"role {req.role!r} ({self.source}) cannot be replaced in a saved pipeline", Location(field="replace"))
        return self.model_dump(mode="json", exclude_defaults=True)


@dataclass
class BuildRequest:
    """What the builder hands :meth:`SourceKind.build`: where paths resolve, the placement, the caller's consent and
    the engine's post-load steps (``transform``: the source's declared transform, located and validated)."""

    spec_dir: Path
    device: str
    dtype: Any  # a torch.dtype or None
    loc: Location
    transform: Callable[[Any], Any]
    trust_remote_code: bool = False
    multi_gpu: bool = False
    allow_outside_paths: bool | None = None
    hub_file_at: Path | None = None

    sub: Callable[[str], Location] = field(default=lambda name: Location(field=name))  # locates one of its fields


@dataclass
class LintRequest:
    """What ``zoo validate`` hands :meth:`SourceKind.lint` for one source: where it is, and the engine's lint
    services (``target(value, field, kind)`` checks a code target and returns its static description
    (:class:`registry.static.Info`, from the package's params module; None when there is none),
    ``params(entry, values, field)`` validates values with its model as the build will, ``check_tiny(source, field,
    entry)`` a zoo source's ``tiny.config`` merged over its ``config``, ``library_has(library, name)`` says whether a
    library class/model exists (None: unknown), ``foreign_problem(source, variant)`` why a foreign role cannot build)."""

    field: str
    role: str
    variant: str
    problem: Callable[[str, str], None]
    target: Callable[[Any, str, str], Any]
    params: Callable[[Any, Mapping[str, Any], str], None]
    library_has: Callable[[str, str], Any]
    foreign_problem: Callable[[Any, str], str | None]
    check_tiny: Callable[..., None]
    resolve: bool = False


@dataclass
class LoadingPathRequest:
    """What conformance hands :meth:`SourceKind.loading_path_check`: the spec folder, the source's location, the
    variant's refusal (None when runnable), the caller's remote-code-stub consent, and the builder
    (``build_model(source, **kwargs)``) the check goes through; ``locate(field)`` locates a
    field of the spec file."""

    role: str
    variant: str
    field: str
    spec_dir: Path
    loc: Location
    declared_only: str | None
    allow_remote_code_stub: bool
    build_model: Callable[..., Any]
    locate: Callable[[str], Location]


@dataclass
class SaveRequest:
    """What ``pipe.save_pretrained`` hands :meth:`SourceKind.saved` for one role: its built object, the user's
    replacement (or None), the kept ``transform`` fields, and the writers (``write_state()`` saves the
    replacement's or the object's tensors and returns the weights fields ``{weights, sha256, dtype?}``, or ``{}`` when
    it holds no tensors; ``folder`` for a library's own
    ``save_pretrained``; ``float_dtype(obj)`` its one floating dtype)."""

    role: str
    obj: Any
    replacement: Any
    keep: dict[str, Any]
    folder: Path
    write_state: Callable[[], dict[str, Any]]
    float_dtype: Callable[[Any], str | None]


# ----------------------------------------------------------------------------- the registry of kinds
_KINDS: dict[str, type[SourceKind]] = {}
_listeners: list[Callable[[], None]] = []


def register(kind: type[SourceKind]) -> type[SourceKind]:
    """Register a source kind (usable as a class decorator): its ``source:`` tags become valid in every spec
    validated from now on. A tag already taken by another kind is an error."""
    if not (isinstance(kind, type) and issubclass(kind, SourceKind)):
        raise TypeError(f"{kind!r} is not a SourceKind subclass")
    tags = kind.tags()
    if not tags:
        raise TypeError(f"{kind.__name__}: declare `source: Literal[...]` with its tag(s)")
    for tag in tags:
        if _KINDS.get(tag, kind) is not kind:
            raise ValueError(f"source kind {tag!r} is already registered by {_KINDS[tag].__name__}")
    for tag in tags:
        _KINDS[tag] = kind
    for listener in _listeners:
        listener()
    return kind


def unregister(kind: type[SourceKind]) -> None:
    """Remove a kind registered with :func:`register` (tests)."""
    for tag in kind.tags():
        if _KINDS.get(tag) is kind:
            del _KINDS[tag]
    for listener in _listeners:
        listener()


def kinds() -> tuple[type[SourceKind], ...]:
    """The registered kinds, in registration order, each once."""
    return tuple(dict.fromkeys(_KINDS.values()))


#: The entry-point group an installed package names its source kinds in (``name = "pkg.module:MyKind"``).
ENTRY_POINT_GROUP = "zoo.sources"
_entry_points_loaded = False


def ensure_tags(tags: set[str]) -> None:
    """Make sure every tag in ``tags`` has a kind: when one has none, the kinds installed packages declare under
    the ``zoo.sources`` entry-point group are imported and registered (once per process; an installed package is
    the user's consent, as for ``zoo.plugins``; a spec never names code to import). Unknown tags that remain are
    left to the schema's located error."""
    global _entry_points_loaded
    if _entry_points_loaded or tags <= set(_KINDS):
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            kind = ep.load()
            register(kind)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is one warning, never a crash of every spec
            import warnings

            warnings.warn(f"source kind entry point {ep.name} = {ep.value} not registered: {type(exc).__name__}: {exc}",
                          stacklevel=2)


def on_change(listener: Callable[[], None]) -> None:
    """Call ``listener()`` whenever the set of kinds changes (the spec schema rebuilds its source union)."""
    _listeners.append(listener)


# ----------------------------------------------------------------------------- helpers every kind's build uses
def torch_dtype(name: str | None) -> Any:
    if name is None:
        return None
    import torch

    return getattr(torch, name)


def load_state_strict(module: Any, state: Mapping[str, Any], name: str, loc: Location, allow_nonfinite: bool = False) -> None:
    """Load a state dict strictly: same tensor names, and for each the model's exact shape and
    dtype (an fp16/int8 file never loads silently into an fp32 model), all values finite unless
    the spec sets ``allow_nonfinite: true``."""
    import torch

    if not hasattr(module, "load_state_dict") or not hasattr(module, "state_dict"):
        raise BuildError(f"factory returned {type(module).__name__}, which cannot take weights", loc)
    expected = module.state_dict()
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        parts = ([f"missing {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}"] if missing else []) + (
            [f"unexpected {', '.join(unexpected[:3])}{' ...' if len(unexpected) > 3 else ''}"] if unexpected else [])
        raise BuildError(f"weights {name} do not match the model: {'; '.join(parts)}", loc)
    for key, want in expected.items():
        got = state[key]
        if tuple(got.shape) != tuple(want.shape):
            raise BuildError(f"weights {name}: tensor {key} has shape {tuple(got.shape)}, the model expects {tuple(want.shape)}", loc)
        if got.dtype != want.dtype:
            raise BuildError(f"weights {name}: tensor {key} is {str(got.dtype).removeprefix('torch.')}, the model expects {str(want.dtype).removeprefix('torch.')}", loc)
        if not allow_nonfinite and (got.is_floating_point() or got.is_complex()) and not bool(torch.isfinite(got).all()):
            raise BuildError(f"weights {name}: tensor {key} has NaN or inf values (set allow_nonfinite: true if intended)", loc)
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0:2]
        raise BuildError(f"weights {name} do not match the model: {' '.join(first)}", loc) from None


def in_declared_dtype(module: Any, state: Mapping[str, Any], declared: str | None) -> Any:
    """The model in the source's declared ``dtype`` when the file holds exactly that dtype and the factory built
    another one (a saved pipeline's weights, or a half-precision release): the file still has to match the model
    tensor for tensor (:func:`load_state_strict`); nothing is converted silently. Otherwise ``module`` unchanged."""
    if declared is None or not hasattr(module, "to"):
        return module
    want = torch_dtype(declared)
    floats = [v.dtype for v in state.values() if hasattr(v, "is_floating_point") and v.is_floating_point()]
    have = [v.dtype for v in module.state_dict().values() if v.is_floating_point()]
    if floats and all(d == want for d in floats) and any(d != want for d in have):
        return module.to(dtype=want)
    return module


def is_model_class(cls: type) -> bool:
    """Whether a transformers/diffusers class loads weights (vs a tokenizer, processor or scheduler)."""
    name = cls.__name__
    return not any(t in name for t in ("Tokenizer", "Processor", "FeatureExtractor", "Scheduler"))


def place(obj: Any, device: str, dtype: Any) -> Any:
    if hasattr(obj, "to") and hasattr(obj, "parameters"):
        obj = obj.to(device=device) if dtype is None else obj.to(device=device, dtype=dtype)
        if hasattr(obj, "eval"):
            obj.eval()
    return obj
