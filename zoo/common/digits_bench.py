"""Benchmark of the shared class-conditional digits DiT (``specs/digits.yaml``, role ``dit``): classifier
accuracy and Frechet distance of its samples.

For each sampler setting, draws ``--per-class`` samples of every digit class (seed ``--seed``), scores them with the
digits classifier (logistic regression on the train split) and the Frechet distance to the test split in the
fixed PCA-20 space. Reference rows: the classifier on the real test split, and the real train split's FD.
Writes ``digits-bench.md`` (the table), ``digits-bench.json`` and ``digits-dit-samples.png`` (one row per class)::

    zoo bench digits [--quick] [--per-class N] [--out-dir docs/common]
"""
from __future__ import annotations

import sys
import time
from typing import Any, ClassVar

import torch
from pydantic import Field

from registry.contract import Options, benchmark
from zoo.common.params import DitBenchOptions  # noqa: F401 - the torch-free models (registry.declare)

from .digits import NUM_CLASSES, classifier_accuracy, digits_classifier, digits_split, frechet_distance, sample_digits, save_digit_grid

__all__ = ["SETTINGS", "DitBenchOptions", "run"]

#: (scheduler, steps, guidance scale) of each row; the first is the figure's
SETTINGS = [("ddim", 50, 1.0), ("ddim", 50, 2.0), ("ddim", 20, 1.0), ("dpmsolver++", 20, 1.0), ("unipc", 10, 1.0)]


@benchmark(options=DitBenchOptions)
def run(ctx: Any, opts: DitBenchOptions) -> dict[str, Any]:
    """The digits DiT's samples: classifier accuracy and Frechet distance (PCA-20) per sampler setting."""
    torch.set_num_threads(1)
    model = ctx.models("toy")["dit"]  # the spec's declaration: sha256-verified, strict
    clf = digits_classifier()
    s = digits_split()
    labels = torch.arange(NUM_CLASSES).repeat_interleave(opts.per_class)
    rows = [("real test split (classifier reference)", "-", "-", classifier_accuracy(), frechet_distance(s.x_test), 0.0),
            ("real train split", "-", "-", clf.accuracy(s.x_train, s.y_train), frechet_distance(s.x_train), 0.0)]
    grid_samples = None
    for sched, steps, w in SETTINGS:
        t0 = time.time()
        x = sample_digits(model, labels, steps, sched, seed=ctx.seed, guidance_scale=w, progress=True)
        dt = time.time() - t0
        rows.append((sched, steps, w, clf.accuracy(x, labels), frechet_distance(x), dt))
        if grid_samples is None:
            grid_samples = x
        print(f"{sched:12s} steps={steps:3d} w={w}: acc {rows[-1][3]:.3f}  FD {rows[-1][4]:.3f}  ({dt:.1f}s)", file=sys.stderr)
    png = save_digit_grid(grid_samples, labels, ctx.figure("digits-dit-samples.png"), per_class=10,
                          title="digits DiT, DDIM 50 steps, no guidance (row = class 0..9)")
    lines = [
        "# Digits DiT benchmark", "",
        f"`nice -n 10 zoo bench digits{' --quick' if ctx.quick else ''}` ({opts.per_class} samples per class = {len(labels)}, "
        f"seed {ctx.seed}, one thread).",
        "Accuracy: the digits classifier's agreement with the requested class. FD: Frechet distance to the test split in the fixed PCA-20 space.", "",
        "| samples | steps | guidance | classifier accuracy | FD (PCA-20) | seconds |", "|---|---|---|---|---|---|",
    ]
    for name, steps, w, acc, fd, dt in rows:
        lines.append(f"| {name} | {steps} | {w} | {acc:.3f} | {fd:.3f} | {dt:.1f} |")
    lines += ["", f"![samples]({png.name})", ""]
    ctx.report("\n".join(lines))
    keys = ("samples", "steps", "guidance", "accuracy", "fd", "seconds")
    return {"per_class": opts.per_class, "rows": [dict(zip(keys, r)) for r in rows]}
