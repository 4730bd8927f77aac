#!/usr/bin/env python
"""SAE feature death at CPU scale on all-MiniLM-L6-v2 (a thin wrapper: the benchmark is ``zoo.methods.sae_feature_death.benchmark``,
also run by ``zoo bench sae-feature-death [--quick]`` from an installed wheel). From a checkout it writes
the PNG into docs/methods/ unless --plot is given; ``--help`` lists the options."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.methods.sae_feature_death.benchmark import main  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a == "--plot" or a.startswith("--plot=") for a in argv):
        argv += ["--plot", str(ROOT / "docs" / "methods" / "sae-feature-death.png")]
    raise SystemExit(main(argv))
