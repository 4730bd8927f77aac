"""Test environment: offline hub, one torch thread, the demo plugin importable and allowed, no inherited $COLUMNS."""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")
# `zoo check` stores re-measured metrics; tests must not overwrite the user's (tests/test_metrics.py)
if "ZOO_METRICS_DIR" not in os.environ:
    os.environ["ZOO_METRICS_DIR"] = tempfile.mkdtemp(prefix="zoo-test-metrics-")
    atexit.register(shutil.rmtree, os.environ["ZOO_METRICS_DIR"], True)

FIXTURES = Path(__file__).parent / "fixtures"
sys.path.insert(0, str(FIXTURES))
os.environ["ZOO_ALLOWED_PACKAGES"] = "zoo_demo_plugin"
# `zoo` tables honour $COLUMNS even in a pipe (zoo.tables); pytest-xdist workers can inherit COLUMNS=80 from
# the terminal that started them, which would wrap the plain one-line-per-row output the tests read. Tests
# that want a width set it themselves.
os.environ.pop("COLUMNS", None)

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass

from registry.conformance import load_hypothesis_profile  # noqa: E402

load_hypothesis_profile(slow=os.environ.get("HYPOTHESIS_PROFILE") == "nightly")


@pytest.fixture(autouse=True)
def _process_catalog_keeps_its_folders():
    """A test that adds spec folders to the process-wide catalog (``zoo --specs DIR ...`` through ``zoo.cli.main``,
    ``zoo.add_specs``) takes them away again, so a later test does not see its broken specs."""
    import zoo

    cat = zoo.catalog()
    before = list(cat._dirs)
    yield
    if cat._dirs != before:
        with cat._lock:
            cat._dirs[:] = before
            cat._entries = None
