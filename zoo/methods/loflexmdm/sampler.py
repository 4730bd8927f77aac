"""τ-leaping sampler of LoFlexMDM / FlexMDM (arXiv 2602.18695, Alg. 2; code ``predictor_tau_leaping_kuma.py``).

From ``x = [<eos>]`` at ``t = 0`` with ``dt = (1 - 1e-5) / (max_steps + 1)``, each of ``max_steps`` steps:

1. θ's outputs on ``x_t``: ``K_θ`` (top-k / top-p filtered), ``λ_um^θ = b_um^θ h(t)``, ``λ_in^θ = b_in^θ h(t)`` with
   ``h(t) = a t^(a-1) / (1 - t^a)``.
2. Unmask: per masked slot and token ``v`` a Poisson count with mean ``λ_um^θ K_θ(v) dt``; a slot has an event if its
   total count is > 0 (``count_1``: exactly 1, token = the one counted). With a ``confidence`` rule the *number* of
   events per row is kept and the events move to the most confident masked slots. Slots with an event get a token
   drawn from ``K_θ``; clean tokens are absorbing.
3. Insert: ``Poisson(λ_in^θ dt)`` masks into the gap left of every slot (the ``<eos>`` slot included: that gap is
   the end of the sequence), skipped for a row whose length would exceed ``max_length``; order is preserved
   (:func:`zoo.common.varlen.insert_at_gaps`).
4. ``t += dt``.

A final step fills every remaining mask with its argmax (no insertions).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from registry.contract import Procedure
from registry.limits import Rows
from zoo.common import varlen
from zoo.common.discrete import categorical, top_p_filter
from zoo.common.masked_dlm import GenerationOutput

from .params import TauLeapingCli, TauLeapingParams
from .schedule import EPS, hazard_shape

__all__ = ["CONFIDENCE_RULES", "SamplerConfig", "TauLeaping", "Trace", "tau_leap"]

CONFIDENCE_RULES = ("top_prob", "prob_diff", "entropy", "rates", "top_rate")


@dataclass(frozen=True)
class SamplerConfig:
    max_steps: int = 64
    confidence: str | None = None
    top_p: float = 1.0
    top_k: int | None = None
    count_1: bool = False


@dataclass
class Trace:
    """Per-step record (tests): rows after unmasking and after insertion, events, insertion origins."""

    after_unmask: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    after_insert: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)
    events: list[torch.Tensor] = field(default_factory=list)
    drawn_events: list[torch.Tensor] = field(default_factory=list)
    origins: list[torch.Tensor] = field(default_factory=list)


def _filter(logits: torch.Tensor, top_p: float, top_k: int | None) -> torch.Tensor:
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), -1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return top_p_filter(logits, top_p) if top_p < 1.0 else logits


def _confidence(rule: str, probs: torch.Tensor, b_um: torch.Tensor) -> torch.Tensor:
    """Higher = more confident."""
    if rule == "top_prob":
        return probs.max(-1).values
    if rule == "prob_diff":
        top2 = probs.topk(2, -1).values
        return top2[..., 0] - top2[..., 1]
    if rule == "entropy":
        return (probs * probs.clamp_min(1e-30).log()).sum(-1)
    if rule == "rates":
        return b_um
    if rule == "top_rate":
        return b_um * probs.max(-1).values
    raise ValueError(f"unknown confidence rule {rule!r}; one of {CONFIDENCE_RULES}")


def _move_events(events: torch.Tensor, masked: torch.Tensor, score: torch.Tensor) -> torch.Tensor:
    """Keep each row's number of events but place them on its most confident masked slots."""
    k = events.sum(1, keepdim=True)
    s = score.masked_fill(~masked, float("-inf"))
    rank = s.argsort(dim=1, descending=True, stable=True).argsort(dim=1, stable=True)
    return (rank < k) & masked


