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
