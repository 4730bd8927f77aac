"""Masked discrete flow matching for UniDFlow (reconstruction, ``/work/shared/methods/unidflow.md`` section 4).

Convention of Gat et al. 2024 (arXiv 2407.15595): time ``t`` runs from 0 (all masks) to 1 (data); on the
mixture path ``p_t(x | x_1) = Π_i [κ_t δ_{x_1^i} + (1 − κ_t) δ_m]`` with ``κ_t = t`` each target token is
masked independently with probability ``1 − t``. Only the task's target positions are ever masked
(understanding: the text; generation and editing: the image), the condition is never touched.

* Training loss (:func:`dfm_loss`): CE on masked target tokens weighted by ``κ̇_t / (1 − κ_t)``
  (``zoo.common.masked_dlm.dfm_masked_loss``; the MDLM/LLaDA NELBO with reversed time).
* Sampler (:func:`dfm_sample`): from ``t_k = k / K`` to ``t_{k+1}`` each still-masked target position is
  unmasked with probability ``(κ_{k+1} − κ_k) / (1 − κ_k)`` (the posterior velocity's jump probability,
  Gat et al. eq. for mixture paths) to a draw from ``p_{1|t}(· | x_t)``; the last step unmasks everything;
  unmasked tokens never change (absorbing).
* Surrogate log-likelihood (:func:`elbo`): ``ℓ_θ(x | c) = −`` the weighted masked CE at a given ``(t, mask)``,
  the quantity mRef-DPO compares between policy and reference (Diffusion-DPO's use of ELBO differences,
  Wallace et al. 2023, arXiv 2311.12908).
* mRef-DPO (:func:`dpo_loss`): ``−log σ(β [(ℓ_θ(x^w|c) − ℓ_ref(x^w|c)) − (ℓ_θ(x^l|c) − ℓ_ref(x^l|c))])`` with
  the winner and loser sharing c, t and the mask pattern (Rafailov et al. 2023, arXiv 2305.18290, eq. 7).
"""
from __future__ import annotations

from typing import Sequence

import torch

from zoo.common.discrete import gumbel_max, uniform
from zoo.common.masked_dlm import dfm_masked_loss

from .world import LAYOUT, SEQ_LEN, TASKS, TOK, target_slice

__all__ = ["target_mask", "corrupt", "dfm_loss", "elbo", "dpo_loss", "dpo_margin", "dfm_sample", "allowed_ids"]


def target_mask(tasks: Sequence[str], L: int = SEQ_LEN) -> torch.Tensor:
    """``[B, L]`` bool: the positions each row's task generates."""
    m = torch.zeros(len(tasks), L, dtype=torch.bool)
    for i, task in enumerate(tasks):
        if task == "pair":  # the pre-training format: text and image slots
            m[i, LAYOUT.text] = True
            m[i, LAYOUT.image] = True
        else:
            m[i, target_slice(task)] = True
    return m


