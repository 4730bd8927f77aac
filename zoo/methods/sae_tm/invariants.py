"""Named property checks for ``sae-tm`` (run by the conformance harness under Hypothesis).

All are deterministic (no statistical tolerance, hence no false-fail rate). Sources: the SAE-TM
paper (arXiv 2511.16309) and the method notes' §7."""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.contract import invariant

from .topics import Interpretation, fit_interpretation, merge_atoms, mixture_word_probs, normalise_theta, sparsify_top_mass

_SEEDS = st.integers(0, 2**31 - 1)
_FAST = settings(max_examples=20, deadline=None)


def _toy(seed: int, n: int = 40, k: int = 6, v: int = 15) -> tuple[torch.Tensor, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = torch.from_numpy(rng.normal(size=(n, k)) * (rng.random((n, k)) < 0.5)).float()
    z[0] = -1.0  # one all-inactive document: its theta row must stay 0
    counts = rng.poisson(0.7, size=(n, v)).astype(np.float32)
    counts[:, 0] += 1  # every document has a word
    return z, counts


@invariant("distributions-on-simplex")
@settings(max_examples=10, deadline=None)
@given(_SEEDS, st.floats(0.0, 0.99), st.booleans())
def distributions_on_simplex(seed: int, pi: float, idf: bool) -> None:
    """theta rows are >= 0 and sum to 1 (or are all 0); B and p0 rows lie on the simplex; the
    mixture word law q_d sums to 1 for every document with theta_d != 0 (and to pi otherwise)."""
    z, counts = _toy(seed)
    theta = normalise_theta(z)
    s = theta.sum(1)
    assert bool((theta >= 0).all())
    assert bool(((s - 1).abs() < 1e-6).logical_or(s == 0).all()) and float(s[0]) == 0.0
    it = fit_interpretation(theta, counts, pi=pi, idf=idf, epochs=3, batch_size=16, seed=seed)
    assert np.all(it.B >= 0) and np.allclose(it.B.sum(1), 1, atol=1e-9)
    assert np.all(it.p0 >= 0) and abs(it.p0.sum() - 1) < 1e-9
    q = mixture_word_probs(theta.double(), torch.log(torch.from_numpy(it.B)), torch.log(torch.from_numpy(it.p0)), pi)
    want = torch.where(s.double() > 0, torch.ones_like(s.double()), torch.full_like(s.double(), pi))
    assert torch.allclose(q.sum(1), want, atol=1e-9)


@invariant("background-only-ignores-atoms")
@_FAST
@given(_SEEDS)
def background_only_ignores_atoms(seed: int) -> None:
    """With pi = 1 the word law is the background law alone, independent of the atoms beta."""
    z, _ = _toy(seed)
    theta = normalise_theta(z)
    g = torch.Generator().manual_seed(seed)
    bg = torch.randn(15, generator=g)
    a = mixture_word_probs(theta, torch.randn(6, 15, generator=g), bg, 1.0)
    b = mixture_word_probs(theta, torch.randn(6, 15, generator=g), bg, 1.0)
    assert torch.equal(a, b)


@invariant("sparsify-keeps-minimal-prefix")
@_FAST
@given(_SEEDS, st.floats(0.01, 0.99), st.integers(2, 30))
def sparsify_keeps_minimal_prefix(seed: int, tau: float, v: int) -> None:
    """Top-mass sparsification keeps, per row, the minimal descending prefix whose cumulative
    mass exceeds tau (at least the arg-max), preserves the order of kept entries and renormalises
    to sum 1; tau -> 0 keeps exactly the arg-max."""
    rng = np.random.default_rng(seed)
    B = rng.dirichlet(np.full(v, 0.5), size=5)
    S = sparsify_top_mass(B, tau)
    assert np.allclose(S.sum(1), 1)
    for b, s in zip(B, S):
        kept = np.flatnonzero(s > 0)
        order = np.argsort(-b, kind="stable")
        m = len(kept)
        assert set(kept) == set(order[:m])
        assert b[order[:m]].sum() > tau * b.sum() - 1e-12
        assert m == 1 or b[order[: m - 1]].sum() <= tau * b.sum() + 1e-12
        assert np.allclose(s[kept], b[kept] / b[kept].sum())
    T = sparsify_top_mass(B, 1e-9)
    assert np.all((T > 0).sum(1) == 1) and np.all(T.argmax(1) == B.argmax(1))


def _interp(seed: int, k: int, v: int, dead: int) -> tuple[Interpretation, np.ndarray]:
    rng = np.random.default_rng(seed)
    B = rng.dirichlet(np.full(v, 0.3), size=k)
    tb = rng.random(k) + 0.05
    tb[:dead] = 0.0
    tb /= tb.sum()
    return Interpretation(B=B, p0=np.full(v, 1 / v), theta_bar=tb, pi=0.3, losses=[]), rng.normal(size=(v, 8))


@invariant("merged-cluster-masses-sum-to-one")
@_FAST
@given(_SEEDS, st.integers(3, 12), st.integers(0, 2), st.integers(1, 3))
def merged_cluster_masses_sum_to_one(seed: int, k: int, dead: int, n: int) -> None:
    """Every atom with theta_bar > 0 belongs to exactly one cluster (atoms with theta_bar = 0 to
    none), cluster masses are >= 0 and sum to 1, and each topic's word law is a convex combination
    of sparsified atom rows (on the simplex)."""
    interp, wv = _interp(seed, k, 20, dead)
    n = min(n, k - dead)
    ts = merge_atoms(interp, wv, n, tau=0.9)
    assert np.all(ts.atom_topic[:dead] == -1) and np.all((ts.atom_topic[dead:] >= 0) & (ts.atom_topic[dead:] < n))
    assert np.all(ts.cluster_mass >= 0) and abs(ts.cluster_mass.sum() - 1) < 1e-12
    assert np.all(ts.topic_word >= 0) and np.allclose(ts.topic_word.sum(1), 1)


@invariant("retopic-to-n-atoms-gives-atoms")
@_FAST
@given(_SEEDS, st.integers(2, 10), st.integers(0, 2))
def retopic_to_n_atoms_gives_atoms(seed: int, k: int, dead: int) -> None:
    """Merging into as many topics as there are valid atoms gives back the (sparsified) atoms,
    up to permutation, with cluster masses equal to their theta_bar."""
    interp, wv = _interp(seed, k + dead, 20, dead)
    ts = merge_atoms(interp, wv, k, tau=0.9)
    atoms = sparsify_top_mass(interp.B[dead:], 0.9)
    for t in range(k):
        members = np.flatnonzero(ts.atom_topic == t)
        assert len(members) == 1
        a = members[0]
        assert np.allclose(ts.topic_word[t], atoms[a - dead])
        assert np.isclose(ts.cluster_mass[t], interp.theta_bar[a])
