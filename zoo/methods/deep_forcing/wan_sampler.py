"""The ``full`` pipeline: text -> UMT5 -> Self-Forcing's few-step chunk loop with a Deep Forcing KV cache -> Wan VAE.

Roles (spec ``deep-forcing``, variant ``full``): ``tokenizer`` (the UMT5 tokenizer), ``text_encoder``
(transformers ``UMT5EncoderModel``), ``transformer`` (diffusers ``WanTransformer3DModel`` with the Self-Forcing
EMA generator and :func:`~.wan.install_deep_forcing`) and ``vae`` (diffusers ``AutoencoderKLWan``).

- Text (:func:`encode_prompts`): tokens padded to ``max_sequence_length`` (512, Wan's ``text_len``), the encoder's
  last hidden state with the padding positions set to zero, as diffusers' ``WanPipeline._get_t5_prompt_embeds``
  and Self-Forcing's ``WanTextEncoder`` do. The DMD-distilled generator runs without classifier-free guidance.
- Video (:func:`~.wan.self_forcing_rollout`): chunks of 3 latent frames, 4 steps ``{1000, 750, 500, 250}``
  warped by ``shift = 5``, the clean re-run at ``t = 0``; the KV cache follows the sampler's policy (Deep Sink,
  Participative Compression, FIFO, ...), set on the transformer's processors at each call.
- Pixels (:func:`decode_latents`): ``z / (1 / std) + mean`` with the VAE config's ``latents_mean`` /
  ``latents_std`` (diffusers' ``WanPipeline``), ``AutoencoderKLWan.decode``, clamped to ``[-1, 1]``.

Paper: Yi et al., Deep Forcing, arXiv 2512.05081 (https://github.com/cvlab-kaist/DeepForcing); base model:
Self-Forcing, Huang et al., arXiv 2506.08009 (https://github.com/guandeh17/Self-Forcing).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import torch

from registry.contract import Procedure
from registry.limits import Bound, Frames
from registry.results import ProcedureOutput

from .params import EXAMPLE_PROMPT, WanDeepForcingSamplerCli, WanDeepForcingSamplerParams
from .wan import install_deep_forcing, self_forcing_rollout

__all__ = ["WanDeepForcingSampler", "VideoOutput", "encode_prompts", "decode_latents", "latent_shape", "save_contact_sheet"]


@dataclass
class VideoOutput(ProcedureOutput):
    """``videos`` ``[B, T, 3, H, W]`` float32 in ``[-1, 1]`` (decoded frames, ``T = 1 + s_t (f - 1)`` for ``f``
    latent frames and the VAE's temporal factor ``s_t``), ``latents`` ``[B, C, f, h, w]`` float32 (the generator's
    clean latents, before the VAE's de-normalisation), ``prompts``, ``cache_tokens`` (first block's cached tokens
    after each chunk's first call, counted exactly) and ``policy`` (the cache policy's settings)."""

    videos: Any = None
    latents: Any = None
    prompts: Any = None
    cache_tokens: Any = None
    policy: Any = None

    @property
    def frames(self) -> Any:
        """``videos`` as uint8 NumPy ``[B, T, H, W, 3]`` (for ``imageio`` / ``torchvision.io.write_video``)."""
        return ((self.videos / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 1, 3, 4, 2).cpu().numpy()


def _device(module: Any) -> torch.device:
    return next(module.parameters()).device


@torch.no_grad()
def encode_prompts(tokenizer: Any, text_encoder: Any, prompts: Sequence[str], max_length: int = 512) -> torch.Tensor:
    """``[B, max_length, d]`` UMT5 embeddings, padding positions zero (diffusers ``WanPipeline._get_t5_prompt_embeds``);
    whitespace runs collapsed first (Self-Forcing's tokenizer ``clean="whitespace"``; diffusers' ftfy pass is not done)."""
    tok = tokenizer([" ".join(p.split()) for p in prompts], padding="max_length", max_length=max_length, truncation=True, add_special_tokens=True,
                    return_attention_mask=True, return_tensors="pt")
    dev = _device(text_encoder)
    ids, mask = tok["input_ids"].to(dev), tok["attention_mask"].to(dev)
    h = text_encoder(input_ids=ids, attention_mask=mask).last_hidden_state
    return h * mask[..., None].to(h.dtype)


def latent_shape(vae: Any, transformer: Any, height: int, width: int) -> tuple[int, int, int]:
    """``(C, h, w)`` of the latents for a ``height x width`` video; both must be multiples of the VAE's spatial
    factor times the transformer's spatial patch (Wan2.1: 8 x 2 = 16)."""
    s = int(vae.config.scale_factor_spatial)
    p = transformer.config.patch_size
    for name, size, patch in (("height", height, p[1]), ("width", width, p[2])):
        if size % (s * patch):
            raise ValueError(f"{name}: expected a multiple of {s * patch} (VAE factor {s} x patch {patch}), got {size}")
    return int(transformer.config.in_channels), height // s, width // s


