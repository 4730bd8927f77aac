"""Train PoE-Bridge's ``toy-long`` pair (issue 40 item 2): column-interleaved addition of 31-digit numbers
(``zoo.methods.poe_bridge.columns``: 63-token answers, an answer region of 64), an AR target
``Qwen2ForCausalLM`` (``zoo.methods.poe_bridge.toy:build_ar``) and a proposal of exactly its size, a
bidirectional Qwen2 (``build_dlm_qwen2``), not held back, so that PoE-Bridge's speed on it is limited by how
many drafts the DLM gets right and not by the forward-count bound of short answers (3-digit step answers:
20 / (1 + 2) = 6.7; here 32 / (1 + 2) = 10.7). The DLM starts from the trained AR's weights and keeps its
next-token read-out (``shift_logits``: output ``i - 1`` predicts token ``i``), as Dream-7B starts from
Qwen2.5-7B (``--dlm-init random``: from scratch, no shift).

Losses and schedule: ``zoo.methods.poe_bridge.training`` (next-token CE for the AR; the MDLM/LLaDA masked
ELBO for the DLM). Seeds: training seed ``s`` initialises both networks from ``s``, draws the AR's data from a
generator seeded ``s`` and the DLM's from ``s + 1``. One thread; the files are the same byte for byte on
every run (``--check`` re-trains and compares with the shipped files).

    OMP_NUM_THREADS=1 python tools/train_poe_bridge_long.py                   # both files into specs/weights/
    OMP_NUM_THREADS=1 python tools/train_poe_bridge_long.py --check           # re-train, compare the sha256
    OMP_NUM_THREADS=1 python tools/train_poe_bridge_long.py --seed 1 --out /tmp/s1 --eval 64   # another seed, its counters
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint  # noqa: E402
from zoo.methods.poe_bridge.training import train_ar_qwen2, train_dlm_qwen2  # noqa: E402

FILES = {"ar": "poe-bridge-long-ar.safetensors", "dlm": "poe-bridge-long-dlm.safetensors"}
DIGITS, MAX_NEW_TOKENS, MAX_POSITIONS = 31, 64, 128  # the toy-long variant's config in specs/poe-bridge.yaml


def train_to(args: argparse.Namespace, out: Path) -> dict[str, Path]:
    """Train the selected models and save their full state dicts (tied heads included) under ``out``."""
    arch = {"task": "columns", "max_new_tokens": MAX_NEW_TOKENS, "max_position_embeddings": MAX_POSITIONS,
            "init_seed": args.seed}
    written = {}
    for role in ("ar", "dlm") if args.only is None else (args.only,):
        t0, c0 = time.time(), time.thread_time()
        if role == "ar":
            model = train_ar_qwen2(args.ar_steps, args.batch_size, args.lr, DIGITS, args.seed, **arch)
        else:
            init = None
            if args.dlm_init == "ar":
                from safetensors.torch import load_file

                ar_file = out / FILES["ar"] if (out / FILES["ar"]).is_file() else args.out / FILES["ar"]
                init = load_file(str(ar_file))
            model = train_dlm_qwen2(args.dlm_steps, args.batch_size, args.lr, DIGITS, args.seed + 1, init_from=init,
                                    shift_logits=args.dlm_init == "ar", **arch)
        written[FILES[role]] = out / FILES[role]
        h = save_checkpoint(model, written[FILES[role]], quiet=True)
        print(f"{role.upper():3} {time.thread_time() - c0:6.1f} CPU s ({time.time() - t0:6.1f} s wall)  {FILES[role]}  sha256 {h}")
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ar-steps", type=int, default=1200, help="AR optimiser steps")
    ap.add_argument("--dlm-steps", type=int, default=600, help="DLM optimiser steps")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3, help="peak learning rate of the one-cycle schedule")
    ap.add_argument("--seed", type=int, default=0, help="training seed (the shipped files: 0)")
    ap.add_argument("--dlm-init", choices=["ar", "random"], default="ar",
                    help="DLM initialisation: the trained AR's weights with Dream's shift-by-one read-out (default, as "
                    "Dream-7B from Qwen2.5-7B; with --only dlm the AR file is read from --out), or random")
    ap.add_argument("--only", choices=sorted(FILES), default=None, help="train one of the two models")
    ap.add_argument("--out", type=Path, default=ROOT / "specs" / "weights", help="output folder")
    ap.add_argument("--eval", type=int, default=0, metavar="N",
                    help="after training (or alone with --eval-only), print the pair's counters on N held-out problems as "
                    "JSON: accuracy and forwards of AR decoding, DLM decoding and PoE-Bridge K = 1 / 4")
    ap.add_argument("--eval-only", action="store_true", help="evaluate the files already in --out, do not train")
    add_check_argument(ap)
    args = ap.parse_args()
    if args.check:
        names = [FILES[args.only]] if args.only else list(FILES.values())
        raise SystemExit(0 if check_reproduces(lambda d: train_to(args, d), {n: args.out / n for n in names}) else 1)
    if not args.eval_only:
        train_to(args, args.out)
    if args.eval or args.eval_only:
        print(json.dumps({"seed": args.seed, **evaluate_pair(args.out, args.eval or 64, args.dlm_init == "ar")}))


def evaluate_pair(folder: Path, n_problems: int, dlm_shift: bool = True) -> dict:
    """:func:`zoo.methods.poe_bridge.metrics.pair_counts` of the two files in ``folder`` (``dlm_shift``: the DLM
    reads out shifted by one, as trained with ``--dlm-init ar``)."""
    from safetensors.torch import load_file

    from zoo.methods.poe_bridge.metrics import pair_counts
    from zoo.methods.poe_bridge.toy import build_ar, build_dlm_qwen2

    arch = {"task": "columns", "digits": DIGITS, "max_new_tokens": MAX_NEW_TOKENS, "max_position_embeddings": MAX_POSITIONS}
    models = {"target": build_ar(**arch), "proposal": build_dlm_qwen2(shift_logits=dlm_shift, **arch)}
    for role, name in (("target", FILES["ar"]), ("proposal", FILES["dlm"])):
        models[role].load_state_dict(load_file(str(folder / name)))
        models[role].eval()
    return pair_counts(models, n_problems)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    main()
