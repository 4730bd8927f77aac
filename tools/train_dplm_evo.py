#!/usr/bin/env python
"""Train the DPLM-Evo toy models on the synthetic protein families (``zoo.methods.dplm_evo.family``), one thread,
seeded, safetensors + sha256 (paste into specs/dplm-evo.yaml and specs/dplm-masked.yaml). Five networks per
family (``training.CONFIGS``: the contextual, uniform and BLOSUM62 kernels, the masked baseline with DPLM's
constant weight and with DPLM-Evo's ELBO weight) on the conserved-core family (``dplm-evo-NAME.safetensors``)
and on the mutation-bias family (``dplm-evo-mutation-bias-NAME.safetensors``); ~1 CPU minute each.

    python tools/train_dplm_evo.py                      # all ten
    python tools/train_dplm_evo.py --only contextual --family conserved-core   # one of them
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

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint  # noqa: E402
from zoo.methods.dplm_evo.family import FAMILIES  # noqa: E402
from zoo.methods.dplm_evo.training import CONFIGS, train_named  # noqa: E402

OUT = ROOT / "specs" / "weights"


def path_of(name: str, family_name: str, out: Path) -> Path:
    """``dplm-evo-NAME.safetensors`` (conserved-core family) or ``dplm-evo-FAMILY-NAME.safetensors``."""
    stem = name if family_name == "conserved-core" else f"{family_name}-{name}"
    return out / f"dplm-evo-{stem}.safetensors"


def train_to(out: Path, jobs: list[tuple[str, str]]) -> dict[str, Path]:
    written = {}
    for family_name, name in jobs:
        t0 = time.process_time()
        net, losses = train_named(name, family_name)
        print(f"{family_name} / {name}: final loss {sum(losses[-100:]) / 100:.4f} ({time.process_time() - t0:.0f} CPU s)")
        path = path_of(name, family_name, out)
        save_checkpoint(net, path)
        written[f"{family_name}/{name}"] = path
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=sorted(CONFIGS), action="append", help="train only this model (repeatable)")
    ap.add_argument("--family", choices=sorted(FAMILIES), action="append",
                    help="train only on this toy family (repeatable; default both)")
    ap.add_argument("--out", default=str(OUT), help="output folder (default specs/weights)")
    add_check_argument(ap)
    args = ap.parse_args(argv)
    jobs = [(f, n) for f in (args.family or list(FAMILIES)) for n in (args.only or list(CONFIGS))]
    if args.check:
        ok = check_reproduces(lambda tmp: train_to(tmp, jobs),
                              {f"{f}/{n}": path_of(n, f, Path(args.out)) for f, n in jobs})
        return 0 if ok else 1
    train_to(Path(args.out), jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