@torch.no_grad()
def decode_latents(vae: Any, latents: torch.Tensor) -> torch.Tensor:
    """``[B, T, 3, H, W]`` float32 in ``[-1, 1]`` from clean latents ``[B, C, f, h, w]`` (diffusers' ``WanPipeline``
    de-normalisation ``z / (1 / std) + mean``, then ``AutoencoderKLWan.decode``)."""
    cfg, dev, dt = vae.config, _device(vae), vae.dtype
    shape = (1, int(cfg.z_dim), 1, 1, 1)
    mean = torch.tensor(cfg.latents_mean, dtype=torch.float32).view(shape)
    std = torch.tensor(cfg.latents_std, dtype=torch.float32).view(shape)
    z = latents.float().cpu() * std + mean
    video = vae.decode(z.to(dev, dt), return_dict=False)[0]  # [B, 3, T, H, W]
    return video.float().clamp(-1, 1).permute(0, 2, 1, 3, 4).cpu()


class WanDeepForcingSampler(Procedure):
    """Text-to-video with Wan2.1-T2V-1.3B + the Self-Forcing generator under one KV-cache policy (the ``wan-*``
    samplers: Deep Sink + PC, Deep Sink, FIFO = Self-Forcing, ...). ``prompt`` is a string or a list (one video each)."""

    kind = "sampler"
    batch_independent = False  # cross-attention over padded text and one shared noise stream per call

    Params = WanDeepForcingSamplerParams

    def __call__(self, *, seed: int = 0, prompt: Annotated[str | Sequence[str], Bound("rows"), Bound("length", "longest")] = EXAMPLE_PROMPT,
                 num_frames: Frames | None = None) -> VideoOutput:
        p = self.params
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        if not prompts or not all(isinstance(x, str) for x in prompts):
            raise ValueError("prompt: expected a string or a non-empty list of strings")
        T = int(num_frames or p.num_frames)
        if T % p.chunk_frames:
            raise ValueError(f"num_frames: expected a multiple of chunk_frames = {p.chunk_frames}, got {T}")
        tr, vae = self.models["transformer"], self.models["vae"]
        chw = latent_shape(vae, tr, p.height, p.width)
        text = encode_prompts(self.models["tokenizer"], self.models["text_encoder"], prompts, p.max_sequence_length)
        text = text.to(_device(tr), tr.dtype)
        # the policy is this sampler's: (re)install the processors with it (cheap; no weights change)
        install_deep_forcing(tr, chunk_frames=p.chunk_frames, **p.policy_kwargs())
        tokens: list[int] = []
        g = torch.Generator().manual_seed(seed)
        latents = self_forcing_rollout(tr, text, T, chw, steps=p.steps, shift=p.shift, chunk=p.chunk_frames, generator=g,
                                       cache_tokens=tokens, progress=p.progress)
        return VideoOutput(videos=decode_latents(vae, latents), latents=latents.cpu(), prompts=prompts, cache_tokens=tokens,
                           policy={**p.policy_kwargs(), "chunk_frames": p.chunk_frames})

    CliInputs = WanDeepForcingSamplerCli

    def run_cli(self, inputs: Any, seed: int) -> str:
        inputs = inputs if inputs is not None else self.CliInputs()
        out = self.with_params(progress=True)(seed=seed, prompt=inputs.prompt, num_frames=inputs.num_frames)
        path = save_contact_sheet(out.videos[0], inputs.out)
        return (f"{out.videos.shape[1]} frames of {out.videos.shape[3]}x{out.videos.shape[4]} "
                f"(latent frames {out.latents.shape[2]}); cached tokens max {max(out.cache_tokens)}; wrote {path} "
                f"(8 frames; VideoOutput.frames gives uint8 [B, T, H, W, 3] for a video writer)")

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        words = ["a red fox in the snow", "a city street at night in the rain", "waves on a beach at sunset"]
        return {"prompt": [words[i % len(words)] for i in range(batch_size)], "num_frames": 2 * self.params.chunk_frames}


def save_contact_sheet(video: torch.Tensor, path: str, n: int = 8) -> str:
    """``n`` evenly spaced frames of one video ``[T, 3, H, W]`` in ``[-1, 1]`` side by side, as a PNG."""
    from PIL import Image

    idx = torch.linspace(0, video.shape[0] - 1, min(n, video.shape[0])).round().long()
    strip = torch.cat(list(video[idx]), dim=-1)  # [3, H, n W]
    arr = ((strip / 2 + 0.5).clamp(0, 1) * 255).round().to(torch.uint8).permute(1, 2, 0).cpu().numpy()
    Image.fromarray(arr).save(path)
    return str(path)
