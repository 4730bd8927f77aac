"""The CPU variant's training: RAMAC and its baselines on the 2-D risky bandit, sharing one
``eta = 0`` warm-up (BC + critic) and then continuing per preset (:class:`~zoo.methods.ramac.train.RamacTrainer`).
Used by ``tools/train_ramac_toy.py`` (which saves the shipped actors) and the benchmark."""
from __future__ import annotations

from typing import Any

import torch

from .bandit import bandit_dataset
from .nets import build_actor, build_critic
from .train import PRESETS, RamacTrainer, TrainConfig, TrainResult, reinitialise

__all__ = ["TOY_ACTOR", "TOY_CRITIC", "SHIPPED", "init_seeds", "train_presets"]

#: factory configs of the toy's roles (the spec repeats them; a test keeps both equal)
TOY_ACTOR: dict[str, Any] = {"state_dim": 1, "action_dim": 2, "T": 20, "schedule": "vp", "width": 128, "layers": 3, "time_dim": 16, "max_action": 1.0}
TOY_CRITIC: dict[str, Any] = {"state_dim": 1, "action_dim": 2, "width": 64, "emb_dim": 64, "n_cos": 16}
#: preset -> shipped file name under specs/weights/
SHIPPED = {name: f"ramac-toy-actor-{name}.safetensors" for name in PRESETS}


def init_seeds(seed: int) -> tuple[int, int, int]:
    """(data/training generator, actor init, critic init) seeds derived from one run seed."""
    return seed, 10_007 * seed + 1, 10_007 * seed + 2


def fresh_models(seed: int) -> tuple[torch.nn.Module, torch.nn.Module]:
    _, sa, sc = init_seeds(seed)
    return reinitialise(build_actor(**TOY_ACTOR), sa), reinitialise(build_critic(**TOY_CRITIC), sc)


def train_presets(seed: int = 0, presets: tuple[str, ...] = tuple(PRESETS), base: dict[str, Any] | None = None, data_size: int = 10_000,
                  progress: bool = False) -> dict[str, TrainResult]:
    """Train each preset with config ``TrainConfig(**base, **PRESETS[name])`` from the same seeded start.
    The warm-up (``eta_warmup`` steps, ``eta_t = 0``) is run once and forked: identical to separate runs
    because the warm-up draws the same random numbers whatever the preset, and an actor with
    ``lambda_bc = 0`` does not move during it (it starts the risk phase from its initialisation)."""
    base = dict(base or {})
    g = torch.Generator().manual_seed(init_seeds(seed)[0])
    data = bandit_dataset(data_size, g)
    actor, critic = fresh_models(seed)
    cfgs = {name: TrainConfig(**{**base, **PRESETS[name]}) for name in presets}
    first = next(iter(cfgs.values()))
    warm = RamacTrainer(actor, critic, data, first, g).run(first.eta_warmup, progress=progress)
    out: dict[str, TrainResult] = {}
    for name, cfg in cfgs.items():
        fresh = fresh_models(seed)[0] if cfg.lambda_bc == 0 else None
        out[name] = warm.fork(cfg, fresh_actor=fresh).run(progress=progress).result()
    return out
