"""Metric checks for ``specs/unidflow.yaml``: ``fn(pipeline, **check_params) -> float`` on the ``toy``
variant, whose roles are the stages and the ablation (``model`` final, ``reference`` stage II, ``stage1``,
``shared``: the single-adapter ablation). Each evaluation runs once per pipeline (``Pipeline.memo``), seed 0; the
same functions fill ``zoo bench unidflow``'s table."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from . import evaluate as E
from .exact_dpo import surrogate_gap


def _memo(pipeline: Any, key: tuple, fn):
    return pipeline.memo(("unidflow",) + key, fn) if hasattr(pipeline, "memo") else fn()


def caption(pipeline: Any, role: str) -> float:
    return _memo(pipeline, ("caption", role), lambda: E.caption_accuracy(pipeline.models[role]))


def gen(pipeline: Any, role: str, per_caption: int) -> dict[str, float]:
    return _memo(pipeline, ("gen", role, per_caption), lambda: E.generation(pipeline.models[role], per_caption))


@metric_check
def caption_accuracy(pipeline: Any, role: str = "model") -> float:
    """Understanding: exact-match caption accuracy (greedy, 3 DFM steps) over all 348 scenes."""
    return caption(pipeline, role)


@metric_check
def understanding_drop(pipeline: Any, after: str = "model", before: str = "stage1") -> float:
    """Interference: caption accuracy of ``before`` (after stage I) minus that of ``after`` (after generation
    training), in points, both with their learned routers."""
    return 100.0 * (caption(pipeline, before) - caption(pipeline, after))


@metric_check
def faithfulness(pipeline: Any, role: str = "model", per_caption: int = 16) -> float:
    """Generation: fraction of ``per_caption`` samples (temperature 1, 16 steps) per caption that are a scene
    with exactly that caption (36 captions)."""
    return gen(pipeline, role, per_caption)["faithfulness"]


@metric_check
def diversity(pipeline: Any, role: str = "model", per_caption: int = 16) -> float:
    """Generation: mean number of distinct faithful images per caption among ``per_caption`` samples."""
    return gen(pipeline, role, per_caption)["diversity"]


@metric_check
def edit_accuracy(pipeline: Any, role: str = "model") -> float:
    """Editing: exact-match recolouring (greedy, 16 steps) of all 348 scenes to each non-background colour."""
    return _memo(pipeline, ("edit", role), lambda: E.editing(pipeline.models[role]))


@metric_check
def preference_margin(pipeline: Any, role: str = "model") -> float:
    """Mean surrogate-ELBO margin ℓ(w|c) − ℓ(l|c) (nats) on 512 held preference pairs (shared t and mask)."""
    return _memo(pipeline, ("margin", role), lambda: E.preference_margin(pipeline.models[role]))


@metric_check
def dpo_tv_to_optimum(pipeline: Any, objective: str = "surrogate", V: int = 4, beta: float = 0.5, seed: int = 0) -> float:
    """2-token images: TV between p* ∝ p_ref exp(r/β) and the sampler law of the population-DPO optimum
    trained with the exact log-likelihood or the masked-CE (ELBO) surrogate (model-free, float64)."""
    out = _memo(pipeline, ("gap", V, beta, seed), lambda: surrogate_gap(V, beta, seed))
    return out["tv_exact" if objective == "exact" else "tv_surrogate"]
