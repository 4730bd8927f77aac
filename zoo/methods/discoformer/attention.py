"""The one attention module DiScoFormer uses (and the exact-KDE construction is built from), so the
construction pins the convention the trained model runs with.

``CrossAttention(q_tokens, kv_tokens)``: ``Q = q_tokens W_q^T + b_q``, ``K = kv W_k^T + b_k``,
``V = kv W_v^T + b_v`` split into ``n_heads`` heads of width ``head_dim``; per head
``A = softmax(scale * Q K^T)`` over the key axis, ``out = concat_heads(A V) W_o^T + b_o``. No positional
encoding, no mask: permuting the keys/values permutes nothing in the output (softmax-weighted sums are
permutation invariant), permuting the queries permutes the output rows. ``return_lse=True`` also returns the
per-query, per-head log-normaliser ``logsumexp_j scale * q_i . k_j`` (shape ``(..., m, n_heads)``), which
the KDE construction reads out as ``l_i`` (Prop. 3.6 of arXiv 2511.05924).
"""
from __future__ import annotations

import math

import torch
from torch import nn


class CrossAttention(nn.Module):
    """Multi-head softmax attention of query tokens over key/value tokens (module docstring)."""

    def __init__(self, d_model: int, n_heads: int = 4, head_dim: int | None = None, bias: bool = True,
                 scale: float | None = None, dtype: torch.dtype | None = None):
        super().__init__()
        hd = d_model // n_heads if head_dim is None else head_dim
        self.n_heads, self.head_dim = n_heads, hd
        self.scale = 1.0 / math.sqrt(hd) if scale is None else float(scale)
        inner = n_heads * hd
        self.q = nn.Linear(d_model, inner, bias=bias, dtype=dtype)
        self.k = nn.Linear(d_model, inner, bias=bias, dtype=dtype)
        self.v = nn.Linear(d_model, inner, bias=bias, dtype=dtype)
        self.o = nn.Linear(inner, d_model, bias=bias, dtype=dtype)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(*t.shape[:-1], self.n_heads, self.head_dim).transpose(-2, -3)  # (..., H, L, hd)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor, return_lse: bool = False):
        q, k, v = self._split(self.q(x)), self._split(self.k(ctx)), self._split(self.v(ctx))
        logits = self.scale * (q @ k.transpose(-1, -2))  # (..., H, m, n)
        lse = torch.logsumexp(logits, dim=-1, keepdim=True)
        a = torch.exp(logits - lse)
        out = (a @ v).transpose(-2, -3)  # (..., m, H, hd)
        out = self.o(out.reshape(*out.shape[:-2], self.n_heads * self.head_dim))
        if return_lse:
            return out, lse[..., 0].transpose(-1, -2)  # (..., m, H)
        return out
