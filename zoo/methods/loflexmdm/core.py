"""Noising, projected rate-matching loss, leave-one-out REINFORCE and the joint training step of LoFlexMDM
(arXiv 2602.18695, Sec. 3.2-3.4, Alg. 1; code ``lflexmdm/loss_flexmdm_kuma.py``). With ``a = 1`` and
``b_in = b_um = 1`` (no aux network) this is FlexMDM's Bregman insertion matching (arXiv 2509.01025).

Notation: latent ``z_1 [B, N]`` (tokens, the fixed ``<eos>``, ``<pad>``), ``fixed [B, N]`` (clean at every t),
``valid [B, N]`` (not padding). The variable-length bookkeeping (contraction, gap sums) is
:mod:`zoo.common.varlen`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from zoo.common import varlen

from .schedule import EPS, bregman, hazard_shape, kuma_inverse, kuma_sample_truncated, schedule_regulariser, state_log_probs

__all__ = ["Noised", "antithetic_times", "noise", "rate_matching_loss", "sequence_log_prob", "reinforce_term", "joint_loss",
           "LossConfig"]

DROP, MASK, CLEAN = 0, 1, 2


@dataclass(frozen=True)
class Noised:
    """One noised batch: event times, the per-position state (0 dropped / 1 masked / 2 clean), the latent with
    masks, the presence mask and the contracted rows the generator sees."""

    t_in: torch.Tensor
    t_um: torch.Tensor
    state: torch.Tensor
    latent: torch.Tensor
    present: torch.Tensor
    rows: varlen.Contracted


def antithetic_times(batch: int, generator: torch.Generator | None, eps: float = EPS) -> torch.Tensor:
    """Stratified antithetic t in ``[eps, 1 - eps]``: ``t_i = (u + i / B) mod 1``, one shared uniform ``u``."""
    u = torch.rand((), generator=generator)
    t = (u + torch.arange(batch, dtype=torch.float32) / batch) % 1.0
    return eps + (1 - 2 * eps) * t


def noise(z1: torch.Tensor, fixed: torch.Tensor, valid: torch.Tensor, t: torch.Tensor, a: float, b_in: torch.Tensor,
          b_um: torch.Tensor, mask_id: int, pad_id: int, generator: torch.Generator | None) -> Noised:
    """Draw ``T_in ~ F(·; a, b_in)``, ``T_um ~ F(·; a, b_um)`` truncated to ``[T_in, 1]`` per position, and the
    state at ``t``: dropped if ``t < T_in``, masked if ``T_in <= t < T_um``, clean otherwise. Fixed positions
    have ``T_in = T_um = 0``; padding is never inserted (``T_in = 2``)."""
    b_in, b_um = b_in.detach(), b_um.detach()
    u1 = torch.rand(z1.shape, generator=generator).to(b_in.dtype)
    u2 = torch.rand(z1.shape, generator=generator).to(b_in.dtype)
    t_in = kuma_inverse(u1, a, b_in)
    t_um = kuma_sample_truncated(u2, a, b_um, t_in)
    t_in = torch.where(fixed, torch.zeros_like(t_in), torch.where(valid, t_in, torch.full_like(t_in, 2.0)))
    t_um = torch.where(fixed, torch.zeros_like(t_um), torch.where(valid, t_um, torch.full_like(t_um, 2.0)))
    tc = t[:, None].to(t_in.dtype)
    state = torch.where(tc < t_in, DROP, torch.where(tc < t_um, MASK, CLEAN))
    present = state != DROP
    latent = torch.where(state == MASK, torch.full_like(z1, mask_id), z1)
    rows = varlen.contract(latent, present, pad_id)
    return Noised(t_in, t_um, state, latent, present, rows)


def rate_matching_loss(logits: torch.Tensor, b_in_theta: torch.Tensor, b_um_theta: torch.Tensor, noised: Noised, z1: torch.Tensor,
                       fixed: torch.Tensor, valid: torch.Tensor, t: torch.Tensor, a: float, b_in_phi: torch.Tensor,
                       b_um_phi: torch.Tensor, max_length: int) -> torch.Tensor:
    """Per-sequence projected rate-matching loss ``[B]`` (loflexmdm.md Sec. 4, "Loss for one sample at time t"):

    * unmask, per masked slot k (latent position ``s_t(k)``): ``λ_um^φ · (-log K_θ(z_1[s_t(k)] | x_t)) +
      D(λ_um^φ, λ_um^θ(k))``, summed and divided by the number of masked slots;
    * insert, per gap g left of slot k: ``D(Σ_{dropped j in gap} λ_in^φ_j, λ_in^θ(k))``, summed and divided by
      ``max_length``; with ``D(x, y) = y - x + x log(x / y)`` and ``λ = b · a t^(a-1) / (1 - t^a)``."""
    rows = noised.rows
    h = hazard_shape(t.to(b_in_phi.dtype), a)[:, None]  # [B, 1]
    attn = rows.attention_mask
    pos = rows.positions.clamp_min(0)
    slot_masked = torch.gather(noised.state == MASK, 1, pos) & attn
    target = torch.gather(z1, 1, pos)
    ce = F.cross_entropy(logits.transpose(1, 2), target, reduction="none")
    ce = torch.where(slot_masked, ce, torch.zeros_like(ce))
    lam_um_phi = torch.gather(b_um_phi, 1, pos) * h
    lam_um_theta = b_um_theta * h
    um = (lam_um_phi * ce + bregman(lam_um_phi, lam_um_theta)) * slot_masked
    n_masked = slot_masked.sum(1).clamp_min(1)
    um_loss = um.sum(1) / n_masked
    # insertion: gap g lies before contracted slot g (varlen convention); padding and fixed slots carry no hazard
    lam_in_phi_latent = b_in_phi * h * (valid & ~fixed)
    gap_target = varlen.gap_sums(lam_in_phi_latent, noised.present, rows)[:, : rows.tokens.shape[1]]
    ins = bregman(gap_target, b_in_theta * h) * attn
    ins_loss = ins.sum(1) / max_length
    return um_loss + ins_loss


def sequence_log_prob(noised: Noised, t: torch.Tensor, a: float, b_in_phi: torch.Tensor, b_um_phi: torch.Tensor,
                      fixed: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``log p_φ(z_t | z_1) [B]``: Σ over non-fixed valid positions of the log closed-form probability of the
    sampled state (dropped / masked / clean)."""
    ld, lm, lc = state_log_probs(t[:, None].to(b_in_phi.dtype), a, b_in_phi, b_um_phi)
    lp = torch.where(noised.state == DROP, ld, torch.where(noised.state == MASK, lm, lc))
    return (lp * (valid & ~fixed)).sum(1)


