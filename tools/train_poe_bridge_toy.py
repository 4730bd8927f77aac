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

    OMP_NUM_THREADS=1 python tools/train_poe_bridge_toy.py            # ~5-8 min on one thread
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.toy_text import ArithTokenizer, eval_problems, solution  # noqa: E402
from zoo.methods.poe_bridge.toy import build_ar, build_dlm  # noqa: E402

MAX_NEW = 40


def batch(tok: ArithTokenizer, n: int, g: torch.Generator, digits: int, banned: set[tuple[int, int]]):
    """Token matrix ``[n, P + MAX_NEW]`` (prompt, answer, EOS, EOS padding) and the prompt length."""
    lim = 10**digits
    rows = []
    while len(rows) < n:
        a, b = (int(v) for v in torch.randint(0, lim, (2,), generator=g))
        if (a, b) in banned:
            continue
        prompt = tok.encode(f"{a}+{b}")
        ans = tok.encode_raw(solution(a, b, digits)) + [tok.eos_token_id]
        ans = ans + [tok.eos_token_id] * (MAX_NEW - len(ans))
        rows.append(prompt + ans)
    x = torch.tensor(rows)
    return x, len(prompt)


def train_ar(steps: int, bs: int, lr: float, digits: int, seed: int, banned) -> torch.nn.Module:
    from tqdm import tqdm

    tok = ArithTokenizer(digits)
    model = build_ar(digits=digits).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(seed)
    n_ans = 9 * digits + digits + 3  # answer + first EOS
    for step in (bar := tqdm(range(steps), desc="AR", mininterval=2)):
        x, P = batch(tok, bs, g, digits, banned)
        x = x[:, : P + n_ans]
        logits = model(input_ids=x[:, :-1]).logits
        tgt = x[:, 1:].clone()
        tgt[:, : P - 1] = -100
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
        _update(model, opt, sched, loss, bar, step)
    return model.eval()


def _update(model, opt, sched, loss, bar, step: int) -> None:
    """One AdamW step with gradient clipping at 1.0 and the one-cycle schedule."""
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    if step % 50 == 0:
        bar.set_postfix(loss=f"{loss.item():.4f}")


def train_dlm(steps: int, bs: int, lr: float, digits: int, seed: int, banned) -> torch.nn.Module:
    from tqdm import tqdm

    tok = ArithTokenizer(digits)
    model = build_dlm(digits=digits).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps, pct_start=0.1)
    g = torch.Generator().manual_seed(seed + 1)
    eps = 1e-3
    for step in (bar := tqdm(range(steps), desc="DLM", mininterval=2)):
        x, P = batch(tok, bs, g, digits, banned)
        t = torch.rand(bs, 1, generator=g) * (1 - eps) + eps
        m = torch.rand(x.shape, generator=g) < t
        m[:, :P] = False
        xt = torch.where(m, torch.full_like(x, tok.mask_token_id), x)
        logits = model(xt)
        ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x, reduction="none")
        loss = ((ce * m) / t).sum() / (bs * MAX_NEW)
        _update(model, opt, sched, loss, bar, step)
    return model.eval()


def save(model: torch.nn.Module, path: Path) -> str:
    from safetensors.torch import save_file

    sd = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    # tied embeddings: keep one copy only if the model reloads it strictly without the duplicate
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(sd, str(path))
    return hashlib.sha256(path.read_bytes()).hexdigest()


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
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    banned = {(e.a, e.b) for e in eval_problems(256, args.digits)}
    if args.only in (None, "ar"):
        t = time.time()
        ar = train_ar(args.ar_steps, args.batch_size, args.lr, args.digits, args.seed, banned)
        h = save(ar, args.out / "poe-bridge-ar.safetensors")
        print(f"AR  {time.time() - t:6.1f}s  poe-bridge-ar.safetensors  sha256 {h}")
    if args.only in (None, "dlm"):
        t = time.time()
        dlm = train_dlm(args.dlm_steps, args.batch_size, args.lr, args.digits, args.seed, banned)
        h = save(dlm, args.out / "poe-bridge-dlm.safetensors")
        print(f"DLM {time.time() - t:6.1f}s  poe-bridge-dlm.safetensors  sha256 {h}")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    main()
