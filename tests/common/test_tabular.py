"""Tabular helpers: encoding round trip, valid tables after rounding, exact W1."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from zoo.common.tabular import TabularEncoder, wasserstein1


def _table(seed):
    rng = np.random.default_rng(seed)
    n = 40
    return np.column_stack([rng.normal(size=n), rng.integers(0, 7, n), rng.choice([2.0, 5.0, 9.0], n), rng.uniform(-3, 3, n)])


def test_round_trip_is_identity_and_encoding_in_range():
    """transform then inverse_transform gives the table back; numeric columns lie in [-1, 1]; one-hot rows sum to 1."""
    X = _table(0)
    enc = TabularEncoder(categorical=[2], integer=[1]).fit(X)
    Z = enc.transform(X)
    assert Z.shape == (40, 3 + 3) and enc.width == 6
    assert Z[:, :3].min() >= -1 and Z[:, :3].max() <= 1
    assert np.array_equal(Z[:, 3:].sum(1), np.ones(40))
    assert np.allclose(enc.inverse_transform(Z), X, atol=1e-12)


@given(st.integers(0, 1000))
@settings(max_examples=20, deadline=None)
def test_inverse_of_noise_is_a_valid_table(seed):
    """Any real matrix decodes to a valid table: values within the observed [min, max], integer columns
    integral, categorical columns among the observed categories."""
    X = _table(seed)
    enc = TabularEncoder(categorical=[2], integer=[1]).fit(X)
    Z = np.random.default_rng(seed + 1).normal(scale=2, size=(30, enc.width))
    T = enc.inverse_transform(Z)
    assert (T >= X.min(0) - 1e-12).all() and (T <= X.max(0) + 1e-12).all()
    assert np.array_equal(T[:, 1], np.round(T[:, 1]))
    assert set(T[:, 2]) <= {2.0, 5.0, 9.0}


def test_unseen_category_is_rejected():
    X = _table(1)
    enc = TabularEncoder(categorical=[2]).fit(X)
    X2 = X.copy()
    X2[0, 2] = 4.0
    with pytest.raises(ValueError, match="column 2"):
        enc.transform(X2)


def test_wasserstein1_exact_values():
    """W1 is 0 between a sample and its permutation, equals |shift| for a translated sample, matches the
    sorted-difference formula in 1-D, and brute force over all permutations for n = 6."""
    import itertools

    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    assert wasserstein1(x, x[rng.permutation(50)]) == pytest.approx(0.0, abs=1e-12)
    shift = np.array([0.3, -0.4, 0.0])
    assert wasserstein1(x, x + shift) == pytest.approx(0.5, abs=1e-12)
    a, b = rng.normal(size=(30, 1)), rng.normal(size=(30, 1)) + 1
    assert wasserstein1(a, b) == pytest.approx(np.abs(np.sort(a[:, 0]) - np.sort(b[:, 0])).mean(), rel=1e-12)
    p, q = rng.normal(size=(6, 2)), rng.normal(size=(6, 2))
    brute = min(np.linalg.norm(p - q[list(perm)], axis=1).mean() for perm in itertools.permutations(range(6)))
    assert wasserstein1(p, q) == pytest.approx(brute, rel=1e-12)
