"""forestflow / treeflow: behaviour of the tree flows, the run-time artefact cache, the procedure and the
benchmark (the spec invariants are run by conformance, not repeated here)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from zoo.methods.treeflow import FlowConfig, TabularFlowGeneration, TreeFlow, XGBConfig, fit_artifact_path, load_split
from zoo.methods.treeflow import flow as flow_mod

TINY = FlowConfig(n_t=4, duplicate_K=3, xgb=XGBConfig(n_estimators=5, max_depth=3), global_trees=10, warm_trees=3)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))


def test_xgboost_cpu_imports_with_timm_transformers_diffusers():
    """The CPU-only XGBoost wheel lives beside the deep-learning stack (one process, no import clash)."""
    code = "import xgboost, timm, transformers, diffusers; print(xgboost.__version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().split(".")[0] >= "3"


def test_booster_counts_per_mode():
    """per_level: n_t - 1 boosters per class (no t = 1 model); global: one booster over (x_t, t) with
    global_trees rounds; warm_start: one booster with n_estimators + (n_t - 2) * warm_trees rounds."""
    s = load_split("iris")
    per = TreeFlow(TINY, use_cache=False).fit(s.X_train, s.y_train)
    assert len(per.boosters) == 3 and sorted(per.boosters[0]) == ["level0", "level1", "level2"]
    glo = TreeFlow(TINY.model_copy(update={"mode": "global"}), use_cache=False).fit(s.X_train, s.y_train)
    assert list(glo.boosters[0]) == ["global"] and glo.boosters[0]["global"].num_boosted_rounds() == 10
    assert glo.boosters[0]["global"].num_features() == 5  # 4 columns + t
    warm = TreeFlow(TINY.model_copy(update={"mode": "warm_start"}), use_cache=False).fit(s.X_train, s.y_train)
    assert warm.boosters[0]["warm"].num_boosted_rounds() == 5 + 2 * 3


def test_warm_start_level0_equals_forestflow_level0_and_later_levels_differ():
    """Warm-starting reuses ForestFlow's level-0 fit exactly (same noise pairing, same rounds) and only
    then adds rounds: at level 0 the two velocities agree bit for bit, at later levels they do not."""
    X = np.random.default_rng(3).normal(size=(25, 3))
    per = TreeFlow(TINY, use_cache=False).fit(X)
    warm = TreeFlow(TINY.model_copy(update={"mode": "warm_start"}), use_cache=False).fit(X)
    x = np.random.default_rng(4).normal(size=(10, 3))
    assert np.array_equal(per.velocity(0, 0, 0.0, x), warm.velocity(0, 0, 0.0, x))
    assert not np.array_equal(per.velocity(0, 2, 2 / 3, x), warm.velocity(0, 2, 2 / 3, x))


def test_second_fit_is_a_cache_hit_and_changed_data_refits(monkeypatch):
    """The boosters are a run-time artefact: a second fit on the same data and configuration never
    calls XGBoost; one changed value refits (and lands in another file)."""
    X = np.random.default_rng(0).normal(size=(20, 3))
    first = TreeFlow(TINY).fit(X)
    path = Path(fit_artifact_path(first.encoder.transform(X), None, TINY))
    assert path.is_file()

    def boom(*a, **k):
        raise AssertionError("refitted despite a cached artefact")

    monkeypatch.setattr(flow_mod, "_train", boom)
    again = TreeFlow(TINY).fit(X)
    assert np.array_equal(again.sample_encoded(7, 3)[0], first.sample_encoded(7, 3)[0])
    X2 = X.copy()
    X2[0, 0] += 1e-3
    with pytest.raises(AssertionError, match="refitted"):
        TreeFlow(TINY).fit(X2)


def test_label_conditional_samples_follow_their_class():
    """Per-class flows generate each class in its own region: on iris, generated setosa (class 0) rows
    have petal length below every generated virginica (class 2) row's, as in the data; class
    frequencies follow the empirical ones (120 draws, 3 classes of 35 each: within 4 binomial sd)."""
    s = load_split("iris")
    cfg = FlowConfig(n_t=6, duplicate_K=10, xgb=XGBConfig(n_estimators=20, max_depth=4))
    X, y = TreeFlow(cfg, use_cache=False).fit(s.X_train, s.y_train).sample(120, seed=0)
    assert X[y == 0, 2].max() < X[y == 2, 2].min()
    counts = np.bincount(y, minlength=3)
    assert np.all(np.abs(counts - 40) <= 4 * np.sqrt(120 * (1 / 3) * (2 / 3))), counts


def test_procedure_output_and_parameter_bounds():
    """The recipe returns typed measurements and valid samples; out-of-range sizes are refused by name."""
    proc = TabularFlowGeneration({}, TabularFlowGeneration.Params(dataset="iris", mode="global", n_t=3, duplicate_K=2,
                                                                    global_trees=8, max_depth=3, use_cache=False))
    out = proc(seed=0)
    assert 0 <= out.auc <= 1 and out.w1_test > 0 and 0 <= out.utility <= 1
    assert out.samples.shape == (105, 4) and set(np.unique(out.labels)) <= {0, 1, 2}
    with pytest.raises(ValidationError, match="n_t"):
        TabularFlowGeneration.Params(n_t=1)
    with pytest.raises(ValidationError, match="mode"):
        TabularFlowGeneration.Params(mode="leaf_routing")
    with pytest.raises(ValidationError, match="n_estimators"):
        XGBConfig(n_estimators=10**6)


def test_bench_runs_and_writes_table_png_json(tmp_path, capsys):
    """``zoo bench treeflow`` (tiny sizes) runs all three modes in one run and writes the table, PNG and JSON."""
    from zoo.cli import main

    assert main(["bench", "treeflow", "--datasets", "iris", "--n-t", "3", "--K", "2", "--n-estimators", "3", "--max-depth", "2",
                 "--global-trees", "6", "--warm-trees", "2", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| iris | ForestFlow (per level) |" in out and "treeflow global [inferred]" in out
    assert (tmp_path / "treeflow.png").stat().st_size > 1000
    rows = json.loads((tmp_path / "treeflow-bench.json").read_text())["result"]["rows"]
    assert [r["mode"] for r in rows] == ["per_level", "global", "warm_start"] and rows[0]["fit_ratio"] == 1.0


def test_bench_fits_every_mode_once_untimed_before_the_timed_fits(monkeypatch):
    """The benchmark's first timed fit must not pay for the imports and set-up of a fresh process: every mode is
    fitted once at a tiny size (n_t 2) before any timed fit, and those warm-up fits are not in the table."""
    from zoo.methods.treeflow import benchmark

    calls = []
    real = benchmark.evaluate

    def spy(split, cfg, **kw):
        calls.append((cfg.mode, cfg.n_t))
        return real(split, cfg, **kw)

    monkeypatch.setattr(benchmark, "evaluate", spy)
    res = benchmark.measure(["iris"], n_t=3, K=2, n_estimators=3, max_depth=2, global_trees=6, warm_trees=2, progress=False)
    assert calls[:3] == [("per_level", 2), ("global", 2), ("warm_start", 2)]
    assert calls[3:] == [("per_level", 3), ("global", 3), ("warm_start", 3)] and len(res["rows"]) == 3
    assert all(r["fit_cpu_s"] > 0 and r["fit_s"] > 0 for r in res["rows"])
