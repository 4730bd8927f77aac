"""Metric checks for ``specs/egt.yaml``: ``fn(pipeline, **check_params) -> float``. Each re-runs one
recipe of the spec with its own parameters and seed 0 (digits: the ``seed`` of the check; memoised per
pipeline), exactly what ``zoo bench egt`` reports."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from .params import DigitsStatParams, GaussianStatParams, RecipeStatParams


def _run(pipeline: Any, recipe: str, seed: int = 0) -> Any:
    return pipeline.memo(("egt", recipe, seed), lambda: pipeline.procedures[recipe](seed=seed))


@metric_check(params=GaussianStatParams)
def gaussian_stat(pipeline: Any, recipe: str, stat: str, which: str = "after", group: int | None = None) -> float:
    """A number of a Gaussian recipe: ``stat`` in gap / worst / weighted / joint_kl / proportion_gap /
    matched_gap / kl (with ``group``) / w (exact dual weight, with ``group``) / q (final group-DRO
    weight, with ``group``) / sampled_proportion_gap (measured on draws of the model's sampler), of the
    fine-tuned model's last iterate (``which=after``), its tail-averaged iterate (``averaged``), the ERM
    start (``before``) or the exact min–max solution (``exact``)."""
    out = _run(pipeline, recipe)
    if stat == "q":
        return float(out["weight_history"][-1][group])
    src = {"after": out, "averaged": out["averaged"], "before": out["before"], "exact": out["exact_minmax"]}[which]
    if stat in ("proportion_gap", "matched_gap", "sampled_proportion_gap") and which != "after":
        raise ValueError(f"{stat} is only reported for the fine-tuned model")
    v = src[stat]
    return float(v[group] if isinstance(v, list) else v)


@metric_check(params=DigitsStatParams)
def digits_stat(pipeline: Any, recipe: str, stat: str, which: str = "after", seed: int = 0) -> float:
    """``loss_gap`` / ``recall_gap`` / ``worst_loss`` / ``worst_recall`` / ``mean_loss`` of a digits recipe run
    with ``seed``, before or after; ``which=change``: after − before (the arm's own health)."""
    v = _run(pipeline, recipe, seed)[stat]
    return float(v["after"] - v["before"]) if which == "change" else float(v[which])


@metric_check(params=RecipeStatParams)
def ddpm_stat(pipeline: Any, recipe: str, stat: str, which: str = "after") -> float:
    """``gap`` / ``worst`` / ``weighted`` of the per-group held-out excess loss of a DDPM recipe, before or after."""
    return float(_run(pipeline, recipe)[stat][which])
