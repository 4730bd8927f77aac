"""Joint θ/φ training of the toy models (Alg. 1 of arXiv 2602.18695): AdamW with a one-cycle schedule over
two parameter groups (generator, aux with its own ``aux_lr``; gradient norms clipped per group), one backward pass
per step through
:func:`~zoo.methods.loflexmdm.core.joint_loss`. :func:`train_toy` is the recipe of every shipped toy checkpoint
(``zoo train loflexmdm`` / ``zoo train flexmdm``, :mod:`~zoo.methods.loflexmdm.train`) and of the benchmark's extra training seeds."""
from __future__ import annotations

import torch

from zoo.common.training import progress, setup_deterministic

from .core import LossConfig, joint_loss
from .params import RECIPE
from .tasks import TASKS, Task

__all__ = ["METHODS", "RECIPE", "train", "train_toy"]

METHODS = {"loflexmdm": "kumaraswamy", "flexmdm": "linear"}


def train_toy(method: str, task_name: str, seed: int = 0, steps: int = 4800, batch_size: int = 128, lr: float = 3e-3,
              aux_lr: float = 1e-3, time_weight: str = "hazard", insertion_head: str = "multiplier", length_conditioning: bool = True):
    """One toy checkpoint: ``method`` (``loflexmdm`` / ``flexmdm``) on ``task_name``, training seed ``seed``. The
    data/noise generator is seeded by ``seed + 100 · task index + 10 · method index`` (so any subset of the
    (task, method) grid reproduces the full run), the initial weights by ``init_seed = seed``; one thread."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {list(METHODS)}, got {method!r}")
    if task_name not in TASKS:
        raise ValueError(f"task must be one of {list(TASKS)}, got {task_name!r}")
    from .model import make_model

    g = setup_deterministic(seed + 100 * TASKS.index(task_name) + 10 * list(METHODS).index(method))
    model = make_model(init_seed=seed, task=task_name, schedule=METHODS[method], insertion_head=insertion_head,
                       length_conditioning=length_conditioning)
    suffix = f", seed {seed}" if seed else ""
    train(model, Task(task_name), steps, batch_size, lr, aux_lr, g, LossConfig(time_weight=time_weight), desc=f"{method}[{task_name}{suffix}]")
    return model


def train(model, task: Task, steps: int, batch_size: int, lr: float, aux_lr: float, generator: torch.Generator,
          cfg: LossConfig = LossConfig(), desc: str = "train", clip: float = 1.0) -> list[dict[str, float]]:
    """Train ``model`` in place on exact draws of ``task``; returns the per-step statistics."""
    tok = model.zoo_tokenizer
    groups = [{"params": list(model.generator.parameters()), "lr": lr}]
    if model.aux is not None:
        groups.append({"params": list(model.aux.parameters()), "lr": aux_lr})
    opt = torch.optim.AdamW(groups, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[g["lr"] for g in groups], total_steps=steps, pct_start=0.1)
    model.train()
    log = []
    bar = progress(range(steps), desc)
    for _ in bar:
        z1, fixed, valid = task.encode_latents(task.sample_texts(batch_size, generator), tok)
        loss, stats = joint_loss(model, z1, fixed, valid, tok.mask_token_id, tok.pad_token_id, generator, cfg)
        opt.zero_grad()
        loss.backward()
        for group in groups:  # per group: φ's hazard-weighted gradients must not shrink θ's step
            torch.nn.utils.clip_grad_norm_(group["params"], clip)
        opt.step()
        sched.step()
        log.append(stats)
        bar.set_postfix(loss=f"{stats['loss_theta']:.3f}")
    model.eval()
    return log
