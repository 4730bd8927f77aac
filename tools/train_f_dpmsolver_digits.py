#!/usr/bin/env python
"""Train the tiny epsilon-prediction UNet of the f-dpmsolver ``digits`` variant on scikit-learn's 8x8 digits.

DDPM objective (Ho et al. 2020, eq. 14): E ||eps - eps_theta(sqrt(ab_t) x0 + sqrt(1 - ab_t) eps, t)||^2 with the
diffusers default linear betas (1e-4 .. 0.02, T = 1000). Writes specs/weights/f-dpmsolver-digits-unet.safetensors
and prints its sha256 (copy it into specs/f-dpmsolver.yaml). Deterministic for a fixed seed on one thread.

    python tools/train_f_dpmsolver_digits.py --steps 3000
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from tqdm.auto import tqdm  # noqa: E402

from zoo.methods.f_dpmsolver.toy import build_digits_unet, digits_data  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="specs/weights/f-dpmsolver-digits-unet.safetensors")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    from diffusers import DDPMScheduler

    data = digits_data()
    model = build_digits_unet().train()
    print(f"params: {sum(p.numel() for p in model.parameters()):,}")
    sched = DDPMScheduler()
    ab = sched.alphas_cumprod
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    lr_sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.05)
    g = torch.Generator().manual_seed(args.seed)
    ema = {k: v.detach().clone() for k, v in model.state_dict().items()}
    bar = tqdm(range(args.steps), desc="train")
    for step in bar:
        idx = torch.randint(0, data.shape[0], (args.batch,), generator=g)
        x0 = data[idx]
        t = torch.randint(0, 1000, (args.batch,), generator=g)
        eps = torch.randn(x0.shape, generator=g)
        a = ab[t].sqrt()[:, None, None, None]
        s = (1 - ab[t]).sqrt()[:, None, None, None]
        loss = ((model(a * x0 + s * eps, t).sample - eps) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        lr_sched.step()
        with torch.no_grad():
            decay = min(0.999, (1 + step) / (10 + step))
            for k, v in model.state_dict().items():
                ema[k].mul_(decay).add_(v.detach(), alpha=1 - decay) if v.is_floating_point() else ema[k].copy_(v)
        if step % 50 == 0:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in ema.items()}, str(out))
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB) sha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
