"""Typed procedure outputs in the style of diffusers' ``BaseOutput`` / transformers' ``ModelOutput``
(issue #11 item 6): a dataclass whose fields are also the keys of an ordered mapping.

    @dataclass
    class SampleOutput(ImageOutput):
        nfe: int | None = None

    out = SampleOutput(samples=x, nfe=10)
    out.samples is out["samples"] is out[0]; out.to_tuple() == (x, 10); samples, nfe = out.to_tuple()

Fields that are ``None`` are not keys (as in both libraries), so ``to_tuple()`` and integer indexing
skip them. A field holding one value per call rather than one per row (a per-step trace, a setting echoed
back) is declared with :func:`per_call`, so ``zoo sample`` keeps it once instead of splitting it into rows. :class:`ImageOutput` holds images as a tensor ``samples`` (N, C, H, W) in ``[-1, 1]``
(the diffusion convention) and offers ``.images`` (NumPy, N x H x W x C in ``[0, 1]``) and
``.pil_images`` views. Importing this module imports neither torch nor PIL. The conformance
comparisons treat outputs as mappings (``registry.conformance.assert_same``).
"""
from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


#: dataclass field metadata key of :func:`per_call`
PER_CALL = "zoo_per_call"


def per_call(default: Any = None, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field that holds one value per call, not one per row (e.g. the router's weight per step)::

        alphas: list[float] | None = per_call()

    Without it, ``zoo sample`` (:mod:`registry.sampling`) reads a tensor whose first dimension, or a list
    whose length, equals the call's row count as one entry per row."""
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata={PER_CALL: True})
    return dataclasses.field(default=default, metadata={PER_CALL: True})


def is_per_call(f: "dataclasses.Field[Any]") -> bool:
    """Whether dataclass field ``f`` was declared with :func:`per_call`."""
    return bool(f.metadata.get(PER_CALL, False))


class ProcedureOutput(OrderedDict):  # type: ignore[type-arg]
    """Base of a procedure's output dataclass: attribute, key and index access, ``to_tuple()``."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if not dataclasses.is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a @dataclass")
        return super().__new__(cls)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is not None:
                super().__setitem__(f.name, value)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(key)
        return self.to_tuple()[key]

    def __setattr__(self, name: str, value: Any) -> None:
        if name in {f.name for f in dataclasses.fields(self)}:
            if value is None:
                super().pop(name, None)
            else:
                super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __delitem__(self, key: str) -> None:
        raise TypeError(f"{type(self).__name__} fields cannot be deleted; set them to None")

    def setdefault(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} is a dataclass: set a field instead")

    def pop(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} is a dataclass: set a field to None instead")

    def update(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(f"{type(self).__name__} is a dataclass: set fields instead")

    def to_tuple(self) -> tuple[Any, ...]:
        """The non-``None`` fields in declaration order."""
        return tuple(self[k] for k in self.keys())

    def __reduce__(self) -> Any:  # pickling: rebuild through the dataclass constructor
        return (type(self), tuple(getattr(self, f.name) for f in dataclasses.fields(self)))


@dataclass
class ImageOutput(ProcedureOutput):
    """Image samples: ``samples`` a tensor (N, C, H, W) in [-1, 1]; ``images`` and ``pil_images`` are views."""

    samples: Any = None

    @property
    def images(self) -> Any:
        """``samples`` as NumPy float32, N x H x W x C, mapped from [-1, 1] to [0, 1] (diffusers' ``output_type="np"``)."""
        x = self.samples
        return (x / 2 + 0.5).clamp(0, 1).detach().cpu().permute(0, 2, 3, 1).float().numpy()

    @property
    def pil_images(self) -> list[Any]:
        """``images`` as a list of PIL images (8-bit; one channel as grey)."""
        from PIL import Image

        arr = (self.images * 255).round().astype("uint8")
        return [Image.fromarray(a[..., 0] if a.shape[-1] == 1 else a) for a in arr]


# ----------------------------------------------------------------------------- printing
def _array_summary(value: Any) -> str | None:
    """``tensor float32 (4, 2)  min -1.2  mean 0.031  max 2.4`` for a tensor / array, else None (no torch import:
    a tensor is whatever has ``shape``, ``dtype`` and ``detach``)."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None or isinstance(value, type):
        return None
    import numpy as np

    try:
        dims = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None
    is_torch = hasattr(value, "detach")
    kind = "tensor" if is_torch else "array" if isinstance(value, np.ndarray) else type(value).__name__
    dt = str(dtype).removeprefix("torch.")
    head = f"{kind} {dt} {dims}"
    try:
        arr = value.detach().cpu().numpy() if is_torch else np.asarray(value)
    except Exception:  # noqa: BLE001 - bfloat16, a meta tensor, ...: describe without numbers
        try:
            arr = value.detach().float().cpu().numpy()
        except Exception:  # noqa: BLE001
            return head
    if arr.size == 0:
        return head + "  (empty)"
    if arr.dtype.kind == "b":
        return head + f"  {int(arr.sum())} true of {arr.size}"
    if arr.dtype.kind not in "iufc":
        return head
    if arr.dtype.kind == "c":
        arr = np.abs(arr)
    a = arr.astype(np.float64)
    finite = np.isfinite(a)
    bad = int(a.size - finite.sum())
    if not finite.any():
        return head + f"  all {a.size} non-finite"
    a = a[finite]
    fmt = (lambda x: f"{int(x)}") if arr.dtype.kind in "iu" else (lambda x: f"{x:.4g}")
    text = f"{head}  min {fmt(a.min())}  mean {a.mean():.4g}  max {fmt(a.max())}"
    return text + (f"  ({bad} non-finite)" if bad else "")


def _short_value(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _brief(value: Any) -> str:
    """A few words for a nested value: ``tensor float32 (2, 3)``, ``list[5]``, ``0.25``, ``'text'``."""
    arr = _array_summary(value)
    if arr is not None:
        return arr.split("  ")[0]
    if isinstance(value, (dict, list, tuple)):
        return f"{type(value).__name__}[{len(value)}]"
    if isinstance(value, float):
        return f"{value:.4g}"
    return _short_value(value, 30)


def summarize_value(value: Any, width: int = 100) -> str:
    """One line describing ``value``: shape / dtype / range of a tensor or array, length and first items of a
    list, keys of a dict, the value of a scalar (never a truncated tensor repr)."""
    arr = _array_summary(value)
    if arr is not None:
        return arr
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (str, bytes)):
        return _short_value(value, width)
    if isinstance(value, dict):
        body = ", ".join(f"{k}={_brief(v)}" for k, v in value.items())
        text = f"dict[{len(value)}]: {body}"
        return text if len(text) <= width else text[: width - 3] + "..."
    if isinstance(value, (list, tuple)):
        name = type(value).__name__
        if not value:
            return f"{name}[0]"
        first = value[0]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
            nums = [float(x) for x in value]
            kind = "int" if all(isinstance(x, int) for x in value) else "float"
            stats = f"min {min(nums):.4g}  mean {sum(nums) / len(nums):.4g}  max {max(nums):.4g}"
            text = f"{name}[{len(value)}] of {kind}  {stats}"
            return text
        if all(isinstance(x, bool) for x in value):
            return f"{name}[{len(value)}] of bool  {sum(value)} true"
        kinds = {type(x).__name__ for x in value}
        of = kinds.pop() if len(kinds) == 1 else "mixed"
        if _array_summary(first) is not None:
            shapes = {tuple(getattr(x, "shape", ())) for x in value}
            return f"{name}[{len(value)}] of {_array_summary(first).split('  ')[0]}" + ("" if len(shapes) == 1 else " (shapes differ)")
        items = ", ".join(_brief(x) for x in value[:3])
        text = f"{name}[{len(value)}] of {of}: {items}" + (", ..." if len(value) > 3 else "")
        return text if len(text) <= width else text[: width - 3] + "..."
    return f"{type(value).__name__}"


def summarize(value: Any, width: int = 100) -> str:
    """What ``zoo run`` prints for a result without a method-specific rendering: a typed output (any mapping)
    as one line per field (name, shape / dtype, a short summary), anything else as one summary line."""
    if isinstance(value, Mapping):
        keys = [str(k) for k in value.keys()]
        pad = max((len(k) for k in keys), default=0)
        lines = [type(value).__name__ + ":"]
        lines += [f"  {str(k).ljust(pad)}  {summarize_value(v, width)}" for k, v in value.items()]
        return "\n".join(lines)
    return summarize_value(value, width)
