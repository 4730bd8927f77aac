"""Behaviour tests of ``ramac`` beyond the spec's invariants (conformance runs those): the IQN critic
network recovers known return quantiles (and the released pairing does not), the shared warm-up of the
training script equals separate recipe runs bit for bit, the sampler / evaluation / recipe contracts,
the spec agrees with the code's presets, and the declared-only Stochastic-D4RL variants refuse to load."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from registry.errors import ZooError
from zoo.methods.ramac import RamacTrainer, TrainConfig, bandit_dataset, build_critic, quantile_huber_loss
from zoo.methods.ramac.bandit import RISKY_LAW, SAFE_LAW, evaluate_actions
from zoo.methods.ramac.risk import cvar_normal_mixture, mixture_quantile
from zoo.methods.ramac.toy import TOY_ACTOR, TOY_CRITIC, TOY_FLOW_ACTOR, train_presets
from zoo.methods.ramac.train import PRESETS, reinitialise

ROOT = Path(__file__).resolve().parents[2]
SPEC = yaml.safe_load((ROOT / "specs" / "ramac.yaml").read_text())


def _fit_iqn(pairing: str, kappa: float, steps: int = 1500) -> dict[str, torch.Tensor]:
    """A small IQN critic fitted to rewards of the safe arm (0.6, 0) and the risky arm (0, 0.6)."""
    critic = reinitialise(build_critic(width=64, emb_dim=64, n_cos=16), 3).z1
    opt = torch.optim.Adam(critic.parameters(), 3e-3)
    g = torch.Generator().manual_seed(0)
    acts = torch.tensor([[0.6, 0.0], [0.0, 0.6]]).repeat(64, 1)
    s = torch.zeros(128, 1)
    from zoo.common.toys2d import risky_bandit_reward

    for _ in range(steps):
        r = risky_bandit_reward(acts, g).float()
        taus, taus_t = torch.rand(128, 16, generator=g), torch.rand(128, 16, generator=g)
        loss = quantile_huber_loss(critic(s, acts, taus), taus, r[:, None].expand(128, 16), kappa, pairing, taus_t)  # type: ignore[arg-type]
        opt.zero_grad()
        loss.backward()
        opt.step()
    levels = torch.tensor([[0.1, 0.5, 0.9]])
    with torch.no_grad():
        return {arm: critic(torch.zeros(1, 1), torch.tensor([a]), levels)[0] for arm, a in (("safe", [0.6, 0.0]), ("risky", [0.0, 0.6]))}


@pytest.mark.slow
def test_iqn_critic_recovers_return_quantiles_and_released_pairing_does_not() -> None:
    """Pure pinball on the bandit's rewards: the critic network's q(0.1), q(0.5), q(0.9) of the safe arm
    (N(5, 0.5^2): 4.36, 5.0, 5.64) within 0.25, and of the risky arm (0.8 N(9, 0.25) + 0.2 N(-8, 1): its
    q(0.1) is in the catastrophic component, about -7.6) with q(0.1) < 0 < q(0.5) -- the CVaR the actor
    needs sees the tail. The released RADAC pairing on the same draws puts the risky arm's q(0.1) above 5
    (collapsed towards the median, 8.9)."""
    q = _fit_iqn("standard", 0.0)
    want_safe = torch.tensor([mixture_quantile(t, *SAFE_LAW) for t in (0.1, 0.5, 0.9)])
    assert float((q["safe"] - want_safe).abs().max()) < 0.25, q
    want_risky_10 = mixture_quantile(0.1, *RISKY_LAW)
    assert abs(float(q["risky"][0]) - want_risky_10) < 1.5 and float(q["risky"][1]) > 7, q
    bad = _fit_iqn("radac_released", 1.0)
    assert float(bad["risky"][0]) > 5, bad


def test_shared_warmup_equals_separate_recipe_runs() -> None:
    """The training script's fork of one eta = 0 warm-up gives, for every preset, the same actor bytes as
    the `train*` recipe run from scratch with that preset and seed (tiny budget), so the shipped actors are
    what the recipes produce."""
    base = {"steps": 8, "eta_warmup": 4, "eta_ramp": 2, "batch_size": 16, "risk_batch": 8}
    forked = train_presets(0, tuple(PRESETS), base, data_size=64)
    pipe = zoo.load("ramac", variant="toy")
    recipe = {"ramac": "train", "bc-only": "train-bc-only", "risk-neutral": "train-risk-neutral", "cvar-no-bc": "train-cvar-no-bc"}
    for name, res in forked.items():
        out = pipe.procedures[recipe[name]](seed=0, data_size=64, eval_n=16, **base)
        mine, theirs = res.actor.state_dict(), out.state_dict()
        assert mine.keys() == theirs.keys()
        assert all(torch.equal(mine[k], theirs[k]) for k in mine), name
    # the presets really differ after the warm-up (otherwise the check above would prove little)
    for x, y in (("ramac", "risk-neutral"), ("ramac", "bc-only"), ("bc-only", "cvar-no-bc")):
        a, b = forked[x].actor.state_dict(), forked[y].actor.state_dict()
        assert not all(torch.equal(a[k], b[k]) for k in a), (x, y)


def test_fork_refuses_a_different_warmup() -> None:
    cfg = TrainConfig(steps=4, eta_warmup=2, batch_size=8)
    g = torch.Generator().manual_seed(0)
    t = RamacTrainer(reinitialise(zoo.methods.ramac.build_actor(T=3, width=8), 0), build_critic(width=8, emb_dim=8, n_cos=4),
                     bandit_dataset(32, g), cfg, g)
    with pytest.raises(ValueError, match="lr_actor"):
        t.fork(cfg.model_copy(update={"lr_actor": 1e-2}))
    t.fork(cfg.model_copy(update={"eta": 0.3, "risk": "neutral"}))  # post-warm-up fields may differ


def test_act_sampler_rows_box_and_errors() -> None:
    pipe = zoo.load("ramac", variant="toy")
    out = pipe(seed=0, n=5)
    assert out.actions.shape == (5, 2) and float(out.actions.abs().max()) <= 1.0
    assert torch.equal(out.actions, pipe(seed=0, n=5).actions)
    assert not torch.equal(out.actions, pipe(seed=1, n=5).actions)
    other = pipe.procedures["act-risk-neutral"](seed=0, n=5)
    assert not torch.equal(out.actions, other.actions)
    with pytest.raises(ZooError, match="noise must have shape"):
        pipe(seed=0, states=torch.zeros(3, 1), noise=torch.zeros(3, 2, 2))
    with pytest.raises(ZooError, match="role"):
        pipe(seed=0, role="actor-nonexistent")


def test_rafmac_recipe_equals_training_script_and_act_selects_flow_actor() -> None:
    """RAFMAC: the `train-rafmac` recipe (actor: flow) gives the same actor bytes as the training script's
    `rafmac` preset (tiny budget), trains a private copy, and moves the actor after the warm-up; the `act`
    sampler with actor: flow samples the flow actor (noise (B, 1, 2), the Euler start), equal to
    `act-rafmac`, and refuses actor: flow on a diffusion role."""
    from zoo.methods.ramac.nets import FlowActor

    base = {"steps": 8, "eta_warmup": 4, "eta_ramp": 2, "batch_size": 16, "risk_batch": 8}
    mine = train_presets(0, ("rafmac",), base, data_size=64)["rafmac"].actor
    assert isinstance(mine, FlowActor)
    pipe = zoo.load("ramac", variant="toy")
    before = {k: v.clone() for k, v in pipe.models["actor-rafmac"].state_dict().items()}
    out = pipe.procedures["train-rafmac"](seed=0, data_size=64, eval_n=16, **base)
    assert isinstance(out.actor, FlowActor) and out.actor is not pipe.models["actor-rafmac"]
    theirs = out.state_dict()
    assert mine.state_dict().keys() == theirs.keys() and all(torch.equal(v, theirs[k]) for k, v in mine.state_dict().items())
    assert all(torch.equal(before[k], v) for k, v in pipe.models["actor-rafmac"].state_dict().items())
    no_risk = pipe.procedures["train-rafmac"](seed=0, data_size=64, eval_n=16, **{**base, "eta": 0.0}).state_dict()
    assert not all(torch.equal(no_risk[k], theirs[k]) for k in theirs)  # the CVaR term changed the flow actor
    a = pipe(seed=0, n=6, actor="flow")
    assert a.actions.shape == (6, 2) and float(a.actions.abs().max()) <= 1.0
    assert torch.equal(a.actions, pipe.procedures["act-rafmac"](seed=0, n=6).actions)
    assert not torch.equal(a.actions, pipe(seed=0, n=6).actions)
    noise = torch.randn(3, 1, 2, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        direct = pipe.models["actor-rafmac"](torch.zeros(3, 1), noise=noise)
    assert torch.equal(pipe(states=torch.zeros(3, 1), noise=noise, actor="flow").actions, direct)
    with pytest.raises(ZooError, match="noise must have shape"):
        pipe(states=torch.zeros(3, 1), noise=torch.zeros(3, 21, 2), actor="flow")
    with pytest.raises(ZooError, match="FlowActor"):
        pipe(seed=0, n=2, actor="flow", role="actor-bc-only")


def test_evaluate_exact_matches_empirical_on_pure_policies() -> None:
    """Actions at the safe / risky centres: the exact CVaR_0.1 and mean are the closed forms (4.12 / 5;
    -8.80 / 5.6) and 20,000 reward draws agree within 0.1 (s.e. < 0.03)."""
    for centre, cv, mean in (([0.6, 0.0], 4.123, 5.0), ([0.0, -0.6], cvar_normal_mixture(0.1, *RISKY_LAW), 5.6)):
        ev = evaluate_actions(torch.tensor([centre]).repeat(20_000, 1), generator=torch.Generator().manual_seed(0))
        assert abs(ev["exact_cvar"] - cv) < 1e-3 and abs(ev["exact_mean"] - mean) < 1e-9
        assert abs(ev["cvar"] - cv) < 0.1 and abs(ev["mean"] - mean) < 0.1
        assert ev["ood_rate"] == 0.0


def test_spec_matches_code_presets_and_toy_configs() -> None:
    """The spec's recipe params are the code's presets on the toy defaults, and the toy roles' configs
    are the training script's."""
    defaults = TrainConfig()
    names = {"train": "ramac", "train-bc-only": "bc-only", "train-risk-neutral": "risk-neutral", "train-cvar-no-bc": "cvar-no-bc"}
    for recipe, preset in names.items():
        params = SPEC["recipes"][recipe]["params"]
        want = {**defaults.model_dump(), **PRESETS[preset]}
        assert all(want[k] == v for k, v in params.items()), (recipe, params)
    for role in ("actor", "actor-bc-only", "actor-risk-neutral", "actor-cvar-no-bc"):
        assert SPEC["models"][role]["variants"]["toy"]["config"] == TOY_ACTOR
    assert SPEC["models"]["actor-rafmac"]["variants"]["toy"]["config"] == TOY_FLOW_ACTOR
    flow = dict(SPEC["recipes"]["train-rafmac"]["params"])
    assert flow.pop("actor") == "flow" and all(getattr(defaults, k) == v for k, v in flow.items()), flow
    assert SPEC["models"]["critic"]["variants"]["toy"]["config"] == TOY_CRITIC


