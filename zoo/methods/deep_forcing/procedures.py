"""The ``deep-forcing`` sampler: a chunk-wise AR rollout of the toy under one cache policy, and its metrics.

Identity drift of frame ``t`` (note §6): ``|| mean_g mu_t[g] - c ||_RMS`` over the ``C`` channels, where ``mu_t`` is the
model's predicted mean and ``c`` the clip's known palette (the wave sums to zero over the grid). Motion energy:
``mean (mu_t - mu_{t-1})^2`` over tokens and channels (the data's own is ``a^2 (1 - cos w)`` per channel, ~0.3).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import torch

from registry.contract import Procedure, summarize
from registry.limits import Batch, Bound, Frames
from registry.results import ProcedureOutput

from .params import DeepForcingRolloutCli, DeepForcingRolloutParams, PolicyParams  # noqa: F401 - PolicyParams: its old home
from .toy import CHANNELS, CHUNK, GRID, SIGMA, TRAIN_FRAMES, make_clips, rollout

__all__ = ["PolicyParams", "DeepForcingRollout", "RolloutOutput", "identity_drift", "motion_energy"]


@dataclass
class RolloutOutput(ProcedureOutput):
    """``samples`` ``[B, T, G, C]`` (sampled frames; the prompt first), ``means`` (predicted means; the prompt copied),
    ``palette`` ``[B, C]`` (the clips' identity, when drawn here or passed in), ``cache_tokens`` (layer-0 cached tokens
    at each chunk's query call, counted exactly) and ``policy`` (the cache policy's settings)."""

    samples: Any = None
    means: Any = None
    palette: Any = None
    cache_tokens: Any = None
    policy: Any = None


class DeepForcingRollout(Procedure):
    """Chunk-wise AR rollout of the toy (query call -> mean, Gaussian sample, clean context call) under a cache policy."""

    kind = "sampler"
    batch_independent = True

    Params = DeepForcingRolloutParams

    def __call__(self, *, seed: int = 0, prompt: Batch = None, noise: Annotated[Any, Bound("rows"), Bound("frames", axis=1)] = None,
                 palette: Batch = None, num_frames: Frames | None = None, progress: bool = False) -> RolloutOutput:
        p = self.params
        T = int(num_frames or p.num_frames)
        if T % CHUNK or T <= p.prompt_frames:
            raise ValueError(f"num_frames: expected a multiple of {CHUNK} above prompt_frames = {p.prompt_frames}, got {T}")
        g = torch.Generator().manual_seed(seed)
        if prompt is None:
            clips, palette, _ = make_clips(p.batch_size, p.prompt_frames, g)
            prompt = clips
        prompt = torch.as_tensor(prompt, dtype=torch.float32)
        if prompt.shape[1:] != (p.prompt_frames, GRID[0] * GRID[1], CHANNELS):
            raise ValueError(f"prompt: expected shape [B, {p.prompt_frames}, {GRID[0] * GRID[1]}, {CHANNELS}], got {list(prompt.shape)}")
        if noise is None:
            noise = torch.randn((prompt.shape[0], T, GRID[0] * GRID[1], CHANNELS), generator=g)
        model = self.models[p.role]
        caches = model.new_caches(p.policy())
        r = rollout(model, caches, prompt, T, torch.as_tensor(noise, dtype=torch.float32), SIGMA, progress=progress)
        return RolloutOutput(samples=r["frames"].cpu(), means=r["means"].cpu(), palette=palette, cache_tokens=r["cache_tokens"],
                             policy=p.policy().model_dump())

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        g = torch.Generator().manual_seed(11)
        clips, palette, _ = make_clips(batch_size, self.params.prompt_frames, g)
        T = 2 * TRAIN_FRAMES  # past the window: eviction / compression happen
        return {"prompt": clips, "palette": palette, "noise": torch.randn((batch_size, T, GRID[0] * GRID[1], CHANNELS), generator=g), "num_frames": T}

    CliInputs = DeepForcingRolloutCli

    def run_cli(self, inputs: Any, seed: int) -> str:
        """``zoo run deep-forcing --frames 252 --n 8 --out drift.png``: roll ``n`` seeded clips out under this
        sampler's cache policy; print the identity drift (RMS distance of each frame's mean colour from the
        clip's palette) and motion energy over time, and the cache size per chunk."""
        ci = inputs if inputs is not None else self.CliInputs()
        p = self.params
        g = torch.Generator().manual_seed(seed)
        clips, palette, _ = make_clips(ci.n, p.prompt_frames, g)
        out = self(seed=seed, prompt=clips, palette=palette, num_frames=ci.frames)
        drift = identity_drift(out.means, palette).mean(0)
        motion = motion_energy(out.means).mean(0)
        T = drift.shape[0]
        pol = p.policy()
        head = (f"{ci.n} clips x {T} frames ({T / TRAIN_FRAMES:.1f}x the {TRAIN_FRAMES}-frame training clips); cache: window "
                f"{pol.window_frames or 'full'}, sink {pol.sink_frames}, realign {pol.rope_realign}, PC {pol.pc_enabled}")
        marks = sorted({min(T, m) for m in (TRAIN_FRAMES, 2 * TRAIN_FRAMES, T // 2, T)})
        tokens = out.cache_tokens or [0]
        lines = [head, summarize(out),
                 "  identity drift at frame " + ", ".join(f"{m}: {float(drift[m - 1]):.3f}" for m in marks),
                 f"  last {min(T, TRAIN_FRAMES)} frames: drift {float(drift[-TRAIN_FRAMES:].mean()):.3f}, "
                 f"motion energy {float(motion[-TRAIN_FRAMES:].mean()):.3f}",
                 f"  cached tokens per chunk: {min(tokens)} .. {max(tokens)}"]
        if ci.out:
            lines.append(f"  wrote {plot_drift(drift, motion, ci.out, head)}")
        return "\n".join(lines)

    def input_rows(self, inputs: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**inputs, "prompt": inputs["prompt"][i:i + 1], "noise": inputs["noise"][i:i + 1], "palette": inputs["palette"][i:i + 1]}
                for i in range(inputs["prompt"].shape[0])]

    def output_rows(self, outputs: RolloutOutput) -> list[Any]:
        return [{"samples": outputs.samples[i], "means": outputs.means[i], "cache_tokens": outputs.cache_tokens}
                for i in range(outputs.samples.shape[0])]


def plot_drift(drift: torch.Tensor, motion: torch.Tensor, path: str, title: str = "") -> str:
    """PNG: mean identity drift and motion energy per frame, the training-clip length marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2))
    a.plot(range(1, drift.shape[0] + 1), drift.tolist())
    a.set(xlabel="frame", ylabel="identity drift", title="identity drift (mean over clips)")
    b.plot(range(2, motion.shape[0] + 2), motion.tolist(), color="tab:orange")
    b.set(xlabel="frame", ylabel="motion energy", title="motion energy (mean over clips)")
    for ax in (a, b):
        ax.axvline(TRAIN_FRAMES, color="grey", lw=0.8, ls="--")
    if title:
        fig.suptitle(title, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def identity_drift(means: torch.Tensor, palette: torch.Tensor) -> torch.Tensor:
    """``[B, T]``: RMS over channels of ``mean_g mu_t[g] - c``."""
    return ((means.mean(2) - palette.to(means.device)[:, None, :]) ** 2).mean(-1).sqrt()


def motion_energy(means: torch.Tensor) -> torch.Tensor:
    """``[B, T - 1]``: ``mean (mu_t - mu_{t-1})^2`` over tokens and channels."""
    return ((means[:, 1:] - means[:, :-1]) ** 2).mean((-1, -2))
