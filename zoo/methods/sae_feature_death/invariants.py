"""Named property checks for ``sae-feature-death`` (run by the conformance harness under Hypothesis).

Each invariant is stated in its docstring; all are deterministic (no statistical tolerance), so
none has a false-fail rate. Sources: the paper's definitions (arXiv 2605.31518 §3-4) and the
method notes' §7.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.contract import invariant
from zoo.common.sae import SparseAutoencoder, TrainConfig, geometric_median, train_sae

from . import diagnostics as dg

_SEEDS = st.integers(0, 2**31 - 1)
_FAST = settings(max_examples=25, deadline=None)


def _data(seed: int, n: int = 200, d: int = 12, outlier: float = 0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.5, 2.0, size=d) + rng.normal(size=d)
    x[:, 0] += outlier
    return x


@invariant("gamma-scale-invariant")
@_FAST
@given(_SEEDS, st.floats(1.0, 1e3), st.floats(0.0, 50.0))
def gamma_scale_invariant(seed: int, c: float, outlier: float) -> None:
    """gamma(c X) = gamma(X) for c > 0, for gamma_raw (exactly up to rounding) and gamma_postLN
    (up to the LayerNorm eps = 1e-5, negligible for c >= 1 and unit-scale data)."""
    x = _data(seed, outlier=outlier)
    assert math.isclose(dg.gamma(c * x, post_ln=False), dg.gamma(x, post_ln=False), rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(dg.gamma(c * x), dg.gamma(x), rel_tol=1e-4, abs_tol=1e-9)


@invariant("gamma-rotation-invariant")
@_FAST
@given(_SEEDS, st.floats(0.0, 50.0))
def gamma_rotation_invariant(seed: int, outlier: float) -> None:
    """gamma_raw(X Q) = gamma_raw(X) for any orthogonal Q (||mu Q|| = ||mu||, trace of the
    covariance is invariant); gamma_postLN is invariant to permuting dimensions."""
    x = _data(seed, outlier=outlier)
    rng = np.random.default_rng(seed + 1)
    q, _ = np.linalg.qr(rng.normal(size=(x.shape[1], x.shape[1])))
    assert math.isclose(dg.gamma(x @ q, post_ln=False), dg.gamma(x, post_ln=False), rel_tol=1e-9, abs_tol=1e-12)
    perm = rng.permutation(x.shape[1])
    assert math.isclose(dg.gamma(x[:, perm]), dg.gamma(x), rel_tol=1e-9, abs_tol=1e-12)


@invariant("gamma-of-centred-data-is-zero")
@_FAST
@given(_SEEDS, st.floats(0.0, 1e3))
def gamma_of_centred_data_is_zero(seed: int, outlier: float) -> None:
    """gamma_raw(X - mean(X)) = 0 (<= 1e-9 relative to gamma_raw(X) + 1), and gamma >= 0."""
    x = _data(seed, outlier=outlier)
    g = dg.gamma(x, post_ln=False)
    assert g >= 0 and dg.gamma(x) >= 0
    assert dg.gamma(x - x.mean(0), post_ln=False) <= 1e-9 * (1.0 + g)


@invariant("predicted-death-monotone-with-limits")
@_FAST
@given(st.floats(1e-3, 1e4), st.floats(1e-3, 1e4), st.integers(3, 10**6), st.integers(1, 512), st.integers(2, 8))
def predicted_death_monotone_with_limits(g1: float, g2: float, n_eval: int, k: int, mult: int) -> None:
    """Phi(-C/gamma) and Phi(t_k - C/gamma) are non-decreasing in gamma, lie in [0, 1/2] and
    [0, 1 - k/F], tend to 0 as gamma -> 0 and to 1/2 and 1 - k/F as gamma -> infinity
    (for N_eval >= 3, so that C = Phi^-1(1 - 1/N_eval) > 0)."""
    F = k * mult
    lo, hi = sorted((g1, g2))
    r_lo, r_hi = dg.predicted_dead_by_relu(lo, n_eval), dg.predicted_dead_by_relu(hi, n_eval)
    t_lo, t_hi = dg.predicted_dead_by_topk(lo, n_eval, k, F), dg.predicted_dead_by_topk(hi, n_eval, k, F)
    assert 0.0 <= r_lo <= r_hi <= 0.5
    assert 0.0 <= t_lo <= t_hi <= 1 - k / F + 1e-12
    assert dg.predicted_dead_by_relu(1e-6, n_eval) < 1e-9 and dg.predicted_dead_by_topk(1e-6, n_eval, k, F) < 1e-9
    assert abs(dg.predicted_dead_by_relu(1e12, n_eval) - 0.5) < 1e-6
    assert abs(dg.predicted_dead_by_topk(1e12, n_eval, k, F) - (1 - k / F)) < 1e-6


@invariant("dead-pathways-disjoint")
@_FAST
@given(_SEEDS, st.floats(0.0, 100.0), st.integers(1, 8))
def dead_pathways_disjoint(seed: int, outlier: float, k: int) -> None:
    """dead-by-ReLU and dead-by-TopK are disjoint, 0 <= total <= 1, and if every token has at
    least k positive pre-activations then at least k features are alive."""
    x = torch.from_numpy(_data(seed, n=128, d=16, outlier=outlier)).float()
    sae = SparseAutoencoder(16, 48, "topk", k, seed=seed)
    r, t = dg.dead_masks(sae, x)
    assert not bool((r & t).any())
    c = dg.dead_by_pathway(sae, x)
    assert 0.0 <= c.total <= 1.0 and math.isclose(c.total, c.relu + c.topk)
    if bool(((sae.pre_acts(x) > 0).sum(1) >= k).all()):
        assert int((~(r | t)).sum()) >= k


@invariant("centred-sae-translation-invariant")
@settings(max_examples=10, deadline=None)
@given(_SEEDS, st.lists(st.integers(-1000, 1000), min_size=8, max_size=8), st.sampled_from(["topk", "batchtopk", "relu"]))
def centred_sae_translation_invariant(seed: int, shift: list[int], arch: str) -> None:
    """With b_dec initialised to the data mean, adding a constant c to every activation leaves the
    whole training trajectory unchanged bit for bit: b_dec shifts by exactly c and every other
    parameter (W_enc, b_enc, W_dec, b_dec - mean, AuxK counters, BatchTopK threshold) is
    identical. Data live on a dyadic grid with N a power of two so that x + c and the mean are
    exact in float32 and the check is bitwise."""
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.integers(-256, 256, size=(64, 8)) / 256.0).float()
    c = torch.tensor(shift, dtype=torch.float32)
    cfg = TrainConfig(steps=12, batch_size=16, lr=1e-2, b_dec_init="mean", auxk_alpha=1 / 32, dead_tokens=32,
                      threshold_start_step=3, l1_coef=0.01 if arch == "relu" else 0.0, seed=seed)
    runs = []
    for data in (x, x + c):
        sae = SparseAutoencoder(8, 24, arch, 3, seed=seed)  # type: ignore[arg-type]
        train_sae(sae, data, cfg)
        runs.append(sae.state_dict())
    a, b = runs
    assert torch.equal(b["center"], a["center"] + c)
    for key in a:
        if key != "center":
            assert torch.equal(a[key], b[key]), key


@invariant("uncentred-sae-shift-can-kill-features")
@_FAST
@given(_SEEDS, st.integers(0, 31))
def uncentred_sae_shift_can_kill_features(seed: int, f: int) -> None:
    """Non-invariance witness: with b_dec = 0 a constant shift c = -s * W_dec[:, f] (s large)
    makes feature f dead-by-ReLU, while the same shift leaves a mean-centred SAE's death unchanged."""
    x = torch.from_numpy(_data(seed, n=128, d=16)).float()
    sae = SparseAutoencoder(16, 32, "topk", 4, seed=seed)
    s = 10.0 * float(x.abs().max()) * math.sqrt(16)
    xs = x - s * sae.W_dec[:, f].detach()
    r, _ = dg.dead_masks(sae, xs)
    assert bool(r[f])
    sae.set_b_dec_init(x, "mean")
    before = dg.dead_masks(sae, x)
    sae.set_b_dec_init(xs, "mean")
    after = dg.dead_masks(sae, xs)
    # same centred data up to float rounding of the shift: the same features are dead
    assert torch.equal(before[0], after[0])