@pytest.mark.parametrize("variant", [v for v in SPEC["variants"] if v.startswith("d4rl-")])
def test_stochastic_d4rl_variants_are_declared_only(variant: str) -> None:
    with pytest.raises(ZooError, match="declared-only"):
        zoo.load("ramac", variant=variant)


def test_train_recipe_reports_and_leaves_roles_alone() -> None:
    """A tiny `train` run returns a typed output whose actor is a private copy (the pipeline's cached
    `actor` keeps its shipped weights) and whose evaluation is filled in."""
    pipe = zoo.load("ramac", variant="toy")
    before = {k: v.clone() for k, v in pipe.models["actor"].state_dict().items()}
    out = pipe.procedures["train"](seed=0, steps=4, eta_warmup=2, eta_ramp=1, batch_size=8, risk_batch=4, data_size=32, eval_n=16)
    assert out.actor is not pipe.models["actor"]
    assert all(torch.equal(before[k], v) for k, v in pipe.models["actor"].state_dict().items())
    assert out.evaluation.n == 16 and 0.0 <= out.evaluation.ood_rate <= 1.0
    assert [h["step"] for h in out.history] == [0.0, 3.0]


def test_bench_quick_writes_table_png_and_json(tmp_path: Path) -> None:
    from zoo.cli import main

    assert main(["bench", "ramac", "--quick", "--n", "200", "--out-dir", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "ramac-bench.json").read_text())["result"]
    assert "| ramac |" in (tmp_path / "ramac-bench.md").read_text()
    assert set(res["rows"]) >= {"ramac", "bc-only", "risk-neutral", "cvar-no-bc", "behaviour-data"}
    assert (tmp_path / "ramac-bandit.png").stat().st_size > 10_000
    assert res["exact_chain_ood_floor"]["5"] > res["exact_chain_ood_floor"]["20"]
    assert "rafmac" in res["rows"] and res["exact_flow_ood_floor"]["5"] > res["exact_flow_ood_floor"]["20"]


def test_bootstrap_path_updates_targets() -> None:
    """With non-terminal transitions the trainer keeps a soft target critic and an EMA actor: after a few
    steps the target critic has moved towards the critic by Polyak averaging (neither frozen nor copied),
    and the EMA actor equals the actor before ``ema_start`` (copied every step)."""
    g = torch.Generator().manual_seed(0)
    data = bandit_dataset(64, g)
    data.not_done = torch.ones(64)
    cfg = TrainConfig(steps=3, eta_warmup=1, eta_ramp=1, batch_size=16, risk_batch=8, ema_start=100, tau_soft=0.5)
    actor = reinitialise(zoo.methods.ramac.build_actor(T=3, width=16), 0)
    critic = reinitialise(build_critic(width=16, emb_dim=16, n_cos=4), 1)
    t = RamacTrainer(actor, critic, data, cfg, g)
    start = [p.clone() for p in t.target_critic.parameters()]
    t.run()
    now, crit = list(t.target_critic.parameters()), list(critic.parameters())
    assert not all(torch.equal(a, b) for a, b in zip(now, start))
    assert not all(torch.equal(a, b) for a, b in zip(now, crit))
    assert all(torch.equal(a, b) for a, b in zip(t.ema_actor.parameters(), actor.parameters()))
