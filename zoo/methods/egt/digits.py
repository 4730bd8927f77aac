"""EGT on the shared class-conditional digits DiT (:mod:`zoo.common.digits`), digit classes as groups.

No per-group divergence D_f(P_a‖Q_a) is computable for a learned diffusion model, so this module
measures a **named proxy** (not a divergence):

* ``heldout_loss`` -- per-group held-out denoising loss: the epsilon MSE on the test split (36
  images per class) at ``n_t`` stratified timesteps t_j = ⌊(j + ½) T / n_t⌋ with seeded noise. Like an
  NLL it carries a per-group irreducible offset (the Bayes-optimal denoiser's loss differs by class),
  so equal losses are not equal divergences (note ``methods/egt.md`` §4.5);
* ``recall`` -- per-group classifier recall on samples: the fraction of samples requested as class a
  (DDIM, ``num_inference_steps``, seeded) that the digits classifier (logistic regression on the
  train split, 96 % test accuracy) labels a.

Fine-tuning objectives (Adam on a private copy of the DiT; the cached model is never changed):

* ``erm`` -- the DDPM epsilon loss on uniform minibatches of the train split (Ho et al., arXiv
  2006.11239, eq. 14);
* ``minmax`` -- the note's §4.3 rule for diffusion: group-stratified minibatches, an EMA L̄_{a,b} of each
  group's loss per timestep bin b (``bins`` equal bins of 0..T−1), and, for every bin present in the
  batch, back-propagate only the loss of the group with the largest L̄_{a,b};
* ``group-dro`` -- exponentiated-gradient group weights on the per-group batch losses (Sagawa et al.,
  arXiv 1911.08731, Alg. 1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from zoo.common.digits import NULL_CLASS, NUM_CLASSES, digits_classifier, digits_split, make_scheduler, sample_digits

from .gaussian import eg_update

__all__ = ["T_TRAIN", "alphas_cumprod", "heldout_loss", "sample_recall", "DigitsRun", "finetune_digits", "DIGITS_ALGORITHMS",
           "DIGITS_SCHEDULES"]

T_TRAIN = 1000
DIGITS_ALGORITHMS = ("erm", "minmax", "group-dro")
DIGITS_SCHEDULES = ("constant", "cosine")


def alphas_cumprod() -> torch.Tensor:
    """The DiT's training schedule (DDPM linear betas 1e-4..0.02, T = 1000), float32 (T,)."""
    return make_scheduler("ddpm").alphas_cumprod.float()


