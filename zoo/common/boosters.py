"""XGBoost boosters as run-time artefacts: to/from XGBoost's own UBJSON bytes held in a numeric array
(never pickle), so :func:`registry.artifacts.cached_artifact` can store them in safetensors files."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["booster_from_bytes", "booster_to_bytes"]


def booster_to_bytes(booster: Any) -> np.ndarray:
    """A booster (``xgboost.Booster``) as a uint8 array of its UBJSON model."""
    return np.frombuffer(bytes(booster.save_raw("ubj")), dtype=np.uint8).copy()


def booster_from_bytes(arr: Any, nthread: int = 1) -> Any:
    """The booster saved by :func:`booster_to_bytes` (numpy array or CPU tensor), predicting on ``nthread`` threads."""
    import xgboost as xgb

    if hasattr(arr, "numpy"):
        arr = arr.numpy()
    b = xgb.Booster()
    b.load_model(bytearray(np.asarray(arr, dtype=np.uint8).tobytes()))
    b.set_param({"nthread": nthread})
    return b
