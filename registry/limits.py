"""Named size caps: the one mechanism that bounds every size a spec (or a caller) can set.

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
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
