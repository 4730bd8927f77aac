"""The Deep Forcing KV-cache policy as pure torch: 3-D RoPE, Deep Sink and Participative Compression.

Deep Forcing (Yi, Jang, Cho, Nam, Yoon, Kim; arXiv 2512.05081, code github.com/cvlab-kaist/DeepForcing) is a
training-free cache policy for chunk-wise autoregressive video diffusion (Self-Forcing, arXiv 2506.08009):

* **Deep Sink** keeps the first ``S`` frames' tokens for ever and re-aligns their *temporal* RoPE phase so
  they look contiguous with the rolling tail (paper Eq. 5-6): ``K_sink^(time) <- K_sink^(time) * exp(i w_t D_sink)``.
* **Participative Compression** (PC, Eq. 7-11): when the window ``M`` would overflow on the first call of a
  new chunk, the cache (plus the new chunk) is cut to a budget of ``N`` frames' tokens:
  ``[sink (S) | top-C | recent (R)]``; the top-C candidates maximise ``phi_j = sum_r q_r^T k_j`` over the recent
  frames' queries (``fusion="sum"``; ``"max"`` = max over queries, the public code's option), scored on all heads
  concatenated with scale ``1 / (sqrt(d_head) * n_heads)`` (the public code); a token already selected
  ``topc_max_reuse`` times is ineligible (the public code's undocumented re-use cap, 7). Kept tokens stay in
  original temporal order; the top-C block is temporally shifted as one block to end just before the recent tail.

Conventions here (see docs/methods/deep-forcing.md for every departure):

* Keys are stored post-RoPE at their *original* absolute frame; the effective key is produced on read as
  ``rotate_time(k, eff - frame)`` — one rotation from the original phase rather than the public code's
  incremental in-place rotations (the same element of the rotation group, without accumulating rounding).
* Sinks are re-aligned so that their effective frames are ``[tail_start - S, tail_start)`` where
  ``tail_start`` is the first frame of the rolling tail minus the frames the top-C block stands for
  (the public code hard-codes a first-roll shift of ``21 - N`` instead).
* The recent-query buffer holds, per frame, the latest queries written for it (at the trigger point, the first
  call of a new chunk, this equals the public code's rolling ``win_q`` of the last ``R`` frames' tokens).

:class:`FrameKVCache` is one attention layer's cache; :func:`fifo_reference` is Self-Forcing's plain rolling
window written independently (the degenerate-case invariant compares the two bit for bit);
:func:`select_top_c_bruteforce` is the brute-force reference of the PC selection.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
import torch

from .params import CachePolicy

__all__ = [
    "CachePolicy", "Rope3D", "rope_split", "FrameKVCache", "FifoReferenceCache", "select_top_c", "select_top_c_bruteforce",
    "POLICIES", "policy",
]


# ----------------------------------------------------------------------------- configuration
#: The spec's samplers, by name (the paper's default first).
POLICIES: dict[str, dict] = {
    "deep-sink-pc": {"sink_frames": 10, "budget_frames": 16, "recent_frames": 4, "pc_enabled": True, "rope_realign": True},
    "deep-sink": {"sink_frames": 10, "pc_enabled": False, "rope_realign": True},
    "sink-1": {"sink_frames": 1, "pc_enabled": False, "rope_realign": True},
    "fifo": {"sink_frames": 0, "pc_enabled": False, "rope_realign": False},
    "full-cache": {"window_frames": None, "sink_frames": 0, "pc_enabled": False, "rope_realign": False},
    "deep-sink-no-realign": {"sink_frames": 10, "pc_enabled": False, "rope_realign": False},
}


def policy(name: str, **overrides) -> CachePolicy:
    """The named policy of :data:`POLICIES` with ``overrides``."""
    return CachePolicy(**{**POLICIES[name], **overrides})


# ----------------------------------------------------------------------------- 3-D RoPE
def rope_split(head_dim: int) -> tuple[int, int, int]:
    """Wan's split of the ``c = head_dim / 2`` complex channels: temporal ``c - 2 floor(c/3)``, height and width
    ``floor(c/3)`` each (head_dim 128 -> 22, 21, 21)."""
    if head_dim % 2:
        raise ValueError(f"head_dim: expected an even number, got {head_dim}")
    c = head_dim // 2
    return c - 2 * (c // 3), c // 3, c // 3


class Rope3D:
    """3-D rotary embedding on ``[..., L, H, D]`` tensors: complex channel ``(x_{2i}, x_{2i+1})`` of axis ``a`` with
    ``n_a`` channels rotates by ``pos_a * theta^(-i / n_a)`` (Su et al., arXiv 2104.09864; per-axis split of Wan)."""

    def __init__(self, head_dim: int, theta: float = 10000.0):
        self.head_dim = head_dim
        self.n_t, self.n_h, self.n_w = rope_split(head_dim)
        self.freqs = [theta ** (-torch.arange(n, dtype=torch.float64) / n) for n in (self.n_t, self.n_h, self.n_w)]

    def angles(self, t: torch.Tensor, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """``[..., c]`` rotation angles (float64) for positions of shape ``[...]``."""
        return torch.cat([p.to(torch.float64)[..., None] * f.to(p.device) for p, f in zip((t, h, w), self.freqs)], dim=-1)

    @staticmethod
    def _rotate(x: torch.Tensor, ang: torch.Tensor) -> torch.Tensor:
        """Rotate complex pairs of ``x [..., c, 2]`` by ``ang`` (broadcast to ``[..., c]``). The products are taken in
        at least float32 and cast back to ``x.dtype`` once: in bfloat16, casting cos/sin first (8-bit mantissa) and
        rounding each product and the sum costs up to ~3 bf16 roundings per channel instead of one (issue 38).
        float32 / float64 inputs are computed exactly as before (bit for bit)."""
        work = torch.promote_types(x.dtype, torch.float32)
        cos, sin = ang.cos().to(x.device, work), ang.sin().to(x.device, work)
        a, b = x[..., 0].to(work), x[..., 1].to(work)
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).to(x.dtype)

    def apply(self, x: torch.Tensor, t: torch.Tensor, h: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """RoPE of ``x [..., L, H, D]`` at positions ``t, h, w`` of shape ``[L]`` or ``[B, L]``."""
        ang = self.angles(t, h, w)[..., None, :]  # [..., L, 1, c]
        xc = x.reshape(*x.shape[:-1], self.head_dim // 2, 2)
        return self._rotate(xc, ang).reshape(x.shape)

    def rotate_time(self, x: torch.Tensor, delta: torch.Tensor | float) -> torch.Tensor:
        """Multiply only the temporal complex channels of ``x [..., L, H, D]`` by ``exp(i w_t delta)`` (paper Eq. 6);
        ``delta`` is a number or shaped like ``x.shape[:-2]``. Spatial channels are returned bitwise unchanged."""
        delta = torch.as_tensor(delta, dtype=torch.float64)
        ang = (delta[..., None] * self.freqs[0].to(delta.device))[..., None, :]  # [..., L, 1, n_t]
        xc = x.reshape(*x.shape[:-1], self.head_dim // 2, 2)
        rot = self._rotate(xc[..., : self.n_t, :], ang)
        return torch.cat([rot, xc[..., self.n_t:, :]], dim=-2).reshape(x.shape)


def frame_positions(start_frame: int, n_frames: int, grid: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(t, h, w)`` of the tokens of ``n_frames`` frames from ``start_frame``, row-major over the ``grid``."""
    gh, gw = grid
    per = gh * gw
    idx = torch.arange(n_frames * per)
    return start_frame + idx // per, (idx % per) // gw, idx % gw


