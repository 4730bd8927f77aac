"""The CPU variant's training: RAMAC and its baselines on the 2-D risky bandit, sharing one
``eta = 0`` warm-up (BC + critic) and then continuing per preset (:class:`~zoo.methods.ramac.train.RamacTrainer`).
Used by the ``zoo train ramac`` recipe :func:`train_toy_actors` (which writes the shipped actors) and the benchmark."""
from __future__ import annotations

from typing import Any

import torch

from registry.contract import trainer

from .bandit import bandit_dataset
from .nets import build_actor, build_critic, build_flow_actor
from .params import ToyTrainOptions
from .train import PRESETS, RamacTrainer, TrainConfig, TrainResult, reinitialise

__all__ = ["TOY_ACTOR", "TOY_FLOW_ACTOR", "TOY_CRITIC", "FLOW_PRESETS", "SHIPPED", "ToyTrainOptions", "init_seeds", "train_presets",
           "train_toy_actors"]

#: factory configs of the toy's roles (the spec repeats them; a test keeps both equal)
TOY_ACTOR: dict[str, Any] = {"state_dim": 1, "action_dim": 2, "T": 20, "schedule": "vp", "width": 128, "layers": 3, "time_dim": 16, "max_action": 1.0}
TOY_FLOW_ACTOR: dict[str, Any] = {"state_dim": 1, "action_dim": 2, "steps": 10, "width": 128, "layers": 3, "time_dim": 16, "max_action": 1.0}
TOY_CRITIC: dict[str, Any] = {"state_dim": 1, "action_dim": 2, "width": 64, "emb_dim": 64, "n_cos": 16}
#: RAFMAC presets: the flow-matching actor (TOY_FLOW_ACTOR) with the same TrainConfig overrides as PRESETS
FLOW_PRESETS: dict[str, dict[str, Any]] = {"rafmac": {}}
#: preset -> shipped file name under specs/weights/
SHIPPED = {name: f"ramac-toy-actor-{name}.safetensors" for name in (*PRESETS, *FLOW_PRESETS)}


def init_seeds(seed: int) -> tuple[int, int, int]:
    """(data/training generator, actor init, critic init) seeds derived from one run seed."""
    return seed, 10_007 * seed + 1, 10_007 * seed + 2


def fresh_models(seed: int, flow: bool = False) -> tuple[torch.nn.Module, torch.nn.Module]:
    _, sa, sc = init_seeds(seed)
    actor = build_flow_actor(**TOY_FLOW_ACTOR) if flow else build_actor(**TOY_ACTOR)
    return reinitialise(actor, sa), reinitialise(build_critic(**TOY_CRITIC), sc)


def train_presets(seed: int = 0, presets: tuple[str, ...] = tuple(PRESETS), base: dict[str, Any] | None = None, data_size: int = 10_000,
                  progress: bool = False) -> dict[str, TrainResult]:
    """Train each preset with config ``TrainConfig(**base, **PRESETS[name])`` from the same seeded start.
    The warm-up (``eta_warmup`` steps, ``eta_t = 0``) is run once and forked: identical to separate runs
    because the warm-up draws the same random numbers whatever the preset, and an actor with
    ``lambda_bc = 0`` does not move during it (it starts the risk phase from its initialisation).
    A RAFMAC preset (:data:`FLOW_PRESETS`) is a separate run from the same seeds (data, critic init) with
    the flow actor: its BC loss draws different random numbers, so it cannot share the diffusion warm-up."""
    base = dict(base or {})
    unknown = [p for p in presets if p not in PRESETS and p not in FLOW_PRESETS]
    if unknown:
        raise ValueError(f"unknown presets {unknown}; have {', '.join((*PRESETS, *FLOW_PRESETS))}")
    out: dict[str, TrainResult] = {}
    diff = [p for p in presets if p in PRESETS]
    if diff:
        g = torch.Generator().manual_seed(init_seeds(seed)[0])
        data = bandit_dataset(data_size, g)
        actor, critic = fresh_models(seed)
        cfgs = {name: TrainConfig(**{**base, **PRESETS[name]}) for name in diff}
        first = next(iter(cfgs.values()))
        warm = RamacTrainer(actor, critic, data, first, g).run(first.eta_warmup, progress=progress)
        for name, cfg in cfgs.items():
            fresh = fresh_models(seed)[0] if cfg.lambda_bc == 0 else None
            out[name] = warm.fork(cfg, fresh_actor=fresh).run(progress=progress).result()
    for name in (p for p in presets if p in FLOW_PRESETS):
        g = torch.Generator().manual_seed(init_seeds(seed)[0])
        data = bandit_dataset(data_size, g)
        actor, critic = fresh_models(seed, flow=True)
        cfg = TrainConfig(**{**base, **FLOW_PRESETS[name]})
        out[name] = RamacTrainer(actor, critic, data, cfg, g).run(progress=progress).result()
    return out


@trainer(options=ToyTrainOptions)
def train_toy_actors(ctx: Any, opts: ToyTrainOptions) -> None:
    """Train the toy actors from ``ctx.seed`` (one CPU thread, deterministic) and write each as
    ``ramac-toy-actor-<preset>.safetensors`` into ``ctx.out_dir``, with its evaluation on 1,000 actions."""
    import time

    from zoo.common.training import save_checkpoint, setup_deterministic

    from .bandit import evaluate_actions

    presets = tuple(opts.presets)
    setup_deterministic(ctx.seed)
    t0 = time.perf_counter()
    results = train_presets(ctx.seed, presets, {}, progress=opts.progress)
    print(f"trained {', '.join(presets)} in {time.perf_counter() - t0:.0f} s")
    for name, res in results.items():
        save_checkpoint(res.actor.state_dict(), ctx.path(SHIPPED[name]))
        with torch.no_grad():
            acts = res.actor(torch.zeros(1000, 1), generator=torch.Generator().manual_seed(1))
        ev = evaluate_actions(acts, generator=torch.Generator().manual_seed(2))
        print(f"  {name:13s} CVaR_0.1 {ev['cvar']:+.2f} (exact {ev['exact_cvar']:+.2f})  mean {ev['mean']:+.2f} (exact {ev['exact_mean']:+.2f})  "
              f"OOD {ev['ood_rate']:.3f}  safe {ev['safe_rate']:.3f}  risky {ev['risky_rate']:.3f}")
