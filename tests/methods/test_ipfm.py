"""Behaviour tests of the ``pfgmpp`` and ``ipfm`` specs beyond their invariants and metric checks: parameter
validation, NFE accounting and the heavy-tailed prior of the teacher sampler, the direction of the IPFM update,
that distillation improves the one-step generator (and a sign-flipped loss does not), the D override of the SiD
recipes, and the zoo.load / CLI / benchmark paths."""
from __future__ import annotations

import json
import math
import sys

import pytest
import torch

import zoo
from registry.errors import ZooError
from zoo.cli import main
from zoo.methods.ipfm import distill, ipfm_loss, sid_loss, steps_to_threshold
from zoo.common.pfgmpp import AnalyticPFGMPP, TeacherConfig, heun_sample, karras_sigmas
from zoo.methods.pfgmpp import PFGMPPSampler


def test_teacher_config_validates_D():
    """D is an integer >= 1 or the string 'inf'; 0, negative and other strings are refused."""
    assert TeacherConfig(D="inf").D == "inf" and TeacherConfig(D=4).D == 4
    for bad in (0, -3, "infinity", 2.5e7):
        with pytest.raises(ValueError):
            TeacherConfig(D=bad)
    assert math.isinf(AnalyticPFGMPP("gmm3", "inf").D)


def test_sampler_nfe_and_grid():
    """N Karras points cost 2N - 1 teacher calls (Heun, Euler into sigma = 0); the grid starts at sigma_max and ends at 0."""
    pipe = zoo.load("pfgmpp", variant="toy")
    teacher = pipe.procedure.models["teacher"]
    before = teacher.calls
    out = pipe(seed=0, num_samples=8)
    assert out.nfe == 35 and teacher.calls - before == 35
    assert out.samples.shape == (8, 2) and out.samples.dtype == torch.float64
    s = karras_sigmas(18)
    assert s[0] == 80.0 and s[-1] == 0.0 and abs(s[-2] - 0.002) < 1e-12 and all(a > b for a, b in zip(s, s[1:]))


def test_pfgmpp_prior_is_heavier_tailed_than_gaussian():
    """At D = 4 the PFGM++ prior radius has a far heavier upper tail than sigma_max chi_2 (99.9% quantile ratio ~2.97 analytically, F(2, 4) tail; asserted > 2),
    and at D = inf the two priors are the same law (ratio ~ 1)."""
    g = torch.Generator().manual_seed(0)
    q = lambda x: float(torch.quantile(x.norm(dim=1), 0.999))  # noqa: E731
    gauss = q(80.0 * torch.randn(20000, 2, dtype=torch.float64, generator=g))
    assert q(AnalyticPFGMPP("gmm3", 4).prior(20000, 80.0, g)) / gauss > 2
    assert abs(q(AnalyticPFGMPP("gmm3", "inf").prior(20000, 80.0, g)) / gauss - 1) < 0.1


def test_sampler_refuses_a_teacher_without_the_interface():
    """A teacher role lacking denoise/prior is a one-line ValueError naming what is missing."""
    proc = PFGMPPSampler({"teacher": object()}, PFGMPPSampler.Params())
    with pytest.raises(ValueError, match="denoise"):
        proc(seed=0, num_samples=2)


def test_sampler_params_are_validated():
    """sigma_min >= sigma_max and an unknown prior are parameter errors."""
    pipe = zoo.load("pfgmpp", variant="toy")
    with pytest.raises(ZooError):
        pipe.procedure.with_params(sigma_min=100.0)
    with pytest.raises(ZooError):
        pipe.procedure.with_params(prior="cauchy")


def test_more_teacher_steps_are_closer_to_the_data():
    """The exact-teacher Heun sampler improves with NFE on gmm3 at D = 16 (SW2 at NFE 17 < NFE 9 < NFE 5)."""
    from zoo.common.pfgmpp import teacher_quality

    t = AnalyticPFGMPP("gmm3", 16)
    sw = [teacher_quality(t, k, n=400)["sw2"] for k in (5, 9, 17)]
    assert sw[2] < sw[1] < sw[0]


