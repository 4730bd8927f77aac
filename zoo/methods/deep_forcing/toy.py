"""The toy: synthetic clips with a persistent identity and a tiny causal chunk transformer with 3-D RoPE.

**Data** (note §6): each clip draws a palette ``c ~ N(0, I_C)`` once, an amplitude ``a ~ U(0.5, 1)^C``, an angular
speed ``w ~ U(0.35, 0.7)`` rad/frame and a phase ``phi``; frame ``t`` holds ``G = 2 x 2`` tokens of ``C`` channels,
``x_t[g] = c + a * sin(w t + phi + g pi / 2) + sigma * eps`` (a wave rotating over the 2x2 grid). The wave sums to
zero over the four tokens, so ``mean_g x_t[g] - c`` is pure noise: identity drift of a generated frame is
``|| mean_g mu_t[g] - c ||`` (RMS over channels), exactly computable from the known ``c``.

**Model**: frames enter as ``G`` tokens (``Linear(C, d)``); to predict chunk ``j`` the model reads ``3 G`` *query*
tokens (one learned embedding) at chunk ``j``'s positions. Two calls per chunk, as in Self-Forcing: the query call
(the "denoising" call, which triggers eviction/compression and returns the predicted mean ``mu``), then the clean
re-run on the sampled frames ``mu + sigma * eps`` (a Gaussian head with the data's known noise), which overwrites
the chunk's K/V with clean context. Training is teacher-forced in one parallel pass with the equivalent mask:
clean chunk ``j`` sees clean chunks ``<= j``; query chunk ``j`` sees clean chunks ``< j`` and itself; MSE on the
means of chunks 1.. (:func:`train_toy`, ``zoo train deep-forcing``).
"""
from __future__ import annotations

import math
from typing import Annotated, Any

import torch
import torch.nn.functional as Fn
from pydantic import Field
from torch import nn

from registry.contract import factory, trainer

from .params import CHANNELS, CHUNK, GRID, SIGMA, TRAIN_FRAMES, BuildToyVideoConfig, ToyTrainOptions
from .policy import CachePolicy, FrameKVCache, Rope3D, frame_positions

__all__ = ["ToyVideoTransformer", "build_toy_video", "rollout", "teacher_forced_means", "train_toy", "make_clips", "GRID", "CHANNELS", "SIGMA", "TRAIN_FRAMES", "CHUNK"]


