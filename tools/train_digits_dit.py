#!/usr/bin/env python
"""Train the shared class-conditional tiny DiT on scikit-learn's 8x8 digits (train split).

DDPM epsilon objective (Ho et al. 2020, arXiv 2006.11239, eq. 14) with the diffusers default linear betas
(1e-4 .. 0.02, T = 1000); class labels through DiT's adaLN-Zero label embedding, which drops labels to the
null class with probability 0.1 in training mode (classifier-free guidance training, Ho & Salimans,
arXiv 2207.12598). AdamW + one-cycle, gradient clipping at 1, EMA 0.999. Writes
specs/weights/digits-dit.safetensors and prints its sha256 (paste into zoo/common/digits.py
DIGITS_DIT_SHA256). Byte-for-byte deterministic on one thread; ``--check`` verifies that.

    nice -n 10 python tools/train_digits_dit.py            # ~3 min on one thread
    nice -n 10 python tools/train_digits_dit.py --check    # re-train to a temp dir, compare sha256
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

from zoo.common.digits import build_digits_dit, digits_split  # noqa: E402
from zoo.common.training import EMA, add_check_argument, ddpm_eps_loss, adamw_one_cycle, check_reproduces, optimizer_step, progress, save_checkpoint, setup_deterministic  # noqa: E402

NAME = "digits-dit.safetensors"


def train(args: argparse.Namespace, out_dir: Path) -> dict[str, Path]:
    from diffusers import DDPMScheduler

    g = setup_deterministic(args.seed)
    s = digits_split()
    model = build_digits_dit().train()
    ab = DDPMScheduler().alphas_cumprod
    opt, sched = adamw_one_cycle(model.parameters(), args.lr, args.steps, pct_start=0.05)
    ema = EMA(model, 0.999)
    for step in (bar := progress(range(args.steps), desc="digits-dit")):
        loss = ddpm_eps_loss(model, s.x_train, ab, args.batch, g, labels=s.y_train)
        optimizer_step(model, opt, sched, loss, clip=1.0)
        ema.update(model, step)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    path = out_dir / NAME
    save_checkpoint(ema.state_dict(), path)
    return {NAME: path}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "specs" / "weights")
    add_check_argument(ap)
    args = ap.parse_args(argv)
    t0 = time.time()
    if args.check:
        ok = check_reproduces(lambda d: train(args, d), {NAME: args.out_dir / NAME})
        print(f"{time.time() - t0:.1f}s")
        return 0 if ok else 1
    train(args, args.out_dir)
    print(f"{time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
