#!/usr/bin/env python
"""Train the LoFlexMDM and FlexMDM toy checkpoints (``specs/loflexmdm.yaml`` and ``specs/flexmdm.yaml``,
variants ``toy`` = the checksum task, ``toy-brackets`` and ``toy-chain``, the order toy of issue 37).

For each task of ``zoo.methods.loflexmdm.tasks`` and each method, a tiny DDiT generator (2 layers, d = 64) is
trained from scratch on exact draws of the task law:

* ``loflexmdm``: joint θ/φ training (arXiv 2602.18695, Alg. 1) with the paper's best setting a = 1, b_um = 1
  fixed, only b_in learned by a 1-layer aux network φ (projected rate matching + leave-one-out REINFORCE +
  the schedule regulariser);
* ``flexmdm``: the same generator and loss with a = b = 1 and no φ (arXiv 2509.01025).

Time weighting: ``--time-weight hazard`` (the default, the paper's loss). ``--time-weight unit`` divides θ's
per-sequence loss by the hazard shape ``a t^(a-1)/(1 - t^a)`` (``1/(1-t)`` at a = 1): every per-t minimiser of θ
is unchanged and the gradients stay bounded, but the t → 1 signal is drowned, and the first toys trained that way
left an insertion rate that does not vanish on finished rows (docs/methods/loflexmdm.NOTES.md, "Diagnosis"). φ always
gets the paper's hazard-weighted loss (REINFORCE reward and target-hazard path; ``core.LossConfig``), and the
gradient norm is clipped per parameter group. ``--length-conditioning`` (the default) adds the row-length embedding
to θ's adaLN condition (``build_model``'s ``length_conditioning``; the 2-layer toy cannot count the parity of a row
with masks, docs/methods/loflexmdm.md). ``--insertion-head`` selects θ's insertion head (``build_model``'s
``insertion_head``; it must match the spec's ``config``). The checksum task's check digit is a copy of the last
free digit (``tasks.py``: the earlier sum rules stayed at chance within this budget).

Writes ``specs/weights/{loflexmdm,flexmdm}-{checksum,brackets}.safetensors`` and prints their sha256 (paste
into the specs).

    OMP_NUM_THREADS=1 nice -n 10 python tools/train_loflexmdm.py          # ~4 min per model on a free core (6-9 min on a loaded machine)
    OMP_NUM_THREADS=1 nice -n 10 python tools/train_loflexmdm.py --check  # re-train, compare sha256
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
from zoo.methods.loflexmdm.tasks import TASKS  # noqa: E402
from zoo.methods.loflexmdm.training import METHODS, train_toy  # noqa: E402


def name(method: str, task: str) -> str:
    return f"{method}-{task}.safetensors"


def train(args: argparse.Namespace, out: Path) -> dict[str, Path]:
    written = {}
    for task_name in args.tasks:
        for method in args.methods:  # the seed depends on the names, so any subset reproduces the full run
            t0 = time.time()
            model = train_toy(method, task_name, args.seed, args.steps, args.batch_size, args.lr, args.aux_lr, args.time_weight,
                              args.insertion_head, args.length_conditioning)
            fname = name(method, task_name)
            written[fname] = out / fname
            h = save_checkpoint(model, written[fname], quiet=True)
            print(f"{method:9s} {task_name:8s} {time.time() - t0:6.1f}s  {fname}  sha256 {h}", flush=True)
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=4800, help="optimizer steps per checkpoint")
    ap.add_argument("--batch-size", type=int, default=128, help="exact draws of the task law per step")
    ap.add_argument("--lr", type=float, default=3e-3, help="generator learning rate (one-cycle peak)")
    ap.add_argument("--aux-lr", type=float, default=1e-3, help="aux network φ learning rate")
    ap.add_argument("--seed", type=int, default=0,
                    help="training seed (data, noise and initial weights; 0 = the shipped checkpoints, the chain task's "
                         "other seeds are the benchmark's --chain-seeds)")
    ap.add_argument("--time-weight", choices=["unit", "hazard"], default="hazard",
                    help="unit: per-sequence loss divided by the hazard shape (same minimiser, bounded gradients; "
                         "the first toys); hazard: the paper's weighting (the default and the shipped toys)")
    ap.add_argument("--insertion-head", choices=["multiplier", "survival"], default="multiplier",
                    help="θ's insertion head (build_model's insertion_head): multiplier = the paper; survival = times (1 - t^a)^b_ref")
    ap.add_argument("--length-conditioning", action=argparse.BooleanOptionalAction, default=True,
                    help="build_model's length_conditioning (must match the spec's config; the shipped toys: on)")
    ap.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS), help="toy tasks to train (default: all)")
    ap.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS), help="methods to train (default: both)")
    ap.add_argument("--out", type=Path, default=ROOT / "specs" / "weights", help="folder for the safetensors files (default: specs/weights)")
    add_check_argument(ap)
    args = ap.parse_args()
    if args.check:
        ok = check_reproduces(lambda d: train(args, d), {name(m, t): args.out / name(m, t) for t in args.tasks for m in args.methods})
        raise SystemExit(0 if ok else 1)
    train(args, args.out)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    main()
