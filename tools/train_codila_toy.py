"""Train the CoDiLA toy checkpoints (``specs/codila.yaml`` variants ``toy`` and ``toy-trap``).

For each toy task of ``zoo.methods.codila.tasks`` (``xor``: XOR-words; ``trap``: the top-1 counterexample):

1. the drafter, a tiny bidirectional masked denoiser, with the MDLM/LLaDA loss (Sahoo et al. 2024,
   arXiv 2406.07524; Nie et al. 2025, arXiv 2502.09992);
2. with the DLM frozen, the local AR (a tiny ``Qwen2ForCausalLM``) on block-masked inputs soft-conditioned on
   the DLM's marginals (CoDiLA, arXiv 2603.20216, Sec. 3);
3. the same AR conditioned on the top-1 of the marginals only (the Theorem 3.3 ablation, sampler ``codila-topk``).

Writes ``specs/weights/codila-<task>-{dlm,ar,ar-top1}.safetensors`` and prints their sha256 (paste into the spec).

    OMP_NUM_THREADS=1 nice -n 10 python tools/train_codila_toy.py          # ~2-4 min on one thread
    OMP_NUM_THREADS=1 nice -n 10 python tools/train_codila_toy.py --check  # re-train, compare sha256
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

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint, setup_deterministic  # noqa: E402
from zoo.methods.codila.sampler import excluded_ids  # noqa: E402
from zoo.methods.codila.tasks import TASKS, Task  # noqa: E402
from zoo.methods.codila.toy import build_dlm, build_local_ar, toy_tokenizer  # noqa: E402
from zoo.methods.codila.training import sample_batch, train_dlm, train_local_ar  # noqa: E402

MAX_BLOCK = 4  # the AR is trained on blocks of 1..4 positions (static B = 2 and B = 4 both use it)
GRID = 2  # block starts on the grid of the smallest static block (B = 2: the words)


def names(task: str) -> list[str]:
    return [f"codila-{task}-dlm.safetensors", f"codila-{task}-ar.safetensors", f"codila-{task}-ar-top1.safetensors"]


def train(args: argparse.Namespace, out: Path) -> dict[str, Path]:
    written = {}
    for i, task_name in enumerate(args.tasks):
        task = Task(task_name)
        tok = toy_tokenizer(task_name)
        g = setup_deterministic(args.seed + 100 * i)
        t0 = time.time()
        dlm = build_dlm(task=task_name)
        train_dlm(dlm, task, tok, args.dlm_steps, args.batch_size, args.lr, g)
        for p in dlm.parameters():
            p.requires_grad_(False)
        files = names(task_name)
        written[files[0]] = out / files[0]
        h = save_checkpoint(dlm, written[files[0]], quiet=True)
        print(f"{task_name} DLM {time.time() - t0:6.1f}s  {files[0]}  sha256 {h}")
        ex = excluded_ids(tok, tok.mask_token_id, tok.think_ids, allow_eos=False)
        for fname, cond in ((files[1], "soft"), (files[2], "topk")):
            t0 = time.time()
            ar = build_local_ar(task=task_name)
            train_local_ar(ar, dlm, lambda n, gg: sample_batch(task, tok, n, gg), args.ar_steps, args.ar_batch_size,
                           args.ar_lr, MAX_BLOCK, g, tok.mask_token_id, ex, tok.think_ids, cond, 1,
                           desc=f"AR[{task_name},{cond}]", grid=GRID)
            written[fname] = out / fname
            h = save_checkpoint(ar, written[fname], quiet=True)
            print(f"{task_name} AR  {time.time() - t0:6.1f}s  {fname}  sha256 {h}")
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dlm-steps", type=int, default=600)
    ap.add_argument("--ar-steps", type=int, default=500)
    ap.add_argument("--batch-size", type=int, default=128, help="DLM batch size")
    ap.add_argument("--lr", type=float, default=3e-3, help="DLM learning rate")
    ap.add_argument("--ar-batch-size", type=int, default=64)
    ap.add_argument("--ar-lr", type=float, default=5e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    ap.add_argument("--out", type=Path, default=ROOT / "specs" / "weights")
    add_check_argument(ap)
    args = ap.parse_args()
    if args.check:
        ok = check_reproduces(lambda d: train(args, d), {n: args.out / n for t in args.tasks for n in names(t)})
        raise SystemExit(0 if ok else 1)
    train(args, args.out)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    main()
