"""Train the ``toy-equal`` proposal of PoE-Bridge: a bidirectional Qwen2 mask predictor of exactly the AR
target's width and depth (``zoo.methods.poe_bridge.toy:build_dlm_qwen2``), on the step-by-step addition
task of ``zoo.common.toy_text``. The AR target of ``toy-equal`` is the ``toy`` variant's shipped Qwen2
(``specs/weights/poe-bridge-ar.safetensors``), so both models cost the same per forward.

Objective: MDLM/LLaDA (Sahoo et al. 2024, arXiv 2406.07524; Nie et al. 2025, arXiv 2502.09992): each
answer token (answer, EOS, EOS padding to 40 tokens) is masked with probability t ~ U(eps, 1), the
cross-entropy on masked positions is weighted by 1/t (the loop: ``zoo.methods.poe_bridge.training.train_dlm_qwen2``).
AdamW + one-cycle schedule, gradient clipping at 1, one thread, fixed seeds: the output file is the
same byte for byte on every run (``--check`` verifies it against the shipped file).

    OMP_NUM_THREADS=1 python tools/train_poe_bridge_equal.py          # ~3 min on one thread
    OMP_NUM_THREADS=1 python tools/train_poe_bridge_equal.py --check  # re-train, compare the sha256
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint  # noqa: E402
from zoo.methods.poe_bridge.training import train_dlm_qwen2  # noqa: E402

OUT_NAME = "poe-bridge-dlm-qwen2.safetensors"


def train_to(args: argparse.Namespace, out: Path) -> dict[str, Path]:
    """Train and save the full state dict (the tied head included, so the zoo loader reads it strictly)."""
    torch.manual_seed(args.seed)
    t0 = time.time()
    model = train_dlm_qwen2(args.steps, args.batch_size, args.lr, args.digits, args.seed)
    h = save_checkpoint(model, out / OUT_NAME, quiet=True)
    print(f"DLM {time.time() - t0:6.1f}s  {OUT_NAME}  sha256 {h}")
    return {OUT_NAME: out / OUT_NAME}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1400)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--digits", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "specs" / "weights")
    add_check_argument(ap)
    args = ap.parse_args()
    if args.check:
        raise SystemExit(0 if check_reproduces(lambda d: train_to(args, d), {OUT_NAME: args.out / OUT_NAME}) else 1)
    train_to(args, args.out)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    main()
