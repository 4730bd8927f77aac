"""Test environment: offline hub, one torch thread, the demo plugin importable and allowed."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
os.environ["ZOO_ALLOWED_PACKAGES"] = "zoo_demo_plugin"

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass

from registry.conformance import load_hypothesis_profile  # noqa: E402

load_hypothesis_profile(slow=os.environ.get("HYPOTHESIS_PROFILE") == "nightly")