# ----------------------------------------------------------------------------- Participative Compression selection
def pc_scores(keys: torch.Tensor, queries: torch.Tensor, fusion: str) -> torch.Tensor:
    """``phi [B, L]``: per key, the query-key dot products over all heads concatenated, scaled by
    ``1 / (sqrt(d_head) * n_heads)``, fused over the recent queries by sum (Eq. 7) or max. ``keys [B, L, H, D]``,
    ``queries [B, Q, H, D]``."""
    H, D = keys.shape[-2:]
    dots = torch.einsum("bqhd,blhd->bql", queries, keys) / (math.sqrt(D) * H)
    return dots.sum(1) if fusion == "sum" else dots.amax(1)


def select_top_c(scores: torch.Tensor, candidate: torch.Tensor, eligible: torch.Tensor, c: int) -> torch.Tensor:
    """Boolean ``[B, L]``: per row, the ``c`` highest-scoring tokens among ``candidate & eligible`` (Eq. 8), ties
    broken towards the earlier position (a stable descending sort). Rows with fewer than ``c`` eligible tokens
    get all of them."""
    masked = torch.where(candidate & eligible, scores, torch.full_like(scores, -math.inf))
    order = torch.sort(masked, dim=1, descending=True, stable=True).indices
    n_ok = (candidate & eligible).sum(1, keepdim=True)
    rank = torch.arange(scores.shape[1], device=scores.device).expand_as(order)
    take = rank < torch.clamp(n_ok, max=c)
    out = torch.zeros_like(candidate)
    out.scatter_(1, order, take)
    return out