@torch.no_grad()
def tau_leap(model: Any, n: int, cfg: SamplerConfig, generator: torch.Generator, eos_id: int, mask_id: int, pad_id: int,
             max_length: int, trace: Trace | None = None) -> tuple[torch.Tensor, torch.Tensor, dict[str, Any]]:
    """``n`` unconditional samples: ``(tokens [n, L] with <eos> last, lengths [n], stats)``."""
    dev = next(model.parameters()).device
    tokens = torch.full((n, 1), eos_id, dtype=torch.long, device=dev)
    lengths = torch.ones(n, dtype=torch.long, device=dev)
    dt = (1.0 - 1e-5) / (cfg.max_steps + 1)
    t = 0.0
    events_total = torch.zeros(n, dtype=torch.long)
    for _ in range(cfg.max_steps):
        attn = varlen.length_mask(lengths, tokens.shape[1])
        tt = torch.full((n,), max(t, EPS), device=dev)
        logits, b_in, b_um = model.generator_rates(tokens, attn, tt)
        h = hazard_shape(tt, model.a)[:, None]
        probs = torch.softmax(_filter(logits.float(), cfg.top_p, cfg.top_k), -1)
        masked = (tokens == mask_id) & attn
        lam = (b_um * h * dt).clamp_min(0)
        if cfg.count_1:
            counts = torch.poisson(lam[..., None] * probs, generator=generator)
            events = (counts.sum(-1) == 1) & masked
            drawn = counts.argmax(-1)
        else:
            counts = torch.poisson(lam, generator=generator)
            events = (counts > 0) & masked
            drawn = categorical(probs, generator).to(tokens.dtype)
        if trace is not None:
            trace.drawn_events.append(events.sum(1))
        if cfg.confidence is not None:
            events = _move_events(events, masked, _confidence(cfg.confidence, probs, b_um))
            drawn = categorical(probs, generator).to(tokens.dtype) if cfg.count_1 else drawn
        tokens = torch.where(events, drawn, tokens)
        events_total += events.sum(1).cpu()
        if trace is not None:
            trace.events.append(events.clone())
            trace.after_unmask.append((tokens.clone(), lengths.clone()))
        ins = torch.poisson((b_in * h * dt).clamp_min(0) * attn, generator=generator).long()
        counts = torch.cat([ins, ins.new_zeros(n, 1)], 1)  # nothing after <eos>
        edited, _ = varlen.insert_at_gaps(tokens, lengths, counts, mask_id, pad_id, max_length)
        tokens, lengths = edited.tokens, edited.lengths
        if trace is not None:
            trace.origins.append(edited.origin.clone())
            trace.after_insert.append((tokens.clone(), lengths.clone()))
        t += dt
    attn = varlen.length_mask(lengths, tokens.shape[1])
    masked = (tokens == mask_id) & attn
    final_filled = masked.sum(1)
    if masked.any():
        logits, _, _ = model.generator_rates(tokens, attn, torch.full((n,), max(t, EPS), device=dev))
        tokens = torch.where(masked, logits.argmax(-1), tokens)
    stats = {"steps": cfg.max_steps, "forwards": cfg.max_steps + int(bool(masked.any())),
             "events": events_total.tolist(), "final_argmax_filled": final_filled.cpu().tolist()}
    return tokens, lengths, stats


class TauLeaping(Procedure):
    """Unconditional τ-leaping generation (Alg. 2) from the model role ``model``: ``pipe(num_samples=n)``
    draws ``n`` rows together from one generator seeded by ``seed`` (rows share the generator, so the
    procedure is not batch-independent)."""

    Params = TauLeapingParams
    Cli = TauLeapingCli
    CliInputs = Cli

    def __init__(self, models, params, device="cpu", dtype=None):
        super().__init__(models, params, device, dtype)
        self.model = self.models[params.model_role]
        self.cfg = SamplerConfig(params.max_steps, params.confidence, params.top_p, params.top_k, params.count_1)

    def __call__(self, *, seed: int = 0, num_samples: Rows = 8) -> GenerationOutput:
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        tok = self.model.zoo_tokenizer
        g = torch.Generator().manual_seed(seed)
        tokens, lengths, stats = tau_leap(self.model, num_samples, self.cfg, g, tok.eos_token_id, tok.mask_token_id,
                                          tok.pad_token_id, self.model.zoo_max_length)
        rows = [r[:-1].tolist() for r in varlen.unpad_rows(tokens.cpu(), lengths.cpu())]  # drop <eos>
        texts = [tok.decode(r, skip_special_tokens=True) for r in rows]
        per_row = [{"new_tokens": len(r), "steps": stats["steps"], "forwards": stats["forwards"], "events": stats["events"][i],
                    "final_argmax_filled": stats["final_argmax_filled"][i]} for i, r in enumerate(rows)]
        return GenerationOutput(rows, texts, per_row)

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"num_samples": batch_size}

    def run_cli(self, inputs: Any, seed: int) -> str:
        inputs = inputs if inputs is not None else self.Cli()
        out = self(seed=seed, num_samples=inputs.num_samples)
        return "\n".join(f"{t!r}  (length {len(ids)})" for t, ids in zip(out.texts, out.token_ids))
