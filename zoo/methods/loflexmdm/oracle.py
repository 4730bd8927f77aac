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

import functools
import itertools
import math

import torch
from torch import nn

from .schedule import kuma_cdf, state_log_probs

__all__ = ["ExactPosteriorModel", "OracleLengthModel"]


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


class ExactPosteriorModel(nn.Module):
    """The Bayes generator of a task with an enumerable law, under any per-position insertion schedule: given the
    noised row ``x_t`` it returns the exact conditional token law of every masked slot and the exact expected
    insertion multiplier of every gap, so the τ-leaping sampler driven by it is exact up to the time grid (the
    validity a *perfectly trained* generator reaches under that schedule at a given number of steps; not an upper
    bound on a trained one, whose sharper-than-posterior conditionals can conflict less under factorised draws).

    Forward process (arXiv 2602.18695 Sec. 3, a shared ``a``, ``b_um = 1``): position ``i`` of the clean sequence
    ``z`` is dropped / masked / clean at ``t`` with the closed-form probabilities of
    :func:`~zoo.methods.loflexmdm.schedule.state_log_probs` for its own ``b_in(z, i)``. The row ``x_t`` (``k``
    slots before ``<eos>``) is the contraction of one such draw, so the posterior over (clean sequence, alignment)
    is ``P(z, s | x_t) ∝ P(z) Π_{i ∉ s} P_drop(z, i) Π_j P_{state_j}(z, s_j) [z_{s_j} = x_j where x_j is clean]``
    over increasing maps ``s: [k] → [L]`` (enumerated; the supports here are small). Then
    ``K(v | slot j) = P(z_{s_j} = v | x_t)`` and ``b_in^θ(gap g) = E[Σ_{i dropped, in gap g} b_in(z, i) | x_t]``
    (the minimiser of the insertion Bregman term, ``core.rate_matching_loss``); with ``b_um = 1`` the unmask hazard
    of a masked slot is ``h(t)`` whatever ``T_in`` was (truncation does not change the hazard after it), so
    ``b_um^θ = 1`` is exact. A row that no sequence of the support explains (the sampler already made an error that
    no later step can undo: clean tokens are absorbing) gets uniform tokens over ``vocab_ids`` and no insertions.

    ``b_in``: ``{text: [b_in per position]}`` (``None``: 1 everywhere, FlexMDM's linear schedule), e.g. a trained
    φ's multipliers on the support (:func:`phi_schedule`) or a planted order."""

    def __init__(self, support: dict[str, float], tokenizer, b_in: dict[str, list[float]] | None = None, a: float = 1.0) -> None:
        super().__init__()
        self.a, self.fix_b_um = float(a), 1.0
        self.tok = tokenizer
        self.vocab_ids = sorted({i for s in support for i in tokenizer.encode_raw(s)})
        self.by_length: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        groups: dict[int, list[str]] = {}
        for s in support:
            groups.setdefault(len(s), []).append(s)
        for L, texts in groups.items():
            ids = torch.tensor([tokenizer.encode_raw(s) for s in texts], dtype=torch.long)
            prior = torch.tensor([support[s] for s in texts], dtype=torch.float64).log()
            b = torch.tensor([b_in[s] if b_in is not None else [1.0] * L for s in texts], dtype=torch.float64)
            if b.shape != ids.shape or bool((b <= 0).any()):
                raise ValueError(f"b_in must give {L} positive multipliers for every length-{L} sequence")
            self.by_length[L] = (ids, prior, b)
        self._hyp: dict[int, tuple[torch.Tensor, ...]] = {}
        self.anchor = nn.Parameter(torch.zeros(0))  # the sampler reads the device from the parameters

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def _alignments(L: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(s [A, k], gap_of [A, L])``: every increasing map ``[k] → [L]`` and, per latent position, the gap its
        slot would fall in when dropped (``#{j: s_j < i}``), ``-1`` where aligned."""
        combos = list(itertools.combinations(range(L), k))
        s = torch.tensor(combos, dtype=torch.long).reshape(len(combos), k)
        pos = torch.arange(L)
        gap_of = (s[:, None, :] < pos[None, :, None]).sum(-1)
        aligned = (s[:, None, :] == pos[None, :, None]).any(-1)
        return s, torch.where(aligned, torch.full_like(gap_of, -1), gap_of)

    def _hypotheses(self, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """For rows of ``k`` slots, every (sequence, alignment) hypothesis ``h``: ``(tok_at [H, k], prior [H],
        b [H, L_max], pos [H, k], present_pad [H, L_max], gap_rate [H, k + 1])``: the tokens each slot would hold,
        the log prior, the sequence's multipliers (0-padded), the aligned positions, which positions exist, and
        ``Σ_{i dropped, in gap g} b_i``."""
        if k in self._hyp:
            return self._hyp[k]
        lmax = max(self.by_length)
        parts: list[list[torch.Tensor]] = [[] for _ in range(6)]
        for L, (ids, prior, b) in sorted(self.by_length.items()):
            if L < k:
                continue
            s, gap_of = self._alignments(L, k)
            z, a = ids.shape[0], s.shape[0]
            contrib = torch.where(gap_of[None] >= 0, b[:, None, :], torch.zeros((), dtype=b.dtype))  # [Z, A, L]
            gap_rate = torch.zeros(z, a, k + 1, dtype=b.dtype).scatter_add_(2, gap_of.clamp_min(0)[None].expand(z, a, L), contrib)
            pad = lambda x: torch.cat([x, x.new_zeros(*x.shape[:-1], lmax - L)], -1)  # noqa: E731
            parts[0].append(ids[:, s].reshape(z * a, k))
            parts[1].append(prior[:, None].expand(z, a).reshape(-1))
            parts[2].append(pad(b)[:, None].expand(z, a, lmax).reshape(z * a, lmax))
            parts[3].append(s[None].expand(z, a, k).reshape(z * a, k))
            parts[4].append(pad(torch.ones(z, L, dtype=torch.bool))[:, None].expand(z, a, lmax).reshape(z * a, lmax))
            parts[5].append(gap_rate.reshape(z * a, k + 1))
        if not parts[0]:
            out = (torch.zeros(0, k, dtype=torch.long), torch.zeros(0, dtype=torch.float64), torch.zeros(0, lmax, dtype=torch.float64),
                   torch.zeros(0, k, dtype=torch.long), torch.zeros(0, lmax, dtype=torch.bool), torch.zeros(0, k + 1, dtype=torch.float64))
        else:
            out = tuple(torch.cat(p) for p in parts)  # type: ignore[assignment]
        self._hyp[k] = out
        return out

    def posterior_batch(self, rows: torch.Tensor, t: torch.Tensor, second_moment: bool = False):
        """``(K [r, k, V], b_in per gap [r, k + 1], explained [r])`` for ``r`` rows of ``k`` token ids each (mask id
        where masked) at times ``t [r]``; with ``second_moment`` also ``E[(Σ_{dropped i in gap g} b_i)² | x_t]``
        ``[r, k + 1]`` (tests: the sampling variance of the gap sums)."""
        r, k = rows.shape
        tok_at, prior, b, pos, present, gap_rate = self._hypotheses(k)
        vsize = self.tok.vocab_size
        masked = rows == self.tok.mask_token_id
        if tok_at.shape[0] == 0:
            logw = torch.full((r, 0), -math.inf, dtype=torch.float64)
        else:
            ld, lm, lc = state_log_probs(t.to(torch.float64)[:, None, None], self.a, b.clamp_min(1e-12)[None],
                                         torch.ones_like(b)[None])  # [r, H, L_max]
            ld = torch.where(present[None], ld, torch.zeros((), dtype=ld.dtype))
            gidx = pos[None].expand(r, -1, -1)
            l_slot = torch.where(masked[:, None, :], lm.gather(2, gidx), lc.gather(2, gidx))  # [r, H, k]
            logw = prior[None] + ld.sum(-1) + (l_slot - ld.gather(2, gidx)).sum(-1)
            ok = (masked[:, None, :] | (tok_at[None] == rows[:, None, :])).all(-1)
            logw = torch.where(ok, logw, torch.full_like(logw, -math.inf))
        explained = torch.isfinite(logw).any(-1) if logw.shape[1] else torch.zeros(r, dtype=torch.bool)
        w = torch.softmax(torch.where(explained[:, None], logw, torch.zeros_like(logw)), -1) if logw.shape[1] else logw
        probs = torch.zeros(r, k, vsize, dtype=torch.float64)
        gaps = torch.zeros(r, k + 1, dtype=torch.float64)
        if logw.shape[1]:
            onehot = torch.nn.functional.one_hot(tok_at, vsize).to(torch.float64)  # [H, k, V]
            probs = torch.einsum("rh,hkv->rkv", w, onehot)
            gaps = w @ gap_rate
        uniform = torch.zeros(vsize, dtype=torch.float64)
        uniform[self.vocab_ids] = 1.0 / len(self.vocab_ids)
        probs = torch.where(explained[:, None, None], probs, uniform)
        gaps = torch.where(explained[:, None], gaps, torch.zeros_like(gaps))
        if second_moment:
            sq = w @ gap_rate**2 if logw.shape[1] else torch.zeros_like(gaps)
            return probs, gaps, explained, torch.where(explained[:, None], sq, torch.zeros_like(sq))
        return probs, gaps, explained

    def posterior(self, row: list[int], t: float, second_moment: bool = False):
        """:meth:`posterior_batch` for one row: ``(K [k, V], b_in per gap [k + 1], explained[, second moment])``."""
        out = self.posterior_batch(torch.tensor([row], dtype=torch.long).reshape(1, len(row)), torch.tensor([t], dtype=torch.float64),
                                   second_moment)
        return (out[0][0], out[1][0], bool(out[2][0])) + ((out[3][0],) if second_moment else ())

    def generator_rates(self, tokens: torch.Tensor, key_mask: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n, width = tokens.shape
        logits = torch.full((n, width, self.tok.vocab_size), -math.inf)
        logits[:, :, self.vocab_ids] = 0.0  # <eos> and padding: never masked, any finite row
        b_in = torch.zeros(n, width)
        ks = key_mask.sum(1) - 1  # slots before <eos>
        for k in ks.unique().tolist():
            sel = (ks == k).nonzero().flatten()
            probs, gaps, _ = self.posterior_batch(tokens[sel, :k].cpu(), t[sel].cpu())
            lg = probs.clamp_min(1e-300).log().masked_fill(probs == 0, -math.inf).float()
            logits[sel, :k] = lg
            b_in[sel, : k + 1] = gaps.float()
        return logits, b_in, torch.ones_like(b_in)