def test_ipfm_update_moves_samples_toward_teacher_minus_fake():
    """The direct (through y) gradient of the IPFM loss is -2 (f_teacher - f_fake): a gradient step moves each sample
    along f_teacher - f_fake (toward the data, away from the generator's own law); SiD's at alpha has the same
    direct gradient, -(f_teacher - f_fake)."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    y = torch.randn(5, 3, generator=g, requires_grad=True)
    (gy,) = torch.autograd.grad(ipfm_loss(a, b, y).sum(), y)
    assert torch.allclose(gy, -2 * (a - b))
    (gs,) = torch.autograd.grad(sid_loss(a, b, y, 1.2).sum(), y)
    assert torch.allclose(gs, -(a - b))


def test_distillation_improves_the_one_step_generator(monkeypatch):
    """80 IPFM steps at D = inf (after a 600-step learned teacher copy) bring the one-step generator's SW2 well below its start (the learned teacher copy
    evaluated once at sigma_init, a blurry denoiser); the same run with the teacher and fake fields swapped in the loss
    (the wrong sign) ends worse than it started."""
    t = AnalyticPFGMPP("gmm3", "inf")
    kw = dict(steps=80, init_steps=600, eval_every=80, eval_n=1000, seed=0)
    good = distill(t, **kw)["history"]
    assert good[-1]["sw2"] < 0.5 * good[0]["sw2"]
    module = sys.modules["zoo.methods.ipfm.distill"]
    monkeypatch.setattr(module, "ipfm_loss", lambda f_t, f_f, y: ipfm_loss(f_f, f_t, y))
    bad = distill(t, **kw)["history"]
    assert bad[0]["sw2"] == good[0]["sw2"] and bad[-1]["sw2"] > bad[0]["sw2"]


def test_sid_recipe_overrides_D_without_touching_the_cached_teacher():
    """The sid recipes run at D = inf on a D = 16 teacher role; the cached role keeps D = 16, and the run is seeded."""
    pipe = zoo.load("ipfm", variant="toy")
    teacher = pipe.procedure.models["teacher"]
    out1 = pipe.procedures["sid"](seed=3, num_samples=4, steps=2, init_steps=2)
    out2 = pipe.procedures["sid"](seed=3, num_samples=4, steps=2, init_steps=2)
    assert teacher.D == 16
    assert torch.equal(out1.samples, out2.samples)
    assert [h["step"] for h in out1.history] == [0, 2]


def test_steps_to_threshold():
    h = [{"step": 0, "sw2": 1.0}, {"step": 50, "sw2": 0.4}, {"step": 100, "sw2": 0.2}]
    assert steps_to_threshold(h, 0.3) == 100 and steps_to_threshold(h, 0.5) == 50 and steps_to_threshold(h, 0.1) is None


def test_point_mass_heun_is_exact_through_the_public_sampler():
    """heun_sample is what PFGMPPSampler runs: for a one-point law it lands on the point from any prior sample."""

    class One:
        def denoise(self, x, s):
            return torch.ones_like(x)

    x, nfe = heun_sample(One(), 50 * torch.randn(4, 2, dtype=torch.float64), karras_sigmas(4))
    assert nfe == 7 and torch.allclose(x, torch.ones_like(x), atol=1e-12)


def test_cli_run_pfgmpp(capsys):
    assert main(["run", "pfgmpp", "--variant", "toy", "--sampler", "heun-9"]) == 0


@pytest.mark.slow
def test_bench_quick(tmp_path):
    """``zoo bench ipfm --quick`` writes the table, the PNG and the JSON with one row per D."""
    assert main(["bench", "ipfm", "--quick", "--out-dir", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "ipfm-bench.json").read_text())["result"]
    assert [r["D"] for r in res["rows"]] == ["16", "inf"] and (tmp_path / "ipfm.png").exists()
    assert "| 16 | IPFM |" in (tmp_path / "ipfm-bench.md").read_text()


def test_shipped_generator_is_one_step_and_trained():
    """The shipped generator costs one call and is far closer to the data than the same network untrained
    (SW2 on 1000 samples: trained < 0.3, a freshly initialised one > 0.5)."""
    from zoo.methods.ipfm.toy import OneStepSampler, build_generator
    from zoo.common.pfgmpp import quality

    pipe = zoo.load("ipfm", variant="toy")
    proc = pipe.procedures["one-step"]
    out = proc(seed=5, num_samples=1000)
    teacher = proc.models["teacher"]
    ref = teacher.gmm.sample(1000, torch.Generator().manual_seed(9))
    assert out.nfe == 1 and quality(out.samples, teacher, ref)["sw2"] < 0.3
    torch.manual_seed(0)
    fresh = OneStepSampler({"teacher": teacher, "generator": build_generator()}, OneStepSampler.Params())
    assert quality(fresh(seed=5, num_samples=1000).samples, teacher, ref)["sw2"] > 0.5


@pytest.mark.parametrize("old, name", [("zoo.methods.pfgmpp", "AnalyticPFGMPP"), ("zoo.methods.pfgmpp", "heun_sample"),
                                       ("zoo.methods.pfgmpp.toy", "analytic_pfgmpp"), ("zoo.methods.pfgmpp.toy", "EDMField"),
                                       ("zoo.methods.pfgmpp.evaluate", "teacher_quality"), ("zoo.common.flows", "pfgmpp_denoise")])
def test_moved_pfgmpp_names_are_deprecated_aliases(old, name):
    """PFGM++ lives in zoo.common.pfgmpp: the old paths still import, warn naming the new one, and give the same object."""
    import importlib

    import zoo.common.pfgmpp as common

    with pytest.warns(DeprecationWarning, match=f"zoo.common.pfgmpp.{name}"):
        obj = getattr(importlib.import_module(old), name)
    assert obj is getattr(common, name)


def test_ipfm_reaches_its_teacher_through_zoo_common_only():
    """No ipfm module imports the pfgmpp method package; its teacher role's factory is zoo.common.pfgmpp's."""
    from pathlib import Path

    import zoo.methods.ipfm as pkg

    for f in sorted(Path(pkg.__file__).parent.glob("*.py")):
        assert "zoo.methods.pfgmpp" not in f.read_text(), f.name
    teacher = zoo.spec("ipfm").models["teacher"].variants["toy"]
    assert teacher.factory == "zoo.common.pfgmpp:analytic_pfgmpp"
    pipe = zoo.load("ipfm", variant="toy")
    assert type(pipe.procedures["one-step"].models["teacher"]).__module__ == "zoo.common.pfgmpp"


def test_fresh_eval_draws_differ_per_step_and_draw_and_the_default_reuses_one_set():
    """fresh_eval: the final draws are distinct fresh samples (different SW2 values), reproducible for the same seed;
    without it every evaluation reuses one z set and one reference set, so an untrained generator (steps = 0) scores
    the same at step 0 however often it is evaluated and final_draws is ignored."""
    t = AnalyticPFGMPP("gmm3", "inf")
    kw = dict(steps=0, init_steps=5, eval_n=300, seed=1)
    fresh = distill(t, fresh_eval=True, final_draws=3, **kw)["final"]
    again = distill(t, fresh_eval=True, final_draws=3, **kw)["final"]
    assert len(set(fresh["sw2_draws"])) == 3 and fresh["sw2_draws"] == again["sw2_draws"]
    assert abs(fresh["sw2"] - sum(fresh["sw2_draws"]) / 3) < 1e-12
    fixed = distill(t, final_draws=3, **kw)
    assert fixed["final"]["sw2_draws"] == [fixed["history"][-1]["sw2"]]
    from zoo.methods.ipfm.distill import eval_seed

    seeds = {eval_seed(s, st, d, w) for s in range(3) for st in range(0, 500, 25) for d in range(8) for w in range(3)}
    assert len(seeds) == 3 * 20 * 8 * 3


def test_learned_teacher_replaces_the_exact_field_in_distillation():
    """teacher_field='learned': after the one cached fit, distillation never calls the exact field (the trick that makes
    finite-D runs cheap); the generator starts as the teacher network's weights; the fit approximates the exact field
    (relative field error at sigma in [0.1, 5] well below an untrained network's) and leaves the global RNG alone."""
    from zoo.common.pfgmpp import EDMField
    from zoo.methods.ipfm.distill import LearnedTeacher, learned_teacher

    t = AnalyticPFGMPP("gmm3", "inf")
    lt = learned_teacher(t, 300)
    state = torch.random.get_rng_state()
    lt2 = learned_teacher(t, 300)
    assert torch.equal(state, torch.random.get_rng_state())
    assert all(torch.equal(a, b) for a, b in zip(lt.net.state_dict().values(), lt2.net.state_dict().values()))
    g = torch.Generator().manual_seed(0)
    y = t.gmm.sample(500, g)
    sig = torch.exp(torch.empty(500, dtype=torch.float64).uniform_(math.log(0.1), math.log(5.0), generator=g))
    x = y + sig[:, None] * torch.randn(500, 2, dtype=torch.float64, generator=g)
    exact = t.denoise(x, sig)
    err = lambda f: float(((f - exact) ** 2).sum() / ((x - exact) ** 2).sum())  # noqa: E731
    torch.manual_seed(0)
    untrained = LearnedTeacher(t, EDMField(2, t.sigma_data, 64, 3))
    assert err(lt.denoise(x, sig)) < 0.2 * err(untrained.denoise(x, sig))
    calls = t.calls
    out = distill(lt, steps=3, eval_every=3, eval_n=200, teacher_field="learned")
    assert t.calls == calls and lt.calls > 0
    out0 = distill(lt, steps=0, eval_n=200, teacher_field="learned", ema=0)
    assert all(torch.equal(a, b) for a, b in zip(out0["generator"].state_dict().values(), lt.net.state_dict().values()))
    assert out["history"][-1]["step"] == 3


def test_generator_noise_laws():
    """tmax: SiD's rule on [0.002, ~24.4]; loguniform on the same range with median sqrt(0.002 * 24.4); lognormal:
    median exp(-1.2); an unknown law is refused."""
    from zoo.methods.ipfm.losses import gen_sigma

    g = torch.Generator().manual_seed(0)
    tm, lu, ln = (gen_sigma(k, 20000, g) for k in ("tmax", "loguniform", "lognormal"))
    assert tm.min() >= 0.002 - 1e-12 and tm.max() <= 24.5 and lu.min() >= 0.002 - 1e-12 and lu.max() <= 24.4 + 1e-9
    assert abs(float(lu.log().median()) - 0.5 * math.log(0.002 * 24.4)) < 0.1
    assert abs(float(ln.log().median()) + 1.2) < 0.05 and ln.max() > 24.4
    with pytest.raises(ValueError):
        gen_sigma("uniform", 4, g)


def test_bands_verdict_follows_the_preregistered_rule(monkeypatch):
    """bands(): 'supported' only when the paired AUC difference (16 - inf) is < 0 by more than 2 s.e.; a consistent
    -0.05 passes, a difference inside its spread does not (synthetic runs; no training)."""
    from zoo.methods.ipfm import benchmark as b
    from zoo.methods.ipfm.params import BenchOptions

    def fake_run(shift):
        def run(D, seed, opts, **kw):
            sw = 0.3 + (shift[seed] if D == "16" else 0.0)
            h = [{"step": 0, "sw2": sw}, {"step": 10, "sw2": sw}]
            return {"seed": seed, "history": h, "start_sw2": sw, "final": {"sw2": sw}, "auc": b.auc(h), "steps_to_threshold": None}
        return run

    monkeypatch.setattr(b, "ceiling", lambda *a: {"teacher_heun35_sw2": (0.07, 0.0), "data_floor_sw2": (0.07, 0.0)})
    monkeypatch.setattr(b, "learned_teacher", lambda *a, **k: None)
    opts = BenchOptions(bands_seeds=[0, 1, 2, 3, 4])
    monkeypatch.setattr(b, "_run", fake_run([-0.05, -0.06, -0.04, -0.05, -0.055]))
    assert b.bands(opts, progress=False)["verdict"] == "supported"
    monkeypatch.setattr(b, "_run", fake_run([-0.05, 0.04, -0.03, 0.05, -0.02]))
    res = b.bands(opts, progress=False)
    assert res["verdict"].startswith("not supported") and abs(res["paired_auc"]["mean"] + 0.002) < 1e-12
    assert b.auc([{"step": 0, "sw2": 1.0}, {"step": 10, "sw2": 0.0}, {"step": 30, "sw2": 0.0}]) == pytest.approx(5 / 30)
