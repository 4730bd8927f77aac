"""Deprecated: this module is now :mod:`zoo.common.out_files` (the `--out PATH` file-name rules); this shim re-exports its names and warns on import, for
one release (removed in zoo 0.2)."""
from __future__ import annotations

import importlib as _importlib
import warnings as _warnings
from typing import Any as _Any

from zoo.common.out_files import *  # noqa: F401,F403 - the public names, the very same objects

_NEW = _importlib.import_module("zoo.common.out_files")
_warnings.warn("zoo.common.output is deprecated, import zoo.common.out_files", DeprecationWarning, stacklevel=2)


def __getattr__(name: str) -> _Any:
    """Any other name of the new module (the same object)."""
    return getattr(_NEW, name)
