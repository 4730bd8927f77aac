"""Size limits, two families in one module (no name is shared between them; nothing here imports torch).

**Spec-side caps.** Named size caps: the one mechanism that bounds every size a spec (or a caller) can set.

A spec may pass numbers to code in many places: a factory's ``config``, a procedure's ``params``,
a metric's ``check_params``, a transform's ``transform_config``, timm ``kwargs``, a tiny checkpoint's
``tiny.config``, an adapter's ``adapter_config.json``. Where the receiving params model declares a
bound (``Field(le=...)``, ``max_length=...``) that bound rules; everywhere else a value is held to the
caps below, and a value over one is one line naming the field, the value and the cap::

    models.lm.variants.full.tiny.config.hidden_size: 1000000 is over the limit TINY_CONFIG_INT = 65536 (registry.limits)

Use from any code that takes sizes from untrusted input::

    from registry import limits
    limits.TINY_CONFIG_INT.check(value, "tiny.config.hidden_size")     # one value against one cap
    limits.check_tree(cfg, "transform_config")                        # every int / list / string / mapping inside
    limits.enforce_default_caps(Params, values, "check_params")        # only fields Params leaves unbounded

:class:`SizeError` is a ``ValueError`` (pydantic validators turn it into a located field error; the
engine re-raises it as a :class:`~registry.errors.ParamError`). Nothing here imports torch.

**Per-call limits.** Per-call size limits: how large a batch, a sample count, a frame count, a length or a width one
call of a procedure may ask for, the same for Python calls and ``zoo run`` options.

A procedure's ``__call__`` (and its ``CliInputs``) marks every size it accepts with a limit
*kind* through the ready-made types below, e.g. ``batch_size: Rows = 4`` or
``num_frames: Frames | None = None``; a sequence or tensor input carries a :class:`Bound` that
measures it (``prompts: Annotated[list[str], Bound("rows")]`` counts the prompts). A value above
the kind's limit is one :class:`~registry.errors.ParamError` naming the input, the limit and how
to raise it, before the call allocates anything.

The limits are safety nets against a typo (``batch_size=10**9``), not cost models: the defaults
(:data:`LIMITS`) are far above what the methods' toys need. Raise one deliberately with its
environment variable (``ZOO_MAX_ROWS=1000000 zoo run ...``) or, in Python, for a block::

    with registry.limits.raised(rows=10**6):
        pipe(seed=0, batch_size=500_000)

It bounds what one *call* asks for; the spec-side caps above bound what a *spec* sets.
"""
from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import PydanticCustomError, core_schema

from .errors import Location, ParamError


class SizeError(ValueError):
    """A value over a named cap; ``str()`` is ``"<where>: <value> is over the limit <NAME> = <cap> (registry.limits)"``,
    ``.path`` the dotted field (``<where>``) and ``.detail`` the rest, for callers that locate the field themselves."""

    def __init__(self, path: str, detail: str):
        self.path, self.detail = path, detail
        super().__init__(f"{path}: {detail}" if path else detail)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


@dataclass(frozen=True)
class Cap:
    """A named upper bound: ``name`` (the constant's name, printed in errors), ``value``, and ``what`` it bounds."""

    name: str
    value: int
    what: str

    def check(self, n: Any, where: str, unit: str = "") -> None:
        """Raise :class:`SizeError` when the number ``n`` exceeds the cap (``unit`` is added after the value, e.g. " items")."""
        if isinstance(n, bool) or not isinstance(n, (int, float)):
            return
        if isinstance(n, float) and not math.isfinite(n):
            raise SizeError(where, f"{n!r} is not a finite number")
        if abs(n) > self.value:
            shown = f"{n:,}" if isinstance(n, int) else f"{n:g}"
            raise SizeError(where, f"{shown}{unit} is over the limit {self.name} = {self.value:,} (registry.limits)")


