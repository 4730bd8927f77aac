"""Validation of what a caller or a spec hands a procedure or a factory: strict scalar types, call
inputs checked against ``__call__``'s annotations, and the rule that every size is bounded.

* :func:`strict_problem` -- pydantic's lax mode turns ``True`` into ``1`` for an ``int`` field,
  ``1`` into ``True`` for a ``bool`` and ``"10"`` into ``10``; a spec or a Python caller writing
  ``num_inference_steps: true`` then silently runs one step. ``ProcedureParams``,
  ``FactoryParams`` and call inputs refuse those (only ``CliInputs``, which receive the command
  line's strings, parse them).
* :func:`check_call` -- a procedure's ``__call__`` keyword inputs validated by a pydantic model
  derived from its annotations (``batch_size: Rows = 4`` is ``ge=1`` and the ``rows`` limit of
  :mod:`registry.limits`), before the method runs. The values are only checked; the method
  receives exactly what the caller passed.
* :func:`unbounded` -- the conformance rule: every int and every container (list, tuple, tensor,
  ``Any``) a procedure accepts, in ``__call__``, ``Params`` or ``CliInputs``, has an upper bound
  (a :class:`~registry.limits.Bound` or ``Field(le=/lt=/max_length=)``), so a new method cannot
  forget one.
"""
from __future__ import annotations

import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .limits import Bound, bound_of

_NUMBER = {"int", "float"}


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def _strip(annotation: Any) -> tuple[Any, list[Any]]:
    """``(type, metadata)`` of an ``Annotated`` type (nested ones flattened)."""
    meta: list[Any] = []
    while typing.get_origin(annotation) is typing.Annotated:
        meta.extend(annotation.__metadata__)
        annotation = annotation.__origin__
    return annotation, meta


