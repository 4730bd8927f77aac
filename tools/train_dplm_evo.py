#!/usr/bin/env python
"""Train the DPLM-Evo toy models on the synthetic protein family (``zoo.methods.dplm_evo.family``), one thread,
seeded, safetensors + sha256 (paste into specs/dplm-evo.yaml and specs/dplm-masked.yaml):

    python tools/train_dplm_evo.py                      # all four models (contextual, uniform, blosum62, masked)
    python tools/train_dplm_evo.py --only contextual    # one of them
    python tools/train_dplm_evo.py --check              # retrain into a temp dir, compare byte for byte
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint, setup_deterministic  # noqa: E402
from zoo.methods.dplm_evo.family import N_LATENT, family  # noqa: E402
from zoo.methods.dplm_evo.model import build_toy  # noqa: E402
from zoo.methods.dplm_evo.training import CONFIGS, train  # noqa: E402

OUT = ROOT / "specs" / "weights"
SEEDS = {"contextual": 0, "uniform": 1, "blosum62": 2, "masked": 3}


def path_of(name: str, out: Path) -> Path:
    return out / f"dplm-evo-{name}.safetensors"


def train_to(out: Path, names: list[str]) -> dict[str, Path]:
    data = family().train_tensor()
    written = {}
    for name in names:
        g = setup_deterministic(SEEDS[name])
        net = build_toy()
        t0 = time.process_time()
        losses = train(net, data, CONFIGS[name], N_LATENT, g)
        print(f"{name}: final loss {sum(losses[-100:]) / 100:.4f} ({time.process_time() - t0:.0f} CPU s)")
        save_checkpoint(net, path_of(name, out))
        written[name] = path_of(name, out)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=sorted(CONFIGS), action="append", help="train only this model (repeatable)")
    ap.add_argument("--out", default=str(OUT), help="output folder (default specs/weights)")
    add_check_argument(ap)
    args = ap.parse_args(argv)
    names = args.only or list(CONFIGS)
    if args.check:
        ok = check_reproduces(lambda tmp: train_to(tmp, names), {n: path_of(n, Path(args.out)) for n in names})
        return 0 if ok else 1
    train_to(Path(args.out), names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
