"""Behaviour tests for fmrg beyond the spec's invariants and metric checks: the two-time interface check, per-call
overrides through zoo.load, monotone reward in a small strength range, FMRG-J vs FMRG-E on an identity-Jacobian
flow map (and its negative control), the LQR optimum against a brute-force control search, the dual-time
embedder patch on a tiny diffusers FluxTransformer2DModel, and the zoo run / bench paths."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import zoo
from registry.errors import ParamError
from zoo.cli import main
from zoo.common.gmm import GaussianMixture, analytic_model
from zoo.methods.fmrg import ExactFlowMapModel, FlowMapSampler, FMRGSampler
from zoo.methods.fmrg.rewards import RewardSpec, gramian, lqr_endpoint, reward_fn

R = {"kind": "quadratic", "target": [0.3, 1.4], "tau": 0.5}


def _gauss(mu, v) -> ExactFlowMapModel:
    return ExactFlowMapModel(GaussianMixture([1.0], [list(mu)], variances=[list(v)]))


def _x0(n: int = 32, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def test_a_model_without_the_two_time_interface_is_refused_in_one_line() -> None:
    vp = analytic_model("gmm3")  # the shared VP diffusion model: denoiser only, no flow map
    with pytest.raises(ParamError) as exc:
        FMRGSampler({"flow_map": vp}, FMRGSampler.Params())
    msg = str(exc.value)
    assert "\n" not in msg and "two-time" in msg and "sample_mode" in msg and "AnalyticDiffusionModel" in msg


def test_bad_parameters_name_the_parameter() -> None:
    pipe = zoo.load("fmrg")
    with pytest.raises(ParamError, match="early_stop"):
        pipe(seed=0, batch_size=2, num_steps=2, early_stop=3)
    with pytest.raises(ParamError, match="grad_mode"):
        pipe(seed=0, batch_size=2, grad_mode="hessian")


def test_zoo_load_default_sampler_and_zero_strength_override() -> None:
    pipe = zoo.load("fmrg")
    assert pipe.variant == "toy"
    out = pipe(seed=0, batch_size=16)
    assert out.samples.shape == (16, 2) and out.nfe == 4 and out.rewards.shape == (16,)
    off = pipe(seed=0, batch_size=16, step_size=0.0)
    ref = pipe.procedures["unguided"](seed=0, batch_size=16)
    assert torch.equal(off.samples, ref.samples)
    assert float(out.rewards.mean()) > float(ref.rewards.mean())  # guidance raises the reward


def test_reward_non_decreasing_in_small_strengths() -> None:
    """Method note invariant 6 (a small strength range only): plain FMRG-J on a Gaussian with a quadratic reward."""
    m = _gauss([1.0, 0.5], [0.25, 0.25])
    x0 = _x0(64)
    means = []
    for eta in (0.0, 0.02, 0.05, 0.1, 0.2):
        P = FMRGSampler.Params(num_steps=4, grad_mode="jac", step_size=eta, use_adam=False, normalize_grad=False, reward=R)
        means.append(float(FMRGSampler({"flow_map": m}, P)(noise=x0).rewards.mean()))
    assert all(b > a for a, b in zip(means, means[1:])), means


def _inner(m, x, t, grad_mode):
    """FMRG's inner displacement of one plain step of size 1 (z - x for J, x1* - x1_hat for E)."""
    r = reward_fn(RewardSpec(**R))
    if grad_mode == "jac":
        z = x.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(r(m.flow_map(z, t, 1.0)).sum(), z)
        return g
    x1 = m.flow_map(x, t, 1.0).detach().requires_grad_(True)
    (g,) = torch.autograd.grad(r(x1).sum(), x1)
    return g