def _members(annotation: Any) -> list[Any]:
    """The members of a union (``X | None`` included), else ``[annotation]``."""
    annotation, _ = _strip(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        out: list[Any] = []
        for a in typing.get_args(annotation):
            out.extend(_members(a))
        return out
    return [annotation]


def _is_container(t: Any) -> bool:
    origin = typing.get_origin(_strip(t)[0])
    return origin is not None and origin is not typing.Literal


def scalar_kinds(annotation: Any, skip_containers: bool = False) -> set[str] | None:
    """The kinds of the union members of ``annotation``: ``bool``, ``int``, ``float``, ``none``, ``str``
    (a string or a literal of strings); None when a member may accept anything else (a container,
    a model, ``Any``, a class): then strictness does not apply to scalars. ``skip_containers``: leave
    list / tuple / dict members out (what a scalar value is checked against)."""
    kinds: set[str] = set()
    for m in _members(annotation):
        if skip_containers and _is_container(m):
            continue
        m, _ = _strip(m)
        if m is bool:
            kinds.add("bool")
        elif m is int:
            kinds.add("int")
        elif m is float:
            kinds.add("float")
        elif m is type(None):
            kinds.add("none")
        elif m is str:
            kinds.add("str")
        elif typing.get_origin(m) is typing.Literal:
            for v in typing.get_args(m):
                if _is_bool(v):
                    kinds.add("bool")
                elif isinstance(v, (int, float)):
                    kinds.add("int" if isinstance(v, int) else "float")
                elif v is None:
                    kinds.add("none")
                elif isinstance(v, str):
                    kinds.add("str")
                else:
                    return None
        else:
            return None
    return kinds


NUMERIC = re.compile(r"[-+]?(\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?")


def yaml_number_hint(text: str) -> str:
    """For a string that spells a number (``5e-05``, ``1.0e6``: YAML 1.1 reads a number without a dot, or
    with an unsigned exponent, as a string), how to write it so YAML reads a number."""
    if not NUMERIC.fullmatch(text.strip()):
        return ""
    if "e" not in text.lower():
        return f"; write {text.strip()} without quotes"
    mantissa, exp = f"{float(text.replace('_', '')):e}".split("e")
    mantissa = mantissa.rstrip("0")
    return f"; YAML reads {text.strip()!r} as a string: write {mantissa}{'0' if mantissa.endswith('.') else ''}e{exp}"


def _str_member_takes(annotation: Any, value: str) -> bool:
    """Whether a ``str`` member, or a string literal equal to ``value``, of ``annotation`` takes ``value``."""
    for m in _members(annotation):
        m, _ = _strip(m)
        if m is str or (typing.get_origin(m) is typing.Literal and value in typing.get_args(m)):
            return True
    return False


def _item_types(annotation: Any) -> list[Any] | None:
    """Element types of the one container member of ``annotation`` (list/tuple/set/Sequence/dict values)."""
    containers = [m for m in (_strip(x)[0] for x in _members(annotation)) if typing.get_origin(m) is not None
                  and typing.get_origin(m) not in (typing.Literal,)]
    if len(containers) != 1:
        return None
    origin, args = typing.get_origin(containers[0]), typing.get_args(containers[0])
    if not args:
        return None
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        return [args[-1]]
    return list(args)


def strict_problem(annotation: Any, value: Any, depth: int = 0) -> str | None:
    """Why ``value`` may not stand for ``annotation`` although pydantic's lax mode would coerce it, or
    None: a boolean where only numbers are admitted, a number where only booleans are, a string where
    only numbers or booleans are; list / tuple / dict items are checked against their item types."""
    if depth > 8:
        return None
    kinds = scalar_kinds(annotation, skip_containers=not isinstance(value, (list, tuple, Mapping)))
    if kinds is not None and not isinstance(value, (list, tuple, Mapping)):
        numeric = kinds & _NUMBER
        if _is_bool(value) and numeric and "bool" not in kinds:
            return f"expected {'an integer' if numeric == {'int'} else 'a number'}, got a boolean"
        if isinstance(value, (int, float)) and not _is_bool(value) and "bool" in kinds and not numeric:
            return "expected a boolean (true or false), got a number"
        if isinstance(value, str) and (numeric or "bool" in kinds) and not _str_member_takes(annotation, value):
            want = "an integer" if numeric == {"int"} else "a number" if numeric else "a boolean (true or false)"
            return f"expected {want}, got a string" + (yaml_number_hint(value) if numeric else "")
        return None
    items = _item_types(annotation)
    if items is None:
        return None
    if isinstance(value, Mapping):
        for k, v in value.items():
            msg = strict_problem(items[-1], v, depth + 1)
            if msg:
                return f"{k}: {msg}"
    elif isinstance(value, (list, tuple)):
        variadic = len(items) == 2 and items[1] is Ellipsis
        for i, v in enumerate(value):
            item = items[0] if variadic or len(items) == 1 else (items[i] if i < len(items) else None)
            msg = None if item is None else strict_problem(item, v, depth + 1)
            if msg:
                return f"item {i}: {msg}"
    return None


def strict_field_check(model: type[BaseModel], name: str, value: Any) -> Any:
    """The body of the params models' ``field_validator("*", mode="before")``."""
    from pydantic_core import PydanticCustomError

    field = model.model_fields.get(name)
    if field is None:
        return value
    annotation = field.annotation
    if field.metadata:
        annotation = typing.Annotated[(annotation, *field.metadata)]  # type: ignore[misc]
    msg = strict_problem(annotation, value)
    if msg:
        raise PydanticCustomError("zoo_strict_type", msg)
    return value


# ----------------------------------------------------------------------------- call inputs
_INPUT_MODELS: dict[Any, tuple[type[BaseModel], dict[str, Any], inspect.Signature]] = {}


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """``fn``'s parameter annotations resolved in its module (PEP 563 strings included); the return
    annotation is left out (it may name a class defined further down, or only for type checkers)."""
    shim = types.SimpleNamespace(  # the innermost function's module: decorators (torch.no_grad) live elsewhere
        __annotations__={k: v for k, v in getattr(fn, "__annotations__", {}).items() if k != "return"},
        __globals__=getattr(inspect.unwrap(fn), "__globals__", {}),
    )
    try:
        return typing.get_type_hints(shim, globalns=shim.__globals__, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - NameError, TypeError, ...
        raise TypeError(f"{fn.__qualname__}: cannot resolve its annotations ({exc})") from None


def call_inputs_model(fn: Callable[..., Any]) -> tuple[type[BaseModel], dict[str, Any], inspect.Signature]:
    """``(model, hints, signature)`` of a procedure's ``__call__`` inputs (``self`` and ``*args``/
    ``**kwargs`` left out), built once per function."""
    cached = _INPUT_MODELS.get(fn)
    if cached is not None:
        return cached
    sig = inspect.signature(fn)
    hints = {k: v for k, v in _hints(fn).items() if k != "return"}
    fields: dict[str, Any] = {}
    for name, p in sig.parameters.items():
        if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        fields[name] = (hints.get(name, Any), None)
    model = create_model(f"{fn.__qualname__.replace('.', '_')}_inputs",
                         __config__=ConfigDict(arbitrary_types_allowed=True, extra="ignore"), **fields)
    _INPUT_MODELS[fn] = (model, hints, sig)
    return _INPUT_MODELS[fn]


def _short(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None and not isinstance(value, (str, bytes, type)):
        try:
            return f"{type(value).__name__} of shape {tuple(int(d) for d in shape)}"
        except (TypeError, ValueError):
            pass
    if isinstance(value, (list, tuple, dict, set)) and len(value) > 8:
        return f"{type(value).__name__} of {len(value)} items"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_TAG = re.compile(r"[a-z][a-z-]*\[.*\]|int|float|str|bool|none|list|tuple|dict|set")


def _is_union_tag(part: Any) -> bool:
    """Whether an error location part names a union member (``int``, ``function-after[...]``), not a key."""
    return isinstance(part, str) and _TAG.fullmatch(part) is not None


def _first_error(errors: list[Any], values: Mapping[str, Any]) -> Any:
    """The error to report: a per-call limit first; for a list / tuple / mapping value, an error from inside
    the container member of a union rather than its scalar member's "should be an integer"; else the first."""
    for err in errors:
        if err["type"] == "zoo_limit":
            return err
    for err in errors:
        value = values.get(str(err["loc"][0])) if err["loc"] else None
        tags = [p for p in err["loc"][1:] if _is_union_tag(p)]
        if isinstance(value, (list, tuple, Mapping)) and tags and tags[0] not in ("int", "float", "str", "bool", "none"):
            return err
    return errors[0]


def check_call(owner: str, fn: Callable[..., Any], self: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Validate a call's inputs against ``fn``'s annotations: strict scalar types first, then the
    pydantic model (bounds, limits, types). A problem is one :class:`ParamError` naming the input;
    the call itself receives the caller's values unchanged."""
    from .errors import Location, ParamError

    model, hints, sig = call_inputs_model(fn)
    try:
        given = sig.bind_partial(self, *args, **kwargs).arguments
    except TypeError:
        return  # the call itself raises the TypeError the caller deserves
    values = {k: v for k, v in given.items() if k in model.model_fields}
    for name, value in values.items():
        msg = strict_problem(hints.get(name, Any), value)
        if msg:
            raise ParamError(f"{msg} (got {_short(value)})", Location(field=f"input {name} of {owner}"))
    if "seed" in values:
        from .limits import check_seed

        seed = values["seed"]
        if isinstance(seed, (list, tuple)):  # one seed per row (per_row_seeds); the annotation bounds the count
            for i, s in enumerate(seed):
                check_seed(s, f"input seed[{i}] of {owner}")
        else:
            check_seed(seed, f"input seed of {owner}")
    try:
        model.model_validate(values)
    except ValidationError as exc:
        err = _first_error(exc.errors(include_url=False), values)
        name = str(err["loc"][0]) if err["loc"] else "?"
        path = ".".join(str(p) for p in err["loc"][1:] if not _is_union_tag(p))
        shown = values.get(name, err.get("input"))
        msg = err["msg"].removeprefix("Value error, ")
        got = "" if err["type"] == "zoo_limit" else f" (got {_short(shown)})"
        raise ParamError(f"{(path + ': ') if path else ''}{msg}{got}", Location(field=f"input {name} of {owner}")) from None


def validate_call(proc: Any, **kwargs: Any) -> None:
    """Validate the inputs of ``proc(**kwargs)`` exactly as the call would (:func:`check_call`), without running it:
    for a caller that must refuse a call before doing anything else (``zoo sample`` before it writes a manifest)."""
    call = type(proc).__call__
    check_call(type(proc).__name__, getattr(call, "__wrapped__", call), proc, (), kwargs)


# ----------------------------------------------------------------------------- bounded sizes
def _has_upper(meta: list[Any]) -> bool:
    import annotated_types as at

    for m in meta:
        if isinstance(m, (Bound, at.Le, at.Lt, at.MaxLen)):
            return True
        if isinstance(m, at.Interval) and (m.le is not None or m.lt is not None):
            return True
        if hasattr(m, "metadata") and _has_upper(list(getattr(m, "metadata", []))):  # a FieldInfo
            return True
    return False


def _size_like(t: Any) -> bool:
    """An int, a container, a tensor, ``Any``: something whose size a caller chooses. Booleans,
    floats, strings, literals, enums and params models are not (a model checks its own fields)."""
    if t is bool or t is float or t is str or t is type(None) or t is bytes:
        return False
    origin = typing.get_origin(t)
    if origin is typing.Literal:
        return False
    if isinstance(t, type):
        import enum

        if issubclass(t, (enum.Enum, BaseModel)):
            return False
        if t is int:
            return True
    return True


def unbounded(annotation: Any, where: str, depth: int = 0, nested: bool = False) -> list[str]:
    """Every place in ``annotation`` that accepts an unbounded size, as ``where[.item]: what``.
    ``nested``: an enclosing ``Bound(kind, "longest")`` already bounds the length of inner sequences."""
    if depth > 8:
        return []
    t, meta = _strip(annotation)
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        if _has_upper(meta):
            return []
        out: list[str] = []
        for m in typing.get_args(t):
            out.extend(unbounded(m, where, depth + 1, nested))
        return out
    if isinstance(t, type) and issubclass(t, BaseModel):  # a nested model: its own fields
        out = []
        for name, f in t.model_fields.items():
            ann = typing.Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation  # type: ignore[misc]
            out.extend(unbounded(ann, f"{where}.{name}", depth + 1))
        return out
    if not _size_like(t):
        return []
    container = typing.get_origin(t) is not None
    if not _has_upper(meta) and not (nested and container):
        return [f"{where}: {_name(t)} has no upper bound (use registry.limits.Rows/Steps/Frames/Length/Width, "
                f"a Bound(kind), or Field(le=...) / Field(max_length=...))"]
    origin = typing.get_origin(t)
    if origin is None:
        return []
    out = []
    args = [a for a in typing.get_args(t) if a is not Ellipsis]
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        args = args[-1:]
    longest = nested or any(isinstance(m, Bound) and m.measure == "longest" for m in meta)
    for a in args:
        out.extend(unbounded(a, f"{where}[item]", depth + 1, longest))
    return out


def _name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


def unbounded_inputs(cls: type) -> list[str]:
    """Every unbounded size ``cls`` (a procedure class) accepts: ``__call__`` inputs (``**kwargs`` can
    never be bounded), ``Params`` and ``CliInputs`` fields."""
    problems: list[str] = []
    call = getattr(cls, "__call__")
    fn = inspect.unwrap(call)
    sig = inspect.signature(fn)
    hints = _hints(fn)
    for name, p in sig.parameters.items():
        if name == "self":
            continue
        if name == "seed":  # an int seed's range is the engine's; a list of seeds (one per row) needs a bound
            ann = hints.get(name, int)
            t, meta = _strip(ann)
            members = typing.get_args(t) if typing.get_origin(t) in (typing.Union, types.UnionType) and not meta else (ann,)
            for m in members:
                mt, mmeta = _strip(m)
                if mt is not int and _size_like(mt) and not _has_upper(mmeta):
                    problems.append(f"__call__ input seed: {_name(mt)} has no upper bound (one seed per row: use "
                                    "registry.limits.Seeds, at most `rows` seeds)")
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            problems.append(f"__call__ *{'*' if p.kind is p.VAR_KEYWORD else ''}{name}: inputs that cannot be "
                            "validated or bounded; name each input")
            continue
        problems += unbounded(hints.get(name, Any), f"__call__ input {name}")
    for label, model in (("Params", getattr(cls, "Params", None)), ("CliInputs", getattr(cls, "CliInputs", None))):
        if model is None:
            continue
        for name, f in model.model_fields.items():
            ann = typing.Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation  # type: ignore[misc]
            problems += unbounded(ann, f"{label}.{name}")
    return problems


__all__ = ["strict_problem", "check_call", "validate_call", "call_inputs_model", "unbounded", "unbounded_inputs", "bound_of"]
