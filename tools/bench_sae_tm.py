#!/usr/bin/env python
"""SAE-TM vs scikit-learn LDA and NMF (a thin wrapper: the benchmark is ``zoo.methods.sae_tm.benchmark``,
also run by ``zoo bench sae-tm [--quick]`` from an installed wheel); ``--help`` lists the options."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.methods.sae_tm.benchmark import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
