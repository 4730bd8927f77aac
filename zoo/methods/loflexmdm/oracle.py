"""An *oracle* generator for the length process: the exact conditional insertion rate of a known length law under a
shared Kumaraswamy schedule (LoFlexMDM arXiv 2602.18695 Sec. 3 with every ``b_in^i = b``; ``a = b = 1`` is
FlexMDM's linear schedule, arXiv 2509.01025). Used to test the τ-leaping sampler apart from any training.

Every position of a length-``L`` sequence is inserted independently at ``T_in ~ Kumaraswamy(a, b)``, so given ``L``
the number present at ``t`` is ``Binomial(L, F(t))`` and the present set is a uniform subset. The length path is a
pure birth process whose rate given the whole path depends on the current length ``n`` only:
``P(L | n, t) ∝ P(L) C(L, n) F(t)^n (1 - F(t))^(L - n)`` and the total insertion rate is
``E[L - n | n, t] · λ(t)`` with ``λ(t) = b a t^(a-1)/(1 - t^a)``. By exchangeability each of the ``n + 1`` gaps
(before every token and before ``<eos>``) carries ``1/(n + 1)`` of it, so the generator multiplier of every slot is
``b_in^θ = b · E[L - n | n, t] / (n + 1)``. The sampler run with this generator draws lengths from ``P(L)`` up to
the τ-leaping error.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .schedule import kuma_cdf

__all__ = ["OracleLengthModel"]


class OracleLengthModel(nn.Module):
    """Generator interface of :class:`~zoo.methods.loflexmdm.model.LoFlexMDMModel` (``generator_rates``, ``a``)
    with the exact insertion multipliers of ``length_law`` (``{L: P(L)}``, ``L`` = tokens before ``<eos>``) under
    the shared schedule ``(a, b)``. Tokens come from a uniform ``K`` over ``vocab_ids``; ``gap_share`` scales the
    rate of every gap (1 = exact; anything else is a wrong rate, for negative controls)."""

    def __init__(self, length_law: dict[int, float], vocab_size: int, vocab_ids: list[int], a: float = 1.0, b: float = 1.0,
                 gap_share: float = 1.0) -> None:
        super().__init__()
        self.a, self.b, self.gap_share = float(a), float(b), float(gap_share)
        self.fix_b_um = 1.0
        self.lengths = torch.tensor(sorted(length_law), dtype=torch.float64)
        self.log_prior = torch.log(torch.tensor([length_law[k] for k in sorted(length_law)], dtype=torch.float64))
        logits = torch.full((vocab_size,), float("-inf"))
        logits[vocab_ids] = 0.0
        self.register_buffer("logits", logits)
        self.anchor = nn.Parameter(torch.zeros(0))  # the sampler reads the device from the parameters

    def expected_remaining(self, n: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """``E[L - n | n, t]`` per row (``n`` present tokens before ``<eos>``); 0 where no ``L >= n`` exists."""
        f = kuma_cdf(t.double().clamp(1e-12, 1 - 1e-12), self.a, self.b)[:, None]
        L, nn_ = self.lengths[None], n.double()[:, None]
        ok = L >= nn_
        lc = torch.lgamma(L + 1) - torch.lgamma(nn_ + 1) - torch.lgamma((L - nn_).clamp_min(0) + 1)
        logw = self.log_prior[None] + lc + nn_ * torch.log(f) + (L - nn_) * torch.log1p(-f)
        logw = torch.where(ok, logw, torch.full_like(logw, -math.inf))
        w = torch.softmax(logw, 1).nan_to_num(0.0)
        return (w * (L - nn_).clamp_min(0)).sum(1)

    def generator_rates(self, tokens: torch.Tensor, key_mask: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = key_mask.sum(1) - 1  # tokens before <eos>
        per_gap = self.b * self.expected_remaining(n, t) / (n + 1).double() * self.gap_share
        b_in = per_gap[:, None].float().expand(tokens.shape).clone()
        logits = self.logits.expand(*tokens.shape, -1)
        return logits, b_in, torch.ones_like(b_in)
