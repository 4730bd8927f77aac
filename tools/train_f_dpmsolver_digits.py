#!/usr/bin/env python
"""Train the tiny epsilon-prediction UNet of the f-dpmsolver ``digits`` variant on scikit-learn's 8x8 digits.

DDPM objective (Ho et al. 2020, eq. 14): E ||eps - eps_theta(sqrt(ab_t) x0 + sqrt(1 - ab_t) eps, t)||^2 with the
diffusers default linear betas (1e-4 .. 0.02, T = 1000). Writes specs/weights/f-dpmsolver-digits-unet.safetensors
and prints its sha256 (copy it into specs/f-dpmsolver.yaml). Deterministic for a fixed seed on one thread;
``--check`` re-trains into a temporary directory and verifies the shipped file is reproduced byte for byte.

    nice -n 10 python tools/train_f_dpmsolver_digits.py --steps 3000
    nice -n 10 python tools/train_f_dpmsolver_digits.py --check
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.common.digits import digits_images  # noqa: E402
from zoo.common.training import EMA, add_check_argument, ddpm_eps_loss, adamw_one_cycle, check_reproduces, optimizer_step, progress, save_checkpoint, setup_deterministic  # noqa: E402
from zoo.common.digits import build_digits_unet  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="specs/weights/f-dpmsolver-digits-unet.safetensors")
    add_check_argument(ap)
    args = ap.parse_args(argv)
    if args.check:
        return 0 if check_reproduces(lambda d: train(args, d / Path(args.out).name), {"unet": Path(args.out)}) else 1
    train(args, Path(args.out))
    return 0


def train(args: argparse.Namespace, out: Path) -> dict[str, Path]:
    from diffusers import DDPMScheduler

    g = setup_deterministic(args.seed)
    data = digits_images()
    model = build_digits_unet().train()
    print(f"params: {sum(p.numel() for p in model.parameters()):,}")
    ab = DDPMScheduler().alphas_cumprod
    opt, lr_sched = adamw_one_cycle(model.parameters(), args.lr, args.steps, pct_start=0.05, weight_decay=0.0)
    ema = EMA(model, max_decay=0.999)
    for step in (bar := progress(range(args.steps), desc="train", mininterval=0.1)):
        loss = ddpm_eps_loss(model, data, ab, args.batch, g)
        optimizer_step(model, opt, lr_sched, loss, clip=1.0)
        ema.update(model, step)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    save_checkpoint(ema.state_dict(), out)
    return {"unet": out}


if __name__ == "__main__":
    raise SystemExit(main())
