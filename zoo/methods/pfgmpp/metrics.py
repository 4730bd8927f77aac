"""Metric checks of ``specs/pfgmpp.yaml``: ``fn(pipeline, **check_params) -> float`` (the numbers ``zoo bench ipfm`` prints)."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from zoo.common.pfgmpp import data_quality, teacher_quality

from .params import DataStatParams, TeacherStatParams


@metric_check(params=TeacherStatParams)
def teacher_stat(pipeline: Any, nfe: int = 35, stat: str = "sw2", n: int = 2000) -> float:
    """``sw2`` or ``loglik`` of ``n`` Heun samples of the pipeline's teacher (its mixture and D) at ``nfe`` (seed 0)."""
    teacher = getattr(pipeline, "procedure", pipeline).models["teacher"]
    return float(teacher_quality(teacher, nfe, n)[stat])


@metric_check(params=DataStatParams)
def data_stat(pipeline: Any, stat: str = "sw2", n: int = 2000) -> float:
    """The same measure for exact data samples (SW2 floor at this sample size; the data's own mean log-likelihood)."""
    teacher = getattr(pipeline, "procedure", pipeline).models["teacher"]
    return float(data_quality(teacher, n)[stat])
