"""zoo.common.spread: the mean ± sample-sd summary every seed-spread table uses."""
import json
import math
import statistics

import numpy as np
import pytest
from hypothesis import given, strategies as st

from zoo.common.spread import spread

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(st.lists(finite, min_size=2, max_size=20))
def test_sd_is_the_sample_sd_with_n_minus_1(xs):
    s = spread(xs)
    assert s.n == len(xs)
    assert s.mean == pytest.approx(float(np.mean(xs)), rel=1e-9, abs=1e-6)
    assert s.sd == pytest.approx(float(np.std(xs, ddof=1)), rel=1e-7, abs=1e-6)
    # not the population sd (ddof 0): they differ whenever the values do
    if np.std(xs) > 1e-3:
        assert s.sd > float(np.std(xs, ddof=0))


def test_one_value_has_no_sd_and_is_json_safe():
    s = spread([0.25])
    assert s.sd is None and s.text(2) == "0.25"
    assert json.loads(json.dumps(s.as_dict())) == {"mean": 0.25, "sd": None, "n": 1, "values": [0.25]}


def test_text_and_values():
    s = spread([1, 2, 3])
    assert s.text(2) == "2.00 ± 1.00" and str(s) == "2.000 ± 1.000"
    assert s.as_dict()["values"] == [1.0, 2.0, 3.0]


def test_no_values_is_a_one_line_error():
    with pytest.raises(ValueError, match="at least one value"):
        spread([])


def test_nan_propagates_rather_than_hiding_a_failed_seed():
    assert math.isnan(spread([1.0, float("nan"), 2.0]).mean)


def test_the_benchmarks_use_it():
    """probe, dsmtree and unidflow print the same summary (they each had their own before)."""
    from zoo.methods.dsmtree.benchmark import _mean_sd
    from zoo.methods.probe.report import mean_sd as probe_mean_sd
    from zoo.methods.unidflow.interference import mean_sd as unid_mean_sd

    xs = [0.91, 0.95, 0.97]
    m, sd = statistics.fmean(xs), statistics.stdev(xs)
    assert probe_mean_sd(xs) == f"{m:.3f} ± {sd:.3f}"
    assert _mean_sd(xs) == pytest.approx((m, sd))
    assert unid_mean_sd(xs)["sd"] == pytest.approx(sd) and unid_mean_sd([1.0])["sd"] is None
