#!/usr/bin/env python
"""DPLM-Evo vs its kernel ablations and dplm-masked on the toy protein family (a thin wrapper: the benchmark is
``zoo.methods.dplm_evo.benchmark``, also run by ``zoo bench dplm-evo [--quick]``). From a checkout it writes the PNG
into docs/methods/ unless --png is given; ``--help`` lists the options."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.methods.dplm_evo.benchmark import main  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a == "--png" or a.startswith("--png=") for a in argv):
        argv += ["--png", str(ROOT / "docs" / "methods" / "dplm-evo-bench.png")]
    raise SystemExit(main(argv))