def corrupt(x1: torch.Tensor, target: torch.Tensor, t: torch.Tensor, g: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample ``x_t``: each target token is masked with probability ``1 − κ_t = 1 − t`` (one ``rand`` draw of
    ``x1.shape``). Returns ``(x_t, masked)``."""
    masked = (torch.rand(x1.shape, generator=g) >= t.reshape(-1, 1)) & target
    return torch.where(masked, torch.full_like(x1, TOK.mask_token_id), x1), masked


def dfm_loss(model, x1: torch.Tensor, task_ids: torch.Tensor, target: torch.Tensor, g: torch.Generator | None,
             t: torch.Tensor | None = None, alpha=None) -> torch.Tensor:
    """The masked DFM objective on one batch: ``t ~ U(0, 1)`` per row (or given), corrupt the target, weighted
    CE (:func:`~zoo.common.masked_dlm.dfm_masked_loss`, ``κ_t = t``), normalised by the number of target
    tokens."""
    B = x1.shape[0]
    if t is None:
        t = torch.rand(B, generator=g)
    xt, masked = corrupt(x1, target, t, g)
    logits = model(xt, t, task_ids, alpha=alpha)
    return dfm_masked_loss(logits, x1, masked, t, normalizer=max(float(target.sum()), 1.0))


def elbo(model, x1: torch.Tensor, task_ids: torch.Tensor, t: torch.Tensor, masked: torch.Tensor, alpha=None) -> torch.Tensor:
    """Per-row surrogate log-likelihood ``ℓ(x) = −Σ_i w(t) 1[masked_i] CE_i`` at the given ``(t, mask)``,
    ``w(t) = κ̇/(1 − κ) = 1/(1 − t)``; its expectation over ``t ~ U(0,1)`` and the masks is the DFM ELBO."""
    xt = torch.where(masked, torch.full_like(x1, TOK.mask_token_id), x1)
    logits = model(xt, t, task_ids, alpha=alpha)
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x1, reduction="none")
    return -(ce * masked).sum(1) / (1.0 - t).clamp_min(1e-6)


def dpo_margin(lw: torch.Tensor, lw_ref: torch.Tensor, ll: torch.Tensor, ll_ref: torch.Tensor) -> torch.Tensor:
    """``(ℓ_θ(w) − ℓ_ref(w)) − (ℓ_θ(l) − ℓ_ref(l))``."""
    return (lw - lw_ref) - (ll - ll_ref)


def dpo_loss(lw: torch.Tensor, lw_ref: torch.Tensor, ll: torch.Tensor, ll_ref: torch.Tensor, beta: float) -> torch.Tensor:
    """Mean of ``−log σ(β · margin)`` (``softplus(−β · margin)``, stable)."""
    return torch.nn.functional.softplus(-beta * dpo_margin(lw, lw_ref, ll, ll_ref)).mean()


def allowed_ids(task: str) -> torch.Tensor:
    """``[L, V]`` bool: which tokens each target position may take (image tokens on the image, the slot's word
    set on the text); the sampler renormalises over them."""
    V = TOK.vocab_size
    a = torch.ones(SEQ_LEN, V, dtype=torch.bool)
    if task in ("gen", "edit"):
        a[target_slice(task)] = False
        a[target_slice(task), list(TOK.image_ids)] = True
    else:
        a[1:4] = False
        for pos, ids in zip(range(1, 4), (TOK.colour_ids, TOK.size_ids, TOK.bucket_ids)):
            a[pos, list(ids)] = True
    return a


@torch.no_grad()
def dfm_sample(model, cond: torch.Tensor, task: str, steps: int, temperature: float, g: torch.Generator | None,
               alpha=None, trace: list | None = None) -> torch.Tensor:
    """Generate the target of ``task`` for a batch of condition sequences ``cond [B, L]`` (target positions
    may hold anything: they start masked) with ``steps`` DFM steps. ``temperature = 0``: argmax draws.
    Draws per step, in order: the unmask coins ``[B, L]`` then the Gumbel noise ``[B, L, V]`` (float64)."""
    B, L = cond.shape
    dev = cond.device
    tgt = target_mask([task] * B, L).to(dev)
    x = torch.where(tgt, torch.full_like(cond, TOK.mask_token_id), cond)
    task_ids = torch.full((B,), TASKS.index(task), dtype=torch.long, device=dev)
    allow = allowed_ids(task).to(dev)
    for k in range(steps):
        t0, t1 = k / steps, (k + 1) / steps
        masked = x == TOK.mask_token_id
        masked &= tgt
        p_jump = (t1 - t0) / (1 - t0)
        coins = uniform((B, L), g, x.device) < p_jump
        if k == steps - 1:
            coins = torch.ones_like(coins)
        logits = model(x, torch.full((B,), t0, device=dev), task_ids, alpha=alpha).double()
        logits = logits.masked_fill(~allow, float("-inf"))
        if temperature > 0:
            draw = gumbel_max(logits / temperature, g)
        else:
            uniform((B, L, logits.shape[-1]), g, x.device)  # same RNG consumption as temperature > 0
            draw = logits.argmax(-1)
        x = torch.where(masked & coins, draw, x)
        if trace is not None:
            trace.append(x.clone())
    return x