def test_fmrg_j_gradient_is_the_endpoint_gradient_times_the_flow_map_jacobian() -> None:
    """For diagonal Gaussian data the FMRG-J inner gradient is FMRG-E's times the flow-map Jacobian S_1/S_t per
    coordinate (S_t = sqrt((1-t)^2 + t^2 v)). The method note's invariant 4 ("N(mu, I): the flow map is a translation,
    so J and E coincide") does not hold for the rectified flow: S_t is not constant even for v = 1 (S_0.3 = 0.76),
    so the two gradients differ there too (asserted, as the correction of the note)."""
    x = _x0(8)
    for v in ([1.0, 1.0], [0.2, 3.0]):
        m = _gauss([0.5, -1.0], v)
        vv = torch.tensor(v, dtype=torch.float64)
        for t in (0.0, 0.3, 0.8):
            S = lambda u: torch.sqrt((1 - u) ** 2 + u**2 * vv)  # noqa: E731
            jac, euc = _inner(m, x, t, "jac"), _inner(m, x, t, "euc")
            assert torch.allclose(jac, euc * S(1.0) / S(t), atol=1e-12, rtol=1e-12)
            if t > 0:
                assert not torch.allclose(jac, euc, atol=1e-3)


def test_lqr_endpoint_beats_a_brute_force_search_over_controls() -> None:
    """The closed-form optimum vs random piecewise-constant controls on a 200-step Euler discretisation of
    dx/dt = b_t(x) + u_t (exact affine drift of N(mu, v)): no sampled control reaches a higher objective, and the
    closed form's objective agrees with the discretised one of its own control u_t = Phi(1, t) p (1e-2)."""
    mu, v, y, tau = 0.4, 0.3, 1.5, 0.6
    x0 = torch.tensor([[-0.7]], dtype=torch.float64)
    S = lambda t: math.sqrt((1 - t) ** 2 + t**2 * v)  # noqa: E731
    X = lambda x, a, b: b * mu + (S(b) / S(a)) * (x - a * mu)  # noqa: E731
    n = 200
    ts = [k / n for k in range(n + 1)]

    def run(u):
        x = x0.clone()
        for k in range(n):
            t, tn = ts[k], ts[k + 1]
            x = X(x, t, tn) + (tn - t) * u[k]  # exact drift flow, then the control (Lie splitting)
        cost = 0.5 * sum(float(uk) ** 2 for uk in u) / n
        return float(-((x - y) ** 2).sum() / (2 * tau**2)) - cost

    x1 = X(x0, 0.0, 1.0)
    opt = lqr_endpoint(x1, torch.tensor([v], dtype=torch.float64), torch.tensor([y], dtype=torch.float64), tau)
    p = float(-(opt - y) / tau**2)
    u_star = [S(1.0) / S(ts[k]) * p for k in range(n)]
    J_star = run(u_star)
    closed = float(-((opt - y) ** 2).sum() / (2 * tau**2)) - 0.5 * p**2 * float(gramian(torch.tensor(v)))
    assert abs(J_star - closed) < 1e-2
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        u = [uk + float(d) for uk, d in zip(u_star, 0.3 * torch.randn(n, generator=g, dtype=torch.float64))]
        assert run(u) < J_star
        c = float(torch.randn(1, generator=g, dtype=torch.float64))
        assert run([c] * n) <= J_star + 1e-9


def _tiny_flux():
    from diffusers import FluxTransformer2DModel

    cfg = dict(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=8, num_attention_heads=2,
               joint_attention_dim=16, pooled_projection_dim=8, guidance_embeds=True, axes_dims_rope=[2, 2, 4])
    torch.manual_seed(0)
    return FluxTransformer2DModel(**cfg).eval()


def test_dual_time_embedder_on_a_tiny_flux_transformer() -> None:
    """(t, t) reproduces the unpatched model bit for bit; (t, s) with s != t changes the output once the second
    embedder differs; a plain (B,) timestep keeps the one-time behaviour; the patch is idempotent; a model without
    time_text_embed is refused."""
    from zoo.methods.fmrg.flux import DualTimeEmbedder, dual_time_embedder

    m = _tiny_flux()
    g = torch.Generator().manual_seed(0)
    kw = dict(hidden_states=torch.randn(2, 4, 4, generator=g), encoder_hidden_states=torch.randn(2, 3, 16, generator=g),
              pooled_projections=torch.randn(2, 8, generator=g), img_ids=torch.zeros(4, 3), txt_ids=torch.zeros(3, 3),
              guidance=torch.tensor([3.5, 3.5]))
    t = torch.tensor([0.3, 0.7])
    with torch.no_grad():
        base = m(timestep=t, **kw).sample
        dual_time_embedder(m)
        dual_time_embedder(m)
        assert isinstance(m.time_text_embed, DualTimeEmbedder) and not isinstance(m.time_text_embed.base, DualTimeEmbedder)
        assert torch.equal(m(timestep=torch.stack([t, t], 1), **kw).sample, base)
        assert torch.equal(m(timestep=t, **kw).sample, base)
        for p in m.time_text_embed.second.parameters():
            p.add_(0.1)
        assert torch.equal(m(timestep=t, **kw).sample, base)
        assert not torch.allclose(m(timestep=torch.stack([t, t.flip(0)], 1), **kw).sample, base, atol=1e-4)
    with pytest.raises(ValueError, match="time_text_embed"):
        dual_time_embedder(torch.nn.Linear(2, 2))


