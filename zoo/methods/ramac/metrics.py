"""Metric checks for ``specs/ramac.yaml``: ``fn(pipeline, **check_params) -> float``.

Each scores one shipped actor on the 2-D risky bandit exactly as ``zoo bench ramac`` does (1,000
actions, chain-noise seed 0, reward seed 1): the number is deterministic on one machine, and the
spec's tolerance covers float differences across platforms only, not reward noise."""
from __future__ import annotations

from typing import Any

from registry.contract import metric_check

from .params import ActorRiskParams, CvarGainParams, QuantileFitParams
from .procedures import evaluate_actor

QUANTITIES = ("cvar", "mean", "exact_cvar", "exact_mean", "ood_rate", "safe_rate", "risky_rate")


def _eval(pipeline: Any, role: str, n: int, seed: int) -> Any:
    return pipeline.memo(("ramac-eval", role, n, seed), lambda: evaluate_actor(pipeline.models[role], n, 0.1, seed, role))


@metric_check(params=ActorRiskParams)
def actor_risk(pipeline: Any, role: str = "actor", quantity: str = "exact_cvar", n: int = 1000, seed: int = 0) -> float:
    """One quantity of :class:`~zoo.methods.ramac.procedures.EvaluationOutput` for actor ``role``."""
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {', '.join(QUANTITIES)}, got {quantity!r}")
    return float(getattr(_eval(pipeline, role, n, seed), quantity))


@metric_check(params=CvarGainParams)
def cvar_gain(pipeline: Any, role: str = "actor", baseline: str = "actor-risk-neutral", quantity: str = "exact_cvar", n: int = 1000, seed: int = 0) -> float:
    """``quantity(role) - quantity(baseline)``: RAMAC's CVaR gain over a baseline measured on the same draws."""
    return actor_risk(pipeline, role, quantity, n, seed) - actor_risk(pipeline, baseline, quantity, n, seed)


@metric_check(params=QuantileFitParams)
def quantile_fit(pipeline: Any, level: float = 0.1, kappa: float = 1.0, pairing: str = "standard") -> float:
    """q(level) of the free quantile vector fitted to a stratified N(0, 1) sample (levels 0.05, 0.1, 0.5,
    0.9; 300 Adam steps) with the quantile-Huber loss: the critic-loss pairing check of the method note
    (sec. 9), deterministic. ``pairing`` standard or radac_released; ``kappa = 0`` is the pure pinball loss."""
    from .risk import fit_free_quantiles, stratified_normal

    levels = (0.05, 0.1, 0.5, 0.9)
    if level not in levels:
        raise ValueError(f"level must be one of {levels}")

    def fit() -> Any:
        grid = stratified_normal(2048)
        return fit_free_quantiles(levels, lambda b, g: grid, kappa=kappa, pairing=pairing, steps=300)  # type: ignore[arg-type]

    return float(pipeline.memo(("ramac-quantile-fit", kappa, pairing), fit)[levels.index(level)])
