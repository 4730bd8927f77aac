"""The fair interference baseline: from the shipped ``stage1`` state, three stage-II arms at
an equal adapter-step budget, per training seed, each with its own ``torch.Generator`` seeded from that seed:

* ``decoupled``: the method's stage II (:func:`.training.stage2`: Δg at α ≡ 0 on generation : editing = 2 : 1,
  Δu frozen as stage I left it) then the router-only calibration on all three tasks (:func:`.training.calibrate_router`);
* ``joint_shared``: ONE adapter (the stage-I Δu) trained on understanding : generation : editing = 1 : 2 : 1 —
  the interference baseline: all objectives share the adapter at once;
* ``sequential_shared``: the shipped ablation's recipe (the one adapter on generation : editing = 2 : 1 only):
  forgetting, not interference.

The decoupled arm's start is byte-for-byte the shipped recipe's pre-stage-II state: :func:`.model.build_unidflow`
(fixed init: Δg's ``A`` Kaiming-uniform, ``B`` = 0, the router at α = 0.5) with the stage-I tensors loaded; only the
Δg tensors and the router are not in ``stage1``. Paper: arXiv 2602.12221 section 3 (stages I-II) and Table 4 (single LoRA).
"""
from __future__ import annotations

from typing import Any

import torch

from zoo.common.spread import spread

__all__ = ["ARMS", "start_models", "generator", "train_arm", "study"]

ARMS = ("decoupled", "joint_shared", "sequential_shared")


def start_models(stage1_state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """A fresh model per arm holding the stage-I tensors (the shared arms: one adapter; decoupled: + Δg at zero, router)."""
    from .model import build_unidflow

    out = {}
    for arm in ARMS:
        m = build_unidflow(shared=arm != "decoupled")
        missing, unexpected = m.load_state_dict({k: v.clone() for k, v in stage1_state.items()}, strict=False)
        extra = [k for k in missing if (".lora_" in k and k.endswith(".gen")) or k.startswith("router.")]
        if unexpected or set(missing) - set(extra) or (arm != "decoupled" and missing):
            raise RuntimeError(f"{arm}: stage-I state does not fit (missing {missing}, unexpected {unexpected})")
        out[arm] = m
    return out


def generator(seed: int) -> torch.Generator:
    """A new generator for one arm, seeded from the training seed only (every arm draws the same stream)."""
    return torch.Generator().manual_seed(1000 + seed)


def train_arm(model, arm: str, steps: int, router_steps: int, batch: int, lr: float, router_lr: float, seed: int, quiet: bool = True) -> dict:
    """Stage II of ``arm`` on ``model`` (in place) with its own generator; returns the final loss values."""
    from .training import calibrate_router, stage2, train_stage

    g = generator(seed)
    if arm == "decoupled":
        hist = stage2(model, steps, batch, lr, g, quiet)
        calibrate_router(model, router_steps, batch, router_lr, g, quiet)
    elif arm == "joint_shared":
        hist = train_stage(model, "stage2", ["und", "gen", "edit"], steps, batch, lr, g, quiet, weights=[1, 2, 1])
    elif arm == "sequential_shared":
        hist = stage2(model, steps, batch, lr, g, quiet)
    else:
        raise ValueError(f"unknown arm {arm!r} (one of {ARMS})")
    return {"final_loss": float(sum(hist[-20:]) / max(1, len(hist[-20:])))}


def evaluate(model, per_caption: int, eval_seeds: int, base: int) -> dict[str, float]:
    """Caption accuracy (mean over ``eval_seeds`` unmasking-order seeds), generation faithfulness (mean over
    ``eval_seeds`` seeds), edit accuracy (one greedy draw at ``base``): fresh draws from seed ``base`` upward."""
    from . import evaluate as E

    seeds = range(base, base + eval_seeds)
    return {"caption_accuracy": sum(E.caption_accuracy(model, seed=s) for s in seeds) / eval_seeds,
            "faithfulness": sum(E.generation(model, per_caption, seed=s)["faithfulness"] for s in seeds) / eval_seeds,
            "edit_accuracy": E.editing(model, seed=base)}


def mean_sd(xs: list[float]) -> dict[str, float]:
    """Mean and sample sd (n − 1; None for one value) over training seeds, with the values."""
    return spread(xs).as_dict()


def study(stage1_model, seeds: list[int], steps: int, router_steps: int, batch: int, lr: float, router_lr: float,
          per_caption: int, eval_seeds: int, base: int) -> dict:
    """Every arm for every training seed (fresh copies of the stage-I state), evaluated on fresh draws; per arm the
    mean ± sd over training seeds of each metric, and the paired difference decoupled − joint shared per task."""
    from zoo.common.training import progress

    state = {k: v.detach().clone() for k, v in stage1_model.state_dict().items()}
    before = evaluate(stage1_model, per_caption, eval_seeds, base)
    per: dict[str, list[dict]] = {a: [] for a in ARMS}
    for seed in progress(seeds, "interference seeds"):
        models = start_models(state)
        for arm in ARMS:
            info = train_arm(models[arm], arm, steps, router_steps, batch, lr, router_lr, seed)
            info.update(evaluate(models[arm], per_caption, eval_seeds, base), seed=seed)
            per[arm].append(info)
    keys = ("caption_accuracy", "faithfulness", "edit_accuracy")
    summary = {a: {k: mean_sd([r[k] for r in per[a]]) for k in keys} for a in ARMS}
    diff = {k: mean_sd([d[k] - j[k] for d, j in zip(per["decoupled"], per["joint_shared"])]) for k in keys}
    return {"seeds": list(seeds), "steps": steps, "router_steps": router_steps, "batch": batch, "lr": lr, "router_lr": router_lr,
            "per_caption": per_caption, "eval_seeds": eval_seeds, "eval_base_seed": base, "stage1": before, "runs": per,
            "summary": summary, "decoupled_minus_joint_shared": diff}