def _eps_pred(model: Any, x: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = model(x, t, class_labels=y).sample
    return out[:, : x.shape[1]]


@torch.no_grad()
def heldout_loss(model: Any, n_t: int = 10, seed: int = 0, chunk: int = 1024) -> list[float]:
    """Per-class mean epsilon MSE on the test split at ``n_t`` stratified timesteps (fixed noise)."""
    s = digits_split()
    ab = alphas_cumprod()
    x0 = s.x_test.repeat_interleave(n_t, 0)
    y = s.y_test.repeat_interleave(n_t, 0)
    t = (((torch.arange(n_t) + 0.5) * T_TRAIN / n_t).long()).repeat(s.x_test.shape[0])
    eps = torch.randn(x0.shape, generator=torch.Generator().manual_seed(seed))
    a = ab[t].sqrt().reshape(-1, 1, 1, 1)
    sd = (1 - ab[t]).sqrt().reshape(-1, 1, 1, 1)
    xt = a * x0 + sd * eps
    per = torch.cat([((_eps_pred(model, xt[i:i + chunk], t[i:i + chunk], y[i:i + chunk]) - eps[i:i + chunk]) ** 2).mean((1, 2, 3))
                     for i in range(0, xt.shape[0], chunk)])
    return [float(per[y == c].mean()) for c in range(NUM_CLASSES)]


@torch.no_grad()
def sample_recall(model: Any, per_class: int = 30, num_inference_steps: int = 20, seed: int = 0) -> list[float]:
    """Per-class recall of the digits classifier on ``per_class`` DDIM samples of each class."""
    labels = torch.arange(NUM_CLASSES).repeat_interleave(per_class)
    x = sample_digits(model, labels, num_inference_steps=num_inference_steps, scheduler="ddim", seed=seed)
    pred = digits_classifier().predict(x)
    return [float((pred[labels == c] == c).double().mean()) for c in range(NUM_CLASSES)]


@dataclass
class DigitsRun:
    """Training trace of :func:`finetune_digits`: the per-group EMA of the training loss (mean over
    timestep bins) every ``record_every`` steps, how often each group was back-propagated, the Adam
    learning rate each step used (``lrs``, read from the optimizer), and the mean number of rows per step
    whose loss enters the back-propagated objective (``rows_backprop``: erm and group-dro the whole
    batch, min–max the worst digit's rows of each timestep bin)."""

    steps: list[int] = field(default_factory=list)
    train_loss: list[list[float | None]] = field(default_factory=list)
    worst_counts: list[int] = field(default_factory=lambda: [0] * NUM_CLASSES)
    weights: list[float] = field(default_factory=list)
    lrs: list[float] = field(default_factory=list)
    rows_backprop: float = 0.0


def finetune_digits(model: Any, algorithm: str = "minmax", steps: int = 300, lr: float = 2e-4, batch_per_group: int = 12,
                    ema_decay: float = 0.9, bins: int = 4, eta_q: float = 0.01, label_dropout: float = 0.1, seed: int = 0,
                    record_every: int = 10, progress: bool = False, schedule: str = "constant") -> DigitsRun:
    """Fine-tune ``model`` **in place** (pass a private copy) with ``algorithm`` (module docstring).

    Every draw comes from one generator seeded with ``seed``, in this order per step: row indices,
    timesteps t, noise ε, the label-dropout mask. The model stays in ``eval()`` mode: diffusers' DiT
    drops class labels in ``train()`` mode with the *global* RNG (its classifier-free-guidance
    training, probability 0.1), which would make runs irreproducible; the same dropout is applied here
    explicitly (``label_dropout``, rows keep their group for the per-group losses).

    ``schedule``: ``constant`` (every Adam step at ``lr``) or ``cosine``: step k = 0 … steps − 1 uses
    lr · ½(1 + cos(π k / steps)) (Loshchilov & Hutter, SGDR, https://arxiv.org/abs/1608.03983 eq. 5, one
    cycle, η_min = 0; ``torch.optim.lr_scheduler.LambdaLR``): the step decays to 0, so a fine-tuning
    that starts at a converged model settles back instead of ending an lr-sized kick away from it."""
    if algorithm not in DIGITS_ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; have {', '.join(DIGITS_ALGORITHMS)}")
    if schedule not in DIGITS_SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; have {', '.join(DIGITS_SCHEDULES)}")
    s = digits_split()
    ab = alphas_cumprod()
    K = NUM_CLASSES
    by_class = [torch.nonzero(s.y_train == c).reshape(-1) for c in range(K)]
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = (torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 0.5 * (1.0 + math.cos(math.pi * k / steps)))
             if schedule == "cosine" else None)
    ema = torch.full((K, bins), float("nan"))
    q = torch.full((K,), 1.0 / K, dtype=torch.float64)
    run = DigitsRun()
    n_rows = 0
    model.eval()
    it = range(steps)
    if progress:
        from zoo.common.training import progress as bar

        it = bar(it, desc=f"egt digits {algorithm}")
    for step in it:
        if algorithm == "erm":
            idx = torch.randint(0, s.y_train.shape[0], (batch_per_group * K,), generator=g)
        else:
            idx = torch.cat([c[torch.randint(0, c.numel(), (batch_per_group,), generator=g)] for c in by_class])
        x0, y = s.x_train[idx], s.y_train[idx]
        t = torch.randint(0, T_TRAIN, (idx.numel(),), generator=g)
        eps = torch.randn(x0.shape, generator=g)
        drop = torch.rand(idx.numel(), generator=g) < label_dropout
        xt = ab[t].sqrt().reshape(-1, 1, 1, 1) * x0 + (1 - ab[t]).sqrt().reshape(-1, 1, 1, 1) * eps
        per = ((_eps_pred(model, xt, t, torch.where(drop, torch.full_like(y, NULL_CLASS), y)) - eps) ** 2).mean((1, 2, 3))
        b = t * bins // T_TRAIN
        with torch.no_grad():  # bucket means and their EMA, per (group, bin)
            cell = torch.zeros(K, bins).index_put_((y, b), per.detach(), accumulate=True)
            cnt = torch.zeros(K, bins).index_put_((y, b), torch.ones_like(per), accumulate=True)
            seen = cnt > 0
            mean = cell / cnt.clamp_min(1)
            fresh = seen & ema.isnan()
            ema[fresh] = mean[fresh]
            upd = seen & ~fresh
            ema[upd] = ema_decay * ema[upd] + (1 - ema_decay) * mean[upd]
        if algorithm == "erm":
            objective = per.mean()
            n_rows += per.numel()
        elif algorithm == "group-dro":
            group_loss = torch.stack([per[y == c].mean() for c in range(K)])
            q = eg_update(q, group_loss, eta_q)
            objective = (q.float() * group_loss).sum()
            n_rows += per.numel()
        else:
            terms = []
            for j in range(bins):
                known = ~ema[:, j].isnan()
                if not bool(known.any()):
                    continue
                worst = int(torch.where(known, ema[:, j], torch.tensor(-float("inf"))).argmax())
                mask = (y == worst) & (b == j)
                if bool(mask.any()):
                    terms.append(per[mask].mean())
                    n_rows += int(mask.sum())
                    run.worst_counts[worst] += 1
            objective = torch.stack(terms).mean()
        opt.zero_grad()
        objective.backward()
        run.lrs.append(float(opt.param_groups[0]["lr"]))
        opt.step()
        if sched is not None:
            sched.step()
        if (step + 1) % record_every == 0 or step + 1 == steps:
            run.steps.append(step + 1)
            rows = torch.nanmean(ema, 1)
            run.train_loss.append([None if bool(v.isnan()) else float(v) for v in rows])  # None: group not seen yet
    run.weights = [float(v) for v in q]
    run.rows_backprop = n_rows / max(steps, 1)
    return run
