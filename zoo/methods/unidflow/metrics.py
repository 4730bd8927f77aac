"""Metric checks for ``specs/unidflow.yaml``: ``fn(pipeline, **check_params) -> float`` on the ``toy``
variant, whose roles are the stages and the ablation (``model`` final, ``reference`` stage II, ``stage1``,
``shared``: the single-adapter ablation). Each evaluation runs once per pipeline (``Pipeline.memo``). The sampled
rates are means over ``seeds`` base seeds 0 … seeds−1 (:func:`.evaluate.over_seeds`; the margin's pair seeds are
1234 + k): one draw has a per-seed sd of 0.6–5 tolerances (measured sds in the spec's notes). Editing
stays one greedy draw (seed 0; sd ≈ 0.006 over seeds 0–2, inside its 0.02). ``zoo bench unidflow`` prints the
same means with their standard errors."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from . import evaluate as E
from .exact_dpo import surrogate_gap
from .params import (CaptionAccuracyParams, DiversityParams, DpoTvToOptimumParams, EditAccuracyParams, FaithfulnessParams,
                     PreferenceMarginParams, UnderstandingDropParams)


def _memo(pipeline: Any, key: tuple, fn):
    return pipeline.memo(("unidflow",) + key, fn) if hasattr(pipeline, "memo") else fn()


def caption(pipeline: Any, role: str, seeds: int) -> float:
    m = pipeline.models[role]
    return _memo(pipeline, ("caption", role, seeds),
                 lambda: E.over_seeds(lambda s: {"acc": E.caption_accuracy(m, seed=s)}, range(seeds))["acc"])


def gen(pipeline: Any, role: str, per_caption: int, seeds: int) -> dict[str, float]:
    m = pipeline.models[role]
    return _memo(pipeline, ("gen", role, per_caption, seeds),
                 lambda: E.over_seeds(lambda s: E.generation(m, per_caption, seed=s), range(seeds)))


@metric_check(params=CaptionAccuracyParams)
def caption_accuracy(pipeline: Any, role: str = "model", seeds: int = 4) -> float:
    """Understanding: exact-match caption accuracy (greedy, 3 DFM steps) over all 348 scenes, mean over base
    seeds 0 … ``seeds``−1 (the seed draws the unmasking order)."""
    return caption(pipeline, role, seeds)


@metric_check(params=UnderstandingDropParams)
def understanding_drop(pipeline: Any, after: str = "model", before: str = "stage1", seeds: int = 4) -> float:
    """Interference: caption accuracy of ``before`` (after stage I) minus that of ``after`` (after generation
    training), in points, both with their learned routers, each the mean over base seeds 0 … ``seeds``−1."""
    return 100.0 * (caption(pipeline, before, seeds) - caption(pipeline, after, seeds))


@metric_check(params=FaithfulnessParams)
def faithfulness(pipeline: Any, role: str = "model", per_caption: int = 16, seeds: int = 8) -> float:
    """Generation: fraction of ``per_caption`` samples (temperature 1, 16 steps) per caption that are a scene
    with exactly that caption (36 captions), mean over base seeds 0 … ``seeds``−1."""
    return gen(pipeline, role, per_caption, seeds)["faithfulness"]


@metric_check(params=DiversityParams)
def diversity(pipeline: Any, role: str = "model", per_caption: int = 16, seeds: int = 8) -> float:
    """Generation: mean number of distinct faithful images per caption among ``per_caption`` samples, mean over
    base seeds 0 … ``seeds``−1."""
    return gen(pipeline, role, per_caption, seeds)["diversity"]


@metric_check(params=EditAccuracyParams)
def edit_accuracy(pipeline: Any, role: str = "model") -> float:
    """Editing: exact-match recolouring (greedy, 16 steps) of all 348 scenes to each non-background colour."""
    return _memo(pipeline, ("edit", role), lambda: E.editing(pipeline.models[role]))


@metric_check(params=PreferenceMarginParams)
def preference_margin(pipeline: Any, role: str = "model", seeds: int = 16) -> float:
    """Mean surrogate-ELBO margin ℓ(w|c) − ℓ(l|c) (nats) on 512 held preference pairs (shared t and mask), mean
    over the pair/t/mask seeds 1234 … 1234 + ``seeds``−1."""
    m = pipeline.models[role]
    return _memo(pipeline, ("margin", role, seeds),
                 lambda: E.over_seeds(lambda s: {"m": E.preference_margin(m, seed=1234 + s)}, range(seeds))["m"])


@metric_check(params=DpoTvToOptimumParams)
def dpo_tv_to_optimum(pipeline: Any, objective: str = "surrogate", V: int = 4, beta: float = 0.5, seed: int = 0) -> float:
    """2-token images: TV between p* ∝ p_ref exp(r/β) and the sampler law of the population-DPO optimum
    trained with the exact log-likelihood or the masked-CE (ELBO) surrogate (model-free, float64)."""
    out = _memo(pipeline, ("gap", V, beta, seed), lambda: surrogate_gap(V, beta, seed))
    return out["tv_exact" if objective == "exact" else "tv_surrogate"]
