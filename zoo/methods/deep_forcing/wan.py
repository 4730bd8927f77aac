"""Deep Forcing for diffusers' ``WanTransformer3DModel``: self-attention processors with a frame-level KV cache.

:func:`install_deep_forcing` (a registered ``@transform``) replaces every block's ``attn1`` processor with a
:class:`DeepForcingWanProcessor` sharing one :class:`WanKVSession`: per block a :class:`~.policy.FrameKVCache`
under the chosen :class:`~.policy.CachePolicy`. Each call of :func:`wan_chunk` runs the transformer on one chunk
of latent frames (``[B, C, f, H, W]``) whose first frame is the video's absolute frame ``start_frame``; the
processor RoPE-encodes queries and keys at *absolute* frame indices (diffusers' own ``WanRotaryPosEmbed``
always starts at frame 0), writes K/V into the cache (a repeated call for the same chunk, i.e. later denoising
steps and the clean re-run at ``t = 0``, overwrites in place) and attends over the cache plus the chunk, exactly
the Self-Forcing / Deep Forcing inference loop (note §4 "one self-attention call"). Cross-attention is untouched.

:func:`wan_causal_reference` is the recomputation the cache must reproduce: the stock processors over the whole
sequence with a block-causal mask (chunk ``j`` attends chunks ``<= j``) and per-token timesteps.

:func:`from_self_forcing` (a registered ``@converter`` with its inverse) maps the Self-Forcing checkpoint (original
Wan key names under ``generator_ema`` or ``generator`` with a ``model.`` prefix) to diffusers' names, following the
renames of diffusers' ``scripts/convert_wan_to_diffusers.py``. The key layout of ``self_forcing_dmd.pt`` itself was
**not verified** (no hub access here); the round trip through the inverse is what the tests check.
"""
from __future__ import annotations

from typing import Annotated, Any

import torch
import torch.nn.functional as Fn
from pydantic import Field

from registry.contract import converter, factory, transform

from .params import BuildWanTransformerConfig, InstallDeepForcingParams
from .policy import CachePolicy, FrameKVCache, Rope3D

__all__ = ["WanKVSession", "DeepForcingWanProcessor", "install_deep_forcing", "wan_chunk", "wan_causal_reference",
           "from_self_forcing", "to_self_forcing", "build_wan_transformer", "tiny_wan", "self_forcing_rollout", "shifted_sigma"]


class WanKVSession:
    """Shared state of the processors: the policy settings, one cache per block, the current chunk's start frame
    and spatial grid (caches are created on the first chunk, when the tokens per frame are known)."""

    def __init__(self, n_blocks: int, head_dim: int, theta: float = 10000.0, **policy: Any):
        self.n_blocks, self.policy_kwargs = n_blocks, policy
        CachePolicy(frame_tokens=1, **policy)  # validate now: one clear error at install time
        self.rope = Rope3D(head_dim, theta)
        self.caches: list[FrameKVCache] | None = None
        self.start_frame, self.grid = 0, (1, 1)

    def reset(self) -> None:
        self.caches = None

    def begin(self, start_frame: int, grid: tuple[int, int]) -> None:
        if self.caches is None:
            cfg = CachePolicy(frame_tokens=grid[0] * grid[1], **self.policy_kwargs)
            self.caches = [FrameKVCache(cfg, self.rope) for _ in range(self.n_blocks)]
        elif grid != self.grid:
            raise ValueError(f"wan_chunk: the latent grid changed from {self.grid} to {grid} within one video; call reset()")
        self.start_frame, self.grid = start_frame, grid

    @property
    def tokens(self) -> int:
        """Cached tokens of the first block (exact)."""
        return 0 if self.caches is None else self.caches[0].tokens


