#!/usr/bin/env python
"""Benchmark of the deep_forcing spec (a thin wrapper: the benchmark is ``zoo.methods.deep_forcing.benchmark``, also run by
``zoo bench deep-forcing [--quick]`` from an installed wheel). From a checkout it writes deep-forcing.png into docs/methods/
unless --out-dir is given; ``--help`` lists the options."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.methods.deep_forcing.benchmark import main  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a == "--out-dir" or a.startswith("--out-dir=") for a in argv):
        argv += ["--out-dir", str(ROOT / "docs" / "methods")]
    raise SystemExit(main(argv))
