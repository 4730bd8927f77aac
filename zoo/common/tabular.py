"""Tabular helpers: scaling, one-hot encoding of categorical columns, rounding back to valid tables,
and the exact 1-Wasserstein distance between equal-size samples.

:class:`TabularEncoder` maps a table with numeric, integer and categorical columns to a continuous
matrix (numeric columns min-max scaled to ``[-1, 1]``, categoricals one-hot) and back (inverse scaling,
clipping to the observed ``[min, max]``, rounding integer columns, arg-max per one-hot block) - the
pre/post-processing of ForestDiffusion (Jolicoeur-Martineau et al., arXiv 2309.09968, sec. 3) used by the
tree/flow methods.

:func:`wasserstein1` solves the optimal assignment between two equal-size empirical laws
(``scipy.optimize.linear_sum_assignment``, Crouse 2016); for uniform weights on ``n`` points each the
optimal transport plan is a permutation (Birkhoff-von Neumann), so this is the exact W1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

__all__ = ["TabularEncoder", "wasserstein1"]


@dataclass
class TabularEncoder:
    """Fit on an ``(n, p)`` array; ``categorical`` / ``integer`` list column indices (the rest are real)."""

    categorical: Sequence[int] = ()
    integer: Sequence[int] = ()
    lo: np.ndarray = field(default=None, init=False, repr=False)
    hi: np.ndarray = field(default=None, init=False, repr=False)
    categories: dict[int, np.ndarray] = field(default_factory=dict, init=False, repr=False)
    n_columns: int = field(default=0, init=False)

    def fit(self, X: np.ndarray) -> "TabularEncoder":
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"expected a 2-D table, got shape {X.shape}")
        self.n_columns = X.shape[1]
        bad = [c for c in (*self.categorical, *self.integer) if not 0 <= c < self.n_columns]
        if bad:
            raise ValueError(f"column indices {bad} out of range for {self.n_columns} columns")
        self.lo, self.hi = X.min(0), X.max(0)
        self.categories = {c: np.unique(X[:, c]) for c in self.categorical}
        return self

    @property
    def numeric(self) -> list[int]:
        return [c for c in range(self.n_columns) if c not in set(self.categorical)]

    @property
    def width(self) -> int:
        return len(self.numeric) + sum(len(v) for v in self.categories.values())

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Numeric columns to ``[-1, 1]`` (constant columns to 0), then one one-hot block per categorical column."""
        X = np.asarray(X, dtype=np.float64)
        num = self.numeric
        span = np.where(self.hi - self.lo > 0, self.hi - self.lo, 1.0)
        parts = [2 * (X[:, num] - self.lo[num]) / span[num] - 1]
        for c in self.categorical:
            cats = self.categories[c]
            idx = np.searchsorted(cats, X[:, c])
            if (idx >= len(cats)).any() or (cats[np.minimum(idx, len(cats) - 1)] != X[:, c]).any():
                raise ValueError(f"column {c} has categories not seen in fit")
            parts.append(np.eye(len(cats))[idx])
        return np.concatenate(parts, axis=1)

    def inverse_transform(self, Z: np.ndarray) -> np.ndarray:
        """Back to a valid table: unscale, clip to the observed range, round integer columns, arg-max one-hot blocks."""
        Z = np.asarray(Z, dtype=np.float64)
        if Z.shape[1] != self.width:
            raise ValueError(f"expected {self.width} encoded columns, got {Z.shape[1]}")
        num = self.numeric
        out = np.empty((Z.shape[0], self.n_columns))
        span = self.hi - self.lo
        vals = (Z[:, : len(num)] + 1) / 2 * span[num] + self.lo[num]
        vals = np.clip(vals, self.lo[num], self.hi[num])
        out[:, num] = vals
        for c in self.integer:
            if c in set(self.categorical):
                continue
            out[:, c] = np.clip(np.round(out[:, c]), np.ceil(self.lo[c]), np.floor(self.hi[c]))
        pos = len(num)
        for c in self.categorical:
            cats = self.categories[c]
            out[:, c] = cats[Z[:, pos : pos + len(cats)].argmax(1)]
            pos += len(cats)
        return out


def wasserstein1(x: np.ndarray, y: np.ndarray) -> float:
    """Exact W1 (Euclidean ground cost) between two equal-size point clouds ``(n, d)`` by optimal assignment."""
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial.distance import cdist

    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    if x.shape != y.shape:
        raise ValueError(f"wasserstein1 needs equal-size samples of equal dimension, got {x.shape} and {y.shape}")
    cost = cdist(x, y)
    r, c = linear_sum_assignment(cost)
    return float(cost[r, c].mean())