def test_cli_run_prints_reward_and_log_likelihood(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "fmrg", "--n", "32", "--sampler", "fmrg-e"]) == 0
    text = capsys.readouterr().out
    assert "mean reward" in text and "log p_data" in text and "NFE 4" in text


def test_bench_quick_writes_table_png_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "fmrg", "--quick", "--nfe", "3", "--out-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "| FMRG-J | 3 |" in text and "LQR optimum" in text and "Pareto summary" in text and "| FMRG-J | 4 |" not in text
    doc = json.loads((tmp_path / "fmrg-bench.json").read_text())
    assert doc["quick"] and {k: doc["options"][k] for k in ("n", "nfe", "learned")} == {"n": 64, "nfe": [3], "learned": False}
    methods = {r["method"] for r in doc["result"]["gaussian"]["rows"]}
    assert methods >= {"FMRG-J", "FMRG-E", "DPS", "best-of-N", "LQR optimum"}
    assert (tmp_path / "fmrg.png").stat().st_size > 1000


def test_mode_reward_steers_toward_the_low_weight_mode() -> None:
    """The `mode` reward (log-density of component 2, weight 0.2 in gmm3): FMRG-J raises the fraction of samples whose
    most likely component is 2 (measured 0.219 unguided -> 0.375 at eta 1, 256 samples, seed 0; asserted: + 0.1, about
    four binomial standard errors of a rate near 0.3); the reward's gradient is that component's score."""
    pipe = zoo.load("fmrg")
    gmm = pipe.models["flow_map"].gmm
    mode = {"kind": "mode", "component": 2}
    r = reward_fn(RewardSpec(**mode), gmm)
    x = _x0(16, 3)
    z = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(r(z).sum(), z)
    assert torch.allclose(g, -(x - gmm.means[2]) / gmm.evals[2], atol=1e-12)

    def hit_rate(out):
        comp = torch.stack([reward_fn(RewardSpec(kind="mode", component=k), gmm)(out.samples) + gmm.log_weights[k] for k in range(3)], 1)
        return float((comp.argmax(1) == 2).double().mean())

    base = hit_rate(pipe.procedures["unguided"](seed=0, batch_size=256, reward=mode))
    guided = hit_rate(pipe(seed=0, batch_size=256, reward=mode, step_size=1.0))
    assert guided > base + 0.1, (base, guided)


def test_shifted_grid_is_fluxs_time_shift() -> None:
    """time_grid(N, shift) in sigma = 1 - t equals FLUX's exp(mu) / (exp(mu) + 1/sigma - 1) on sigma = linspace(1, 0, N + 1)."""
    from zoo.methods.fmrg import time_grid

    for shift in (1.0, 3.16):
        ts = time_grid(8, shift)
        sig = [1 - k / 8 for k in range(9)]
        want = [1.0] + [shift / (shift + 1 / s - 1) for s in sig[1:-1]] + [0.0]
        assert all(math.isclose(1 - t, w, abs_tol=1e-12) for t, w in zip(ts, want))
        assert all(b > a for a, b in zip(ts, ts[1:]))