# ----------------------------------------------------------------------------- the caps
#: An integer a spec passes to code whose params model declares no upper bound for it.
SPEC_INT = Cap("SPEC_INT", 1_000_000, "an integer without a declared bound (factory config, params, check_params, transform_config)")
#: Items of a list a spec passes where no ``max_length`` is declared.
SPEC_LIST = Cap("SPEC_LIST", 4096, "items of a list without a declared max_length")
#: Characters of a string a spec passes where no ``max_length`` is declared.
SPEC_STR = Cap("SPEC_STR", 4096, "characters of a string without a declared max_length")
#: Keys and items, at every depth, of one free-form mapping (a config, ``tiny.config``, an adapter config).
SPEC_ENTRIES = Cap("SPEC_ENTRIES", 10_000, "keys and items at every depth of one free-form mapping")
#: Any integer of a tiny checkpoint's ``tiny.config`` (widths, vocabulary, positions, layers).
TINY_CONFIG_INT = Cap("TINY_CONFIG_INT", 65_536, "an integer of tiny.config")
#: Parameters of the tiny checkpoint ``zoo check`` builds from ``tiny.config`` (counted on the meta device first).
TINY_PARAMS = Cap("TINY_PARAMS", 20_000_000, "parameters of a tiny checkpoint")
#: timm ``num_classes``.
TIMM_NUM_CLASSES = Cap("TIMM_NUM_CLASSES", 100_000, "timm kwargs.num_classes")
#: timm ``in_chans``.
TIMM_IN_CHANS = Cap("TIMM_IN_CHANS", 1024, "timm kwargs.in_chans")
#: timm ``img_size`` (each side).
TIMM_IMG_SIZE = Cap("TIMM_IMG_SIZE", 4096, "timm kwargs.img_size (each side)")
#: LoRA rank ``r`` (and every entry of ``rank_pattern``) of an adapter config.
ADAPTER_RANK = Cap("ADAPTER_RANK", 4096, "an adapter config's rank r")
#: Bytes of an adapter config file (``adapter_config.json``) or a LoRA file's metadata header.
ADAPTER_CONFIG_BYTES = Cap("ADAPTER_CONFIG_BYTES", 1 << 20, "bytes of an adapter config")
#: Links in an ``extends:`` chain (a spec, its parent, its parent's parent, ...).
EXTENDS_CHAIN = Cap("EXTENDS_CHAIN", 16, "files in an extends chain")
#: Entries (files and folders) of a local model or adapter folder whose links are checked.
FOLDER_ENTRIES = Cap("FOLDER_ENTRIES", 10_000, "entries of a local model or adapter folder")

ALL: tuple[Cap, ...] = (SPEC_INT, SPEC_LIST, SPEC_STR, SPEC_ENTRIES, TINY_CONFIG_INT, TINY_PARAMS, TIMM_NUM_CLASSES,
                        TIMM_IN_CHANS, TIMM_IMG_SIZE, ADAPTER_RANK, ADAPTER_CONFIG_BYTES, EXTENDS_CHAIN, FOLDER_ENTRIES)


# ----------------------------------------------------------------------------- trees of values
def check_tree(value: Any, where: str, *, ints: Cap = SPEC_INT, lists: Cap = SPEC_LIST, strings: Cap = SPEC_STR,
               entries: Cap = SPEC_ENTRIES) -> None:
    """Every number in ``value`` (at any depth of mappings and lists) within ``ints`` (and finite), every list
    within ``lists`` items, every string within ``strings`` characters, and at most ``entries`` keys + items
    in all. Iterative (no recursion limit); the error names the dotted path below ``where``."""
    stack: list[tuple[str, Any]] = [(where, value)]
    seen = 0
    while stack:
        path, v = stack.pop()
        if isinstance(v, Mapping):
            seen += len(v)
            entries.check(seen, where, " entries")
            for k, x in v.items():
                strings.check(len(str(k)), _join(path, str(k)[:60]), " characters (a key)")
                stack.append((_join(path, k), x))
        elif isinstance(v, (list, tuple, set, frozenset)):
            lists.check(len(v), path, " items")
            seen += len(v)
            entries.check(seen, where, " entries")
            stack.extend((_join(path, i), x) for i, x in enumerate(v))
        elif isinstance(v, (str, bytes)):
            strings.check(len(v), path, " characters")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            ints.check(v, path) if isinstance(v, int) else _finite(v, path)


def _finite(x: float, where: str) -> None:
    if not math.isfinite(x):
        raise SizeError(where, f"{x!r} is not a finite number")


def declared_bound(info: Any) -> bool:
    """Whether a pydantic field (``FieldInfo``) declares an upper bound of its own: ``le``/``lt`` or
    ``max_length``, on the field or inside an ``Annotated`` type, for every member of a union (``None``
    aside); a ``Literal`` or a bool is bounded too."""
    import types
    import typing

    import annotated_types
    from pydantic.fields import FieldInfo

    def bounded(tp: Any, meta: list[Any], depth: int = 0) -> bool:
        if any(isinstance(m, (annotated_types.Le, annotated_types.Lt, annotated_types.MaxLen)) for m in meta):
            return True
        origin = typing.get_origin(tp)
        if origin is typing.Annotated and depth < 10:
            extra = [m2 for m in tp.__metadata__ for m2 in (m.metadata if isinstance(m, FieldInfo) else [m])]
            return bounded(typing.get_args(tp)[0], [*meta, *extra], depth + 1)
        if origin in (typing.Union, types.UnionType) and depth < 10:
            members = [a for a in typing.get_args(tp) if a is not type(None)]
            return bool(members) and all(bounded(a, meta, depth + 1) for a in members)
        return tp is bool or origin is typing.Literal

    return bounded(getattr(info, "annotation", None), list(getattr(info, "metadata", [])))


