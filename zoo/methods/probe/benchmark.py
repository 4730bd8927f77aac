"""Benchmark of ``probe``: balanced accuracy on the held-out generators of the shipped detector and of the
stage-2 detectors of PROBE (buffer, λ = 10), the no-buffer baseline (same stage-2 budget), the λ = 0 ablation and
the detector-blind ablation, over several seeds with the spread, plus the paired per-seed differences that carry
the paper's claim (the buffer improves generalisation), and the boundary-band buffer arm (``probe-band``: only the
samples the frozen detector scores in [0.3, 0.7]). Writes ``probe.png`` (the boundary buffer of seed 0).
Run as ``zoo bench probe [--quick] [--out-dir D]``."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark

from .core import SEEN, UNSEEN
from .params import BenchOptions
from .procedures import DetectorEval, ProbeRecipe
from .report import format_bench, plot_buffer

#: arm (the spec's recipe of the same name) -> ProbeRecipe params
ARMS: dict[str, dict[str, Any]] = {
    "probe": {"lambda_prec": 10.0},
    "probe-no-buffer": {"use_buffer": False, "stage1_steps": 0},
    "probe-lambda0": {"lambda_prec": 0.0},
    "probe-no-critic": {"critic": False},
    # issue 39: only boundary samples (frozen-detector P(fake) in [0.3, 0.7]), per sample, from a 128-sample snapshot
    # every stage-1 step, until the buffer holds 320 (the size of the probe arm's buffer)
    "probe-band": {"lambda_prec": 10.0, "buffer_band": (0.3, 0.7), "buffer_size": 320, "buffer_every": 1, "buffer_batch": 128},
    # control for probe-band: the same band selection with the LoRA all but frozen (lr 1e-9): the unadapted generator's
    # own hard fakes (hard-negative mining); is it the steering or only the band?
    "probe-band-unsteered": {"lambda_prec": 10.0, "lr": 1e-9, "buffer_band": (0.3, 0.7), "buffer_size": 320, "buffer_every": 1, "buffer_batch": 128},
}


def measure(ctx: Any, seeds: list[int], n_eval: int = 360, stage1_steps: int = 100, stage2_steps: int = 300,
            arms: list[str] | None = None, stage2_lr: float | None = None) -> dict[str, Any]:
    """The shipped detector's bAcc and every arm's stage-2 results per seed (the table's numbers)."""
    t0 = time.perf_counter()
    models = ctx.models("toy")  # the spec's roles: shipped weights, sha256-verified
    shipped = DetectorEval(models, DetectorEval.Params(n_eval=n_eval))(seed=0)
    res: dict[str, Any] = {"seeds": seeds, "n_eval": n_eval, "stage1_steps": stage1_steps, "stage2_steps": stage2_steps, "stage2_lr": stage2_lr,
                           "shipped": shipped["bacc"], "shipped_unseen_mean": shipped["unseen_mean"], "arms": {}}
    for arm in arms or list(ARMS):
        kw = {"stage1_steps": stage1_steps, "stage2_steps": stage2_steps, "n_eval": n_eval, **ARMS[arm]}
        kw["stage1_steps"] = min(kw["stage1_steps"], stage1_steps)
        if stage2_lr is not None:
            kw["stage2_lr"] = stage2_lr
        proc = ProbeRecipe(models, ProbeRecipe.Params(**kw))
        runs = []
        for s in seeds:
            t1 = time.perf_counter()
            out = proc(seed=s, progress=True)
            runs.append({**{k: out[k] for k in ("before", "after", "seen", "unseen_mean", "gain", "buffer_fake_prob", "buffer_steps", "buffer_kept",
                                                "buffer_size", "buffer_mean_fake_prob")}, "seconds": time.perf_counter() - t1})
            if s == seeds[0] and "buffer_seed0" not in res and out["buffer_steps"]:
                res["buffer_seed0"] = {k: out[k] for k in ("buffer", "buffer_steps", "buffer_fake_prob", "buffer_kept", "buffer_sample_fake_prob",
                                                           "config")}
        res["arms"][arm] = runs
    names = list(res["arms"])
    if "probe-no-buffer" in res["arms"]:
        ref = [r["unseen_mean"]["after"] for r in res["arms"]["probe-no-buffer"]]
        res["paired"] = {f"{a} − probe-no-buffer": [r["unseen_mean"]["after"] - b for r, b in zip(res["arms"][a], ref)]
                         for a in names if a != "probe-no-buffer"}
    res["seconds"] = time.perf_counter() - t0
    return res


def plot(res: dict[str, Any], path: Path) -> Path:
    import torch

    empty = {"buffer": torch.empty(0, 1, 8, 8), "buffer_steps": [], "buffer_fake_prob": [], "config": {}}
    return plot_buffer(res.get("buffer_seed0", empty), path)


def table(res: dict[str, Any]) -> str:
    return (f"## PROBE on digits: bAcc on the seen ({SEEN}) and {len(UNSEEN)} held-out generators\n\n" + format_bench(res))


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """PROBE on digits: bAcc of every arm on the seen and held-out generators, over seeds, with the paired differences
    (--quick: a smoke run, not the reported numbers)."""
    res = measure(ctx, opts.seeds, opts.n_eval, opts.stage1_steps, opts.stage2_steps, opts.arms, opts.stage2_lr)
    ctx.report(table(res))
    plot(res, ctx.figure("probe.png"))
    return res
