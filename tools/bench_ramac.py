#!/usr/bin/env python
"""RAMAC vs BC-only, risk-neutral and CVaR-without-BC actors on the 2-D risky bandit (a thin wrapper:
the benchmark is ``zoo.methods.ramac.benchmark``, also run by ``zoo bench ramac [--quick]`` from an
installed wheel); ``--help`` lists the options."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.methods.ramac.benchmark import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
