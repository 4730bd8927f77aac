"""Joint θ/φ training of the toy models (Alg. 1 of arXiv 2602.18695): AdamW with a one-cycle schedule over
two parameter groups (generator, aux with its own ``aux_lr``; gradient norms clipped per group), one backward pass
per step through
:func:`~zoo.methods.loflexmdm.core.joint_loss`. Used by ``tools/train_loflexmdm.py``."""
from __future__ import annotations

import torch

from zoo.common.training import progress

from .core import LossConfig, joint_loss
from .tasks import Task

__all__ = ["train"]


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