def enforce_default_caps(model: Any, values: Mapping[str, Any], where: str) -> None:
    """:func:`check_tree` on each value of ``values`` whose field in the pydantic ``model`` declares no upper
    bound (see :func:`declared_bound`); keys the model does not know are left to the model's own validation.
    The error's path is ``<where>.<key>...``."""
    fields = getattr(model, "model_fields", {})
    for key, value in values.items():
        info = fields.get(key)
        if info is not None and declared_bound(info):
            continue
        check_tree(value, _join(where, key))


# --- per-call limits (what one call of a procedure may ask for) ---

@dataclass(frozen=True)
class Limit:
    """One kind of size: its default upper bound, the environment variable that replaces it, and
    what it counts (for messages and ``--help``)."""

    kind: str
    default: int
    env: str
    unit: str
    what: str


#: every limit kind; ``ZOO_MAX_<KIND>`` replaces the default for the process.
LIMITS: dict[str, Limit] = {
    lim.kind: lim
    for lim in (
        Limit("rows", 200_000, "ZOO_MAX_ROWS", "rows", "batch sizes, sample counts, prompts, states, labels per call"),
        Limit("steps", 1_000_000, "ZOO_MAX_STEPS", "steps", "training / optimisation steps and epochs per call"),
        Limit("frames", 10_000, "ZOO_MAX_FRAMES", "frames", "video frames per call"),
        Limit("length", 100_000, "ZOO_MAX_LENGTH", "tokens or characters", "the longest sequence or prompt per call"),
        Limit("width", 100_000, "ZOO_MAX_WIDTH", "units", "features, topics, words per topic per call"),
    )
}

_RAISED: ContextVar[Mapping[str, int]] = ContextVar("zoo_raised_limits", default={})


def _env_limit(lim: Limit) -> int | None:
    text = os.environ.get(lim.env, "").strip()
    if not text:
        return None
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise ParamError(f"expected a positive integer, got {text!r}", Location(field=lim.env))
    return value


def limit(kind: str) -> int:
    """The current upper bound of ``kind``: a :func:`raised` block's value, else ``ZOO_MAX_<KIND>``,
    else the default. An unknown kind is a ``KeyError`` (a programming error, not a user's)."""
    lim = LIMITS[kind]
    raised_now = _RAISED.get()
    if kind in raised_now:
        return raised_now[kind]
    env = _env_limit(lim)
    return lim.default if env is None else env


def how_to_raise(kind: str) -> str:
    """The sentence every limit error ends with."""
    return f"raise it deliberately with {LIMITS[kind].env}=N or registry.limits.raised({kind}=N)"


@contextlib.contextmanager
def raised(**limits: int) -> Iterator[None]:
    """Within the block (this thread / task only), use these limits instead: ``raised(rows=10**6)``."""
    for kind, value in limits.items():
        if kind not in LIMITS:
            raise TypeError(f"unknown limit kind {kind!r}; kinds: {', '.join(LIMITS)}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TypeError(f"limit {kind} must be a positive int, got {value!r}")
    token = _RAISED.set({**_RAISED.get(), **limits})
    try:
        yield
    finally:
        _RAISED.reset(token)


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ in ("bool_", "bool")


def _dims(value: Any) -> tuple[int, ...] | None:
    """The shape of a tensor / array (anything with an integer ``shape``), else None."""
    shape = getattr(value, "shape", None)
    if shape is None or isinstance(value, (type, str, bytes)):
        return None
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None


def _count(value: Any) -> int | None:
    """How many rows ``value`` is: an int is itself; a string is one row; a tensor / array its first
    dimension (a 0-d one is one row); any other sized object its length."""
    if _is_bool(value):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (str, bytes)):
        return 1
    if (dims := _dims(value)) is not None:
        return dims[0] if dims else 1
    if getattr(value, "shape", None) is not None:
        return None
    try:
        return len(value)
    except TypeError:
        return None


def _longest(value: Any, depth: int = 0) -> int | None:
    """The longest sequence in ``value``: an int is itself; a string its length; a tensor / array its
    last dimension; a list of those the largest."""
    if _is_bool(value) or depth > 4:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, (str, bytes)):
        return len(value)
    if (dims := _dims(value)) is not None:
        return dims[-1] if dims else 1
    if getattr(value, "shape", None) is not None or isinstance(value, Mapping):
        return None
    try:
        items = list(value)
    except TypeError:
        return None
    if items and all(isinstance(x, int) and not _is_bool(x) for x in items):
        return len(items)  # a list of token ids is one sequence
    sizes = [s for s in (_longest(x, depth + 1) for x in items) if s is not None]
    return max(sizes, default=0)


_MEASURES = {"count": _count, "longest": _longest}


