"""Metric checks for ``specs/probe.yaml``: ``fn(pipeline, **check_params) -> float``. The recipe checks re-run
one recipe of the spec with its own parameters at seed 0 (memoised per pipeline), the numbers ``zoo bench probe``
reports for seed 0; the detector check evaluates the shipped detector on one generator's held-out fakes."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from .core import GENERATORS, UNSEEN, eval_fakes
from .params import DetectorBaccOnParams, ProbeStatParams
from .procedures import bacc_table, memo_on_models


@metric_check(params=DetectorBaccOnParams)
def detector_bacc_on(pipeline: Any, generator: str, n_eval: int = 360) -> float:
    """bAcc of the shipped detector: the first ``n_eval`` real test digits vs ``n_eval`` held-out fakes of
    ``generator`` (``unseen-mean``: the mean over the held-out generators)."""
    names = UNSEEN if generator == "unseen-mean" else (generator,)
    for n in names:
        if n not in GENERATORS:
            raise ValueError(f"unknown generator {n!r}; have {', '.join(GENERATORS)} or unseen-mean")
    models = pipeline.models
    fakes = memo_on_models(models, ("eval", n_eval, names), lambda: eval_fakes(models, names, n_eval))
    table = bacc_table(models["detector"], models, n_eval, names, fakes)
    return float(sum(table.values()) / len(table))


@metric_check(params=ProbeStatParams)
def probe_stat(pipeline: Any, recipe: str, stat: str, which: str = "after") -> float:
    """``unseen_mean`` / ``seen`` (``which`` = before / after) or ``gain`` of a PROBE recipe run at seed 0."""
    out = pipeline.memo(("probe", recipe), lambda: pipeline.procedures[recipe](seed=0))
    v = out[stat]
    return float(v if stat == "gain" else v[which])