@invariant("decoder-unit-norm-every-step")
@settings(max_examples=8, deadline=None)
@given(_SEEDS, st.sampled_from(["relu", "topk", "batchtopk"]), st.sampled_from(["zeros", "mean", "geometric_median"]))
def decoder_unit_norm_every_step(seed: int, arch: str, how: str) -> None:
    """Decoder columns have unit norm (|norm - 1| <= 1e-5) after every optimiser step, and
    W_enc = W_dec^T at the standard init."""
    x = torch.from_numpy(_data(seed, n=256, d=8, outlier=20.0)).float()
    sae = SparseAutoencoder(8, 32, arch, 4, seed=seed)  # type: ignore[arg-type]
    assert torch.equal(sae.W_enc.detach(), sae.W_dec.detach().T)
    errs: list[float] = []

    def cb(step: int, m: SparseAutoencoder) -> None:
        errs.append(float((torch.linalg.vector_norm(m.W_dec.detach(), dim=0) - 1).abs().max()))

    train_sae(sae, x, TrainConfig(steps=15, batch_size=32, lr=5e-2, b_dec_init=how, seed=seed,  # type: ignore[arg-type]
                                  l1_coef=0.1 if arch == "relu" else 0.0), callback=cb)
    assert len(errs) == 15 and max(errs) <= 1e-5


@invariant("geometric-median-equivariant")
@_FAST
@given(_SEEDS, st.floats(-100, 100))
def geometric_median_equivariant(seed: int, t: float) -> None:
    """The geometric median is translation- and rotation-equivariant (to solver tolerance), lies
    in the bounding box of the points, and equals the point when all points coincide."""
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.normal(size=(60, 5))).double()
    gm = geometric_median(x, tol=1e-12, max_iter=2000)
    shift = torch.full((5,), t, dtype=torch.float64)
    assert torch.allclose(geometric_median(x + shift, tol=1e-12, max_iter=2000), gm + shift, atol=1e-6)
    q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    qt = torch.from_numpy(q)
    assert torch.allclose(geometric_median(x @ qt, tol=1e-12, max_iter=2000), gm @ qt, atol=1e-6)
    assert bool((gm >= x.min(0).values).all() and (gm <= x.max(0).values).all())
    p = x[:1].repeat(7, 1)
    assert torch.allclose(geometric_median(p), x[0])


@invariant("effective-rank-bounds")
@_FAST
@given(_SEEDS, st.integers(2, 12))
def effective_rank_bounds(seed: int, d: int) -> None:
    """Effective rank lies in [1, d] and equals 1 for rank-1 (centred) data."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(50, d))
    er = dg.effective_rank(x, post_ln=False)
    assert 1.0 - 1e-9 <= er <= d + 1e-9
    u = rng.normal(size=d)
    x1 = rng.normal(size=(50, 1)) * u + rng.normal(size=d)
    assert abs(dg.effective_rank(x1, post_ln=False) - 1.0) < 1e-6
