#!/usr/bin/env python
"""Train the ramac toy actors on the 2-D risky bandit: RAMAC (lambda_BC = 1, -CVaR_0.1) and the
baselines BC-only (eta = 0), risk-neutral (-E[Z]) and CVaR without BC (lambda_BC = 0), all from one
seeded start sharing the eta = 0 warm-up (zoo.methods.ramac.toy.train_presets). Writes
specs/weights/ramac-toy-actor-<preset>.safetensors and prints each sha256 (copy them into
specs/ramac.yaml). One CPU thread, deterministic; ``--check`` re-trains into a temporary directory and
verifies every shipped file is reproduced byte for byte.

    nice -n 10 python tools/train_ramac_toy.py
    nice -n 10 python tools/train_ramac_toy.py --check
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint, setup_deterministic  # noqa: E402
from zoo.methods.ramac.bandit import evaluate_actions  # noqa: E402
from zoo.methods.ramac.toy import SHIPPED, train_presets  # noqa: E402
from zoo.methods.ramac.train import PRESETS  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default=str(ROOT / "specs" / "weights"))
    ap.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                    help="override a TrainConfig field for every preset (experiments only; the shipped files use the defaults)")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    add_check_argument(ap)
    args = ap.parse_args(argv)
    base = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    presets = tuple(p for p in args.presets.split(",") if p)
    out = Path(args.out_dir)
    if args.check:
        shipped = {name: out / SHIPPED[name] for name in presets}
        return 0 if check_reproduces(lambda d: train(args.seed, presets, base, d, not args.quiet), shipped) else 1
    train(args.seed, presets, base, out, not args.quiet)
    return 0


def train(seed: int, presets: tuple[str, ...], base: dict, out: Path, progress: bool) -> dict[str, Path]:
    setup_deterministic(seed)
    t0 = time.perf_counter()
    results = train_presets(seed, presets, base, progress=progress)
    print(f"trained {', '.join(presets)} in {time.perf_counter() - t0:.0f} s")
    written = {}
    for name, res in results.items():
        written[name] = out / SHIPPED[name]
        save_checkpoint(res.actor.state_dict(), written[name])
        with torch.no_grad():
            acts = res.actor(torch.zeros(1000, 1), generator=torch.Generator().manual_seed(1))
        ev = evaluate_actions(acts, generator=torch.Generator().manual_seed(2))
        print(f"  {name:13s} CVaR_0.1 {ev['cvar']:+.2f} (exact {ev['exact_cvar']:+.2f})  mean {ev['mean']:+.2f} (exact {ev['exact_mean']:+.2f})  "
              f"OOD {ev['ood_rate']:.3f}  safe {ev['safe_rate']:.3f}  risky {ev['risky_rate']:.3f}")
    return written


if __name__ == "__main__":
    raise SystemExit(main())
