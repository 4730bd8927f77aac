#!/usr/bin/env python
"""LoFlexMDM vs FlexMDM on the toy tasks (checksum, brackets, chain; a thin wrapper: the benchmark is
``zoo.methods.loflexmdm.benchmark``, also run by ``zoo bench loflexmdm [--quick]`` from an installed wheel). From a
checkout it writes the PNG into docs/methods/ unless --png is given; ``--help`` lists the options."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo.methods.loflexmdm.benchmark import main  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    if not any(a == "--png" or a.startswith("--png=") for a in argv):
        argv += ["--png", str(ROOT / "docs" / "methods" / "loflexmdm-bench.png")]
    raise SystemExit(main(argv))