class Bound:
    """``Annotated`` metadata: the value (an int, or what ``measure`` counts in a sequence, string or
    tensor) may not exceed the current limit of ``kind``.

    ``measure="count"`` (default): an int's value, a sequence's length, a tensor's first dimension,
    a string as one row. ``measure="longest"``: the longest string / token sequence, a tensor's last
    dimension. ``axis=k``: a tensor's dimension ``k`` (other values are not measured).
    The JSON Schema gains ``"x-zoo-limit": kind`` (and ``maximum`` for an int), so ``zoo run``
    checks options and ``--help`` prints the bound without importing the method."""

    def __init__(self, kind: str, measure: str = "count", axis: int | None = None):
        if kind not in LIMITS:
            raise TypeError(f"unknown limit kind {kind!r}; kinds: {', '.join(LIMITS)}")
        if measure not in _MEASURES:
            raise TypeError(f"unknown measure {measure!r}; measures: {', '.join(_MEASURES)}")
        self.kind, self.measure, self.axis = kind, measure, axis

    def __repr__(self) -> str:
        extra = f", axis={self.axis}" if self.axis is not None else (f", {self.measure!r}" if self.measure != "count" else "")
        return f"Bound({self.kind!r}{extra})"

    def size(self, value: Any) -> int | None:
        """What this bound measures in ``value`` (None: nothing to measure)."""
        if self.axis is not None:
            dims = _dims(value)
            if dims is None:
                return _count(value) if isinstance(value, int) and not _is_bool(value) else None
            try:
                return dims[self.axis]
            except IndexError:
                return None
        return _MEASURES[self.measure](value)

    def check(self, value: Any) -> Any:
        size = self.size(value)
        top = limit(self.kind)
        if size is not None and size > top:
            lim = LIMITS[self.kind]
            what = "" if isinstance(value, int) else f"{self._what()} "
            raise PydanticCustomError(
                "zoo_limit", "{what}{size} is above the per-call limit of {top} {unit} ({how})",
                {"what": what, "size": size, "top": top, "unit": lim.unit, "how": how_to_raise(self.kind)})
        return value

    def _what(self) -> str:
        if self.axis is not None:
            return f"dimension {self.axis}:"
        return "length" if self.measure == "longest" else "count"

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        out = handler(schema)
        out = handler.resolve_ref_schema(out) if "$ref" in out else out
        out["x-zoo-limit"] = self.kind
        if self.measure != "count" or self.axis is not None:
            out["x-zoo-measure"] = "longest" if self.axis is None else f"axis {self.axis}"
        elif out.get("type") == "integer":
            out["maximum"] = LIMITS[self.kind].default
        elif out.get("type") == "array":
            out["maxItems"] = LIMITS[self.kind].default
        return out


def bound_of(metadata: Any) -> Bound | None:
    """The :class:`Bound` among ``Annotated`` metadata, if any."""
    return next((m for m in metadata if isinstance(m, Bound)), None)


#: a count of rows per call: ``batch_size: Rows = 4``, ``num_samples: Rows | None = None``
Rows = Annotated[int, Field(ge=1), Bound("rows")]
#: optimisation steps or epochs per call
Steps = Annotated[int, Field(ge=1), Bound("steps")]
#: video frames per call
Frames = Annotated[int, Field(ge=1), Bound("frames")]
#: a sequence length (tokens, characters) per call
Length = Annotated[int, Field(ge=1), Bound("length")]
#: a width per call: features, topics, words per topic
Width = Annotated[int, Field(ge=1), Bound("width")]
#: a batch of anything with rows (a tensor, an array, a list): at most ``rows`` rows
Batch = Annotated[Any, Bound("rows")]
#: a batch of sequences (a string or a list of strings, token-id lists, an ``(B, L)`` tensor): at most
#: ``rows`` rows, none longer than ``length``
Sequences = Annotated[Any, Bound("rows"), Bound("length", "longest")]
#: a procedure's ``seed``: one int, or (a ``per_row_seeds`` procedure, ``zoo sample``) one int per row, at most
#: ``rows`` of them; each seed's range ``[0, 2**63 - 1]`` is the engine's (:func:`registry.build.check_seed`)
Seeds = int | Annotated[Sequence[int], Bound("rows")]


def describe() -> list[tuple[str, int, str, str]]:
    """``(kind, current limit, env var, what)`` for every kind (``--help`` and the docs)."""
    return [(k, limit(k), lim.env, lim.what) for k, lim in LIMITS.items()]


#: the largest seed every RNG accepts (torch.Generator.manual_seed takes a signed 64-bit int)
SEED_MAX = 2**63 - 1


def check_seed(seed: Any, where: str = "seed") -> int:
    """A seed every RNG accepts: an int in ``[0, 2**63 - 1]``, else a one-line ParamError."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise ParamError(f"expected an integer in [0, 2**63 - 1], got {seed!r}", Location(field=where))
    return seed

