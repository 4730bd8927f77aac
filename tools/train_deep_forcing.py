#!/usr/bin/env python
"""Train the deep-forcing toy: a tiny causal chunk transformer with 3-D RoPE on 21-frame synthetic clips.

Teacher-forced next-chunk prediction (``zoo.methods.deep_forcing.toy``): every step draws a fresh batch of clips
(palette ``c``, rotating wave, noise sigma = 0.2) from one seeded generator, runs the parallel masked pass and
minimises the MSE between the predicted means of chunks 1..6 and the clips' noise-free frames (the same
minimiser as the MSE to the noisy frames, at lower variance). AdamW + one-cycle, gradient clipping 1.0
(``zoo/common/training.py``). Writes ``specs/weights/deep-forcing-toy.safetensors`` and prints its sha256
(paste into specs/deep-forcing.yaml). Byte-for-byte deterministic on one thread; ``--check`` re-trains into a
temporary folder and compares.

    nice -n 10 python tools/train_deep_forcing.py            # ~2 min on one idle thread
    nice -n 10 python tools/train_deep_forcing.py --check
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

import torch  # noqa: E402

from zoo.common.training import adamw_one_cycle, add_check_argument, check_reproduces, optimizer_step, progress, save_checkpoint, setup_deterministic  # noqa: E402
from zoo.methods.deep_forcing.toy import CHUNK, TRAIN_FRAMES, build_toy_video, make_clips  # noqa: E402

NAME = "deep-forcing-toy.safetensors"


@torch.no_grad()
def heldout_mse(model: torch.nn.Module, n: int = 256, seed: int = 12345) -> float:
    clips, _, clean = make_clips(n, TRAIN_FRAMES, torch.Generator().manual_seed(seed))
    return float(((model(clips) - clean)[:, CHUNK:] ** 2).mean())


def train(args: argparse.Namespace, out_dir: Path) -> dict[str, Path]:
    gen = setup_deterministic(args.seed)
    model = build_toy_video()
    opt, sched = adamw_one_cycle(model.parameters(), args.lr, args.steps, weight_decay=0.01)
    bar = progress(range(args.steps), desc="train deep-forcing toy")
    for step in bar:
        clips, _, clean = make_clips(args.batch, TRAIN_FRAMES, gen)
        loss = ((model(clips) - clean)[:, CHUNK:] ** 2).mean()
        optimizer_step(model, opt, sched, loss)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    model.eval()
    print(f"held-out MSE of chunk means (vs noise-free frames): {heldout_mse(model):.4f} (noise variance {0.2 ** 2:.4f})")
    path = out_dir / NAME
    save_checkpoint(model, path)
    return {NAME: path}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
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
