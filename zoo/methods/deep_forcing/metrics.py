"""Metric checks for ``specs/deep-forcing.yaml``: ``fn(pipeline, **check_params) -> float``, memoised per pipeline;
the numbers ``zoo bench deep-forcing`` prints (same seed, clips and noise for every policy: paired comparisons)."""
from __future__ import annotations

import math
from typing import Any

import torch

from registry.contract import metric_check

from .params import DriftAtParams, DsBeatsFifoParams, MotionAtParams
from .procedures import identity_drift, motion_energy
from .toy import CHANNELS, GRID, TRAIN_FRAMES, make_clips

__all__ = ["policy_rollout", "drift_at", "motion_at", "ds_beats_fifo"]


def shared_inputs(batch: int, frames: int, seed: int, prompt_frames: int = 3) -> dict[str, torch.Tensor]:
    """The prompt clips, palette and sampling noise every policy sees (seeded)."""
    g = torch.Generator().manual_seed(seed)
    clips, palette, _ = make_clips(batch, prompt_frames, g)
    noise = torch.randn((batch, frames, GRID[0] * GRID[1], CHANNELS), generator=g)
    return {"prompt": clips, "palette": palette, "noise": noise}


def policy_rollout(pipeline: Any, sampler: str, frames: int = 12 * TRAIN_FRAMES, batch: int = 32, seed: int = 0) -> dict[str, torch.Tensor]:
    """Per-clip identity drift ``[B, T]`` and motion energy ``[B, T-1]`` of one sampler's rollout (memoised)."""
    def run() -> dict[str, torch.Tensor]:
        inputs = shared_inputs(batch, frames, seed)
        out = pipeline.procedures[sampler](seed=seed, num_frames=frames, **inputs)
        return {"drift": identity_drift(out.means, inputs["palette"]), "motion": motion_energy(out.means),
                "cache_tokens": torch.tensor(out.cache_tokens)}

    return pipeline.memo(("deep-forcing", sampler, frames, batch, seed), run)


def _last_window(x: torch.Tensor) -> torch.Tensor:
    """Per-clip mean over the last 21 frames (the final training-length window)."""
    return x[:, -TRAIN_FRAMES:].mean(1)


@metric_check(params=DriftAtParams)
def drift_at(pipeline: Any, sampler: str, frames: int = 252, batch: int = 32) -> float:
    """Identity drift averaged over clips and the last 21 frames of a ``frames``-frame rollout."""
    return float(_last_window(policy_rollout(pipeline, sampler, frames, batch)["drift"]).mean())


@metric_check(params=MotionAtParams)
def motion_at(pipeline: Any, sampler: str, frames: int = 252, batch: int = 32) -> float:
    """Motion energy averaged over clips and the last 21 frame differences of a ``frames``-frame rollout."""
    return float(_last_window(policy_rollout(pipeline, sampler, frames, batch)["motion"]).mean())


def paired(pipeline: Any, a: str, b: str, frames: int, batch: int) -> tuple[float, float]:
    """Mean and standard error of the per-clip difference ``drift_b - drift_a`` (last 21 frames; same clips and noise)."""
    d = _last_window(policy_rollout(pipeline, b, frames, batch)["drift"]) - _last_window(policy_rollout(pipeline, a, frames, batch)["drift"])
    return float(d.mean()), float(d.std() / math.sqrt(d.numel()))


@metric_check(params=DsBeatsFifoParams)
def ds_beats_fifo(pipeline: Any, frames: int = 252, batch: int = 32, sink: str = "deep-sink", fifo: str = "fifo") -> float:
    """1.0 iff Deep Sink's identity drift at ``frames`` is below FIFO's by more than 2.326 paired standard errors
    (one-sided; a 1% false-pass rate if the two policies drifted equally), else 0.0."""
    mean, se = paired(pipeline, sink, fifo, frames, batch)
    return 1.0 if mean > 2.326 * se else 0.0
