"""Train the ``toy-equal`` proposal of PoE-Bridge: a bidirectional Qwen2 mask predictor of exactly the AR
target's width and depth (``zoo.methods.poe_bridge.toy:build_dlm_qwen2``), on the step-by-step addition
task of ``zoo.common.toy_text``. The AR target of ``toy-equal`` is the ``toy`` variant's shipped Qwen2
(``specs/weights/poe-bridge-ar.safetensors``), so both models cost the same per forward.

Objective: MDLM/LLaDA (Sahoo et al. 2024, arXiv 2406.07524; Nie et al. 2025, arXiv 2502.09992): each
answer token (answer, EOS, EOS padding to 40 tokens) is masked with probability t ~ U(eps, 1), the
cross-entropy on masked positions is weighted by 1/t (``zoo.common.masked_dlm.masked_diffusion_loss``).
AdamW + one-cycle schedule, gradient clipping at 1, one thread, fixed seeds: the output file is the
same byte for byte on every run (``--check`` verifies it against the shipped file).

    OMP_NUM_THREADS=1 python tools/train_poe_bridge_equal.py          # ~3 min on one thread
    OMP_NUM_THREADS=1 python tools/train_poe_bridge_equal.py --check  # re-train, compare the sha256
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

from zoo.common.masked_dlm import mask_tokens, masked_diffusion_loss  # noqa: E402
from zoo.common.toy_text import ArithTokenizer, eval_problems, training_batch  # noqa: E402
from zoo.common.training import add_check_argument, adamw_one_cycle, check_reproduces, optimizer_step, progress, save_checkpoint  # noqa: E402
from zoo.methods.poe_bridge.toy import TOY_MAX_NEW_TOKENS, build_dlm_qwen2  # noqa: E402

OUT_NAME = "poe-bridge-dlm-qwen2.safetensors"


def train(steps: int, bs: int, lr: float, digits: int, seed: int) -> torch.nn.Module:
    tok = ArithTokenizer(digits)
    banned = {(e.a, e.b) for e in eval_problems(256, digits)}
    model = build_dlm_qwen2(digits=digits).train()
    opt, sched = adamw_one_cycle(model.parameters(), lr, steps, pct_start=0.1, weight_decay=0.01)
    g = torch.Generator().manual_seed(seed)
    eps = 1e-3
    for step in (bar := progress(range(steps), desc="DLM (Qwen2, bidirectional)")):
        x, P = training_batch(tok, bs, g, digits, banned, TOY_MAX_NEW_TOKENS)
        t = torch.rand(bs, 1, generator=g) * (1 - eps) + eps
        xt, masked = mask_tokens(x, t, tok.mask_token_id, g, keep_prefix=P)
        loss = masked_diffusion_loss(model(input_ids=xt).logits, x, masked, t, "elbo", normalizer=bs * TOY_MAX_NEW_TOKENS)
        optimizer_step(model, opt, sched, loss, clip=1.0)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    return model.eval()


def train_to(args: argparse.Namespace, out: Path) -> dict[str, Path]:
    """Train and save the full state dict (the tied head included, so the zoo loader reads it strictly)."""
    torch.manual_seed(args.seed)
    t0 = time.time()
    model = train(args.steps, args.batch_size, args.lr, args.digits, args.seed)
    h = save_checkpoint(model, out / OUT_NAME, quiet=True)
    print(f"DLM {time.time() - t0:6.1f}s  {OUT_NAME}  sha256 {h}")
    return {OUT_NAME: out / OUT_NAME}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1400)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--digits", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "specs" / "weights")
    add_check_argument(ap)
    args = ap.parse_args()
    if args.check:
        raise SystemExit(0 if check_reproduces(lambda d: train_to(args, d), {OUT_NAME: args.out / OUT_NAME}) else 1)
    train_to(args, args.out)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    main()
