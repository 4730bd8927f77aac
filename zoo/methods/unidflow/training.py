"""UniDFlow's training stages on the toy (``zoo train unidflow`` runs them, :mod:`.train`; reconstruction of the
paper's three stages, arXiv 2602.12221 section 3, plus the stand-in backbone's pre-training).

0. **Backbone pre-training** (stand-in for the pretrained VLT, then frozen): a generic masked objective on
   caption-image pairs in one neutral format (never the task formats or editing).
I. **Text alignment**: Δu at unit scale (α ≡ 1; Δg does not exist yet), the TSG-RMSNorm modulation, the time MLP
   and the task embeddings on understanding (image → caption) with the DFM loss.
II. **Vision alignment**: Δg at unit scale (α ≡ 0) and the task embeddings on generation (caption → image) and
   editing (instruction + source → image), 2 : 1; Δu and the norm modulation stay as stage I left them. Then
   [recon] the router alone (adapters frozen) on all three tasks: the timestep/task-dependent mix. The
   shared-adapter ablation trains the stage-I model's single adapter on stage II's data.
III. **mRef-DPO**: Δg only, against the frozen stage-II model as reference, on automatically built pairs
   (generation: winner satisfies the caption, loser violates one attribute; editing: exact edit vs one attribute
   off; identical condition, shared t and mask).
"""
from __future__ import annotations

import copy
from typing import Iterable

import torch

from zoo.common.lora import lora_parameters, lora_scales
from zoo.common.masked_dlm import dfm_masked_loss
from zoo.common.training import adamw_one_cycle, optimizer_step, progress

from .dfm import corrupt, dfm_loss, dpo_loss, elbo, target_mask
from .world import TASKS, TOK, all_scenes, preference_pair, random_examples

__all__ = ["pretrain_backbone", "stage1", "stage2", "calibrate_router", "stage3_dpo", "trainable", "STAGE_PARAMS"]


def _set_trainable(model, params: Iterable[torch.nn.Parameter]) -> list[torch.nn.Parameter]:
    params = list(params)
    for p in model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    return params


def trainable(model, stage: str) -> list[torch.nn.Parameter]:
    """The parameters a stage trains (see the module docstring)."""
    if stage == "pretrain":
        return model.backbone_parameters()
    if stage == "stage1":
        return lora_parameters(model.backbone, "und") + list(model.tsg.parameters()) + list(model.time_mlp.parameters()) + list(model.task_emb.parameters())
    if stage == "stage2":
        return lora_parameters(model.backbone, "und" if model.shared else "gen") + list(model.task_emb.parameters())
    if stage == "router":
        return list(model.router.parameters())
    if stage == "stage3":
        return lora_parameters(model.backbone, "und" if model.shared else "gen")
    raise ValueError(f"unknown stage {stage!r}")


STAGE_PARAMS = ("pretrain", "stage1", "stage2", "stage3")


def _loop(model, params, steps: int, lr: float, desc: str, loss_fn, quiet: bool) -> list[float]:
    opt, sched = adamw_one_cycle(params, lr, steps)
    model.train()
    hist = []
    bar = progress(range(steps), desc, disable=quiet)
    for step in bar:
        loss = loss_fn(step)
        optimizer_step(model, opt, sched, loss, clip=1.0)
        hist.append(float(loss.detach()))
        if step % 50 == 0:
            bar.set_postfix(loss=f"{hist[-1]:.3f}")
    model.eval()
    return hist


def pretrain_backbone(model, steps: int, batch: int, lr: float, g: torch.Generator, quiet: bool = False) -> list[float]:
    """Stage 0 (the stand-in for the pretrained VLT): a generic masked objective on caption-image pairs in
    one neutral format (``<img>`` token, text and image slots), each token of both slots masked with
    probability ``1 − t``; adapters off, no modulation; only the backbone's base weights train. It never sees
    the task formats (``<und>``, ``<gen>``, ``<edit>``), task-only masking, or editing."""
    params = _set_trainable(model, trainable(model, "pretrain"))

    def loss_fn(step: int) -> torch.Tensor:
        x1 = random_examples("pair", batch, g)
        tgt = target_mask(["pair"] * batch)
        t = torch.rand(batch, generator=g)
        xt, masked = corrupt(x1, tgt, t, g)
        with lora_scales(model.backbone, {}):
            logits = model.backbone(xt)
        return dfm_masked_loss(logits, x1, masked, t, normalizer=float(tgt.sum()))

    hist = _loop(model, params, steps, lr, "stage 0 (backbone)", loss_fn, quiet)
    _set_trainable(model, [])
    return hist


