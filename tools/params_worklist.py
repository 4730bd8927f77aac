#!/usr/bin/env python
"""What a package registers, its models, and whether its params module agrees: ``python -m registry.declare``
under its old name (kept for the migration; see registry/declare.py)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from registry.declare import main, registered_targets as registered  # noqa: E402,F401 - registered: tests' old import

if __name__ == "__main__":
    raise SystemExit(main())
