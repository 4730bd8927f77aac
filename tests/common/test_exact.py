"""Exact-law toolkit: chi-square / KS checks pass on the true law (false-fail rate 1e-3 for a fresh seed)
and reject deliberately wrong laws (negative controls at p < 1e-6)."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from zoo.common.exact import EnumeratedLaw, LawCheck, check_ks, check_law, chi2_pvalue, empirical_law, ks_pvalue, negative_control, tv


def _law(seed: int, n: int = 6) -> EnumeratedLaw:
    g = torch.Generator().manual_seed(seed)
    return EnumeratedLaw.from_logits(torch.randn(n, generator=g, dtype=torch.float64) * 1.5)


@given(st.integers(0, 10_000), st.integers(2, 12))
@settings(max_examples=30, deadline=None)
def test_tv_is_a_metric_bounded_by_one(seed, n):
    """TV(p, p) = 0, TV is symmetric, lies in [0, 1] and satisfies the triangle inequality."""
    p, q, r = (_law(seed + i, n).probs for i in range(3))
    assert tv(p, p) == 0.0
    assert tv(p, q) == pytest.approx(tv(q, p), abs=1e-15)
    assert 0.0 <= tv(p, q) <= 1.0
    assert tv(p, r) <= tv(p, q) + tv(q, r) + 1e-12


def test_chi2_accepts_true_law_and_rejects_wrong_law():
    """20k draws of an enumerated law pass the chi-square check at alpha = 1e-3; draws of a tempered
    version of the law (negative control) are rejected at p < 1e-6."""
    law = _law(3)
    g = torch.Generator().manual_seed(0)
    counts = law.sample_counts(20_000, g)
    assert torch.equal(law.counts(law.sample(300, torch.Generator().manual_seed(9))), law.sample_counts(300, torch.Generator().manual_seed(9)))
    res = check_law(law, counts)
    assert isinstance(res, LawCheck) and res.passed and res.alpha == 1e-3 and res.n == 20_000
    assert res.tv < 0.02
    wrong = EnumeratedLaw(law.support, torch.softmax(torch.log(law.probs) * 0.7, 0))
    pvals = negative_control(lambda c: chi2_pvalue(law, c), {"tempered": wrong.sample_counts(20_000, g)})
    assert pvals["tempered"] < 1e-6


def test_negative_control_raises_when_test_has_no_power():
    """A control drawn from the true law itself is not detected, and the helper says so by name."""
    law = _law(5)
    same = law.counts(law.sample(2000, torch.Generator().manual_seed(1)))
    with pytest.raises(AssertionError, match="'same-law' was not detected"):
        negative_control(lambda c: chi2_pvalue(law, c), {"same-law": same})


def test_chi2_false_fail_rate_is_as_stated():
    """Over 400 independent seeds, the fraction of true-law checks failing at alpha = 0.05 is 0.05 within
    4 binomial standard deviations (the stated false-fail rate is the real one)."""
    law = _law(7, 5)
    fails = 0
    for s in range(400):
        c = law.sample_counts(500, torch.Generator().manual_seed(1000 + s))
        fails += not check_law(law, c, alpha=0.05).passed
    assert abs(fails / 400 - 0.05) < 4 * math.sqrt(0.05 * 0.95 / 400)


def test_chi2_pools_small_cells_and_detects_support_violation():
    """Cells with expected count < 5 are pooled (a law with many tiny cells still tests); a sample
    outside the law's support gives p = 0; counts outside the support list raise."""
    p = torch.tensor([0.5, 0.3, 0.2] + [1e-5] * 10, dtype=torch.float64)
    p = p / p.sum()
    law = EnumeratedLaw(tuple(range(13)), p)
    c = law.counts(law.sample(3000, torch.Generator().manual_seed(2)))
    assert chi2_pvalue(law, c) > 1e-3
    z = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    assert chi2_pvalue(z, torch.tensor([10.0, 10.0, 1.0])) == 0.0
    with pytest.raises(ValueError, match="outside the support"):
        law.counts([99])


def test_enumerated_law_from_table_is_row_major():
    """from_table's support is itertools.product order, matching table.reshape(-1)."""
    t = torch.arange(1, 7, dtype=torch.float64).reshape(2, 3)
    law = EnumeratedLaw.from_table(t)
    assert law.support[4] == (1, 1)
    assert float(law.probs[4]) == pytest.approx(5 / 21)
    assert torch.allclose(empirical_law(torch.tensor([1.0, 3.0])), torch.tensor([0.25, 0.75], dtype=torch.float64))


def test_ks_accepts_true_cdf_and_rejects_shifted():
    """KS: 5k standard normals pass against 'norm' (exact false-fail rate 1e-3); shifted by 0.15 sd they are rejected."""
    x = torch.randn(5000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert check_ks(x, "norm").passed
    assert ks_pvalue(x + 0.15, "norm") < 1e-6
