#!/usr/bin/env python
"""Train the shipped PROBE toy detector: timm ``test_resnet`` (1 input channel, 2 classes: real, fake) on the
digits train split (1,437 real digits) vs 1,437 fakes of the seen generator (the shared digits DiT, DDIM-10, the
train split's labels, seed 100). Cross-entropy on class-balanced minibatches of 128, AdamW (lr 2e-3, weight decay
1e-4), 600 steps, seed 0, one CPU thread (zoo.methods.probe.core.train_detector); BatchNorm running statistics are
part of the checkpoint. Writes specs/weights/probe-detector.safetensors and prints its sha256 (paste it into
specs/probe.yaml); ``--check`` re-trains into a temporary folder and verifies the file is byte-identical.

    nice -n 10 python tools/train_probe.py            # ~30 s on one idle thread
    nice -n 10 python tools/train_probe.py --check
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

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint, setup_deterministic  # noqa: E402

OUT = ROOT / "specs" / "weights" / "probe-detector.safetensors"


def train_to(folder: Path, steps: int = 600, lr: float = 2e-3, seed: int = 0) -> dict[str, Path]:
    from zoo.common.digits import digits_split, load_digits_dit
    from zoo.methods.probe.core import SEEN, build_detector, detector_bacc, eval_fakes, seen_train_fakes, train_detector

    setup_deterministic(seed)
    s = digits_split()
    dit = load_digits_dit()
    fakes = seen_train_fakes(dit)
    detector = build_detector().train()
    losses = train_detector(detector, s.x_train, [fakes], steps, lr, seed, progress=True, desc="probe detector")
    held = eval_fakes({"dit": dit}, [SEEN], 360)[SEEN]
    print(f"final loss {sum(losses[-50:]) / 50:.4f}; held-out bAcc on the seen generator {detector_bacc(detector, s.x_test, held):.3f}")
    path = folder / OUT.name
    save_checkpoint(detector, path)
    return {"detector": path}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_check_argument(ap)
    a = ap.parse_args(argv)
    t0 = time.time()
    if a.check:
        ok = check_reproduces(train_to, {"detector": OUT})
        print(f"{time.time() - t0:.1f}s")
        return 0 if ok else 1
    train_to(OUT.parent)
    print(f"{time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
