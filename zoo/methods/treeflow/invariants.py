"""Named property checks for ``forestflow`` and ``treeflow`` (run by the conformance harness under Hypothesis).

All are exact (equalities or byte comparisons, no statistical test), so none has a false-fail rate.
Each carries a negative control that a plausible wrong implementation fails."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.artifacts import artifact_path
from registry.contract import invariant
from zoo.common.tabular import TabularEncoder

from .flow import NAMESPACE, FlowConfig, TreeFlow, XGBConfig, euler, fit_key, interpolate, levels

_FAST = settings(max_examples=15, deadline=None)


class NearestNeighbourRegressor:
    """An exact (interpolating) regressor: returns the target of the nearest training input."""

    def __init__(self, X: np.ndarray, Y: np.ndarray):
        self.X, self.Y = X, Y

    def __call__(self, x: np.ndarray) -> np.ndarray:
        d = ((x[:, None, :] - self.X[None, :, :]) ** 2).sum(-1)
        return self.Y[d.argmin(1)]


def _euler_with_exact_regressors(Z: np.ndarray, x0: np.ndarray, n_t: int, target: str = "velocity", extra_step: bool = False) -> np.ndarray:
    """Fit one exact regressor per level on ForestFlow's (x_t, target) pairs (eps = 0) and integrate from
    ``x0``; ``extra_step`` (a negative control) takes one more step of the same ``h = 1/(n_t - 1)``."""
    ts = levels(n_t, 0.0)
    models = []
    for t in ts[:-1]:
        xt, v = interpolate(Z, x0, t)
        models.append(NearestNeighbourRegressor(xt, v if target == "velocity" else x0))
    x = euler(x0, lambda i, t, x: models[i](x), n_t)
    return x + models[-1](x) / (n_t - 1) if extra_step else x


@st.composite
def _points(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, int]:
    seed = draw(st.integers(0, 2**31 - 1))
    n, d = draw(st.integers(1, 12)), draw(st.integers(1, 5))
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (n, d)), rng.standard_normal((n, d)), draw(st.integers(2, 8))


@invariant("exact-regressors-euler-reproduces-data")
@_FAST
@given(_points())
def exact_regressors_reproduce_data(case: tuple[np.ndarray, np.ndarray, int]) -> None:
    """With exact (interpolating) per-level regressors of ForestFlow's velocity target on the grid
    t_i = linspace(0, 1, n_t), the n_t - 1 Euler steps of h = 1/(n_t - 1) started from the training
    noise land exactly on the data points (the conditional paths are straight lines), for one noise
    level (n_t = 2: a single step of h = 1) and more. Negative controls: regressing the noise (a
    VP-style epsilon target) instead of the velocity, and one Euler step too many (n_t steps of
    h = 1/(n_t - 1)), both miss the data (the velocity x_1 - x_0 of continuous noise is never 0)."""
    Z, x0, n_t = case
    for k in (2, n_t):
        out = _euler_with_exact_regressors(Z, x0, k)
        assert np.allclose(out, Z, rtol=0, atol=1e-12), (k, np.abs(out - Z).max())
    wrong_target = _euler_with_exact_regressors(Z, x0, 2, target="noise")
    assert not np.allclose(wrong_target, Z, atol=1e-6)
    overshoot = _euler_with_exact_regressors(Z, x0, n_t, extra_step=True)
    assert not np.allclose(overshoot, Z, atol=1e-6)


@st.composite
def _mixed_table(draw: st.DrawFn) -> np.ndarray:
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(6, 30))
    return np.column_stack([rng.normal(size=n) * 10, rng.integers(0, 9, n).astype(float), rng.choice([-1.0, 2.0, 7.5], n),
                            rng.uniform(-3, 3, n)])


_TINY = FlowConfig(n_t=3, duplicate_K=2, xgb=XGBConfig(n_estimators=3, max_depth=2), global_trees=6, warm_trees=2)


@invariant("tables-round-trip-and-samples-valid")
@settings(max_examples=6, deadline=None)
@given(_mixed_table(), st.sampled_from(["per_level", "global", "warm_start"]))
def tables_valid(X: np.ndarray, mode: str) -> None:
    """Encoding round trip (min-max to [-1, 1], one-hot for the categorical column 2) is the identity,
    and every generated row of a fitted flow (each mode) is a valid table: integer column 1 integral,
    categorical column 2 one of the observed levels, every column inside the training [min, max].
    Negative control: the raw Euler output (before rounding back) is neither integral nor one-hot."""
    enc = TabularEncoder(categorical=[2], integer=[1]).fit(X)
    assert np.allclose(enc.inverse_transform(enc.transform(X)), X, rtol=0, atol=1e-9)
    flow = TreeFlow(_TINY.model_copy(update={"mode": mode}), categorical=[2], integer=[1], use_cache=False).fit(X)
    S, _ = flow.sample(40, seed=1)
    assert np.array_equal(S[:, 1], np.round(S[:, 1]))
    assert set(np.unique(S[:, 2])) <= set(np.unique(X[:, 2]))
    assert (S >= X.min(0)).all() and (S <= X.max(0)).all()
    Z, _ = flow.sample_encoded(40, seed=1)
    onehot = Z[:, 3:6]
    assert not np.array_equal(onehot, np.round(onehot)) or not np.all(onehot.sum(1) == 1)


@invariant("fit-cache-key-changes-with-data-or-config")
@_FAST
@given(st.integers(0, 2**31 - 1), st.sampled_from(["data", "label", "n_t", "duplicate_K", "mode", "eps", "max_depth", "eta", "seed"]))
def cache_keys(seed: int, what: str) -> None:
    """The fitted-booster artefact path is a function of the encoded data, the labels and every
    configuration field: changing one data entry by one ulp, one label or any one field gives a new
    path; an equal copy gives the same. Negative control: a key made of the data's shape and the
    configuration (no data hash) collides when only a value changes."""
    rng = np.random.default_rng(seed)
    Z, y, cfg = rng.uniform(-1, 1, (10, 3)), rng.integers(0, 2, 10), FlowConfig(n_t=4, duplicate_K=3)
    Z2, y2, cfg2 = Z.copy(), y.copy(), cfg
    if what == "data":
        Z2[3, 1] = np.nextafter(Z2[3, 1], 2.0)
    elif what == "label":
        y2[0] = 1 - y2[0]
    elif what in ("max_depth", "eta"):
        cfg2 = cfg.model_copy(update={"xgb": cfg.xgb.model_copy(update={what: {"max_depth": 3, "eta": 0.1}[what]})})
    else:
        cfg2 = cfg.model_copy(update={what: {"n_t": 5, "duplicate_K": 4, "mode": "global", "eps": 0.0, "seed": 1}[what]})
    path = lambda Z_, y_, c_: artifact_path(fit_key(Z_, y_, c_), "safetensors", NAMESPACE)  # noqa: E731
    assert path(Z, y, cfg) == path(Z.copy(), y.copy(), cfg.model_copy())
    assert path(Z, y, cfg) != path(Z2, y2, cfg2), what
    if what in ("data", "label"):
        naive = lambda Z_, y_, c_: artifact_path([Z_.shape, len(y_), c_.model_dump(mode="json")], "safetensors", NAMESPACE)  # noqa: E731
        assert naive(Z, y, cfg) == naive(Z2, y2, cfg2)


@invariant("deterministic-refit-and-cache-hit")
@settings(max_examples=2, deadline=None)
@given(st.sampled_from(["per_level", "warm_start"]))
def deterministic_refit(mode: str) -> None:
    """Two uncached fits with hist, nthread = 1 and a fixed seed give byte-identical boosters, and the
    cached fit returns boosters with the same predictions. Negative control: another seed changes the
    noise pairing and so the boosters' bytes."""
    X = np.random.default_rng(0).normal(size=(20, 3))
    cfg = _TINY.model_copy(update={"mode": mode})
    raw = lambda f: [bytes(b.save_raw("ubj")) for g in f.boosters for b in g.values()]  # noqa: E731
    a, b = TreeFlow(cfg, use_cache=False).fit(X), TreeFlow(cfg, use_cache=False).fit(X)
    assert raw(a) == raw(b)
    c = TreeFlow(cfg).fit(X)
    assert np.array_equal(c.sample_encoded(5, 0)[0], a.sample_encoded(5, 0)[0])
    other = TreeFlow(cfg.model_copy(update={"seed": 1}), use_cache=False).fit(X)
    assert raw(other) != raw(a)
