"""A first-GPU probe of the Deep Forcing Wan path (issue 38 item 4): a few-chunk Self-Forcing rollout through the
Deep Forcing cache on a **random-weight** ``WanTransformer3DModel`` of Wan2.1-T2V-1.3B's shape (the spec's
``transformer`` role: :func:`~.wan.build_wan_transformer`'s defaults, 30 blocks, 12 heads of 128, FFN 8960, text
4096, patch (1, 2, 2)) at 480x832 (latent 16 x 60 x 104, 1560 tokens per latent frame; UMT5's 512 text tokens),
reporting

* the peak CUDA memory of the bfloat16 transformer rollout (weights + activations + KV cache; not the UMT5 text
  encoder or the VAE, which the pipeline runs before / after it), against the spec's ``min_memory_gb: 24``;
* the bfloat16-vs-float32 drift of the clean latents per chunk (relative L2, same noise, same weights), with the
  RoPE rotation in float32 (:meth:`~.policy.Rope3D._rotate`, since issue 38) and with the earlier cast-first
  rotation (:func:`rotate_cast_first`: cos/sin cast to bfloat16 before the products), so the run says how much of
  the drift the rotation's rounding was.

The model is cast with ``.to(dtype)`` as a whole, as ``zoo.load`` does for the role's ``dtype: bfloat16`` (so
diffusers' ``_keep_in_fp32_modules`` — norms, time embedder, modulation tables — run in bfloat16 too; diffusers
warns about it). Random weights say nothing about video quality; the numbers are memory and numerics only. Without CUDA the probe
prints one ``SKIP`` line and exits 0. ``--tiny`` runs the same code on the tiny Wan of the tests at a few tokens (a
CPU dry run). Usage::

    python -m zoo.methods.deep_forcing.device_probe --device cuda            # 8 chunks (24 latent frames, the cache fills)
    python -m zoo.methods.deep_forcing.device_probe --device cpu --tiny      # CPU dry run
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from typing import Any, Iterator

import torch

from .policy import Rope3D
from .wan import build_wan_transformer, install_deep_forcing, self_forcing_rollout, tiny_wan

__all__ = ["rotate_cast_first", "cast_first_rope", "probe", "main"]

FULL = {"latent_chw": (16, 60, 104), "text_tokens": 512, "text_dim": 4096}  # 480x832 / VAE 8x; UMT5-XXL output
TINY = {"latent_chw": (4, 4, 4), "text_tokens": 8, "text_dim": 16}  # tiny_wan: in_channels 4, text_dim 16


def rotate_cast_first(x: torch.Tensor, ang: torch.Tensor) -> torch.Tensor:
    """The rotation as it was before issue 38: cos/sin cast to ``x.dtype`` first, products and sum in ``x.dtype``."""
    cos, sin = ang.cos().to(x.device, x.dtype), ang.sin().to(x.device, x.dtype)
    a, b = x[..., 0], x[..., 1]
    return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1)


@contextlib.contextmanager
def cast_first_rope() -> Iterator[None]:
    """Run with :func:`rotate_cast_first` as :class:`~.policy.Rope3D`'s rotation (restored on exit)."""
    saved = Rope3D.__dict__["_rotate"]
    Rope3D._rotate = staticmethod(rotate_cast_first)
    try:
        yield
    finally:
        Rope3D._rotate = saved


def _build(tiny: bool, seed: int) -> Any:
    if tiny:
        return tiny_wan(seed)
    torch.manual_seed(seed)
    return build_wan_transformer().eval()


