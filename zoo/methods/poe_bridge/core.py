"""The mathematics of PoE-Bridge, free of any model: the token-level bridge, stage 1 (speculative
rejection D -> PoE), stage 2 (lane choice PoE -> AR), the temperature ladder and the samplers they use.

Paper: Shi, Trippe, Leskovec, Ermon, Xu, "PoE-Bridge: bridging diffusion drafts and autoregressive
targets", ICML 2026, arXiv 2606.08048; code https://github.com/juntongshi48/poe-bridge (function
``poe_bridge_sample``). Formulas restated from the paper (no code copied):

* bridge:     p_PoE^(tau)(. | x_<i) = softmax((w * l_D,i + (1 - w) * l_A,i) / tau)
* draft:      q_i = softmax(l_D,i / tau) (Gumbel-max, optional top-p truncation)
* stage 1:    accept draft x_j with prob min(1, p_PoE(x_j) / q(x_j)), sequentially until the first
              rejection r, where a replacement is drawn from norm(max(0, p_PoE - q)) (p_PoE if empty)
* stage 2:    paper (``multinomial_exact``): resample a lane with prob ~ W_k = p_A(x^k) / p_PoE(x^k);
              repository (``argmax_logit_diff``): argmax over lanes of the mean raw-logit difference
              mean_j (l_A,j(x_j) - l_D,j(x_j)).
* ladder:     lanes 0..n_low-2 at tau_low, lanes n_low-1..K-1 = linspace(tau_low, tau_high, K-n_low+1)
              (``anneal_temp``), else n_low lanes at tau_low and the rest at tau_high.

Every function works on batched torch tensors whose last dimension is the vocabulary. The discrete
samplers (Gumbel-max, categorical, top-p) are :mod:`zoo.common.discrete`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

# the discrete samplers live in zoo.common.discrete (shared with the other text samplers); re-exported here
from zoo.common.discrete import (  # noqa: F401
    NEG_INF,
    categorical,
    draft_logits,
    gumbel_max,
    tempered,
    top_p_filter,
    uniform,
)
from zoo.common.discrete import as_col as _as_col


# ----------------------------------------------------------------------------- the bridge
def poe_logits(dlm_logits: torch.Tensor, ar_logits: torch.Tensor, w: float, tau: float | torch.Tensor = 1.0) -> torch.Tensor:
    """Logits of the tempered Product-of-Experts bridge ``(w*l_D + (1-w)*l_A)/tau`` (paper Sec. 3).

    Raw logits may be mixed: log-softmax differs from the logits by a per-position constant, so the
    softmax of the mix is the normalised geometric mixture mu^w p_A^(1-w) / Z. ``w = 1`` is the DLM,
    ``w = 0`` the AR target. Entries that are ``-inf`` in either expert stay ``-inf`` (w in (0,1)).
    """
    if w == 1.0:
        mixed = dlm_logits.clone()
    elif w == 0.0:
        mixed = ar_logits.clone()
    else:
        mixed = w * dlm_logits + (1.0 - w) * ar_logits
    return mixed / _as_col(tau, mixed)


# ----------------------------------------------------------------------------- stage 1
def acceptance_prob(p: torch.Tensor, q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``min(1, p(x)/q(x))`` for probability tables ``p, q [..., V]`` and tokens ``x [...]``."""
    px = p.gather(-1, x.unsqueeze(-1)).squeeze(-1)
    qx = q.gather(-1, x.unsqueeze(-1)).squeeze(-1)
    ratio = torch.where(qx > 0, px / qx.clamp_min(torch.finfo(qx.dtype).tiny), torch.ones_like(px))
    return ratio.clamp(max=1.0)


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The speculative-sampling residual ``norm(max(0, p - q))``; ``p`` itself where it has no mass
    (that happens iff p == q, in which case no rejection can occur)."""
    r = (p - q).clamp_min(0.0)
    mass = r.sum(-1, keepdim=True)
    return torch.where(mass > 0, r / mass.clamp_min(torch.finfo(r.dtype).tiny), p)


@dataclass
class VerifyResult:
    """Outcome of stage 1 on a batch of lanes of one window.

    ``n_accepted [K]`` draft tokens were accepted; ``tokens [K, W]`` holds the emitted block (accepted
    drafts, then the correction at position ``n_accepted`` if ``corrected``); ``n_emitted [K]`` is the
    block length; ``eos_hit [K]`` says that the block ends with EOS.
    """

    n_accepted: torch.Tensor
    corrected: torch.Tensor
    tokens: torch.Tensor
    n_emitted: torch.Tensor
    eos_hit: torch.Tensor
    accept_prob: torch.Tensor


def speculative_verify(
    drafts: torch.Tensor,
    q: torch.Tensor,
    p: torch.Tensor,
    generator: torch.Generator | None,
    eos_id: int | None = None,
    acceptance=acceptance_prob,
    residual_fn=residual,
) -> VerifyResult:
    """Stage 1 of PoE-Bridge on ``K`` lanes of a window of ``W`` drafted positions.

    ``drafts [K, W]`` were drawn from ``q [K, W, V]``; ``p [K, W, V]`` is the bridge at each position,
    conditioned on the lane's own drafted prefix. Tokens are accepted sequentially with probability
    ``min(1, p/q)`` (cumulative product of the flags); at the first rejection a correction is drawn
    from the residual. An accepted EOS ends the block (later tokens are discarded).
    ``acceptance`` / ``residual_fn`` exist so that tests can plug in a deliberately wrong rule
    (negative control); the sampler always uses the defaults.
    """
    K, W = drafts.shape
    a = acceptance(p, q, drafts)  # [K, W]
    u = uniform((K, W), generator, drafts.device)
    flags = (u < a.double()).long()
    acc_prefix = flags.cumprod(-1)  # 1 while every earlier token was accepted
    n_acc = acc_prefix.sum(-1)
    eos_hit = torch.zeros(K, dtype=torch.bool, device=drafts.device)
    if eos_id is not None:
        is_eos = (drafts == eos_id) & acc_prefix.bool()
        has = is_eos.any(-1)
        first = torch.where(has, is_eos.float().argmax(-1), torch.full_like(n_acc, W))
        n_acc = torch.where(has, first + 1, n_acc)
        eos_hit = has
    corrected = (n_acc < W) & ~eos_hit
    tokens = drafts.clone()
    n_emit = n_acc.clone()
    if corrected.any():
        rows = corrected.nonzero().squeeze(-1)
        r = n_acc[rows]
        pr = p[rows, r]
        qr = q[rows, r]
        fix = categorical(residual_fn(pr, qr), generator)
        tokens[rows, r] = fix
        n_emit[rows] = r + 1
        if eos_id is not None:
            eos_hit[rows] = fix == eos_id
    pos = torch.arange(W, device=drafts.device).unsqueeze(0)
    tokens = torch.where(pos < n_emit.unsqueeze(-1), tokens, torch.full_like(tokens, -1))
    return VerifyResult(n_acc, corrected, tokens, n_emit, eos_hit, a)


# ----------------------------------------------------------------------------- stage 2
def exact_log_weights(ar_logprobs_at_x: torch.Tensor, poe_logprobs_at_x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Paper's importance weights, in log form: ``log W_k = sum_{j < n_k} [log p_A(x_j) - log p_PoE(x_j)]``.

    Inputs are ``[K, W]`` log-probabilities of each lane's emitted tokens under the AR target and
    under the bridge law that proposed them; positions ``>= n_k`` are ignored.
    """
    W = ar_logprobs_at_x.shape[-1]
    valid = torch.arange(W, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(-1)
    diff = (ar_logprobs_at_x - poe_logprobs_at_x).double()
    return torch.where(valid, diff, torch.zeros_like(diff)).sum(-1)


def normalized_weights(log_w: torch.Tensor) -> torch.Tensor:
    """Self-normalised importance weights ``W_k / sum W`` (max-shifted; all ``-inf`` -> uniform)."""
    if torch.isneginf(log_w).all():
        return torch.full_like(log_w, 1.0 / log_w.numel())
    return torch.softmax(log_w, dim=-1)


def repo_energy(ar_logits_at_x: torch.Tensor, dlm_logits_at_x: torch.Tensor, lengths: torch.Tensor, length_normalize: bool = True) -> torch.Tensor:
    """The public repository's lane score: (mean over the block of) raw-logit differences
    ``l_A,j(x_j) - l_D,j(x_j)``; no ``w`` factor and no normalisers ``Z_j`` (poe-bridge.md Sec. 4)."""
    W = ar_logits_at_x.shape[-1]
    valid = torch.arange(W, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(-1)
    diff = (ar_logits_at_x - dlm_logits_at_x).double()
    s = torch.where(valid, diff, torch.zeros_like(diff)).sum(-1)
    return s / lengths.clamp_min(1).double() if length_normalize else s


# ----------------------------------------------------------------------------- temperatures
def temperature_ladder(n_lanes: int, n_low: int, tau_low: float, tau_high: float, anneal: bool = True) -> list[float]:
    """Per-lane temperatures (paper's mixed-temperature lanes; repo ``anneal_temp``/``n_low_temp_samples``).

    ``anneal``: lanes ``0..n_low-2`` at ``tau_low`` and lanes ``n_low-1..K-1`` on
    ``linspace(tau_low, tau_high, K - n_low + 1)``; otherwise ``n_low`` lanes at ``tau_low`` and the
    rest at ``tau_high``. Defaults K=4, n_low=1, 0.2, 0.7 give [0.2, 0.367, 0.533, 0.7].
    """
    if not (1 <= n_low <= n_lanes):
        raise ValueError("need 1 <= n_low <= n_lanes")
    if tau_low > tau_high:
        raise ValueError("need tau_low <= tau_high")
    if not anneal:
        return [tau_low] * n_low + [tau_high] * (n_lanes - n_low)
    m = n_lanes - n_low + 1
    if m == 1:
        ramp = [tau_low]
    else:
        ramp = [tau_low + (tau_high - tau_low) * i / (m - 1) for i in range(m)]
    return [tau_low] * (n_low - 1) + ramp[: n_lanes - (n_low - 1)]