class DeepForcingWanProcessor:
    """Self-attention of one Wan block through the session's frame-level KV cache (absolute-frame 3-D RoPE)."""

    def __init__(self, session: WanKVSession, index: int):
        self.session, self.index = session, index

    def __call__(self, attn: Any, hidden_states: torch.Tensor, encoder_hidden_states: torch.Tensor | None = None,
                 attention_mask: torch.Tensor | None = None, rotary_emb: Any = None) -> torch.Tensor:
        if encoder_hidden_states is not None:
            raise ValueError("DeepForcingWanProcessor is for self-attention (attn1) only")
        s = self.session
        q, k, v = attn.to_q(hidden_states), attn.to_k(hidden_states), attn.to_v(hidden_states)
        q, k = attn.norm_q(q), attn.norm_k(k)
        B, L = q.shape[:2]
        q, k, v = (x.unflatten(2, (attn.heads, -1)) for x in (q, k, v))
        gh, gw = s.grid
        idx = torch.arange(L, device=q.device)
        t, h, w = s.start_frame + idx // (gh * gw), (idx % (gh * gw)) // gw, idx % gw
        q, k = s.rope.apply(q, t, h, w), s.rope.apply(k, t, h, w)
        K, V = s.caches[self.index].update(k, v, q, s.start_frame)
        out = Fn.scaled_dot_product_attention(q.transpose(1, 2), K.transpose(1, 2), V.transpose(1, 2))
        out = out.transpose(1, 2).flatten(2, 3).type_as(hidden_states)
        return attn.to_out[1](attn.to_out[0](out))


@transform(params=InstallDeepForcingParams)
def install_deep_forcing(model: Any, window_frames: int | None = 21, sink_frames: int = 10, budget_frames: int = 16,
                         recent_frames: int = 4, fusion: str = "sum", topc_max_reuse: int | None = 7, rope_realign: bool = True,
                         pc_enabled: bool = True, chunk_frames: int = 3, theta: float = 10000.0) -> Any:
    """Install :class:`DeepForcingWanProcessor` on every ``blocks[i].attn1`` of a ``WanTransformer3DModel`` (in place);
    the session is ``model.deep_forcing``. Defaults: the paper's Wan2.1 setting (M = 21, S = 10, N = 16, R = 4, chunk 3)."""
    if getattr(model.config, "patch_size", (1,))[0] != 1:
        raise ValueError("install_deep_forcing: temporal patch size 1 expected (Wan2.1)")
    head_dim = model.config.attention_head_dim
    session = WanKVSession(len(model.blocks), head_dim, theta, window_frames=window_frames, sink_frames=sink_frames,
                           budget_frames=budget_frames, recent_frames=recent_frames, fusion=fusion, topc_max_reuse=topc_max_reuse,
                           rope_realign=rope_realign, pc_enabled=pc_enabled, chunk_frames=chunk_frames)
    for i, block in enumerate(model.blocks):
        block.attn1.set_processor(DeepForcingWanProcessor(session, i))
    model.deep_forcing = session
    return model