def _rollout(model: Any, text: torch.Tensor, chunks: int, latent_chw: tuple[int, int, int], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return self_forcing_rollout(model, text, 3 * chunks, latent_chw, chunk=3, generator=g)


def _drift(x: torch.Tensor, ref: torch.Tensor) -> list[float]:
    """Relative L2 per chunk of 3 latent frames."""
    out = []
    for j in range(0, ref.shape[2], 3):
        a, b = x[:, :, j : j + 3].double(), ref[:, :, j : j + 3].double()
        out.append(float((a - b).norm() / b.norm().clamp_min(1e-30)))
    return out


def probe(device: str = "cuda", tiny: bool = False, chunks: int = 8, seed: int = 0) -> dict[str, Any]:
    """Run the probe; returns the report (see the module docstring)."""
    shape = TINY if tiny else FULL
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    t0 = time.perf_counter()
    model = install_deep_forcing(_build(tiny, seed))  # the paper's policy: M 21, S 10, N 16, R 4, chunk 3
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    text32 = torch.randn(1, shape["text_tokens"], shape["text_dim"], generator=torch.Generator().manual_seed(seed + 1))
    report: dict[str, Any] = {"device": str(dev), "tiny": tiny, "chunks": chunks, "latent_frames": 3 * chunks,
                              "latent_chw": list(shape["latent_chw"]), "params": sum(v.numel() for v in state.values())}
    model = model.to(dev, torch.float32)
    ref = _rollout(model, text32.to(dev), chunks, shape["latent_chw"], seed).cpu()
    report["cache_tokens_fp32"] = model.deep_forcing.tokens
    del model
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    model = install_deep_forcing(_build(tiny, seed))
    model.load_state_dict(state)
    model = model.to(dev, torch.bfloat16)
    text16 = text32.to(dev, torch.bfloat16)
    out = _rollout(model, text16, chunks, shape["latent_chw"], seed).cpu()
    if cuda:
        torch.cuda.synchronize()
        report["peak_memory_gib_bf16"] = torch.cuda.max_memory_allocated(dev) / 2**30
        report["peak_reserved_gib_bf16"] = torch.cuda.max_memory_reserved(dev) / 2**30
    report["cache_tokens_bf16"] = model.deep_forcing.tokens
    with cast_first_rope():
        old = _rollout(model, text16, chunks, shape["latent_chw"], seed).cpu()
    report["drift_bf16_vs_fp32"] = _drift(out, ref)
    report["drift_bf16_cast_first_rope_vs_fp32"] = _drift(old, ref)
    report["finite"] = bool(torch.isfinite(out).all() and torch.isfinite(ref).all())
    report["seconds"] = time.perf_counter() - t0
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m zoo.methods.deep_forcing.device_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true", help="the tests' tiny Wan at a 4x4 latent (a CPU dry run)")
    ap.add_argument("--chunks", type=int, default=8, help="chunks of 3 latent frames (8 = 24 frames: the 21-frame cache fills)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="FILE", help="also write the report as JSON here")
    a = ap.parse_args(argv)
    if not 1 <= a.chunks <= 64:
        ap.error("--chunks: expected 1..64")
    if torch.device(a.device).type == "cuda" and not torch.cuda.is_available():
        print("SKIP deep-forcing device probe: CUDA is not available")
        return 0
    rep = probe(a.device, a.tiny, a.chunks, a.seed)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rep, fh, indent=1)
    size = "tiny" if a.tiny else "480x832"
    mem = f", peak CUDA memory (bf16 transformer) {rep['peak_memory_gib_bf16']:.2f} GiB (reserved {rep['peak_reserved_gib_bf16']:.2f})" if "peak_memory_gib_bf16" in rep else ""
    print(f"deep-forcing device probe: {size}, {rep['params'] / 1e6:.1f}M params (random weights), {a.chunks} chunks on {rep['device']}{mem}, "
          f"cache {rep['cache_tokens_bf16']} tokens, {rep['seconds']:.1f} s")
    fmt = lambda v: " ".join(f"{x:.2e}" for x in v)  # noqa: E731
    print(f"  bf16 vs fp32 clean-latent drift per chunk (rel. L2), fp32 RoPE:       {fmt(rep['drift_bf16_vs_fp32'])}")
    print(f"  bf16 vs fp32 clean-latent drift per chunk (rel. L2), cast-first RoPE: {fmt(rep['drift_bf16_cast_first_rope_vs_fp32'])}")
    if not rep["finite"]:
        print("  NON-FINITE latents")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