def test_adam_lr_decays_over_the_outer_steps_by_default_and_over_the_inner_loop_as_an_option() -> None:
    """The authors' reward sampler (fluxfm_sampler_reward.py) sets Adam's lr to eta (1 - k / K) at guided step k of K
    and keeps it over the inner loop; lr_schedule: inner is the earlier reading eta (1 - i / n_opt). At n_opt = 1 Adam's
    first update is lr * sign(g) per element, so the applied FMRG-J correction Step(x) + Delta (z - x) reveals the lr:
    under "outer" it is eta at step 0 and eta / N at step N - 1; under "inner" eta at both. Negative control: at
    N = 1 (k = 0 of K = 1) the two schedules give bit-identical samples."""
    from zoo.methods.fmrg.sampler import adam_lr, time_grid

    assert adam_lr(2.0, "outer", 0, 1, 0, 4) == 2.0 and adam_lr(2.0, "outer", 0, 1, 3, 4) == 0.5
    assert adam_lr(2.0, "inner", 0, 1, 3, 4) == 2.0 and adam_lr(2.0, "inner", 1, 2, 0, 4) == 1.0
    assert adam_lr(2.0, "outer", 1, 2, 0, 4) == 2.0  # constant over the inner loop
    m = _gauss([0.5, -0.3], [0.3, 1.5])
    x = _x0(16)
    N, eta = 4, 0.7
    ts = time_grid(N)
    seen = {}
    for sched in ("outer", "inner"):
        for gm in ("jac", "euc"):
            s = FMRGSampler({"flow_map": m}, FMRGSampler.Params(num_steps=N, grad_mode=gm, step_size=eta, num_optim_iters=1, lr_schedule=sched, reward=R))
            for k in (0, N - 1):
                t, tn = ts[k], ts[k + 1]
                with torch.no_grad():
                    step = x + (tn - t) * m.mean_velocity(x, t, 1.0)
                corr = (s.guided_step(x, t, tn, k, N) - step).abs()
                w = (tn - t) if gm == "jac" else (1 - t) * tn  # FMRG-J: Delta; FMRG-E: the back-projection weight, no x Delta
                lr = corr / w
                seen[sched, gm, k] = float(lr.mean())
                assert torch.allclose(lr, torch.full_like(lr, seen[sched, gm, k]), rtol=1e-4)  # Adam eps 1e-8 vs |g|
    for gm in ("jac", "euc"):
        assert math.isclose(seen["outer", gm, 0], eta, rel_tol=1e-4) and math.isclose(seen["outer", gm, N - 1], eta / N, rel_tol=1e-4)
        assert math.isclose(seen["inner", gm, 0], eta, rel_tol=1e-4) and math.isclose(seen["inner", gm, N - 1], eta, rel_tol=1e-4)
    run = lambda n, sched: FMRGSampler({"flow_map": m}, FMRGSampler.Params(num_steps=n, step_size=eta, lr_schedule=sched, reward=R))(noise=x).samples  # noqa: E731
    assert not torch.equal(run(N, "outer"), run(N, "inner"))
    assert torch.equal(run(1, "outer"), run(1, "inner"))


def test_fmrg_e_times_delta_is_the_inverse_problem_samplers_option() -> None:
    """FMRG-E's correction w (x1* - x1_hat) carries the extra x Delta only with euc_times_dt (the authors' inverse-
    problem sampler with normalisation); by default (their reward sampler) it does not."""
    from zoo.methods.fmrg.sampler import time_grid

    m = _gauss([0.5, -0.3], [0.3, 1.5])
    x = _x0(8)
    t, tn = time_grid(4)[1:3]
    with torch.no_grad():
        step = x + (tn - t) * m.mean_velocity(x, t, 1.0)
    mk = lambda dt_on: FMRGSampler({"flow_map": m}, FMRGSampler.Params(grad_mode="euc", step_size=0.5, euc_times_dt=dt_on, reward=R))  # noqa: E731
    c_off, c_on = mk(False).guided_step(x, t, tn, 1, 4) - step, mk(True).guided_step(x, t, tn, 1, 4) - step
    assert torch.allclose(c_on, (tn - t) * c_off, rtol=1e-12, atol=1e-15) and not torch.allclose(c_on, c_off)


# ----------------------------------------------------------------------------- the learned model (issue 38 item 1)