def wan_chunk(model: Any, latents: torch.Tensor, timestep: torch.Tensor, text: torch.Tensor, start_frame: int) -> torch.Tensor:
    """One transformer call on a chunk ``[B, C, f, H, W]`` starting at absolute latent frame ``start_frame``."""
    p = model.config.patch_size
    model.deep_forcing.begin(start_frame, (latents.shape[3] // p[1], latents.shape[4] // p[2]))
    return model(latents, timestep, text, return_dict=False)[0]


class _MaskedStock:
    """diffusers' own Wan processor with a fixed attention mask (the recomputation reference)."""

    def __init__(self, mask: torch.Tensor):
        from diffusers.models.transformers.transformer_wan import WanAttnProcessor

        self.stock, self.mask = WanAttnProcessor(), mask

    def __call__(self, attn: Any, hidden_states: torch.Tensor, encoder_hidden_states: Any = None, attention_mask: Any = None,
                 rotary_emb: Any = None) -> torch.Tensor:
        return self.stock(attn, hidden_states, encoder_hidden_states, self.mask, rotary_emb)


@torch.no_grad()
def wan_causal_reference(model: Any, latents: torch.Tensor, timesteps: torch.Tensor, text: torch.Tensor, chunk_frames: int) -> torch.Tensor:
    """The whole sequence ``[B, C, T, H, W]`` through diffusers' stock processors with a block-causal mask (chunk ``j``
    sees chunks ``<= j``) and per-frame timesteps ``timesteps [B, T]``; processors are restored afterwards."""
    p = model.config.patch_size
    B, _, T, H, W = latents.shape
    per = (H // p[1]) * (W // p[2])
    chunk = torch.arange(T * per, device=latents.device) // (per * chunk_frames)
    mask = chunk[None, :] <= chunk[:, None]
    saved = [blk.attn1.processor for blk in model.blocks]
    try:
        for blk in model.blocks:
            blk.attn1.set_processor(_MaskedStock(mask))
        ts = timesteps.repeat_interleave(per, dim=1)
        return model(latents, ts, text, return_dict=False)[0]
    finally:
        for blk, proc in zip(model.blocks, saved):
            blk.attn1.set_processor(proc)


def shifted_sigma(t: float, shift: float = 5.0) -> float:
    """Flow-matching noise level of timestep ``t`` in [0, 1000] warped by ``shift`` (Self-Forcing's
    ``timestep_shift``, SD3's shift): ``sigma = shift s / (1 + (shift - 1) s)``, ``s = t / 1000``."""
    s = t / 1000.0
    return shift * s / (1 + (shift - 1) * s)


@torch.no_grad()
def self_forcing_rollout(model: Any, text: torch.Tensor, num_frames: int, latent_chw: tuple[int, int, int],
                         steps: tuple[int, ...] = (1000, 750, 500, 250), shift: float = 5.0, chunk: int = 3,
                         generator: torch.Generator | None = None, recompute: bool = False,
                         cache_tokens: list[int] | None = None, progress: bool = False) -> torch.Tensor:
    """Self-Forcing's chunk-wise few-step sampler (arXiv 2506.08009) on a Wan transformer with the Deep Forcing
    processors: per chunk, ``len(steps)`` denoising calls (``x0 = x_t - sigma v``, renoised to the next level with
    fresh noise; flow matching ``x_t = (1 - sigma) x0 + sigma eps``), then the clean re-run at ``t = 0`` that writes
    the chunk's K/V (``context_noise = 0``). Returns the clean latents ``[B, C, num_frames, H, W]`` in float32.

    Noise is drawn on the CPU from ``generator`` (the same video on every device) and the latents are kept in float32
    on ``text``'s device; each transformer call gets them in ``text``'s dtype (the transformer's, e.g. bfloat16).
    ``cache_tokens`` (a list) receives the first block's cached-token count after each chunk's first call;
    ``progress`` shows a tqdm bar over chunks.

    ``recompute=True`` runs every call as :func:`wan_causal_reference` over ``[clean chunks so far | current chunk]``
    instead of through the cache (the reference the cached sampler must equal while nothing is evicted)."""
    B, (C, H, W) = text.shape[0], latent_chw
    dev, dt = text.device, text.dtype
    if num_frames % chunk:
        raise ValueError(f"num_frames: expected a multiple of the chunk ({chunk}), got {num_frames}")
    if not recompute:
        model.deep_forcing.reset()
    done: list[torch.Tensor] = []

    def call(x: torch.Tensor, sigma: float, start: int) -> torch.Tensor:
        if not recompute:
            return wan_chunk(model, x.to(dt), torch.full((B,), sigma * 1000.0, device=dev), text, start).float()
        seq = torch.cat([*done, x], 2).to(dt)
        ts = torch.cat([torch.zeros(B, start, device=dev), torch.full((B, x.shape[2]), sigma * 1000.0, device=dev)], 1)
        return wan_causal_reference(model, seq, ts, text, chunk)[:, :, start:].float()

    starts = range(0, num_frames, chunk)
    if progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="chunks", unit="chunk")
    for start in starts:
        x = torch.randn((B, C, chunk, H, W), generator=generator).to(dev)
        for i, t in enumerate(steps):
            sigma = shifted_sigma(t, shift)
            x0 = x - sigma * call(x, sigma, start)
            if i == 0 and cache_tokens is not None and not recompute:
                cache_tokens.append(model.deep_forcing.tokens)
            if i + 1 < len(steps):
                nxt = shifted_sigma(steps[i + 1], shift)
                x = (1 - nxt) * x0 + nxt * torch.randn((B, C, chunk, H, W), generator=generator).to(dev)
        if not recompute:
            call(x0, 0.0, start)  # the clean re-run: overwrites the chunk's K/V in place
        done.append(x0)
    return torch.cat(done, 2)


# ----------------------------------------------------------------------------- the Self-Forcing checkpoint
_RENAMES = [  # original Wan name fragment -> diffusers (order matters: norm3 before anything else named norm)
    ("self_attn.q.", "attn1.to_q."), ("self_attn.k.", "attn1.to_k."), ("self_attn.v.", "attn1.to_v."), ("self_attn.o.", "attn1.to_out.0."),
    ("self_attn.norm_q.", "attn1.norm_q."), ("self_attn.norm_k.", "attn1.norm_k."),
    ("cross_attn.q.", "attn2.to_q."), ("cross_attn.k.", "attn2.to_k."), ("cross_attn.v.", "attn2.to_v."), ("cross_attn.o.", "attn2.to_out.0."),
    ("cross_attn.norm_q.", "attn2.norm_q."), ("cross_attn.norm_k.", "attn2.norm_k."),
    (".norm3.", ".norm2."), ("ffn.0.", "ffn.net.0.proj."), ("ffn.2.", "ffn.net.2."),
    ("time_embedding.0.", "condition_embedder.time_embedder.linear_1."), ("time_embedding.2.", "condition_embedder.time_embedder.linear_2."),
    ("text_embedding.0.", "condition_embedder.text_embedder.linear_1."), ("text_embedding.2.", "condition_embedder.text_embedder.linear_2."),
    ("time_projection.1.", "condition_embedder.time_proj."), ("head.head.", "proj_out."),
]


def _rename(key: str, pairs: list[tuple[str, str]]) -> str:
    for a, b in pairs:
        if a in key:
            return key.replace(a, b, 1)
    return key


def _orig_to_diffusers(key: str) -> str:
    if key == "head.modulation":
        return "scale_shift_table"
    if key.endswith(".modulation"):
        return key[: -len("modulation")] + "scale_shift_table"
    return _rename(key, _RENAMES)


def _diffusers_to_orig(key: str) -> str:
    if key == "scale_shift_table":
        return "head.modulation"
    if key.endswith(".scale_shift_table"):
        return key[: -len("scale_shift_table")] + "modulation"
    return _rename(key, [(b, a) for a, b in _RENAMES])


def to_self_forcing(state: dict[str, torch.Tensor]) -> dict[str, Any]:
    """Inverse of :func:`from_self_forcing`: diffusers keys -> ``{"generator_ema": {"model.<orig key>": ...}}``."""
    return {"generator_ema": {f"model.{_diffusers_to_orig(k)}": v for k, v in state.items()}}


@converter(inverse=to_self_forcing)
def from_self_forcing(ckpt: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The EMA generator (``generator_ema``, else ``generator``) of a Self-Forcing checkpoint, ``model.`` prefix removed,
    original Wan names mapped to ``WanTransformer3DModel``'s (the renames of diffusers' Wan conversion script).
    Half-precision tensors (the public inference code runs the generator in bfloat16; the file's dtype was not
    verified here) are widened to float32, which is lossless, so they load into the factory's float32 model; the
    pipeline's dtype then places them (``bfloat16`` gives back the stored values bit for bit)."""
    sd = ckpt.get("generator_ema") or ckpt.get("generator") or ckpt
    out = {}
    for k, v in sd.items():
        k = k.removeprefix("model.")
        out[_orig_to_diffusers(k)] = v.float() if v.dtype in (torch.bfloat16, torch.float16) else v
    return out


@factory(params=BuildWanTransformerConfig)
def build_wan_transformer(num_layers: Annotated[int, Field(ge=1, le=64)] = 30, num_attention_heads: Annotated[int, Field(ge=1, le=64)] = 12,
                          attention_head_dim: Annotated[int, Field(ge=6, le=256)] = 128, ffn_dim: Annotated[int, Field(ge=8, le=32768)] = 8960,
                          in_channels: Annotated[int, Field(ge=1, le=64)] = 16, text_dim: Annotated[int, Field(ge=8, le=8192)] = 4096,
                          freq_dim: Annotated[int, Field(ge=8, le=1024)] = 256) -> Any:
    """``WanTransformer3DModel`` with Wan2.1-T2V-1.3B's shape by default (patch (1, 2, 2), cross-attn norm, qk RMS norm),
    random weights (a spec loads the converted checkpoint into it)."""
    from diffusers import WanTransformer3DModel

    return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=num_attention_heads, attention_head_dim=attention_head_dim,
                                 in_channels=in_channels, out_channels=in_channels, text_dim=text_dim, freq_dim=freq_dim, ffn_dim=ffn_dim,
                                 num_layers=num_layers, cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6)


def tiny_wan(seed: int = 0) -> Any:
    """A random tiny Wan (2 blocks, 2 heads of 12 channels: 2 temporal + 2 + 2 spatial complex RoPE channels)."""
    torch.manual_seed(seed)
    return build_wan_transformer(num_layers=2, num_attention_heads=2, attention_head_dim=12, ffn_dim=32, in_channels=4, text_dim=16, freq_dim=16).eval()
