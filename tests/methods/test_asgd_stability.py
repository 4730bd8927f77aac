"""Behaviour tests for asgd-stability beyond the spec's invariants and metric checks: negative
controls of the gates (an uncoupled estimate; m-dependence when N grows), the delay mechanics
against a brute-force reference, input validation, and the zoo.load / zoo run / bench paths."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import zoo
from zoo.cli import main
from zoo.methods.asgd_stability import Problem, StabilityReport, delay_pmf, participation_weights, run_coupled, slope_with_se
from zoo.methods.asgd_stability.analysis import Z_ONE_SIDED_1PC, Z_TWO_SIDED_1PC
from zoo.methods.asgd_stability.simulator import loss_and_grad, make_schedule


def test_uncoupled_estimate_fails_the_rate_gate() -> None:
    """Negative control of the O(1/sqrt(mn)) gate: coupled runs that do not share the schedule
    measure seed noise, ε stops decaying with N and the gate rejects (slope ~ 0)."""
    Ns = [64, 128, 256, 512]
    res = [run_coupled(Problem(), N=N, m=4, delay="uniform:4", coupling="independent", seeds=range(20), k=4, n_test=64) for N in Ns]
    slope, se = slope_with_se([float(n) for n in Ns], res)
    assert slope > -0.2 and not slope <= -0.5 + Z_ONE_SIDED_1PC * se
    coupled = [run_coupled(Problem(), N=N, m=4, delay="uniform:4", seeds=range(20), k=4, n_test=64) for N in Ns]
    assert all(c.stability < 0.5 * u.stability for c, u in zip(coupled, res))


def test_m_test_detects_dependence_when_n_is_fixed() -> None:
    """The 'depends on mn, not m' test has power: with n fixed, N = n m grows with m and the same
    two-sided test on the slope vs m rejects."""
    rep = StabilityReport({}, StabilityReport.Params(sweep="m-fixed-n", n=32, ms=(1, 2, 4, 8, 16), seeds=20))(seed=0)
    # the report's slope is against log N = log(32 m), the same as against log m up to a shift
    m_slope, m_se = rep["slope"], rep["slope_se"]
    assert abs(m_slope) > Z_TWO_SIDED_1PC * m_se and m_slope < -0.4


def test_delayed_updates_match_a_brute_force_reference() -> None:
    """A fixed delay τ = 2 with m = 1: the simulator's base run equals the hand-written
    w_{t+1} = w_t - η ∇f(w_{max(t-2, 0)}; z_{ξ_t}); reading the fresh iterate instead (a plausible
    bug) gives a different model."""
    p, N, seed = Problem("logistic-separable", d=4), 24, 7
    r = run_coupled(p, N=N, m=1, delay="fixed:2", seeds=[seed], k=1, n_test=4)
    g = torch.Generator().manual_seed(seed)
    w_star = torch.randn(p.d, generator=g, dtype=torch.float64)
    w_star = w_star / w_star.norm() * math.sqrt(p.d)
    x, y = p.sample(g, N, w_star)
    p.sample(g, 1, w_star), p.sample(g, 4, w_star), torch.randint(0, N, (1,), generator=g)
    sched = make_schedule([g], N, 1, N, delay_pmf("fixed:2"), [1.0])
    order, eta = sched.sample_index(N)[0].tolist(), r.config["eta"]
    ws = [torch.zeros(p.d, dtype=torch.float64)]
    fresh = torch.zeros(p.d, dtype=torch.float64)
    for t, j in enumerate(order):
        ws.append(ws[-1] - eta * loss_and_grad(p.loss, ws[max(t - 2, 0)], x[j], y[j])[1])
        fresh = fresh - eta * loss_and_grad(p.loss, fresh, x[j], y[j])[1]
    assert r.w is not None
    assert torch.allclose(r.w[0], ws[-1], rtol=1e-12, atol=1e-15)
    assert not torch.allclose(r.w[0], fresh, rtol=1e-6, atol=1e-9)


def test_bad_schedules_are_refused() -> None:
    with pytest.raises(ValueError, match="not divisible"):
        run_coupled(Problem(), N=10, m=4, seeds=[0])
    with pytest.raises(ValueError, match="non-negative"):
        delay_pmf("0.5,-1")
    with pytest.raises(ValueError, match="3 non-negative weights"):
        participation_weights("1,2", 3)
    assert participation_weights("one-slow:10", 2) == pytest.approx([10 / 11, 1 / 11])
    assert delay_pmf("geometric:1:3") == pytest.approx([8 / 15, 4 / 15, 2 / 15, 1 / 15])


def test_zoo_load_runs_a_recipe_with_overrides() -> None:
    pipe = zoo.load("asgd-stability")
    rep = pipe(seed=3, Ns=(32, 64), seeds=4, k=2, n_test=32)
    assert [r["N"] for r in rep["rows"]] == [32, 64] and all(r["stability"] > 0 for r in rep["rows"])
    assert "slope" in rep and "rate_consistent" in rep


def test_cli_run_writes_the_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fig"
    assert main(["run", "asgd-stability", "--sampler", "stability-vs-m", "--param", "seeds=3", "--param", "N=64",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "depends on mn, not m" in text and (tmp_path / "fig.png").stat().st_size > 1000


def test_bench_quick_writes_table_png_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "asgd-stability", "--quick", "--out-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "| N = mn |" in text and "ε SGD" in text
    res = json.loads((tmp_path / "asgd-stability-bench.json").read_text())["result"]
    assert [r["N"] for r in res["N"]["rows"]] == [64, 128, 256]
    assert set(res) >= {"N", "m", "m-fixed-n", "delay", "participation", "sgd"}
    assert (tmp_path / "asgd-stability.png").stat().st_size > 1000
