"""Training DPLM-Evo (and its ablations) on the toy family: minibatches of family members, a uniform alignment
``z_0 ∈ Γ(x_0)`` in the 2L latent (:func:`zoo.common.varlen.random_alignment`), ``t ~ U(ε, 1]``, one draw of the
forward kernel (:func:`.noise.noise_latent`) and the edit loss (:func:`.noise.edit_loss`) with the diffusion ELBO
weight ``λ_t = 1/t`` of the linear schedule (the note's ``λ_{t−1}``; until this issue's fix the toys were trained
with a constant weight). The contextual kernel
starts after a warm-up of plain mask noise (``ρ_mask = 1``; paper Sec. 3 "Training recipe") and uses the
network being trained, in eval mode, without gradient.

Shared by ``tools/train_dplm_evo.py`` (the shipped toy weights) and the ``train-dplm-evo`` recipe.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import torch

from zoo.common.training import adamw_one_cycle, optimizer_step, progress
from zoo.common.varlen import align, pad_rows, random_alignment

from .model import GAP, PAD, DPLMEvoNet
from .noise import Knobs, edit_loss, labels, noise_latent

__all__ = ["TrainConfig", "CONFIGS", "sample_t", "train"]


def sample_t(batch_size: int, t_min: float, proposal: str, generator: torch.Generator | None
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(t [B], importance weight [B] or None)``. ``"uniform"``: ``t = t_min + (1 − t_min) u``, ``u ~ U[0, 1)``,
    no weight (the historical draw, bit-identical). ``"square"``: ``t = t_min + (1 − t_min) u²`` puts more rows at
    small ``t`` (proposal density ``p(t) = 1 / ((1 − t_min) · 2u)``); each row is weighted by
    ``w = p_U(t) / p(t) = 2u`` so ``E_prop[w · ℓ(t)] = E_U[ℓ(t)]`` for any per-row loss ``ℓ``: the same objective
    with a different sampling of ``t`` (importance sampling of the ELBO's time integral, a variance-reduction device
    as in Kingma et al. 2021, "Variational Diffusion Models", Sec. 5 / App. I, https://arxiv.org/abs/2107.00630,
    where the ELBO's value is invariant to how t is sampled and only its variance changes), not a different loss."""
    u = torch.rand(batch_size, generator=generator)
    if proposal == "uniform":
        return t_min + (1 - t_min) * u, None
    if proposal == "square":
        return t_min + (1 - t_min) * u * u, 2 * u
    raise ValueError(f"unknown t_proposal {proposal!r}; 'uniform' or 'square'")


@dataclass(frozen=True)
class TrainConfig:
    knobs: Knobs = Knobs()
    gamma_sub: float = 1.0
    gamma_del: float = 1.0
    gamma_ins: float = 1.0
    steps: int = 2500
    batch_size: int = 64
    lr: float = 3e-3
    warmup_fraction: float = 0.3  # mask-noise warm-up before the contextual kernel
    t_min: float = 1e-3
    weighting: str = "elbo"  # λ_t = 1 / t, the diffusion ELBO weight of the note's loss ("none": constant, noise.edit_loss)
    t_proposal: str = "uniform"  # how t is drawn: "uniform" (U(t_min, 1]) or "square" (importance-weighted, sample_t)


#: The shipped toy models: the paper's contextual kernel, the two kernel ablations, and the masked baseline.
CONFIGS: dict[str, TrainConfig] = {
    "contextual": TrainConfig(Knobs(kernel="contextual")),
    "uniform": TrainConfig(Knobs(kernel="uniform")),
    "blosum62": TrainConfig(Knobs(kernel="blosum62")),
    # DPLM's public code trains with a constant weight (bytedance/dplm, src/byprot/tasks/lm/dplm.py: learning.weight
    # defaults to 'constant'), so the masked baseline keeps it.
    "masked": TrainConfig(Knobs(0.0, 0.0, 1.0, "uniform"), gamma_del=0.0, gamma_ins=0.0, weighting="none"),
}


def train(net: DPLMEvoNet, data: Sequence[torch.Tensor], cfg: TrainConfig, n_latent: int, generator: torch.Generator,
          show_progress: bool = True) -> list[float]:
    """Train ``net`` in place; returns the loss per step. Draw order per step: row indices, alignment, ``t``,
    the four kernel draws (reproducible from ``generator``)."""
    opt, sched = adamw_one_cycle(net.parameters(), cfg.lr, cfg.steps)
    warm = int(cfg.warmup_fraction * cfg.steps) if cfg.knobs.kernel == "contextual" else 0
    losses: list[float] = []
    it = range(cfg.steps)
    bar = progress(it, "train dplm-evo") if show_progress else it
    for step in bar:
        idx = torch.randint(0, len(data), (cfg.batch_size,), generator=generator)
        tok, lengths = pad_rows([data[int(i)] for i in idx], PAD)
        present = random_alignment(lengths, n_latent, generator)
        z0 = align(tok, lengths, present, GAP)
        t, w = sample_t(cfg.batch_size, cfg.t_min, cfg.t_proposal, generator)
        knobs = dataclasses.replace(cfg.knobs, rho_mask=1.0) if step < warm else cfg.knobs
        net.eval()
        noised = noise_latent(z0, t, knobs, generator, net)
        net.train()
        loss, _ = edit_loss(net, labels(noised.z0, noised.zt, noised.noised), cfg.gamma_sub, cfg.gamma_del, cfg.gamma_ins,
                            normalizer=cfg.batch_size * n_latent / 2, t=noised.t, weighting=cfg.weighting, row_weight=w)
        optimizer_step(net, opt, sched, loss)
        losses.append(float(loss.detach()))
        if show_progress and step % 100 == 0:
            bar.set_postfix(loss=f"{losses[-1]:.3f}")
    net.eval()
    return losses
