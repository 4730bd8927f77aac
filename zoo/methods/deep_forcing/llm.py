"""Deep Sink for causal LMs: a transformers ``CacheLayerMixin`` with post-RoPE key re-rotation (the LLM analogue).

The layer keeps the first ``sink_tokens`` tokens for ever plus the newest ``window_tokens - 1 - sink_tokens`` tokens, so
that a one-token decoding step attends exactly ``window_tokens`` keys (as ``DynamicSlidingWindowLayer`` stores ``window - 1``)
(StreamingLLM's layout, Xiao et al. arXiv 2309.17453, with a deep sink). Keys are stored post-RoPE at their original
positions; on every read the sink keys are rotated by ``Delta = (tail_start - S) - 0`` so that they sit at positions
``[tail_start - S, tail_start)``, immediately before the rolling tail (Deep Forcing Eq. 5-6, with 1-D RoPE: every
channel is "temporal"). Rotation uses the model's own ``inv_freq`` and the rotate-half pairing of Llama/Qwen2
(``k cos + rotate_half(k) sin``), default RoPE only (``attention_scaling == 1``).

While the cache holds at most ``window_tokens`` tokens nothing is evicted or rotated and the layer returns exactly
what ``DynamicLayer`` returns. **Participative Compression is video-only here**: it scores candidates with the recent
*queries*, which a ``Cache`` never receives (``update`` gets keys and values only); an attention-interface hook
would be needed and is not implemented.

Limits: no left padding (the padding mask is indexed by the positions the mask builder derives from
``get_mask_sizes``, which after eviction are not the tokens' original positions); no cropping / beam reordering.
"""
from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer

__all__ = ["DeepSinkLayer", "deep_sink_cache", "rotate_half_rope"]


def rotate_half_rope(x: torch.Tensor, delta: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Shift RoPE'd ``x [..., L, D]`` by ``delta [L]`` positions (rotate-half pairing ``(x_i, x_{i + D/2})``)."""
    ang = delta.to(torch.float64)[:, None] * inv_freq.to(torch.float64)[None, :]  # [L, D/2]
    ang = torch.cat([ang, ang], dim=-1)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    half = x.shape[-1] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rot * sin


class DeepSinkLayer(DynamicLayer):
    """One layer's Deep Sink cache: ``sink_tokens`` kept for ever, a FIFO tail, sinks re-rotated before the tail."""

    is_sliding = False
    is_croppable = False

    def __init__(self, sink_tokens: int, window_tokens: int, inv_freq: torch.Tensor, realign: bool = True, **kwargs: Any):
        super().__init__()
        if not 0 <= sink_tokens < window_tokens - 1:
            raise ValueError(f"sink_tokens: expected 0 <= S < window_tokens - 1 = {window_tokens - 1}, got {sink_tokens}")
        self.sink_tokens, self.window_tokens, self.realign = sink_tokens, window_tokens, realign
        self.inv_freq = inv_freq.detach().clone()
        self.cumulative_length = 0
        self.positions: torch.Tensor | None = None  # original position of every stored token

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self.positions = torch.zeros(0, dtype=torch.long, device=self.device)

    def effective_positions(self, positions: torch.Tensor) -> torch.Tensor:
        """Sinks at ``[tail_start - S, tail_start)`` (``tail_start`` = first non-sink position), the rest unchanged."""
        S = self.sink_tokens
        sink = positions < S
        if not self.realign or S == 0 or bool(sink.all()):
            return positions
        tail_start = int(positions[~sink].min())
        return torch.where(sink, positions + (tail_start - S), positions)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        q = key_states.shape[-2]
        new_pos = torch.arange(self.cumulative_length, self.cumulative_length + q, device=self.positions.device)
        self.cumulative_length += q
        keys = torch.cat([self.keys, key_states], dim=-2)
        values = torch.cat([self.values, value_states], dim=-2)
        pos = torch.cat([self.positions, new_pos])
        eff = self.effective_positions(pos)
        out_k = keys if bool((eff == pos).all()) else rotate_half_rope(keys, eff - pos, self.inv_freq.to(keys.device))
        # store: sinks + the newest (window - 1 - S) other tokens (the current query block is always attended in full)
        sink = pos < self.sink_tokens
        rank = torch.arange(pos.numel() - 1, -1, -1, device=pos.device)
        keep = sink | (rank < self.window_tokens - 1 - int(sink.sum()))
        self.keys, self.values, self.positions = keys[..., keep, :], values[..., keep, :], pos[keep]
        return out_k, values

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        """``kv_length`` = stored + query; ``kv_offset`` maps the stored block to positions just before the query."""
        stored = 0 if self.positions is None else int(self.positions.numel())
        return stored + query_length, self.cumulative_length - stored

    def get_seq_length(self) -> int:
        return self.cumulative_length

    def get_max_length(self) -> int:
        return self.window_tokens


def deep_sink_cache(model: Any, sink_tokens: int, window_tokens: int, realign: bool = True) -> Cache:
    """A ``Cache`` of :class:`DeepSinkLayer` for every decoder layer of a Llama/Qwen2-style ``model`` (its own
    ``rotary_emb.inv_freq``; default RoPE only)."""
    rotary = model.model.rotary_emb
    if float(getattr(rotary, "attention_scaling", 1.0)) != 1.0:
        raise ValueError("deep_sink_cache: only default RoPE (attention_scaling 1) is supported")
    n = model.config.num_hidden_layers
    return Cache(layers=[DeepSinkLayer(sink_tokens, window_tokens, rotary.inv_freq, realign) for _ in range(n)])
