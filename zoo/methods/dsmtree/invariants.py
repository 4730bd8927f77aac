"""Named property checks for ``dsmtree`` (exact equalities; no false-fail rate), each with a negative control."""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.contract import invariant

from .distill import THRESHOLDS, batch_targets, fit_teacher, train_student, xor_task


@invariant("xor-labels-are-threshold-parity")
@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(3, 8))
def xor_labels(seed: int, d: int) -> None:
    """The task's label is the parity of x_j > θ_j over axes 0-2 (brute force per point); moving one of those
    coordinates across its threshold flips it, moving an axis ≥ 3 never does. Negative control: a majority
    vote of the same three tests (a plausible wrong 'XOR') disagrees on some of 200 points."""
    X, y = xor_task(200, seed, d)
    brute = np.array([sum(int(x[j] > t) for j, t in enumerate(THRESHOLDS)) % 2 for x in X], dtype=np.float32)
    assert np.array_equal(y, brute)
    j = seed % 3
    Xf = X.copy()
    Xf[:, j] = np.where(X[:, j] > THRESHOLDS[j], THRESHOLDS[j] - 0.01, THRESHOLDS[j] + 0.01)
    assert np.array_equal(((Xf[:, :3] > np.array(THRESHOLDS, np.float32)).sum(1) % 2).astype(np.float32), 1 - y)
    if d > 3:
        Xi = X.copy()
        Xi[:, 3:] = 1 - Xi[:, 3:]
        assert np.array_equal(((Xi[:, :3] > np.array(THRESHOLDS, np.float32)).sum(1) % 2).astype(np.float32), y)
    majority = ((X[:, :3] > np.array(THRESHOLDS, np.float32)).sum(1) >= 2).astype(np.float32)
    assert not np.array_equal(majority, y)


@invariant("zero-noise-dsm-reduces-to-kd")
@settings(max_examples=2, deadline=None)
@given(st.integers(0, 1000))
def zero_noise_is_kd(seed: int) -> None:
    """With the noise grid {0}, both dsm objectives see exactly KD's inputs and targets (the teacher at x̃ = x),
    so the seeded students are bitwise identical to the plain-KD student. Negative control: with σ = 0.1 the
    trajectory targets differ from KD's, and the hard-label student differs from KD's."""
    X, y = xor_task(120, seed)
    teacher = fit_teacher(X, y, n_estimators=5, max_depth=3, seed=0, use_cache=False)
    kd = train_student("kd", X, y, teacher, steps=4, batch=16, width=8, seed=seed, sigmas=(0.0,))
    for mode in ("dsm-trajectory", "dsm-clean"):
        other = train_student(mode, X, y, teacher, steps=4, batch=16, width=8, seed=seed, sigmas=(0.0,))
        for a, b in zip(kd.net.parameters(), other.net.parameters()):
            assert torch.equal(a, b), mode
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(X.shape).astype(np.float32)
    p = np.asarray(teacher.inplace_predict(X), np.float32)
    _, t_kd = batch_targets("kd", X, y, p, teacher, np.zeros(len(X), np.float32), noise)
    _, t_noisy = batch_targets("dsm-trajectory", X, y, p, teacher, np.full(len(X), 0.1, np.float32), noise)
    assert not np.array_equal(t_kd, t_noisy)
    hard = train_student("hard", X, y, teacher, steps=4, batch=16, width=8, seed=seed, sigmas=(0.0,))
    assert any(not torch.equal(a, b) for a, b in zip(kd.net.parameters(), hard.net.parameters()))
