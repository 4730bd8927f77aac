"""Metric checks for ``specs/dsmtree.yaml`` (seed 0, what ``zoo bench dsmtree`` reports)."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from .params import StudentAccuracyParams
from .procedures import TreeDistillation


@metric_check(params=StudentAccuracyParams)
def student_accuracy(pipeline: Any, mode: str, steps: int = 3000, n_train: int = 2000, width: int = 64) -> float:
    """Test accuracy (5,000 fresh points) of the student trained with ``mode`` (``steps`` Adam steps, hidden
    ``width``), seed 0."""
    proc = TreeDistillation({}, TreeDistillation.Params(mode=mode, steps=steps, n_train=n_train, width=width, use_cache=False))
    return proc(seed=0).student_acc
