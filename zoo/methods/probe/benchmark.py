"""Benchmark of ``probe``: balanced accuracy on the held-out generators of the shipped detector and of the
stage-2 detectors of PROBE (buffer, λ = 10), the no-buffer baseline (same stage-2 budget), the λ = 0 ablation and
the detector-blind ablation, over several seeds with the spread, plus the paired per-seed differences that carry
the paper's claim (the buffer improves generalisation). Writes ``probe.png`` (the boundary buffer of seed 0).
Run as ``python tools/bench_probe.py`` or ``zoo bench probe [--quick]``."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark
from zoo.common.bench_output import parse_with_quick, write_outputs

from .core import SEEN, UNSEEN
from .procedures import DetectorEval, ProbeRecipe
from .report import format_bench, plot_buffer

#: arm (the spec's recipe of the same name) -> ProbeRecipe params
ARMS: dict[str, dict[str, Any]] = {
    "probe": {"lambda_prec": 10.0},
    "probe-no-buffer": {"use_buffer": False, "stage1_steps": 0},
    "probe-lambda0": {"lambda_prec": 0.0},
    "probe-no-critic": {"critic": False},
}


def run(seeds: list[int], n_eval: int = 360, stage1_steps: int = 100, stage2_steps: int = 300, arms: list[str] | None = None,
        stage2_lr: float | None = None) -> dict[str, Any]:
    import zoo

    t0 = time.perf_counter()
    models = zoo.load("probe", variant="toy", device="cpu").models  # the spec's roles: shipped weights, sha256-verified
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
            out = proc(seed=s, progress=True)
            runs.append({k: out[k] for k in ("before", "after", "seen", "unseen_mean", "gain", "buffer_fake_prob", "buffer_steps")})
            if s == seeds[0] and "buffer_seed0" not in res and out["buffer_steps"]:
                res["buffer_seed0"] = {"buffer": out["buffer"], "buffer_steps": out["buffer_steps"],
                                       "buffer_fake_prob": out["buffer_fake_prob"], "config": out["config"]}
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


@benchmark
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="bench_probe")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default 0 1 2)")
    ap.add_argument("--n-eval", type=int, default=360, help="real test digits and fakes per generator (≤ 360)")
    ap.add_argument("--stage1-steps", type=int, default=100)
    ap.add_argument("--stage2-steps", type=int, default=300)
    ap.add_argument("--stage2-lr", type=float, default=None, help="stage-2 learning rate for every arm (default: the spec's)")
    ap.add_argument("--arms", nargs="+", choices=list(ARMS), default=None, metavar="ARM", help=f"subset of arms (default all: {'; '.join(ARMS)})")
    ap.add_argument("--json", metavar="PATH", help="write every number as JSON (the buffer tensor as a list)")
    ap.add_argument("--out-dir", default=".", help="folder for probe.png")
    a = parse_with_quick(ap, argv, {"seeds": [0, 1], "n_eval": 120, "stage1_steps": 20, "stage2_steps": 60},
                         "2 seeds, 120 evaluation digits, 20 stage-1 and 60 stage-2 steps (a smoke run, not the reported numbers)")
    res = run(a.seeds, a.n_eval, a.stage1_steps, a.stage2_steps, a.arms, a.stage2_lr)
    write_outputs(res, table(res), plot, a.out_dir, "probe.png", a.json)
    return 0
