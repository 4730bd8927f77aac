"""Deprecated: this module is now :mod:`zoo.common.quick_flag` (`--quick` for a hand-written argparse tool); this shim re-exports its names and warns on import, for
one release (removed in zoo 0.2)."""
from __future__ import annotations

import importlib as _importlib
import warnings as _warnings
from typing import Any as _Any

from zoo.common.quick_flag import *  # noqa: F401,F403 - the public names, the very same objects

_NEW = _importlib.import_module("zoo.common.quick_flag")
_warnings.warn("zoo.common.bench_output is deprecated, import zoo.common.quick_flag", DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> _Any:
    """Any other name of the new module (the same object)."""
    return getattr(_NEW, name)
