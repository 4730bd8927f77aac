"""The dual-time embedder patch of the FLUX flow-map checkpoint (spec ``fmrg``, variant ``full``).

The authors' flow-map LoRA for FLUX.1-dev (HF ``gabeguofanclub/flux-1-dev-flowmap-lsd``, trained by Lagrangian
self-distillation) needs the transformer to see two times ``(t, s)``: a deep copy of FLUX's ``time_text_embed``
embeds the second time and the two embeddings are averaged (github.com/jrrhuang/fmrg,
``flux_two_timestep/dual_time_embedder.py``, read for the behaviour only). FLUX's forward multiplies the timestep by
1000 and hands it to ``time_text_embed`` only, so a ``(B, 2)`` timestep (the code's stacked ``(tau_cur, tau_next)``)
flows through unchanged to the patched embedder. A ``(B,)`` timestep keeps the original one-time behaviour.
"""
from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from registry.contract import transform

__all__ = ["DualTimeEmbedder", "dual_time_embedder"]


class DualTimeEmbedder(nn.Module):
    """``emb(t, s) = (E_1(t, ...) + E_2(s, ...)) / 2`` for a ``(B, 2)`` timestep; ``E_1(t, ...)`` for ``(B,)``.

    ``E_2`` starts as an exact copy of ``E_1`` (the LoRA checkpoint then trains/overrides it), so at load time
    ``emb(t, t) = E_1(t)``: the diagonal of the two-time model is the base flow model's velocity."""

    def __init__(self, base: nn.Module):
        super().__init__()
        self.base = base
        self.second = copy.deepcopy(base)

    def forward(self, timestep: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if timestep.ndim == 2 and timestep.shape[-1] == 2:
            return 0.5 * (self.base(timestep[:, 0], *args, **kwargs) + self.second(timestep[:, 1], *args, **kwargs))
        return self.base(timestep, *args, **kwargs)


@transform
def dual_time_embedder(model: Any) -> Any:
    """Install :class:`DualTimeEmbedder` on a FLUX transformer's ``time_text_embed`` (in place; idempotent)."""
    emb = getattr(model, "time_text_embed", None)
    if emb is None:
        raise ValueError(f"dual_time_embedder needs a FLUX transformer with time_text_embed, got {type(model).__name__}")
    if not isinstance(emb, DualTimeEmbedder):
        model.time_text_embed = DualTimeEmbedder(emb)
    return model
