"""dsmtree: student objectives' inputs/targets, the cached teacher, the recipe and the benchmark
(the spec invariants run in conformance)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from zoo.methods.dsmtree import TreeDistillation, batch_targets, fit_teacher, teacher_prob, xor_task


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path / "cache"))


def test_objectives_query_the_teacher_where_they_should():
    """dsm-trajectory: inputs x + σε with σ appended, targets = teacher at the noised point; dsm-clean: same
    inputs, targets = teacher at the clean point; kd: clean inputs, σ = 0, teacher at x; hard: the labels."""
    X, y = xor_task(300, 0)
    t = fit_teacher(X, y, n_estimators=20, max_depth=3, use_cache=False)
    p = teacher_prob(t, X)
    rng = np.random.default_rng(1)
    s = rng.choice([0.0, 0.1, 0.2], 300).astype(np.float32)
    e = rng.standard_normal(X.shape).astype(np.float32)
    inp, tgt = batch_targets("dsm-trajectory", X, y, p, t, s, e)
    assert np.allclose(inp[:, :-1], X + s[:, None] * e) and np.array_equal(inp[:, -1], s)
    assert np.array_equal(tgt, teacher_prob(t, inp[:, :-1]))
    inp_c, tgt_c = batch_targets("dsm-clean", X, y, p, t, s, e)
    assert np.array_equal(inp_c, inp) and np.array_equal(tgt_c, p)
    inp_k, tgt_k = batch_targets("kd", X, y, p, t, s, e)
    assert np.array_equal(inp_k[:, :-1], X) and not inp_k[:, -1].any() and np.array_equal(tgt_k, p)
    assert np.array_equal(batch_targets("hard", X, y, p, t, s, e)[1], y)


def test_teacher_is_a_cached_artifact(monkeypatch):
    """A second fit on the same data never calls xgboost.train and predicts identically; new data refits."""
    import xgboost

    X, y = xor_task(200, 3)
    a = fit_teacher(X, y, n_estimators=10, max_depth=3)

    def boom(*args, **kwargs):
        raise AssertionError("teacher refitted")

    monkeypatch.setattr(xgboost, "train", boom)
    b = fit_teacher(X, y, n_estimators=10, max_depth=3)
    assert np.array_equal(teacher_prob(a, X), teacher_prob(b, X))
    with pytest.raises(AssertionError, match="refitted"):
        fit_teacher(X[:-1], y[:-1], n_estimators=10, max_depth=3)


def test_recipe_output_and_bounds():
    proc = TreeDistillation({}, TreeDistillation.Params(mode="dsm-trajectory", n_train=200, n_test=300, steps=20, batch=32,
                                                        teacher_trees=20, use_cache=False))
    out = proc(seed=0)
    assert 0.4 < out.teacher_acc <= 1 and 0 <= out.student_acc <= 1 and out.gap == pytest.approx(out.teacher_acc - out.student_acc)
    with pytest.raises(ValidationError, match="mode"):
        TreeDistillation.Params(mode="leaf-routing")
    with pytest.raises(ValidationError, match="steps"):
        TreeDistillation.Params(steps=0)


def test_bench_runs_all_students(tmp_path, capsys):
    """``zoo bench dsmtree`` (tiny sizes): the four students in the table, the JSON and the PNG in --out-dir."""
    from zoo.cli import main

    assert main(["bench", "dsmtree", "--steps", "3", "--n-train", "100", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| student dsm-trajectory [inferred] |" in out and "| student hard |" in out
    doc = json.loads((tmp_path / "dsmtree-bench.json").read_text())
    assert set(doc["result"]["students"]) == {"hard", "kd", "dsm-trajectory", "dsm-clean"}
    assert doc["result"]["settings"] == {"steps": 3, "n_train": 100, "seeds": [0]}
    assert (tmp_path / "dsmtree.png").is_file() and (tmp_path / "dsmtree-bench.md").read_text().startswith("XOR of thresholds")


def test_bench_budget_grid_one_row_per_cell(tmp_path, capsys):
    """``--grid-steps`` (tiny sizes): one row per (steps, width, objective) of the three grid objectives, each
    aggregating exactly the requested seeds (mean and ddof-1 sd of the per-seed cells), in the md, JSON and PNG."""
    from zoo.cli import main

    assert main(["bench", "dsmtree", "--steps", "2", "--n-train", "60", "--seeds", "0", "1", "--grid-steps", "2", "3",
                 "--grid-widths", "4", "8", "--out-dir", str(tmp_path)]) == 0
    grid = json.loads((tmp_path / "dsmtree-bench.json").read_text())["result"]["grid"]
    keys = [(r["steps"], r["width"], r["mode"]) for r in grid["rows"]]
    assert keys == [(s, w, m) for s in (2, 3) for w in (4, 8) for m in ("hard", "kd", "dsm-trajectory")]
    for r in grid["rows"]:
        cs = [c for c in grid["cells"] if (c["steps"], c["width"], c["mode"]) == (r["steps"], r["width"], r["mode"])]
        assert r["seeds"] == [c["seed"] for c in cs] == [0, 1]
        gaps = [100 * (c["teacher_acc"] - c["acc"]) for c in cs]
        assert r["acc_mean"] == pytest.approx(np.mean([c["acc"] for c in cs]))
        assert r["acc_sd"] == pytest.approx(np.std([c["acc"] for c in cs], ddof=1))
        assert r["gap_mean"] == pytest.approx(np.mean(gaps)) and r["gap_sd"] == pytest.approx(np.std(gaps, ddof=1))
    md = (tmp_path / "dsmtree-bench.md").read_text()
    assert md.startswith("XOR of thresholds") and "| 3 | 8 | dsm-trajectory [inferred] |" in md and "±" in md
    assert (tmp_path / "dsmtree-grid.png").is_file()


def test_grid_aggregate_is_mean_and_sample_sd_per_cell():
    """``aggregate`` on planted cells: per (steps, width, mode) the mean and the ddof-1 sd of accuracy and of the
    per-seed gap (two teachers of different accuracy, so sd(gap) ≠ sd(acc)); one seed has no sd."""
    from zoo.methods.dsmtree.benchmark import aggregate

    cells = [{"seed": s, "steps": 10, "width": 4, "mode": "kd", "teacher_acc": ta, "acc": a, "gap_points": 100 * (ta - a), "s": 1.0}
             for s, ta, a in [(0, 0.99, 0.90), (1, 0.95, 0.94), (2, 0.97, 0.92)]]
    cells.append({"seed": 0, "steps": 20, "width": 4, "mode": "kd", "teacher_acc": 0.99, "acc": 0.97, "gap_points": 2.0, "s": 2.0})
    rows = aggregate(cells)
    assert [(r["steps"], r["width"], r["mode"], r["seeds"]) for r in rows] == [(10, 4, "kd", [0, 1, 2]), (20, 4, "kd", [0])]
    assert rows[0]["acc_mean"] == pytest.approx(0.92) and rows[0]["acc_sd"] == pytest.approx(0.02)
    assert rows[0]["gap_mean"] == pytest.approx(5.0) and rows[0]["gap_sd"] == pytest.approx(np.std([9.0, 1.0, 5.0], ddof=1))
    assert rows[1]["acc_sd"] is None and rows[1]["gap_mean"] == pytest.approx(2.0)
