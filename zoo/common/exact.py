"""Exact-law toolkit: enumerated laws, total variation, chi-square and Kolmogorov-Smirnov tests with a
stated false-fail rate, and the negative-control pattern.

A statistical invariant asserts ``p-value > alpha``; for a correct sampler and a fresh seed the test
then fails with probability ``alpha`` (its *false-fail rate*, exact for KS and asymptotic for Pearson's
chi-square). A test that always passes proves nothing, so every such invariant also runs a
*negative control*: a deliberately wrong sampler must be rejected at ``p < reject_below`` (default
1e-6) by the very same test, which shows the test has power at that sample size.

* Pearson's chi-square goodness of fit (Pearson 1900) with cells whose expected count is below 5
  pooled into one cell (Cochran's rule), degrees of freedom = cells - 1.
* One-sample Kolmogorov-Smirnov (``scipy.stats.kstest``, exact distribution for n <= 10,000).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Sequence

import numpy as np
import torch

__all__ = [
    "EnumeratedLaw", "tv", "empirical_law", "chi2_pvalue", "ks_pvalue", "LawCheck", "check_law", "check_ks",
    "negative_control", "DEFAULT_ALPHA", "DEFAULT_REJECT",
]

DEFAULT_ALPHA = 1e-3  # false-fail rate of one check for a correct sampler and a fresh seed
DEFAULT_REJECT = 1e-6  # a negative control must reach p below this


def _probs(p: Any) -> torch.Tensor:
    t = torch.as_tensor(p, dtype=torch.float64).reshape(-1)
    return t


@dataclass(frozen=True)
class EnumeratedLaw:
    """A law on a finite support: ``support[i]`` has probability ``probs[i]`` (float64, sums to 1)."""

    support: tuple[Hashable, ...]
    probs: torch.Tensor

    def __post_init__(self) -> None:
        p = _probs(self.probs)
        if p.numel() != len(self.support):
            raise ValueError(f"support has {len(self.support)} points, probs has {p.numel()}")
        if (p < 0).any() or abs(float(p.sum()) - 1.0) > 1e-9:
            raise ValueError("probs must be non-negative and sum to 1")
        object.__setattr__(self, "probs", p)

    @classmethod
    def from_dict(cls, law: dict[Hashable, float]) -> "EnumeratedLaw":
        return cls(tuple(law), torch.tensor(list(law.values()), dtype=torch.float64))

    @classmethod
    def from_table(cls, table: torch.Tensor) -> "EnumeratedLaw":
        """A law on ``itertools.product(range(n_1), ..., range(n_k))`` from a ``(n_1, ..., n_k)`` table
        (row-major, like ``table.reshape(-1)``)."""
        table = torch.as_tensor(table, dtype=torch.float64)
        support = tuple(itertools.product(*(range(n) for n in table.shape))) if table.ndim > 1 else tuple(range(table.shape[0]))
        return cls(support, table.reshape(-1) / table.sum())

    @classmethod
    def from_logits(cls, logits: torch.Tensor, support: Sequence[Hashable] | None = None) -> "EnumeratedLaw":
        p = torch.softmax(torch.as_tensor(logits, dtype=torch.float64).reshape(-1), 0)
        return cls(tuple(range(p.numel())) if support is None else tuple(support), p)

    def index(self) -> dict[Hashable, int]:
        return {s: i for i, s in enumerate(self.support)}

    def counts(self, samples: Iterable[Hashable]) -> torch.Tensor:
        """Counts of ``samples`` per support point (ValueError on a point outside the support)."""
        idx = self.index()
        c = torch.zeros(len(self.support), dtype=torch.float64)
        for s in samples:
            key = tuple(s) if isinstance(s, (list, np.ndarray)) else (tuple(s.tolist()) if isinstance(s, torch.Tensor) and s.ndim else (s.item() if isinstance(s, torch.Tensor) else s))
            if key not in idx:
                raise ValueError(f"sample {key!r} is outside the support")
            c[idx[key]] += 1
        return c

    def sample_counts(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Counts per support point of ``n`` exact draws (float64, fast: no per-sample Python loop)."""
        i = torch.multinomial(self.probs, n, replacement=True, generator=generator)
        return torch.bincount(i, minlength=len(self.support)).double()

    def sample(self, n: int, generator: torch.Generator | None = None) -> list[Hashable]:
        i = torch.multinomial(self.probs, n, replacement=True, generator=generator)
        return [self.support[j] for j in i.tolist()]