def reinforce_term(loss1: torch.Tensor, loss2: torch.Tensor, logp1: torch.Tensor, logp2: torch.Tensor) -> torch.Tensor:
    """Leave-one-out REINFORCE with two samples: ``½ (L¹ - L²)_detached · (log p_φ(z¹) - log p_φ(z²))`` per
    sequence (antisymmetric under swapping the samples, zero when ``L¹ = L²``)."""
    return 0.5 * (loss1 - loss2).detach() * (logp1 - logp2)


@dataclass(frozen=True)
class LossConfig:
    """Loss weights (public code defaults): regulariser 1.0 (mean/boundary/KL = 1/1/1), REINFORCE 1.0.

    ``time_weight``: ``"hazard"`` is the paper's loss; ``"unit"`` divides *θ's* per-sequence loss by the hazard shape
    ``h(t) = a t^(a-1)/(1 - t^a)`` (for a = 1: multiplies it by ``1 - t``). For every t θ's minimisers (the true
    conditional ``K``, the conditional expected gap hazard) are unchanged by a positive per-t weight, but the
    gradient no longer blows up as ``1/(1 - t)`` near the clean end. The first toys were trained with it; it also
    drowns the t → 1 signal that the sampler's length law depends on (their insertion heads plateaued on finished
    rows), so the shipped toys now use the paper's ``"hazard"`` weighting and ``"unit"`` is kept as an option.
    φ's objective is *not* invariant to that weight (the reward of an
    order is the loss of the samples it produces, and ``h`` depends on t), so φ always gets the paper's
    hazard-weighted loss: as the REINFORCE reward and through the target hazards. (Dividing φ's reward by ``h``
    too flips the sign of its gradient on the checksum toy: every ``b_in`` then falls to its floor ``min_rate``.)"""

    regularizer_weight: float = 1.0
    reinforce_weight: float = 1.0
    stop_grad_on_phi: bool = False
    time_weight: str = "hazard"