def _task_batch(tasks: list[str], n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    per = [n // len(tasks) + (i < n % len(tasks)) for i in range(len(tasks))]
    x1 = torch.cat([random_examples(t, k, g) for t, k in zip(tasks, per)])
    names = [t for t, k in zip(tasks, per) for _ in range(k)]
    return x1, torch.tensor([TASKS.index(t) for t in names]), target_mask(names)


def train_stage(model, stage: str, tasks: list[str], steps: int, batch: int, lr: float, g: torch.Generator, quiet: bool = False,
                alpha: float | None = None, weights: list[int] | None = None) -> list[float]:
    """The DFM loss on a mixture of ``tasks`` (``weights``: rows per task out of ``sum(weights)``), training
    :func:`trainable` of ``stage``; ``alpha`` fixes the router output (None: the router)."""
    params = _set_trainable(model, trainable(model, stage))
    plan = [t for t, w in zip(tasks, weights or [1] * len(tasks)) for _ in range(w)]

    def loss_fn(step: int) -> torch.Tensor:
        x1, task_ids, tgt = _task_batch(plan, batch, g)
        return dfm_loss(model, x1, task_ids, tgt, g, alpha=None if alpha is None else torch.tensor(alpha))

    hist = _loop(model, params, steps, lr, f"{stage} ({'+'.join(tasks)})", loss_fn, quiet)
    _set_trainable(model, [])
    return hist


def stage1(model, steps: int, batch: int, lr: float, g: torch.Generator, quiet: bool = False) -> list[float]:
    """Stage I: Δu at unit scale (α ≡ 1: Δg does not exist yet) on understanding."""
    return train_stage(model, "stage1", ["und"], steps, batch, lr, g, quiet, alpha=1.0)


def stage2(model, steps: int, batch: int, lr: float, g: torch.Generator, quiet: bool = False) -> list[float]:
    """Stage II: Δg at unit scale (α ≡ 0) on generation and editing (2 : 1); the shared ablation trains its
    single adapter on the same batches."""
    return train_stage(model, "stage2", ["gen", "edit"], steps, batch, lr, g, quiet, alpha=0.0, weights=[2, 1])


def calibrate_router(model, steps: int, batch: int, lr: float, g: torch.Generator, quiet: bool = False) -> list[float]:
    """End of stage II [recon]: the router alone (adapters frozen) on all three tasks, learning α_t from the
    timestep state: the mixture of Δu and Δg each task and time step gets."""
    if model.shared:
        return []
    return train_stage(model, "router", ["und", "gen", "edit"], steps, batch, lr, g, quiet)


def preference_batch(n: int, g: torch.Generator, task: str = "gen") -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` (winner, loser) pairs of ``task`` (``gen`` or ``edit``) over uniformly drawn scenes, each pair under a
    byte-identical condition (:func:`~.world.preference_pair`)."""
    scenes = all_scenes()
    idx = torch.randint(0, len(scenes), (n,), generator=g).tolist()
    pairs = [preference_pair(scenes[i], g, task) for i in idx]
    return torch.tensor([w for w, _ in pairs]), torch.tensor([l for _, l in pairs])


def stage3_dpo(model, steps: int, batch: int, lr: float, beta: float, g: torch.Generator, quiet: bool = False):
    """Stage III, mRef-DPO: the reference is a frozen copy of the stage-II ``model``; each step draws pairs,
    one ``t`` and one mask pattern per pair shared by winner and loser, and minimises
    :func:`~.dfm.dpo_loss` of the surrogate ELBOs. Returns ``(history, reference)``."""
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    params = _set_trainable(model, trainable(model, "stage3"))

    def loss_fn(step: int) -> torch.Tensor:
        half = batch // 2
        wg, lg = preference_batch(half, g, "gen")
        we, le = preference_batch(batch - half, g, "edit")
        w, l = torch.cat([wg, we]), torch.cat([lg, le])
        task = torch.tensor([TASKS.index("gen")] * half + [TASKS.index("edit")] * (batch - half))
        t = torch.rand(batch, generator=g)
        _, masked = corrupt(w, target_mask(["gen"] * batch), t, g)  # the image slot for both tasks
        both = torch.cat([w, l])
        tt, mm, kk = torch.cat([t, t]), torch.cat([masked, masked]), torch.cat([task, task])
        lp = elbo(model, both, kk, tt, mm)
        with torch.no_grad():
            lr_ = elbo(ref, both, kk, tt, mm)
        return dpo_loss(lp[:batch], lr_[:batch], lp[batch:], lr_[batch:], beta)

    hist = _loop(model, params, steps, lr, "stage III (mRef-DPO)", loss_fn, quiet)
    _set_trainable(model, [])
    return hist, ref