def tv(p: Any, q: Any) -> float:
    """Total variation ``0.5 * sum |p - q|`` between two probability vectors (or ``EnumeratedLaw``s)."""
    p = p.probs if isinstance(p, EnumeratedLaw) else _probs(p)
    q = q.probs if isinstance(q, EnumeratedLaw) else _probs(q)
    if p.shape != q.shape:
        raise ValueError(f"shapes differ: {tuple(p.shape)} vs {tuple(q.shape)}")
    return 0.5 * float((p - q).abs().sum())


def empirical_law(counts: Any) -> torch.Tensor:
    c = _probs(counts)
    return c / c.sum()


def chi2_pvalue(law: Any, counts: Any, min_expected: float = 5.0) -> float:
    """Pearson chi-square p-value of observed ``counts`` against probabilities ``law``.

    Cells with expected count ``< min_expected`` are pooled into one cell; cells with zero expected
    count must have zero observations (otherwise the p-value is 0: the sample left the support).
    """
    from scipy.stats import chi2

    p = law.probs if isinstance(law, EnumeratedLaw) else _probs(law)
    o = _probs(counts)
    if p.shape != o.shape:
        raise ValueError(f"law has {p.numel()} cells, counts has {o.numel()}")
    n = float(o.sum())
    if n <= 0:
        raise ValueError("no observations")
    if bool(((p == 0) & (o > 0)).any()):
        return 0.0
    e = p * n
    small = e < min_expected
    if small.any():
        e = torch.cat([e[~small], e[small].sum().reshape(1)])
        o = torch.cat([o[~small], o[small].sum().reshape(1)])
    keep = e > 0
    e, o = e[keep], o[keep]
    if e.numel() < 2:
        return 1.0
    stat = float(((o - e) ** 2 / e).sum())
    return float(chi2.sf(stat, df=int(e.numel()) - 1))


def ks_pvalue(samples: Any, cdf: Callable[[np.ndarray], np.ndarray] | str, args: tuple = ()) -> float:
    """One-sample two-sided Kolmogorov-Smirnov p-value of ``samples`` against ``cdf`` (a callable or a
    scipy.stats distribution name with ``args``)."""
    from scipy.stats import kstest

    x = torch.as_tensor(samples, dtype=torch.float64).reshape(-1).cpu().numpy() if not isinstance(samples, np.ndarray) else samples.reshape(-1)
    return float(kstest(x, cdf, args=args).pvalue)


@dataclass(frozen=True)
class LawCheck:
    """Outcome of one check: ``passed`` iff ``pvalue > alpha``; ``alpha`` is the false-fail rate."""

    pvalue: float
    alpha: float
    n: int
    tv: float | None = None

    @property
    def passed(self) -> bool:
        return self.pvalue > self.alpha

    def __str__(self) -> str:
        extra = f", TV {self.tv:.4f}" if self.tv is not None else ""
        return f"p = {self.pvalue:.3g} (n = {self.n}, false-fail rate {self.alpha:g}{extra})"


def check_law(law: Any, counts: Any, alpha: float = DEFAULT_ALPHA) -> LawCheck:
    """Chi-square check of ``counts`` against ``law``: passes iff p > ``alpha`` (false-fail rate ``alpha``)."""
    p = law.probs if isinstance(law, EnumeratedLaw) else _probs(law)
    c = _probs(counts)
    return LawCheck(chi2_pvalue(p, c), alpha, int(c.sum()), tv(p, empirical_law(c)))


def check_ks(samples: Any, cdf: Callable | str, args: tuple = (), alpha: float = DEFAULT_ALPHA) -> LawCheck:
    """KS check of continuous ``samples`` against ``cdf``: passes iff p > ``alpha`` (exact false-fail rate)."""
    x = torch.as_tensor(samples).reshape(-1)
    return LawCheck(ks_pvalue(x, cdf, args), alpha, int(x.numel()))


def negative_control(test: Callable[[Any], float], wrong_samples: dict[str, Any], reject_below: float = DEFAULT_REJECT) -> dict[str, float]:
    """Show a statistical test has power: ``test(samples) -> p-value`` must reject every deliberately
    wrong sample set in ``wrong_samples`` (``{name: samples}``) at ``p < reject_below``.

    Returns ``{name: p-value}``; raises ``AssertionError`` naming the first control that was not detected.
    Typical use, beside the positive check::

        law = EnumeratedLaw.from_table(exact)
        assert check_law(law, law_counts).passed
        negative_control(lambda c: chi2_pvalue(law, c), {"residual->p": wrong_counts})
    """
    out = {}
    for name, samples in wrong_samples.items():
        pv = float(test(samples))
        out[name] = pv
        if not pv < reject_below:
            raise AssertionError(f"negative control {name!r} was not detected (p = {pv:.3g}, needed < {reject_below:g})")
    return out