def joint_loss(model, z1: torch.Tensor, fixed: torch.Tensor, valid: torch.Tensor, mask_id: int, pad_id: int,
               generator: torch.Generator | None, cfg: LossConfig = LossConfig()) -> tuple[torch.Tensor, dict[str, float]]:
    """One joint θ/φ objective (Alg. 1): antithetic t, φ's multipliers on ``z_1``, **two** independent noised
    samples, ``loss_θ = ½ (L¹ + L²)`` (gradients also reach φ through the target hazards unless
    ``stop_grad_on_phi``), plus the REINFORCE term ``½ (L¹ - L²)(log p_φ(z¹) - log p_φ(z²))`` with the paper's
    (hazard-weighted) L as reward and the schedule regulariser when φ exists (see :class:`LossConfig` for
    ``time_weight``)."""
    b = z1.shape[0]
    t = antithetic_times(b, generator)
    b_in_phi, b_um_phi = model.aux_rates(z1, valid)
    tgt_in, tgt_um = (b_in_phi.detach(), b_um_phi.detach()) if cfg.stop_grad_on_phi else (b_in_phi, b_um_phi)
    max_length = z1.shape[1]
    losses, logps = [], []
    rewards = []
    if cfg.time_weight not in ("hazard", "unit"):
        raise ValueError(f"time_weight must be 'hazard' or 'unit', got {cfg.time_weight!r}")
    for _ in range(2):
        nz = noise(z1, fixed, valid, t, model.a, b_in_phi, b_um_phi, mask_id, pad_id, generator)
        logits, bi, bu = model.generator_rates(nz.rows.tokens, nz.rows.attention_mask, t)
        if cfg.time_weight == "hazard":
            loss = rate_matching_loss(logits, bi, bu, nz, z1, fixed, valid, t, model.a, tgt_in, tgt_um, max_length)
            reward = loss
        elif not model.learns_schedule:
            loss = rate_matching_loss(logits, bi, bu, nz, z1, fixed, valid, t, model.a, tgt_in, tgt_um, max_length)
            loss = loss / hazard_shape(t.to(loss.dtype), model.a)
            reward = loss
        else:
            # θ: the unit-weighted loss with φ's targets held fixed; φ: the paper's loss with θ's outputs held fixed
            theta_part = rate_matching_loss(logits, bi, bu, nz, z1, fixed, valid, t, model.a, b_in_phi.detach(), b_um_phi.detach(),
                                            max_length) / hazard_shape(t.to(b_in_phi.dtype), model.a)
            reward = rate_matching_loss(logits.detach(), bi.detach(), bu.detach(), nz, z1, fixed, valid, t, model.a, tgt_in, tgt_um,
                                        max_length)
            loss = theta_part + (reward - reward.detach())  # value: θ's loss; gradient: θ's + φ's pathwise
        losses.append(loss)
        rewards.append(reward)
        logps.append(sequence_log_prob(nz, t, model.a, b_in_phi, b_um_phi, fixed, valid) if model.learns_schedule else None)
    loss_theta = 0.5 * (losses[0] + losses[1]).mean()
    total = loss_theta
    stats = {"loss_theta": float(loss_theta.detach())}
    if model.learns_schedule:
        rf = reinforce_term(rewards[0], rewards[1], logps[0], logps[1]).mean()
        free = valid & ~fixed
        reg = schedule_regulariser(model.a, b_in_phi, free)
        if model.fix_b_um is None:
            reg = reg + schedule_regulariser(model.a, b_um_phi, free)
        total = total + cfg.reinforce_weight * rf + cfg.regularizer_weight * reg
        stats.update(reinforce=float(rf.detach()), regulariser=float(reg.detach()))
    return total, stats
