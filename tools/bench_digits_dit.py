#!/usr/bin/env python
"""Benchmark the shared class-conditional digits DiT: classifier accuracy and Frechet distance of its samples.

For each sampler setting, draws ``--per-class`` samples of every digit class (fixed seed), scores them with the
digits classifier (logistic regression on the train split) and the Frechet distance to the test split in the
fixed PCA-20 space. Reference rows: the classifier on the real test split, and the real train split's FD.
Writes docs/common/digits-dit-bench.md (table) and docs/common/digits-dit-samples.png (one row per class).

    nice -n 10 python tools/bench_digits_dit.py
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

from zoo.common.digits import (  # noqa: E402
    NUM_CLASSES, classifier_accuracy, digits_classifier, digits_split, frechet_distance, build_digits_dit, sample_digits, save_digit_grid,
)

SETTINGS = [("ddim", 50, 1.0), ("ddim", 50, 2.0), ("ddim", 20, 1.0), ("dpmsolver++", 20, 1.0), ("unipc", 10, 1.0)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", type=Path, default=None, help="checkpoint (default: the shipped one, role dit of specs/digits.yaml)")
    ap.add_argument("--per-class", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs" / "common")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    if args.weights is None:
        import zoo

        model = zoo.load("digits", variant="toy").models["dit"]  # the spec's declaration: sha256-verified, strict
    else:
        from safetensors.torch import load_file

        model = build_digits_dit()
        model.load_state_dict(load_file(str(args.weights)), strict=True)
    clf = digits_classifier()
    s = digits_split()
    labels = torch.arange(NUM_CLASSES).repeat_interleave(args.per_class)
    rows = [("real test split (classifier reference)", "-", "-", classifier_accuracy(), frechet_distance(s.x_test), 0.0),
            ("real train split", "-", "-", clf.accuracy(s.x_train, s.y_train), frechet_distance(s.x_train), 0.0)]
    grid_samples = None
    for sched, steps, w in SETTINGS:
        t0 = time.time()
        x = sample_digits(model, labels, steps, sched, seed=args.seed, guidance_scale=w, progress=True)
        dt = time.time() - t0
        rows.append((sched, steps, w, clf.accuracy(x, labels), frechet_distance(x), dt))
        if (sched, steps, w) == ("ddim", 50, 1.0):
            grid_samples = x
        print(f"{sched:12s} steps={steps:3d} w={w}: acc {rows[-1][3]:.3f}  FD {rows[-1][4]:.3f}  ({dt:.1f}s)")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    png = save_digit_grid(grid_samples, labels, args.out_dir / "digits-dit-samples.png", per_class=10,
                          title="digits DiT, DDIM 50 steps, no guidance (row = class 0..9)")
    lines = [
        "# Digits DiT benchmark", "",
        f"`nice -n 10 python tools/bench_digits_dit.py` ({args.per_class} samples per class = {len(labels)}, seed {args.seed}, one thread).",
        "Accuracy: the digits classifier's agreement with the requested class. FD: Frechet distance to the test split in the fixed PCA-20 space.", "",
        "| samples | steps | guidance | classifier accuracy | FD (PCA-20) | seconds |", "|---|---|---|---|---|---|",
    ]
    for name, steps, w, acc, fd, dt in rows:
        lines.append(f"| {name} | {steps} | {w} | {acc:.3f} | {fd:.3f} | {dt:.1f} |")
    lines += ["", f"![samples]({png.name})", ""]
    (args.out_dir / "digits-dit-bench.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
