#!/usr/bin/env python
"""QAT fine-tune the RobuQ-quantised digits DiT and ship the packed exports.

For each setting (W1.58A4, W1.58A3, AMPN 2-bit average; each with and without the Hadamard rotation)
the shared FP digits DiT is quantised by ``zoo.methods.robuq.procedures:quantize_dit`` (ternary weights,
rank-8 FP low-rank branch from the SVD of the ternarisation error, per-token min-max activations,
adaLN W4A4, 8-bit attention products QK^T and softmax V -- the paper's layout) and fine-tuned by
``qat_finetune`` (AdamW 2e-4, batch 64, DDPM epsilon loss, straight-through gradients, seed 0). AMPN
follows the paper's protocol: QAT warm-up at uniform 2-bit activations (``--ampn-warmup`` steps), then
per-group sensitivities measured on that QAT model, the exact DP allocation under the 2.0-bit average,
and QAT for the remaining steps (same total step count as the other settings; fresh AdamW state). Each
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
from zoo.methods.robuq.procedures import ampn_allocate, heldout_eps_mse, qat_finetune, quantize_dit  # noqa: E402

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
        if args.only and setting not in args.only:
            continue
        t0 = time.time()
        cfg = dict(cfg)
        avg = cfg.pop("ampn_avg_bits", None)
        q = quantize_dit(copy.deepcopy(fp), lowrank_rank=8, **({"a_bits": int(avg)} if avg else {}), **cfg)
        before = heldout_eps_mse(q)
        if avg:  # AMPN: sensitivities after a QAT warm-up at uniform bits, then QAT with the allocation
            warm = min(args.ampn_warmup, args.steps)
            losses = qat_finetune(q, warm, args.lr, args.batch, args.seed, progress=True)
            print(f"{setting}: AMPN bits after {warm} QAT steps: {ampn_allocate(q, avg)}")
            losses += qat_finetune(q, args.steps - warm, args.lr, args.batch, args.seed + 1, progress=True)
        else:
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
    ap.add_argument("--ampn-warmup", type=int, default=100, help="AMPN: QAT steps before measuring sensitivities (default 100)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", nargs="+", choices=list(SETTINGS), help="train (or --check) only these settings")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "specs" / "weights")
    add_check_argument(ap)
    args = ap.parse_args(argv)
    t0 = time.time()
    if args.check:
        ok = check_reproduces(lambda d: train(args, d), {name(s): args.out_dir / name(s) for s in SETTINGS if not args.only or s in args.only})
        print(f"{time.time() - t0:.1f}s")
        return 0 if ok else 1
    train(args, args.out_dir)
    print(f"{time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