def test_learned_variant_loads_the_shipped_pair_and_its_flow_map_tracks_the_learned_ode() -> None:
    """The shipped seed-0 flow map's endpoint X_phi(x, t, 1) is close to the learned ODE's (its distillation target);
    negative control: the same model with an untrained flow-map net misses by far more."""
    from zoo.methods.fmrg.learned import LearnedFlowMapModel

    pipe = zoo.load("fmrg", variant="learned")
    m = pipe.models["flow_map"]
    assert isinstance(m, LearnedFlowMapModel) and m.two_time
    x = _x0(256, 3)
    with torch.no_grad():
        err = (m.flow_map(x, 0.0, 1.0) - m.ode(x, 0.0, 1.0)).norm(dim=1).mean()
        raw = LearnedFlowMapModel("gmm3", 64)
        raw.vel.load_state_dict(m.vel.state_dict())  # same learned velocity, untrained flow map
        err_raw = (raw.flow_map(x, 0.0, 1.0) - raw.ode(x, 0.0, 1.0)).norm(dim=1).mean()
    assert err < 0.25 and err_raw > 4 * err
    out = pipe(seed=0, batch_size=16)
    assert out.nfe == 4 and torch.isfinite(out.samples).all()
    assert pipe.procedures["dps"](seed=0, batch_size=8).nfe == 4  # DPS calls the learned velocity, 1 per step


def test_learned_model_interface_tangent_and_nfe_counting() -> None:
    from zoo.methods.fmrg.learned import learned_flow_map_model

    m = learned_flow_map_model()
    x = _x0(5)
    m.reset_nfe()
    assert torch.equal(m.mean_velocity(x, 0.3, 0.3), m.velocity(x, 0.3))  # the diagonal is the velocity net
    assert m.nfe == 2
    m.flow_map(x, 0.0, 1.0)
    assert m.nfe == 3
    assert not any(p.requires_grad for p in m.parameters()) and "gmm.means" not in m.state_dict()


def test_train_pair_is_deterministic_per_seed_and_seeds_differ() -> None:
    from zoo.methods.fmrg.params import TrainOptions
    from zoo.methods.fmrg.train import train_pair

    o = TrainOptions(vel_steps=20, fmap_steps=20, batch=32, n_traj=64, n_grid=4, progress=False)
    a, ha = train_pair(1, o)
    b, _ = train_pair(1, o)
    c, _ = train_pair(2, o)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    assert math.isfinite(ha["vel_loss_last100"]) and math.isfinite(ha["fmap_loss_last100"])


def test_disc_reward_is_flat_inside_and_a_shifted_quadratic_outside() -> None:
    r = reward_fn(RewardSpec(kind="disc", target=[0.3, 1.4], tau=0.5, radius=0.5))
    q = reward_fn(RewardSpec(kind="quadratic", target=[0.3, 1.4], tau=0.5))
    inside = torch.tensor([[0.3, 1.4], [0.5, 1.5], [0.3, 1.85]], dtype=torch.float64)
    outside = torch.tensor([[0.3, 2.4], [-1.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
    assert torch.equal(r(inside), torch.zeros(3, dtype=torch.float64))
    assert not torch.equal(q(inside), torch.zeros(3, dtype=torch.float64))  # negative control: the smooth reward is not flat
    d = (outside - torch.tensor([0.3, 1.4], dtype=torch.float64)).norm(dim=1)
    assert torch.allclose(r(outside), -((d - 0.5) ** 2) / (2 * 0.25), atol=1e-12)


def test_verdict_rule_and_summary_use_grid_rows_only() -> None:
    from zoo.methods.fmrg.learned_bench import summarise, verdict

    assert verdict([-0.6, -0.5, -0.7]) == "refuted"
    assert verdict([0.5, -0.1, 1.0]) == "refuted"  # mean 0.47 <= sd 0.55
    assert verdict([0.3, 0.5, 0.05]) == "not shown"  # mean 0.28 > sd 0.23 but < 2 sd
    assert verdict([1.0, 1.1, 0.9]) == "supported"
    rows = [{"method": "DPS", "grid": True, "finite": True, "reward": -1.0, "log_p": -4.0},
            {"method": "DPS", "grid": True, "finite": True, "reward": -3.0, "log_p": -2.0},  # misses the reward bar
            {"method": "DPS", "grid": False, "finite": True, "reward": -0.5, "log_p": -1.0}]  # off the pre-registered grid
    assert summarise(rows, "DPS") == -4.0
    assert summarise(rows, "FMRG-J") is None
