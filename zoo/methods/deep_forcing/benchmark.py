"""Benchmark of ``deep-forcing`` on the toy: every cache policy (Deep Sink + PC, Deep Sink, sink-1, FIFO, the
no-eviction full cache, and Deep Sink without re-alignment) rolled out to 6x and 12x the 21-frame training length
on the same prompts and noise. Reports identity drift and motion energy (last 21 frames, and per frame in the PNG),
the paired Deep Sink vs FIFO test, the cached tokens (exact counts: minimum, maximum, at the end) and the mean
wall time per chunk (query + clean call). Run as ``zoo bench deep-forcing [--quick] [--out-dir D]``."""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch

from registry.contract import benchmark

from .metrics import shared_inputs
from .params import BenchOptions
from .procedures import identity_drift, motion_energy
from .toy import TRAIN_FRAMES

SAMPLERS = ["deep-sink-pc", "deep-sink", "sink-1", "fifo", "full-cache", "deep-sink-no-realign"]
#: paper Table 4 (30 s, VBench-Long Dynamic Degree / Overall Consistency / Imaging Quality), for orientation only
PAPER_TABLE4 = {"fifo": (36.62, 20.50, 68.58), "deep-sink": (48.58, 20.54, 68.54), "deep-sink-pc": (57.56, 20.54, 69.31)}


def measure(ctx: Any, batch: int = 32, seed: int = 0, multiples: tuple[int, ...] = (6, 12)) -> dict[str, Any]:
    """Every policy's rollout statistics on the same clips and noise, and the paired tests (the table's numbers)."""
    t0 = time.perf_counter()
    pipe = ctx.pipeline("toy")
    frames = max(multiples) * TRAIN_FRAMES
    inputs = shared_inputs(batch, frames, seed)
    rows: dict[str, dict[str, Any]] = {}
    curves: dict[str, dict[str, list[float]]] = {}
    per_clip: dict[str, torch.Tensor] = {}
    for name in SAMPLERS:
        proc = pipe.procedures[name]
        s0 = time.perf_counter()
        out = proc(seed=seed, num_frames=frames, **inputs)
        secs = time.perf_counter() - s0
        drift, motion = identity_drift(out.means, inputs["palette"]), motion_energy(out.means)
        chunks = len(out.cache_tokens)
        row: dict[str, Any] = {"cache_tokens_min": min(out.cache_tokens), "cache_tokens_max": max(out.cache_tokens),
                               "cache_tokens_end": out.cache_tokens[-1], "ms_per_chunk": 1000 * secs / chunks}
        for m in multiples:
            T = m * TRAIN_FRAMES
            d = drift[:, T - TRAIN_FRAMES:T].mean(1)
            row[f"drift_{m}x"] = float(d.mean())
            row[f"drift_{m}x_se"] = float(d.std() / math.sqrt(d.numel()))
            row[f"motion_{m}x"] = float(motion[:, T - TRAIN_FRAMES - 1:T - 1].mean())
        row["motion_train_window"] = float(motion[:, 3:TRAIN_FRAMES - 1].mean())
        rows[name] = row
        per_clip[name] = drift[:, frames - TRAIN_FRAMES:].mean(1)
        curves[name] = {"drift": drift.mean(0).tolist(), "motion": motion.mean(0).tolist(), "cache_tokens": list(out.cache_tokens)}
    diff = per_clip["fifo"] - per_clip["deep-sink"]
    se = float(diff.std() / math.sqrt(diff.numel()))
    test = {"fifo_minus_deep_sink": float(diff.mean()), "se": se, "z": float(diff.mean()) / se if se > 0 else math.inf,
            "deep_sink_beats_fifo": bool(float(diff.mean()) > 2.326 * se)}
    pc = per_clip["deep-sink-pc"] - per_clip["deep-sink"]
    test["pc_minus_deep_sink"] = float(pc.mean())
    test["pc_minus_deep_sink_se"] = float(pc.std() / math.sqrt(pc.numel()))
    return {"rows": rows, "curves": curves, "test": test, "paper_table4": PAPER_TABLE4,
            "config": {"batch": batch, "seed": seed, "frames": frames, "multiples": list(multiples), "quick": ctx.quick,
                       "torch_threads": torch.get_num_threads()},
            "seconds": time.perf_counter() - t0}


def table(res: dict[str, Any]) -> str:
    c = res["config"]
    ms = c["multiples"]
    head = (f"deep-forcing toy: {c['batch']} clips, seed {c['seed']}, training length {TRAIN_FRAMES} frames, rollouts to "
            f"{c['frames']} frames (drift / motion over the last 21 frames of each horizon; data motion ~0.07)")
    cols = "".join(f"| drift {m}x (s.e.) | motion {m}x " for m in ms)
    lines = [head, "", f"| policy {cols}| motion ≤21 | cache tokens min / max / end | ms / chunk |",
             "|---" * (2 + 2 * len(ms) + 2) + "|"]
    for name, r in res["rows"].items():
        cells = "".join(f"| {r[f'drift_{m}x']:.3f} ({r[f'drift_{m}x_se']:.3f}) | {r[f'motion_{m}x']:.3f} " for m in ms)
        lines.append(f"| {name} {cells}| {r['motion_train_window']:.3f} | {r['cache_tokens_min']} / {r['cache_tokens_max']} / "
                     f"{r['cache_tokens_end']} | {r['ms_per_chunk']:.1f} |")
    t = res["test"]
    lines += ["", f"Deep Sink vs FIFO drift at {ms[-1]}x (paired over clips): FIFO - DS = {t['fifo_minus_deep_sink']:.3f} "
              f"± {t['se']:.3f} (z = {t['z']:.1f}) -> {'DS beats FIFO' if t['deep_sink_beats_fifo'] else 'NOT shown'} (one-sided, 1%)",
              f"DS+PC - DS drift at {ms[-1]}x: {t['pc_minus_deep_sink']:+.3f} ± {t['pc_minus_deep_sink_se']:.3f} (reported as measured)",
              "", "paper Table 4 (Wan2.1-1.3B Self-Forcing, 30 s, VBench-Long): Dynamic Degree / Overall Consistency / Imaging Quality"]
    for name, v in res["paper_table4"].items():
        lines.append(f"  {name}: {v[0]} / {v[1]} / {v[2]}")
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2))
    for name, cur in res["curves"].items():
        axes[0].plot(cur["drift"], label=name, lw=1.2)
        axes[1].plot(range(1, len(cur["motion"]) + 1), cur["motion"], label=name, lw=1.0)
        chunk_start = [3 + 3 * i for i in range(len(cur["cache_tokens"]))]
        axes[2].plot(chunk_start, cur["cache_tokens"], label=name, lw=1.2)
    for ax, title in zip(axes, ["identity drift ||mean_g mu_t - c|| (RMS)", "motion energy mean (mu_t - mu_{t-1})^2", "cached tokens at each chunk (exact)"]):
        for m in res["config"]["multiples"]:
            ax.axvline(m * TRAIN_FRAMES, color="grey", ls=":", lw=0.8)
        ax.axvline(TRAIN_FRAMES, color="black", ls="--", lw=0.8)
        ax.set_xlabel("frame")
        ax.set_title(title, fontsize=10)
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle("deep-forcing toy: cache policies beyond the 21-frame training length (dashed), 6x and 12x (dotted)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """Deep Forcing toy: every cache policy rolled out to 6x and 12x the training length on the same clips."""
    res = measure(ctx, opts.batch, ctx.seed)
    ctx.report(table(res))
    plot(res, ctx.figure("deep-forcing.png"))
    return res