def make_clips(n: int, frames: int, generator: torch.Generator, sigma: float = SIGMA) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(clips [n, frames, G, C], palette [n, C], clean [n, frames, G, C])`` of the synthetic process (draw order:
    palette, amplitude, speed, phase, noise)."""
    G = GRID[0] * GRID[1]
    c = torch.randn(n, CHANNELS, generator=generator)
    a = 0.5 + 0.5 * torch.rand(n, CHANNELS, generator=generator)
    w = 0.35 + 0.35 * torch.rand(n, 1, 1, generator=generator)
    phi = 2 * math.pi * torch.rand(n, 1, 1, generator=generator)
    t = torch.arange(frames, dtype=torch.float32)[None, :, None]
    g = torch.arange(G, dtype=torch.float32)[None, None, :]
    wave = torch.sin(w * t + phi + g * math.pi / 2)  # [n, T, G]
    clean = c[:, None, None, :] + a[:, None, None, :] * wave[..., None]
    eps = torch.randn(clean.shape, generator=generator)
    return clean + sigma * eps, c, clean


class Block(nn.Module):
    """Pre-LN transformer block whose attention reads/writes a :class:`FrameKVCache` (rollout) or takes a mask (training)."""

    def __init__(self, d: int, heads: int, ff: int):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d))

    def forward(self, x: torch.Tensor, rope: Rope3D, pos: tuple[torch.Tensor, ...], mask: torch.Tensor | None = None,
                cache: Any = None, start_frame: int = 0) -> torch.Tensor:
        B, L, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).reshape(B, L, 3, self.heads, self.hd).unbind(2)
        q, k = rope.apply(q, *pos), rope.apply(k, *pos)
        if cache is not None:
            k, v = cache.update(k, v, q, start_frame)
        att = Fn.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask)
        x = x + self.out(att.transpose(1, 2).reshape(B, L, d))
        return x + self.mlp(self.ln2(x))


class ToyVideoTransformer(nn.Module):
    """Tiny causal chunk transformer with 3-D RoPE (t, h, w): ``layers`` blocks of width ``d``."""

    def __init__(self, d: int = 64, heads: int = 4, layers: int = 2, ff: int = 128, theta: float = 10000.0):
        super().__init__()
        self.d, self.heads = d, heads
        self.inp = nn.Linear(CHANNELS, d)
        self.query = nn.Parameter(torch.zeros(d))
        self.blocks = nn.ModuleList(Block(d, heads, ff) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, CHANNELS)
        self.rope = Rope3D(d // heads, theta)

    @property
    def frame_tokens(self) -> int:
        return GRID[0] * GRID[1]

    # -- training: teacher-forced, one parallel pass
    def train_mask(self, frames: int) -> torch.Tensor:
        """Boolean ``[2L, 2L]`` (True = may attend) over ``[clean tokens | query tokens]``."""
        chunk = torch.arange(frames).repeat_interleave(self.frame_tokens) // CHUNK
        ci, cj = chunk[:, None], chunk[None, :]
        return torch.cat([torch.cat([cj <= ci, torch.zeros_like(ci <= cj)], 1), torch.cat([cj < ci, cj == ci], 1)], 0)

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        """Predicted means ``[B, T, G, C]`` of every chunk from the clean clips ``[B, T, G, C]`` (chunk 0 from nothing)."""
        B, T, G, C = clips.shape
        t, h, w = frame_positions(0, T, GRID)
        pos = (torch.cat([t, t]), torch.cat([h, h]), torch.cat([w, w]))
        x = torch.cat([self.inp(clips.reshape(B, T * G, C)), self.query.expand(B, T * G, -1)], 1)
        mask = self.train_mask(T).to(x.device)
        for blk in self.blocks:
            x = blk(x, self.rope, pos, mask=mask)
        return self.head(self.ln(x[:, T * G:])).reshape(B, T, G, C)

    # -- rollout: two calls per chunk through per-layer caches
    def new_caches(self, policy: CachePolicy) -> list[FrameKVCache]:
        if policy.frame_tokens != self.frame_tokens:
            raise ValueError(f"frame_tokens: the toy has {self.frame_tokens} tokens per frame, the policy says {policy.frame_tokens}")
        return [FrameKVCache(policy, self.rope) for _ in self.blocks]

    def step(self, caches: list, start_frame: int, frames: torch.Tensor | None, batch: int, n_frames: int = CHUNK) -> torch.Tensor:
        """One call: ``frames=None`` is the query call (returns the predicted means ``[B, n, G, C]``); clean
        ``frames [B, n, G, C]`` is the context call (writes the chunk's clean K/V; returns the means it would predict)."""
        G = self.frame_tokens
        pos = frame_positions(start_frame, n_frames, GRID)
        x = self.query.expand(batch, n_frames * G, -1) if frames is None else self.inp(frames.reshape(batch, n_frames * G, CHANNELS))
        for blk, cache in zip(self.blocks, caches):
            x = blk(x, self.rope, pos, cache=cache, start_frame=start_frame)
        return self.head(self.ln(x)).reshape(batch, n_frames, G, CHANNELS)


@torch.no_grad()
def rollout(model: ToyVideoTransformer, caches: list, prompt: torch.Tensor, total_frames: int, noise: torch.Tensor,
            sigma: float = SIGMA, progress: bool = False) -> dict[str, Any]:
    """Autoregressive rollout: the prompt ``[B, P, G, C]`` (P a multiple of the chunk) is written as clean context,
    then each chunk is one query call (mean ``mu``), a sample ``mu + sigma * noise`` and one clean context call.
    Returns ``frames`` and ``means`` ``[B, total, G, C]`` (prompt frames copied into both), the cached tokens
    per layer-0 cache after each query call (the attention set, exact counts) and per-chunk step seconds."""
    import time

    B, P = prompt.shape[:2]
    if P % CHUNK or P == 0 or total_frames % CHUNK or total_frames <= P:
        raise ValueError(f"rollout: prompt frames {P} and total_frames {total_frames} must be positive multiples of {CHUNK}, total > prompt")
    dev = next(model.parameters()).device
    prompt, noise = prompt.to(dev), noise.to(dev)
    frames, means = [prompt], [prompt]
    for s in range(0, P, CHUNK):
        model.step(caches, s, prompt[:, s:s + CHUNK], B)
    tokens, seconds = [], []
    starts = range(P, total_frames, CHUNK)
    if progress:
        from zoo.common.training import progress as bar

        starts = bar(starts, desc="rollout")
    for s in starts:
        t0 = time.perf_counter()
        mu = model.step(caches, s, None, B)
        tokens.append(caches[0].tokens)
        x = mu + sigma * noise[:, s:s + CHUNK]
        model.step(caches, s, x, B)
        seconds.append(time.perf_counter() - t0)
        frames.append(x)
        means.append(mu)
    return {"frames": torch.cat(frames, 1), "means": torch.cat(means, 1), "cache_tokens": tokens, "step_seconds": seconds}


@torch.no_grad()
def teacher_forced_means(model: ToyVideoTransformer, caches: list, clips: torch.Tensor) -> torch.Tensor:
    """Chunk-by-chunk with the cache: query call for chunk ``j`` (its mean), then the true chunk ``j`` as context.
    With a cache that never evicts this must equal ``model(clips)`` (the parallel causal recomputation)."""
    B, T = clips.shape[:2]
    out = []
    for s in range(0, T, CHUNK):
        out.append(model.step(caches, s, None, B))
        model.step(caches, s, clips[:, s:s + CHUNK], B)
    return torch.cat(out, 1)


@factory(params=BuildToyVideoConfig)
def build_toy_video(d: Annotated[int, Field(ge=8, le=1024)] = 64, heads: Annotated[int, Field(ge=1, le=64)] = 4,
                    layers: Annotated[int, Field(ge=1, le=16)] = 2, ff: Annotated[int, Field(ge=8, le=8192)] = 128) -> ToyVideoTransformer:
    """The toy causal chunk transformer (random init; the spec loads the trained weights)."""
    return ToyVideoTransformer(d=d, heads=heads, layers=layers, ff=ff)


@torch.no_grad()
def heldout_mse(model: ToyVideoTransformer, n: int = 256, seed: int = 12345) -> float:
    """MSE of the teacher-forced chunk means (chunks 1..6) to the noise-free frames of ``n`` fresh clips."""
    clips, _, clean = make_clips(n, TRAIN_FRAMES, torch.Generator().manual_seed(seed))
    return float(((model(clips) - clean)[:, CHUNK:] ** 2).mean())


@trainer(options=ToyTrainOptions)
def train_toy(ctx: Any, opts: ToyTrainOptions) -> None:
    """Teacher-forced next-chunk prediction on 21-frame clips: every step draws a fresh batch (palette ``c``, rotating
    wave, noise sigma = 0.2) from one generator seeded with ``ctx.seed``, runs the parallel masked pass and minimises the
    MSE between the predicted means of chunks 1..6 and the clips' noise-free frames (the same minimiser as the MSE to
    the noisy frames, at lower variance). Writes ``deep-forcing-toy.safetensors`` (``zoo train deep-forcing``, ~2 min)."""
    from zoo.common.training import adamw_one_cycle, optimizer_step, progress, save_checkpoint, setup_deterministic

    gen = setup_deterministic(ctx.seed)
    model = build_toy_video()
    opt, sched = adamw_one_cycle(model.parameters(), opts.lr, opts.steps, weight_decay=0.01)
    bar = progress(range(opts.steps), desc="train deep-forcing toy")
    for step in bar:
        clips, _, clean = make_clips(opts.batch, TRAIN_FRAMES, gen)
        loss = ((model(clips) - clean)[:, CHUNK:] ** 2).mean()
        optimizer_step(model, opt, sched, loss)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    model.eval()
    print(f"held-out MSE of chunk means (vs noise-free frames): {heldout_mse(model):.4f} (noise variance {0.2 ** 2:.4f})")
    save_checkpoint(model, ctx.path("deep-forcing-toy.safetensors"))
