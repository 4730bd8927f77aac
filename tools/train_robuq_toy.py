#!/usr/bin/env python
"""QAT fine-tune the RobuQ-quantised digits DiT and ship the packed exports.

For each setting (W1.58A4, W1.58A3, AMPN 2-bit average; each with and without the Hadamard rotation)
the shared FP digits DiT is quantised by ``zoo.methods.robuq.procedures:quantize_dit`` (ternary weights,
rank-8 FP low-rank branch from the SVD of the ternarisation error, per-token min-max activations,
adaLN W4A4; AMPN: exact DP allocation from post-training sensitivities) and fine-tuned by
``qat_finetune`` (AdamW 2e-4, batch 64, DDPM epsilon loss, straight-through gradients, seed 0). Each
result is written with ``pack_model`` (ternary weights as 2-bit codes + fp32 row scales) to
``specs/weights/robuq-<setting>-qat.safetensors`` and its sha256 printed (paste into specs/robuq.yaml).
Byte-for-byte deterministic on one thread; ``--check`` re-trains into a temporary folder and compares.

    nice -n 10 python tools/train_robuq_toy.py            # ~2-3 min on one thread
    nice -n 10 python tools/train_robuq_toy.py --check
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.digits import load_digits_dit  # noqa: E402
from zoo.common.training import check_reproduces, add_check_argument, setup_deterministic, sha256_file  # noqa: E402
from zoo.methods.robuq.model import pack_model  # noqa: E402
from zoo.methods.robuq.procedures import heldout_eps_mse, qat_finetune, quantize_dit  # noqa: E402

SETTINGS: dict[str, dict] = {
    "w158a4": {"a_bits": 4, "hadamard": True},
    "w158a4-nohad": {"a_bits": 4, "hadamard": False},
    "w158a3": {"a_bits": 3, "hadamard": True},
    "w158a3-nohad": {"a_bits": 3, "hadamard": False},
    "ampn2": {"ampn_avg_bits": 2.0, "hadamard": True},
    "ampn2-nohad": {"ampn_avg_bits": 2.0, "hadamard": False},
}


def name(setting: str) -> str:
    return f"robuq-{setting}-qat.safetensors"


def train(args: argparse.Namespace, out_dir: Path) -> dict[str, Path]:
    setup_deterministic(args.seed)
    fp = load_digits_dit()
    written = {}
    for setting, cfg in SETTINGS.items():
        t0 = time.time()
        q = quantize_dit(copy.deepcopy(fp), lowrank_rank=8, **cfg)
        before = heldout_eps_mse(q)
        losses = qat_finetune(q, args.steps, args.lr, args.batch, args.seed, progress=True)
        after = heldout_eps_mse(q)
        path = pack_model(q, out_dir / name(setting))
        print(f"{setting}: held-out eps-MSE {before:.4f} -> {after:.4f} (last-50 train loss {sum(losses[-50:]) / 50:.4f}); "
              f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB) sha256 {sha256_file(path)}  [{time.time() - t0:.0f}s]")
        written[name(setting)] = path
    return written


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "specs" / "weights")
    add_check_argument(ap)
    args = ap.parse_args(argv)
    t0 = time.time()
    if args.check:
        ok = check_reproduces(lambda d: train(args, d), {name(s): args.out_dir / name(s) for s in SETTINGS})
        print(f"{time.time() - t0:.1f}s")
        return 0 if ok else 1
    train(args, args.out_dir)
    print(f"{time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
