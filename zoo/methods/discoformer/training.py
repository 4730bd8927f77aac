"""DiScoFormer's training loop on random Gaussian mixtures (method note section 4.2; Algorithm 1 of
arXiv 2511.05924): per step a batch of fresh random mixtures (:func:`zoo.methods.discoformer.data.sample_tasks`),
loss ``L = alpha * mean (T - log f)^2 + (1 - alpha) * mean |S - grad log f|^2`` against the exact targets,
AdamW with a one-cycle schedule, gradient clipping and an EMA of the weights (the EMA is what is shipped).
Deterministic for a seed on one thread (:mod:`zoo.common.training`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from zoo.common.training import EMA, adamw_one_cycle, optimizer_step, progress, setup_deterministic

from .data import sample_tasks
from .model import DiScoFormer, build_discoformer

__all__ = ["TrainConfig", "TOY_ARCH", "train_discoformer", "discoformer_loss"]

#: the CPU toy architecture (method note section 6: 2 layers x d_model 64 x 4 heads)
TOY_ARCH: dict[str, Any] = {"d_model": 64, "n_heads": 4, "n_layers": 2, "ffn_mult": 2}


@dataclass
class TrainConfig:
    dim: int = 2
    steps: int = 2000
    batch: int = 8
    n_context: int = 256
    n_query: int = 128
    lr: float = 1e-3
    alpha: float = 0.5
    k_max: int = 10
    seed: int = 0
    arch: dict[str, Any] = field(default_factory=lambda: dict(TOY_ARCH))


def discoformer_loss(model: DiScoFormer, X: torch.Tensor, Y: torch.Tensor, log_f: torch.Tensor, score: torch.Tensor,
                     alpha: float = 0.5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(loss, mse_log_density, mse_score)`` with ``mse_score = mean_i |S_i - s_i|^2`` (sum over coordinates)."""
    T, S = model(X, Y)
    mse_t = ((T - log_f) ** 2).mean()
    mse_s = ((S - score) ** 2).sum(-1).mean()
    return alpha * mse_t + (1 - alpha) * mse_s, mse_t, mse_s


def train_discoformer(cfg: TrainConfig, show_progress: bool = True) -> tuple[dict[str, torch.Tensor], list[float]]:
    """Train from scratch; returns the EMA ``state_dict`` and the loss curve (one value per step)."""
    g = setup_deterministic(cfg.seed)
    model = build_discoformer(dim=cfg.dim, **cfg.arch).train()
    opt, sched = adamw_one_cycle(model.parameters(), cfg.lr, cfg.steps, pct_start=0.1, weight_decay=0.0)
    ema = EMA(model, max_decay=0.995)
    losses: list[float] = []
    steps = progress(range(cfg.steps), desc=f"train d={cfg.dim}") if show_progress else range(cfg.steps)
    for step in steps:
        t = sample_tasks(cfg.batch, cfg.dim, cfg.n_context, cfg.n_query, g, k_max=cfg.k_max)
        loss, mse_t, mse_s = discoformer_loss(model, t.X, t.Y, t.log_f, t.score, cfg.alpha)
        optimizer_step(model, opt, sched, loss, clip=1.0)
        ema.update(model, step)
        losses.append(loss.item())
        if show_progress and step % 25 == 0:
            steps.set_postfix(loss=f"{loss.item():.3f}", T=f"{mse_t.item():.3f}", S=f"{mse_s.item():.3f}")  # type: ignore[union-attr]
    return ema.state_dict(), losses
