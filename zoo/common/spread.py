"""Mean and spread over training seeds: the one summary every method-vs-baseline gap in a benchmark reports.

The project's standard (METHOD-DONE) asks for a gap's mean ± sample standard deviation over ≥ 3 training seeds,
next to the per-seed values; this module is the single place that computes and prints it, so every benchmark
table means the same thing by "±" (the sample sd with n − 1 in the denominator, not a standard error).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Spread", "spread"]


@dataclass(frozen=True)
class Spread:
    """``mean`` and sample ``sd`` (n − 1; ``None`` for a single value) of ``values``."""

    mean: float
    sd: float | None
    values: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.values)

    def as_dict(self) -> dict[str, float | int | list[float] | None]:
        """JSON-safe form: ``{"mean", "sd", "n", "values"}`` (``sd`` is ``None`` for one value, never NaN)."""
        return {"mean": self.mean, "sd": self.sd, "n": self.n, "values": list(self.values)}

    def text(self, digits: int = 3) -> str:
        """``"m ± sd"`` to ``digits`` decimals, or ``"m"`` for one value."""
        return f"{self.mean:.{digits}f}" if self.sd is None else f"{self.mean:.{digits}f} ± {self.sd:.{digits}f}"

    def __str__(self) -> str:
        return self.text()


def spread(values: Iterable[float]) -> Spread:
    """Mean and sample standard deviation of ``values`` (at least one; a NaN value gives NaN, not an error).

    >>> spread([1.0, 2.0, 3.0]).text(2)
    '2.00 ± 1.00'
    """
    xs = tuple(float(v) for v in values)
    if not xs:
        raise ValueError("spread needs at least one value, got none")
    mean = math.fsum(xs) / len(xs)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return Spread(mean, sd, xs)
