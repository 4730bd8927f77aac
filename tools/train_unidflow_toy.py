"""Train the UniDFlow toy checkpoints (``specs/unidflow.yaml``) on the shapes-and-captions world.

Stages (``zoo.methods.unidflow.training``): 0 the stand-in backbone (generic masked objective on caption-image
pairs, then frozen); I text alignment (Δu at α ≡ 1 + norm modulation + time MLP on understanding); II vision
alignment (Δg at α ≡ 0 on generation and editing, then the router alone on all three tasks); III mRef-DPO (Δg
against the frozen stage-II reference, generation and editing pairs). The shared-adapter ablation is the stage-I
model with its one adapter trained further on stage II's data.

Writes to ``specs/weights/``:

* ``unidflow-toy.safetensors``        the final model (stage III)            -> variant ``toy``
* ``unidflow-toy-stage2.safetensors`` the stage-II model = the DPO reference -> variant ``toy-stage2``
* ``unidflow-toy-stage1.safetensors`` after stage I (interference baseline)  -> variant ``toy-stage1``
* ``unidflow-toy-shared.safetensors`` the shared single-adapter ablation, stage II from the stage-I state -> ``shared``

    OMP_NUM_THREADS=1 nice -n 10 python tools/train_unidflow_toy.py           # ~4 min on one thread
    OMP_NUM_THREADS=1 nice -n 10 python tools/train_unidflow_toy.py --check   # re-train, compare sha256
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint, setup_deterministic  # noqa: E402
from zoo.methods.unidflow.model import build_unidflow  # noqa: E402
from zoo.methods.unidflow.training import calibrate_router, pretrain_backbone, stage1, stage2, stage3_dpo  # noqa: E402

NAMES = {"toy": "unidflow-toy.safetensors", "toy-stage2": "unidflow-toy-stage2.safetensors", "toy-stage1": "unidflow-toy-stage1.safetensors",
         "toy-shared": "unidflow-toy-shared.safetensors"}


def stage1_model(state: dict[str, torch.Tensor]):
    """A one-adapter model (``shared=True``) holding the stage-I state: Δu at unit scale."""
    model = build_unidflow(shared=True)
    model.load_state_dict({k: v for k, v in state.items() if k in model.state_dict()}, strict=True)
    return model


def train(args: argparse.Namespace, out: Path, evaluate: bool = False) -> dict[str, Path]:
    g = setup_deterministic(args.seed)
    written: dict[str, Path] = {}

    def save(model, variant: str) -> None:
        written[NAMES[variant]] = out / NAMES[variant]
        h = save_checkpoint(model, written[NAMES[variant]], quiet=True)
        line = f"{variant:18s} {NAMES[variant]}  sha256 {h}"
        if evaluate:
            from zoo.methods.unidflow.evaluate import evaluate_all
            line += "  " + " ".join(f"{k}={v:.3f}" for k, v in evaluate_all(model, per_caption=4).items())
        print(line, flush=True)

    t0 = time.time()
    model = build_unidflow()
    pretrain_backbone(model, args.pretrain_steps, args.batch_size, args.lr_backbone, g, args.quiet)
    stage1(model, args.stage1_steps, args.batch_size, args.lr, g, args.quiet)
    # the stage-I model is Δu alone at unit scale (no Δg, no router yet): saved as a one-adapter model
    stage1_state = {k: v.clone() for k, v in model.state_dict().items()}
    save(stage1_model(stage1_state), "toy-stage1")
    stage2(model, args.stage2_steps, args.batch_size, args.lr, g, args.quiet)
    calibrate_router(model, args.router_steps, args.batch_size, args.router_lr, g, args.quiet)
    save(model, "toy-stage2")
    stage3_dpo(model, args.dpo_steps, args.dpo_batch_size, args.dpo_lr, args.beta, g, args.quiet)
    save(model, "toy")
    # the ablation starts from the very stage-I state (one adapter at scale 1 = Δu at α ≡ 1; no Δg, no router)
    shared = stage1_model(stage1_state)
    stage2(shared, args.stage2_steps, args.batch_size, args.lr, g, args.quiet)
    save(shared, "toy-shared")
    print(f"total {time.time() - t0:.0f} s")
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pretrain-steps", type=int, default=1500)
    ap.add_argument("--stage1-steps", type=int, default=600)
    ap.add_argument("--stage2-steps", type=int, default=2400)
    ap.add_argument("--router-steps", type=int, default=300, help="router-only calibration on all tasks at the end of stage II")
    ap.add_argument("--router-lr", type=float, default=0.05, help="router calibration learning rate (the router is tiny)")
    ap.add_argument("--dpo-steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--dpo-batch-size", type=int, default=32)
    ap.add_argument("--lr-backbone", type=float, default=3e-3)
    ap.add_argument("--lr", type=float, default=5e-3, help="stages I and II")
    ap.add_argument("--dpo-lr", type=float, default=3e-4)
    ap.add_argument("--beta", type=float, default=0.1, help="mRef-DPO β")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--evaluate", action="store_true", help="print the rule-checked metrics after each saved stage")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    ap.add_argument("--out", type=Path, default=ROOT / "specs" / "weights")
    add_check_argument(ap)
    args = ap.parse_args()
    if args.check:
        ok = check_reproduces(lambda d: train(args, d), {n: args.out / n for n in NAMES.values()})
        raise SystemExit(0 if ok else 1)
    train(args, args.out, args.evaluate)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    main()
