"""Train the PoE-Bridge toy checkpoints: a tiny causal LM (AR target) and a tiny bidirectional
masked-diffusion LM (proposal) on the step-by-step addition task of ``zoo.common.toy_text``.

Writes ``specs/weights/poe-bridge-ar.safetensors`` and ``specs/weights/poe-bridge-dlm.safetensors``
and prints their sha256 (paste into ``specs/poe-bridge.yaml`` and the baseline specs).

The AR model is trained with next-token cross-entropy on the answer tokens. The DLM is trained with
the MDLM/LLaDA objective (Sahoo et al. 2024, arXiv 2406.07524; Nie et al. 2025, arXiv 2502.09992):
each answer token is masked with probability t ~ U(eps, 1), cross-entropy on masked positions weighted
by 1/t; the answer region is padded with EOS to ``max_new_tokens`` as in LLaDA's SFT. The DLM gets a
smaller training budget (``--dlm-steps``) on purpose: like Dream-7B against Qwen2.5-Math-7B in the
paper, the proposal is the weaker model.

    OMP_NUM_THREADS=1 nice -n 10 python tools/train_poe_bridge_toy.py          # ~3-8 min on one thread
    OMP_NUM_THREADS=1 nice -n 10 python tools/train_poe_bridge_toy.py --check  # re-train, compare sha256
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

from zoo.common.toy_text import ArithTokenizer, eval_problems, training_batch  # noqa: E402
from zoo.common.training import add_check_argument, adamw_one_cycle, check_reproduces, optimizer_step, progress, save_checkpoint  # noqa: E402
from zoo.methods.poe_bridge.toy import build_dlm  # noqa: E402
from zoo.methods.poe_bridge.training import train_ar_qwen2  # noqa: E402

MAX_NEW = 40


def _update(model, opt, sched, loss, bar, step: int) -> None:
    """One AdamW step with gradient clipping at 1.0 and the one-cycle schedule."""
    optimizer_step(model, opt, sched, loss, clip=1.0)
    if step % 50 == 0:
        bar.set_postfix(loss=f"{loss.item():.4f}")


def train_dlm(steps: int, bs: int, lr: float, digits: int, seed: int, banned) -> torch.nn.Module:
    tok = ArithTokenizer(digits)
    model = build_dlm(digits=digits).train()
    opt, sched = adamw_one_cycle(model.parameters(), lr, steps, pct_start=0.1, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed + 1)
    eps = 1e-3
    for step in (bar := progress(range(steps), desc="DLM")):
        x, P = training_batch(tok, bs, g, digits, banned, MAX_NEW)
        t = torch.rand(bs, 1, generator=g) * (1 - eps) + eps
        m = torch.rand(x.shape, generator=g) < t
        m[:, :P] = False
        xt = torch.where(m, torch.full_like(x, tok.mask_token_id), x)
        logits = model(xt)
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x, reduction="none")
        loss = ((ce * m) / t).sum() / (bs * MAX_NEW)
        _update(model, opt, sched, loss, bar, step)
    return model.eval()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ar-steps", type=int, default=2000)
    ap.add_argument("--dlm-steps", type=int, default=1400)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--digits", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=ROOT / "specs" / "weights")
    ap.add_argument("--only", choices=["ar", "dlm"], default=None)
    add_check_argument(ap)
    args = ap.parse_args()
    if args.check:
        names = {"ar": ["poe-bridge-ar.safetensors"], "dlm": ["poe-bridge-dlm.safetensors"]}.get(args.only, ["poe-bridge-ar.safetensors", "poe-bridge-dlm.safetensors"])
        ok = check_reproduces(lambda d: train(args, d), {n: args.out / n for n in names})
        raise SystemExit(0 if ok else 1)
    train(args, args.out)


def train(args: argparse.Namespace, out: Path) -> dict[str, Path]:
    torch.manual_seed(args.seed)
    banned = {(e.a, e.b) for e in eval_problems(256, args.digits)}
    written = {}
    if args.only in (None, "ar"):
        t = time.time()
        ar = train_ar_qwen2(args.ar_steps, args.batch_size, args.lr, args.digits, args.seed)
        written["poe-bridge-ar.safetensors"] = out / "poe-bridge-ar.safetensors"
        h = save_checkpoint(ar, written["poe-bridge-ar.safetensors"], quiet=True)
        print(f"AR  {time.time() - t:6.1f}s  poe-bridge-ar.safetensors  sha256 {h}")
    if args.only in (None, "dlm"):
        t = time.time()
        dlm = train_dlm(args.dlm_steps, args.batch_size, args.lr, args.digits, args.seed, banned)
        written["poe-bridge-dlm.safetensors"] = out / "poe-bridge-dlm.safetensors"
        h = save_checkpoint(dlm, written["poe-bridge-dlm.safetensors"], quiet=True)
        print(f"DLM {time.time() - t:6.1f}s  poe-bridge-dlm.safetensors  sha256 {h}")
    return written


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    main()