def select_top_c_bruteforce(keys: torch.Tensor, queries: torch.Tensor, candidate: torch.Tensor, eligible: torch.Tensor, c: int,
                            fusion: str) -> list[list[int]]:
    """Reference for :func:`pc_scores` + :func:`select_top_c`: Python loops over rows, keys, queries and heads,
    sorted by ``(-score, position)``; returns the selected positions per row in increasing order."""
    B, L, H, D = keys.shape
    out = []
    for b in range(B):
        scored = []
        for j in range(L):
            if not (bool(candidate[b, j]) and bool(eligible[b, j])):
                continue
            per_q = [sum(float(queries[b, r, h] @ keys[b, j, h]) for h in range(H)) / (math.sqrt(D) * H) for r in range(queries.shape[1])]
            scored.append((-(sum(per_q) if fusion == "sum" else max(per_q)), j))
        out.append(sorted(j for _, j in sorted(scored)[:c]))
    return out


# ----------------------------------------------------------------------------- the cache
@dataclass
class CacheEvent:
    """What one :meth:`FrameKVCache.update` did: ``kind`` in {append, overwrite, evict, compress}."""

    kind: str
    start_frame: int
    tokens_after: int


@dataclass
class FrameKVCache:
    """One attention layer's frame-level KV cache under a :class:`CachePolicy` (batch rows share the layout of
    sinks and recent frames; PC's top-C selection is per row).

    State (``B`` rows, ``L`` cached tokens): ``k`` post-RoPE at the original frame, ``v``, ``frame [B, L]``
    original frame, ``eff [B, L]`` effective (encoded) frame, ``uses [B, L]`` times selected by PC, ``top [B, L]``
    member of the current top-C block, ``tid [B, L]`` token id ``frame * F + index within frame``."""

    cfg: CachePolicy
    rope: Rope3D
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    frame: torch.Tensor | None = None
    eff: torch.Tensor | None = None
    uses: torch.Tensor | None = None
    top: torch.Tensor | None = None
    tid: torch.Tensor | None = None
    queries: dict[int, torch.Tensor] = field(default_factory=dict)
    last_chunk: tuple[int, int] | None = None
    events: list[CacheEvent] = field(default_factory=list)

    # -- sizes
    @property
    def tokens(self) -> int:
        """Cached tokens (per row), counted exactly."""
        return 0 if self.k is None else int(self.k.shape[1])

    @property
    def frames_held(self) -> float:
        return self.tokens / self.cfg.frame_tokens

    # -- the one entry point
    def update(self, k_new: torch.Tensor, v_new: torch.Tensor, q_new: torch.Tensor | None, start_frame: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Write one call's chunk (``k_new, v_new, q_new [B, n*F, H, D]`` post-RoPE at absolute frames from
        ``start_frame``) and return ``(K_eff, V)`` to attend over (cache and chunk, effective phases).

        A repeated call for the chunk written last (later denoising steps, the clean re-run) overwrites its slots
        in place: no eviction and no compression (trigger rule, note §7.7). The first call of a new chunk evicts
        (FIFO, sinks kept) or compresses (PC) if appending would exceed ``M`` frames."""
        cfg, F = self.cfg, self.cfg.frame_tokens
        n = k_new.shape[1] // F
        if n * F != k_new.shape[1]:
            raise ValueError(f"update: {k_new.shape[1]} tokens is not a whole number of {F}-token frames")
        B = k_new.shape[0]
        fr = (start_frame + torch.arange(n * F, device=k_new.device) // F).expand(B, -1)
        if self.k is not None and self.last_chunk == (start_frame, n):
            pos = self.k.shape[1] - n * F  # the chunk is always the cache's last n frames
            if not bool((self.frame[:, pos:] == fr).all()):
                raise RuntimeError("overwrite: the cached chunk is no longer the last one")
            self.k = torch.cat([self.k[:, :pos], k_new], 1)
            self.v = torch.cat([self.v[:, :pos], v_new], 1)
            self._store_queries(q_new, start_frame, n)
            self.events.append(CacheEvent("overwrite", start_frame, self.tokens))
            return self.read()
        if self.k is not None and start_frame <= int(self.frame[:, -1].max()):
            raise ValueError(f"update: frame {start_frame} is not after the cached frames (last {int(self.frame[:, -1].max())})")
        self._store_queries(q_new, start_frame, n)
        zeros = torch.zeros_like(fr)
        tid = (start_frame * F + torch.arange(n * F, device=k_new.device)).expand(B, -1)
        new = (k_new, v_new, fr, fr.clone(), zeros, zeros.bool(), tid)
        if self.k is None:
            self.k, self.v, self.frame, self.eff, self.uses, self.top, self.tid = new
            kind = "append"
        else:
            self.k, self.v, self.frame, self.eff, self.uses, self.top, self.tid = (
                torch.cat([a, b], 1) for a, b in zip((self.k, self.v, self.frame, self.eff, self.uses, self.top, self.tid), new))
            kind = "append"
            M = cfg.window_frames
            if M is not None and self.tokens > M * F:
                kind = "compress" if cfg.pc_enabled else "evict"
                keep = self._compress() if cfg.pc_enabled else self._evict_fifo()
                self._gather(keep)
        self.last_chunk = (start_frame, n)
        self._realign()
        self.events.append(CacheEvent(kind, start_frame, self.tokens))
        return self.read()

    def read(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K_eff, V)``: keys rotated from their original frame to their effective frame."""
        delta = self.eff - self.frame
        if not bool(delta.any()):
            return self.k, self.v
        return self.rope.rotate_time(self.k, delta), self.v

    # -- policy pieces
    def _store_queries(self, q: torch.Tensor | None, start: int, n: int) -> None:
        if q is None or not self.cfg.pc_enabled:
            return
        F = self.cfg.frame_tokens
        for i in range(n):
            self.queries[start + i] = q[:, i * F:(i + 1) * F]
        last = start + n - 1
        for f in [f for f in self.queries if f <= last - self.cfg.recent_frames]:
            del self.queries[f]

    def _sink_mask(self) -> torch.Tensor:
        return self.frame < self.cfg.sink_frames

    def _evict_fifo(self) -> torch.Tensor:
        """Keep the sinks and the newest ``M - (sinks held)`` frames' tokens."""
        F, M = self.cfg.frame_tokens, self.cfg.window_frames
        sink = self._sink_mask()
        n_sink = int(sink[0].sum())
        n_tail = M * F - n_sink
        rank_from_end = torch.arange(self.tokens - 1, -1, -1, device=sink.device).expand_as(sink)
        return sink | (~sink & (rank_from_end < n_tail))

    def _compress(self) -> torch.Tensor:
        """Participative Compression (Eq. 7-9): keep sinks, the last ``R`` frames and the top ``C * F`` candidates."""
        cfg, F = self.cfg, self.cfg.frame_tokens
        last = int(self.frame[0, -1])
        sink = self._sink_mask()
        recent = self.frame > last - cfg.recent_frames
        candidate = ~sink & ~recent
        qs = [self.queries[f] for f in sorted(self.queries) if f > last - cfg.recent_frames]
        keys, _ = self.read()
        scores = pc_scores(keys, torch.cat(qs, 1), cfg.fusion)
        cap = cfg.topc_max_reuse
        eligible = torch.ones_like(candidate) if cap is None else self.uses < cap
        chosen = select_top_c(scores, candidate, eligible, cfg.top_frames * F)
        self.uses = self.uses + chosen.long()
        self.top = chosen
        return sink | recent | chosen

    def _gather(self, keep: torch.Tensor) -> None:
        counts = keep.sum(1)
        if not bool((counts == counts[0]).all()):
            raise RuntimeError("rows kept different token counts")
        idx = torch.nonzero(keep)[:, 1].reshape(keep.shape[0], -1)  # increasing: original order kept
        self.frame, self.eff, self.uses, self.top, self.tid = (t.gather(1, idx) for t in (self.frame, self.eff, self.uses, self.top, self.tid))
        ix = idx[..., None, None].expand(-1, -1, *self.k.shape[2:])
        self.k, self.v = self.k.gather(1, ix), self.v.gather(1, ix)

    def _realign(self) -> None:
        """Effective frames (Eq. 5-6, 10-11): the tail keeps its true frames; the top-C block is shifted to end at
        ``tail_first - 1``; the sinks to ``[tail_start - S, tail_start)`` with ``tail_start = tail_first - top frames``."""
        self.eff = self.frame.clone()
        if not self.cfg.rope_realign:
            return
        F, S = self.cfg.frame_tokens, self.cfg.sink_frames
        sink = self._sink_mask()
        tail = ~sink & ~self.top
        if not bool(tail[0].any()):
            return
        first = torch.where(tail, self.frame, torch.full_like(self.frame, 2**62)).amin(1, keepdim=True)  # [B, 1]
        n_top = int(self.top[0].sum())
        if n_top:
            top_last = torch.where(self.top, self.frame, torch.full_like(self.frame, -1)).amax(1, keepdim=True)
            self.eff = torch.where(self.top, self.frame + (first - 1 - top_last), self.eff)
        tail_start = first - (n_top + F - 1) // F
        self.eff = torch.where(sink, self.frame + (tail_start - S), self.eff)


@dataclass
class FifoReferenceCache:
    """Self-Forcing's rolling KV cache written independently of :class:`FrameKVCache`: a new chunk appends;
    beyond ``M`` frames the oldest tokens drop; a repeated call for the last chunk overwrites it; no rotation."""

    window_frames: int
    frame_tokens: int
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    last: tuple[int, int] | None = None

    def update(self, k_new: torch.Tensor, v_new: torch.Tensor, q_new: torch.Tensor | None, start_frame: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = k_new.shape[1]
        if self.k is None:
            self.k, self.v = k_new, v_new
        elif self.last == (start_frame, n):
            self.k, self.v = torch.cat([self.k[:, :-n], k_new], 1), torch.cat([self.v[:, :-n], v_new], 1)
        else:
            limit = self.window_frames * self.frame_tokens
            self.k, self.v = torch.cat([self.k, k_new], 1)[:, -limit:], torch.cat([self.v, v_new], 1)[:, -limit:]
        self.last = (start_frame, n)
        return self.k, self.v

    @property
    def tokens(self) -> int:
        return 0 if self.k is None else int(self.k.shape[1])
