#!/usr/bin/env python
"""Train the shipped IPFM toy generator: IPFM distillation (plain loss, = 2 x SiD at alpha = 1/2) of the exact PFGM++
teacher of gmm3 at D = 16 into a one-step EDM-preconditioned MLP (width 64, 3 layers), 600 teacher-copy steps +
400 generator steps (2 fake-field steps each), batch 256, lr 3e-4, EMA 0.99, seed 0, one CPU thread
(zoo.methods.ipfm.distill). Writes specs/weights/ipfm-gmm3-d16-generator.safetensors and prints its sha256;
``--check`` re-trains into a temporary folder and verifies the file is byte-identical."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.common.training import add_check_argument, check_reproduces, save_checkpoint, setup_deterministic  # noqa: E402

OUT = ROOT / "specs" / "weights" / "ipfm-gmm3-d16-generator.safetensors"


def train_to(folder: Path) -> dict[str, Path]:
    from zoo.methods.ipfm.distill import distill
    from zoo.methods.pfgmpp.toy import AnalyticPFGMPP

    setup_deterministic(0)
    out = distill(AnalyticPFGMPP("gmm3", 16), loss="ipfm", steps=400, seed=0, progress=True)
    h = out["history"][-1]
    print(f"final EMA generator: SW2 {h['sw2']:.4f}, log-lik {h['loglik']:.4f} (2000 samples)")
    path = folder / OUT.name
    save_checkpoint(out["generator"], path)
    return {"generator": path}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_check_argument(ap)
    a = ap.parse_args(argv)
    if a.check:
        return 0 if check_reproduces(train_to, {"generator": OUT}) else 1
    train_to(OUT.parent)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
