"""CoDiLA decoding (Hersche et al., ICML 2026, arXiv 2603.20216, Sec. 3 "inference"): a frozen masked-diffusion
LM drafts per-position marginals, a small causal local AR decodes blocks of them jointly.

Schedules (one DLM forward per step; decoded tokens are never changed again):

* ``static`` (K = B tokens per step): among the first ``candidate_window_blocks`` not-yet-decoded blocks of the
  fixed grid of ``B``-token blocks, take the block with the smallest block entropy ``h(B)`` (ties: the leftmost),
  soft-condition the AR on its ``B`` marginals and decode its ``B`` tokens causally. ``ceil(L / B)`` steps. The
  trace records every window block's ``h(B)`` (``DecodeTrace.window_h``) for the invariant.
* ``dynamic`` (threshold ``tau``): anchor at the most confident masked position of the window (the entropy rule
  of Dream's confidence decoding, on the same proposal draw), take the run of up to ``B`` consecutive masked
  positions from there, and decode its longest prefix ``k`` with ``h(k) <= tau`` (``k > 1`` needs ``tau > 0``).
  ``k = 1`` commits the DLM's own proposal, so ``tau = 0`` or ``B = 1`` *is* confidence decoding with one token
  per step, token for token (the paper: "with k = 1 it degenerates to ordinary DLM confidence decoding"). The
  anchor rule is this implementation's reading of "a candidate block" (the paper gives no code).
* ``verify``: confidence decoding (probability of the proposal, ``tokens_per_step`` per forward) in which each
  window block's proposals are teacher-forced through the AR; positions where the AR's top-1 disagrees with the
  proposal get their confidence multiplied by ``verify_penalty`` (the paper's AR-verification mode).

``conditioning: topk`` conditions the AR on the top-k truncation of the marginals instead of the full marginals
(the ablation Theorem 3.3 proves insufficient); it needs an AR trained that way (role ``local_ar_role``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from zoo.common.discrete import gumbel_max, top_p_filter
from zoo.common.masked_dlm import (
    MaskedDenoiser,
    TextSampler,
    eos_finished,
    final_tokens,
    resolve_max_new_tokens,
)

from .core import block_entropy, block_logits, conditioning_probs, decode_block, restrict_marginals, verify_penalise
from .params import CoDiLASamplerParams

__all__ = ["CoDiLASampler", "DecodeConfig", "codila_decode", "excluded_ids", "boundary_ids"]


@dataclass(frozen=True)
class DecodeConfig:
    """The knobs of :func:`codila_decode` (the sampler's Params, minus model plumbing)."""

    schedule: str = "static"
    block_size: int = 2
    entropy_threshold: float = 0.5
    candidate_window_blocks: int = 10
    dynamic_candidate: str = "anchor"
    conditioning: str = "soft"
    topk: int = 1
    dlm_temperature: float = 1.0
    top_p: float = 1.0
    ar_temperature: float = 1.0
    tokens_per_step: int = 2
    verify_penalty: float = 0.1
    stop_at_eos: bool = True
    boundary: tuple[int, ...] | None = None
    excluded: tuple[int, ...] = ()


@dataclass
class DecodeTrace:
    """Per-step record (for the invariants): the generated region after each step and what was decoded."""

    states: list[list[int]] = field(default_factory=list)
    decoded: list[list[int]] = field(default_factory=list)  # positions written per step
    chosen_block: list[int] = field(default_factory=list)  # static: chosen grid block per step
    window: list[list[int]] = field(default_factory=list)  # static: candidate grid blocks per step
    window_h: list[list[float]] = field(default_factory=list)  # static: h(B) of each window block, same order


def _proposals(logits: torch.Tensor, mask: int, cfg: DecodeConfig, g: torch.Generator | None):
    """The DLM's proposals and proposal law at the given positions, drawn exactly as
    :func:`zoo.common.masked_dlm.confidence_decode` draws them (same RNG consumption)."""
    lg = logits.float().clone()
    if mask < lg.shape[-1]:
        lg[..., mask] = float("-inf")
    if cfg.dlm_temperature > 0:
        lg = top_p_filter(lg / cfg.dlm_temperature, cfg.top_p)
        chosen = gumbel_max(lg, g)
        probs = torch.softmax(lg, -1)
    else:
        probs = torch.softmax(lg, -1)
        chosen = probs.argmax(-1)
    return chosen, probs


def _choose_static_block(window: list[int], hs: list[float]) -> int:
    """The static schedule's choice: the window block with the smallest ``h(B)`` (``hs[i]`` is block
    ``window[i]``'s); on a tie the first of them in window order, i.e. the leftmost (strict ``<``)."""
    best, best_h = None, None
    for b, h in zip(window, hs):
        if best_h is None or h < best_h:
            best, best_h = b, h
    return best


@torch.no_grad()
def codila_decode(denoiser: MaskedDenoiser, ar: Any, prompt_ids: list[int], gen_length: int, cfg: DecodeConfig,
                  eos_id: int | None = None, generator: torch.Generator | None = None, device: Any = "cpu",
                  trace: DecodeTrace | None = None) -> tuple[list[int], dict[str, Any]]:
    """Decode ``gen_length`` tokens after ``prompt_ids`` with the schedule of ``cfg``. Returns the new tokens
    (cut after the first EOS, as confidence decoding) and the counters ``dlm_forwards``, ``ar_forwards``,
    ``steps``, ``new_tokens`` and ``tokens_per_step`` (a list)."""
    P, L, B = len(prompt_ids), gen_length, cfg.block_size
    mask = denoiser.mask_token_id
    x = torch.tensor([list(prompt_ids) + [mask] * L], dtype=torch.long, device=device)
    V_ar = ar.get_input_embeddings().weight.shape[0] if ar is not None else 0
    allowed = torch.ones(max(V_ar, 1), dtype=torch.bool, device=device)
    allowed[[i for i in cfg.excluded if i < V_ar]] = False
    n_blocks = -(-L // B)
    dlm_f = ar_f = 0
    per_step: list[int] = []
    while True:
        gen = x[0, P:]
        masked = gen == mask
        if not bool(masked.any()):
            break
        logits = denoiser(x)[0, P:]
        dlm_f += 1
        open_blocks = [b for b in range(n_blocks) if bool(masked[b * B: (b + 1) * B].any())]
        window = open_blocks[: cfg.candidate_window_blocks]
        cand = [p for b in window for p in range(b * B, min((b + 1) * B, L)) if bool(masked[p])]
        written: list[int] = []
        if cfg.schedule == "static":
            hs = []
            for b in window:
                pos = [p for p in range(b * B, min((b + 1) * B, L)) if bool(masked[p])]
                hs.append(float(block_entropy(restrict_marginals(logits[pos], cfg.excluded, V_ar or None))[-1]))
            best = _choose_static_block(window, hs)
            pos = [p for p in range(best * B, min((best + 1) * B, L)) if bool(masked[p])]
            cond = conditioning_probs(restrict_marginals(logits[pos], cfg.excluded, V_ar), cfg.conditioning, cfg.topk)
            toks, nf = decode_block(ar, cond, cfg.boundary, cfg.ar_temperature, generator, allowed)
            ar_f += nf
            x[0, [P + p for p in pos]] = torch.tensor(toks, device=device)
            written = pos
            if trace is not None:
                trace.chosen_block.append(best)
                trace.window.append(list(window))
                trace.window_h.append(hs)
        elif cfg.schedule == "dynamic":
            chosen, probs = _proposals(logits[cand], mask, cfg, generator)
            if cfg.dynamic_candidate == "grid":  # the window's grid block of smallest h(B), as static
                hs = [float(block_entropy(restrict_marginals(logits[[p for p in range(b * B, min((b + 1) * B, L)) if bool(masked[p])]],
                                                             cfg.excluded, V_ar or None))[-1]) for b in window]
                best = _choose_static_block(window, hs)
                run = [p for p in range(best * B, min((best + 1) * B, L)) if bool(masked[p])]
                anchor = run[0]
                a = cand.index(anchor)
            else:
                conf = (probs * probs.clamp_min(1e-30).log()).sum(-1)  # -H: Dream's entropy rule
                a = int(conf.topk(1).indices[0])
                anchor = cand[a]
                run = [anchor]
                while len(run) < B and run[-1] + 1 < L and bool(masked[run[-1] + 1]):
                    run.append(run[-1] + 1)
            k = 1
            if cfg.entropy_threshold > 0 and len(run) > 1:
                h = block_entropy(restrict_marginals(logits[run], cfg.excluded, V_ar))
                ok = [kk for kk in range(2, len(run) + 1) if float(h[kk - 1]) <= cfg.entropy_threshold]
                k = max(ok) if ok else 1
            if k == 1:
                x[0, P + anchor] = chosen[a]
                written = [anchor]
            else:
                pos = run[:k]
                cond = conditioning_probs(restrict_marginals(logits[pos], cfg.excluded, V_ar), cfg.conditioning, cfg.topk)
                toks, nf = decode_block(ar, cond, cfg.boundary, cfg.ar_temperature, generator, allowed)
                ar_f += nf
                x[0, [P + p for p in pos]] = torch.tensor(toks, device=device)
                written = pos
        elif cfg.schedule == "verify":
            chosen, probs = _proposals(logits[cand], mask, cfg, generator)
            conf = probs.gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
            agree = torch.zeros(len(cand), dtype=torch.bool, device=conf.device)
            for b in window:
                idx = [i for i, p in enumerate(cand) if b * B <= p < (b + 1) * B]
                pos = [cand[i] for i in idx]
                cond = conditioning_probs(restrict_marginals(logits[pos], cfg.excluded, V_ar), cfg.conditioning, cfg.topk)
                lg = block_logits(ar, cond.unsqueeze(0), chosen[idx].unsqueeze(0).to(device), cfg.boundary)[0]
                ar_f += 1
                ar_top = lg.masked_fill(~allowed[: lg.shape[-1]], float("-inf")).argmax(-1)
                agree[idx] = ar_top.to(agree.device) == chosen[idx].to(agree.device)
            conf = verify_penalise(conf, agree, cfg.verify_penalty)
            pick = conf.topk(min(cfg.tokens_per_step, len(cand))).indices
            for i in pick.tolist():
                x[0, P + cand[i]] = chosen[i]
            written = sorted(cand[i] for i in pick.tolist())
        else:
            raise ValueError(f"unknown schedule {cfg.schedule!r}; static, dynamic or verify")
        per_step.append(len(written))
        if trace is not None:
            trace.states.append(x[0, P:].tolist())
            trace.decoded.append(list(written))
        if cfg.stop_at_eos and eos_finished(x[0, P:], eos_id, mask):
            break
    new = final_tokens(x[0, P:].tolist(), eos_id, mask)
    return new, {"dlm_forwards": dlm_f, "ar_forwards": ar_f, "steps": len(per_step), "new_tokens": len(new),
                 "tokens_per_step": per_step}


def boundary_ids(tok: Any, names: list[str]) -> tuple[int, ...] | None:
    """Token ids of the boundary tokens (``<think>``, ``</think>``) in the AR's tokenizer; ``[]`` -> None."""
    if not names:
        return None
    if tok is None:
        raise ValueError("boundary tokens need a tokenizer; pass boundary_token_ids")
    ids = []
    for n in names:
        i = tok.stoi.get(n) if hasattr(tok, "stoi") else tok.convert_tokens_to_ids(n)
        if i is None or (getattr(tok, "unk_token_id", None) is not None and i == tok.unk_token_id):
            raise ValueError(f"boundary token {n!r} is not in the local AR's tokenizer")
        ids.append(int(i))
    return tuple(ids)


def excluded_ids(tok: Any, mask_id: int, boundary: tuple[int, ...] | None, allow_eos: bool) -> tuple[int, ...]:
    """Ids with zero marginal mass: MASK, the boundary tokens and the tokenizer's special ids (pad, BOS, ...;
    EOS only when ``allow_eos`` is False: Dream pads its answers with EOS, so EOS is content for a DLM)."""
    ex = {int(mask_id), *(boundary or ())}
    if tok is not None:
        specials = set(getattr(tok, "all_special_ids", None) or [])
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "mask_token_id"):
            v = getattr(tok, name, None)
            if v is not None:
                specials.add(int(v))
        eos = getattr(tok, "eos_token_id", None)
        if allow_eos and eos is not None:
            specials.discard(int(eos))
        ex |= specials
    return tuple(sorted(ex))


class CoDiLASampler(TextSampler):
    """CoDiLA decoding with a frozen DLM (role ``dlm``) and a local AR (role ``local_ar``); see the module
    docstring for the schedules. Unconditional generation (``pipe(num_samples=n)``) starts from BOS only."""

    roles = ("dlm", "local_ar")

    Params = CoDiLASamplerParams

    def __init__(self, models, params, device="cpu", dtype=None):
        super().__init__(models, params, device, dtype)
        self.dlm = self.role("dlm")
        self.ar = self.role("local_ar")
        self.denoiser = MaskedDenoiser.wrap(self.dlm, params.mask_token_id, params.shift_logits, params.vocab_limit)
        tok = getattr(self.ar, "zoo_tokenizer", None) or self.tokenizer()
        boundary = boundary_ids(tok, params.boundary_tokens)
        self.cfg = DecodeConfig(
            schedule=params.schedule, block_size=params.block_size, entropy_threshold=params.entropy_threshold,
            candidate_window_blocks=params.candidate_window_blocks, dynamic_candidate=params.dynamic_candidate,
            conditioning=params.conditioning, topk=params.topk,
            dlm_temperature=params.dlm_temperature, top_p=params.top_p, ar_temperature=params.ar_temperature,
            tokens_per_step=params.tokens_per_step, verify_penalty=params.verify_penalty, stop_at_eos=params.stop_at_eos,
            boundary=boundary, excluded=excluded_ids(tok, self.denoiser.mask_token_id, boundary, params.marginals_allow_eos))

    def _models_for_tokenizer(self) -> list[Any]:
        return [self.dlm, self.ar]

    def generate_row(self, prompt_ids: list[int], g: torch.Generator, eos: int | None) -> tuple[list[int], dict[str, Any]]:
        n_max = resolve_max_new_tokens(self.params.max_new_tokens, self.dlm)
        return codila_decode(self.denoiser, self.ar, prompt_ids, n_max, self.cfg, eos, g, self.device)
