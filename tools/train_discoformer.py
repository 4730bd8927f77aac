#!/usr/bin/env python
"""Train the DiScoFormer CPU toys (one model per data dimension) on random Gaussian mixtures with exact targets.

Algorithm 1 of arXiv 2511.05924 at CPU scale (method note section 6): 2 layers x d_model 64 x 4 heads, batches
of 8 fresh random mixtures (1-10 components), 256 context and 128 query points each, loss
0.5 MSE(log-density) + 0.5 MSE(score), AdamW one-cycle, EMA weights. Writes
``specs/weights/discoformer-d{1,2}.safetensors`` and prints each sha256 (paste into ``specs/discoformer.yaml``).
Deterministic on one thread; ``--check`` re-trains into a temporary directory and verifies the shipped files
are reproduced byte for byte.

    nice -n 10 python tools/train_discoformer.py              # both dimensions (~4-5 CPU minutes each)
    nice -n 10 python tools/train_discoformer.py --dims 2
    nice -n 10 python tools/train_discoformer.py --check
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint  # noqa: E402
from zoo.methods.discoformer.training import TrainConfig, train_discoformer  # noqa: E402

#: steps per dimension (chosen so one dimension trains in <= 5 CPU minutes on one thread)
STEPS = {1: 2500, 2: 2500}


def weights_path(dim: int, folder: Path = ROOT / "specs" / "weights") -> Path:
    return folder / f"discoformer-d{dim}.safetensors"


def train(dims: list[int], folder: Path, steps: int | None, seed: int) -> dict[str, Path]:
    out = {}
    for dim in dims:
        t0, c0 = time.perf_counter(), time.process_time()
        state, losses = train_discoformer(TrainConfig(dim=dim, steps=steps or STEPS[dim], seed=seed))
        path = weights_path(dim, folder)
        save_checkpoint(state, path)
        print(f"d={dim}: {len(losses)} steps, final loss (mean of last 100) {sum(losses[-100:]) / len(losses[-100:]):.4f}, "
              f"{time.process_time() - c0:.0f} CPU s, {time.perf_counter() - t0:.0f} wall s")
        out[f"d{dim}"] = path
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dims", type=int, nargs="+", default=[1, 2], choices=[1, 2, 3, 4, 5])
    ap.add_argument("--steps", type=int, default=None, help="override the per-dimension step count (the shipped files use the defaults)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default=str(ROOT / "specs" / "weights"))
    add_check_argument(ap)
    a = ap.parse_args(argv)
    if a.check:
        shipped = {f"d{d}": weights_path(d, Path(a.out_dir)) for d in a.dims}
        return 0 if check_reproduces(lambda tmp: train(a.dims, tmp, a.steps, a.seed), shipped) else 1
    train(a.dims, Path(a.out_dir), a.steps, a.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
