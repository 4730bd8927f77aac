"""RobuQ's 8-bit attention products: a diffusers attention processor that fake-quantises both
activation-activation matmuls of self-attention.

The paper's precision layout (RobuQ, arXiv 2509.23582; the method note ``shared/methods/robuq.md``
sec. 4.1, via a third-party summary) computes the two activation-activation products of every
attention block -- the scores ``Q K^T`` and the mixing ``softmax(.) V`` -- with 8-bit x 8-bit
operands (1.01 of DiT-XL/2's 8.13 GFLOPs). The summary does not give the granularity; ours is the
per-token uniform min-max quantiser of the linear layers (:func:`~.quant.quantize_tokens`,
straight-through gradient), applied per (batch, head, token) row:

* ``Q^ = Q_b(Q)``, ``K^ = Q_b(K)``, ``V^ = Q_b(V)``: each token's ``head_dim`` vector of one head;
* ``S = scale Q^ K^^T``, ``P = softmax(S)`` over the keys;
* ``P^ = Q_b(P)``: each query token's row of probabilities (over the keys);
* ``O = P^ V^``.

Granularity caveat (*ours*): ``V`` is quantised per token, i.e. its scales vary along the contracted
axis of ``P V``; an integer kernel would prefer per-channel scales for ``V``. As fake quantisation
this is exact either way; the choice is recorded in the card.

With ``bits=None`` (or ``enabled=False``) the processor calls diffusers' stock
``AttnProcessor2_0`` unchanged, so installing it with quantisation off leaves every output bit for
bit equal.
"""
from __future__ import annotations

from typing import Any

import torch
from diffusers.models.attention_processor import AttnProcessor2_0

from .quant import ste_quantize_tokens

__all__ = ["QuantAttnProcessor", "quantized_attention", "install_attention_quantizers", "attention_bits_of"]


def quantized_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, bits: int) -> torch.Tensor:
    """``Q_b(softmax(scale Q_b(q) Q_b(k)^T)) Q_b(v)`` on ``(..., tokens, head_dim)`` tensors, every
    operand quantised per row (last axis) with the straight-through estimator."""
    p = (ste_quantize_tokens(q, bits) @ ste_quantize_tokens(k, bits).transpose(-1, -2) * scale).softmax(dim=-1)
    return ste_quantize_tokens(p, bits) @ ste_quantize_tokens(v, bits)


class QuantAttnProcessor:
    """Attention processor for a diffusers ``Attention`` (self-attention of a DiT block) with the two
    attention products fake-quantised to ``bits`` bits (:func:`quantized_attention`).

    ``bits=None`` or ``enabled=False``: delegates to diffusers' ``AttnProcessor2_0`` (the stock DiT
    processor), so the output is identical. Unsupported ``Attention`` uses (cross-attention, masks,
    spatial/group norm, 4-D inputs) are refused with a ``ValueError`` when quantising."""

    def __init__(self, bits: int | None = 8):
        if bits is not None and not 2 <= int(bits) <= 16:
            raise ValueError(f"attention_bits: expected 2..16 or null, got {bits}")
        self.bits = None if bits is None else int(bits)
        self.enabled = True
        self._stock = AttnProcessor2_0()

    def __call__(self, attn: Any, hidden_states: torch.Tensor, encoder_hidden_states: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, temb: torch.Tensor | None = None, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.bits is None or not self.enabled:
            return self._stock(attn, hidden_states, encoder_hidden_states, attention_mask, temb, *args, **kwargs)
        if (attn.spatial_norm is not None or attn.group_norm is not None or hidden_states.ndim != 3 or encoder_hidden_states is not None
                or attention_mask is not None):
            raise ValueError("QuantAttnProcessor supports unmasked (batch, tokens, dim) self-attention without spatial/group norm (the DiT's attn1)")
        residual = hidden_states
        b, n, _ = hidden_states.shape
        q, k, v = attn.to_q(hidden_states), attn.to_k(hidden_states), attn.to_v(hidden_states)
        h = attn.heads
        d = k.shape[-1] // h
        q, k, v = (t.reshape(b, -1, h, d).transpose(1, 2) for t in (q, k, v))
        if attn.norm_q is not None:
            q = attn.norm_q(q)
        if attn.norm_k is not None:
            k = attn.norm_k(k)
        out = quantized_attention(q, k, v, attn.scale, self.bits)
        out = attn.to_out[1](attn.to_out[0](out.transpose(1, 2).reshape(b, n, h * d).to(q.dtype)))
        if attn.residual_connection:
            out = out + residual
        return out / attn.rescale_output_factor

    def __repr__(self) -> str:
        return f"QuantAttnProcessor(bits={self.bits}, enabled={self.enabled})"


def install_attention_quantizers(model: Any, bits: int | None = 8) -> Any:
    """Give every transformer block's self-attention (``attn1``) a :class:`QuantAttnProcessor` (in place)."""
    for blk in model.transformer_blocks:
        blk.attn1.set_processor(QuantAttnProcessor(bits))
    return model


def attention_bits_of(model: Any) -> dict[str, int | None]:
    """``{"transformer_blocks.<i>.attn1": bits}`` for the blocks carrying a :class:`QuantAttnProcessor`."""
    return {f"transformer_blocks.{i}.attn1": blk.attn1.processor.bits for i, blk in enumerate(getattr(model, "transformer_blocks", []))
            if isinstance(blk.attn1.processor, QuantAttnProcessor)}
