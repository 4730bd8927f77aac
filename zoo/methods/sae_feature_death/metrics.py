"""Cheap metric checks for ``specs/sae-feature-death.yaml``: ``fn(pipeline) -> float``.

Each re-measures one number of the toy variant (packaged MiniLM, layer 3, lee_background.cor)
with exactly the settings that ``tools/bench_sae_death.py`` reports for it."""
from __future__ import annotations

from registry.contract import metric_check

from typing import Any

CHECK_TOKENS = 4096  # cheap checks: the first 4096 tokens (the full table uses 20,000)


def _report(pipeline: Any, **kw: Any) -> dict:
    return pipeline(seed=0, max_tokens=CHECK_TOKENS, **kw)


@metric_check
def gamma_native(pipeline: Any) -> float:
    """gamma_postLN of native MiniLM layer-3 activations (no injected outlier)."""
    return _report(pipeline, magnitudes=[0.0], preprocessings=[])["rows"][0]["gamma"]


@metric_check
def dead_total_m40(pipeline: Any) -> float:
    """Total init death (b_dec = 0, TopK F=3072 k=32) with a +40 outlier on dim 0 (gamma ~ 3.5)."""
    return _report(pipeline, magnitudes=[40.0], preprocessings=[])["rows"][0]["dead_total"]


@metric_check
def dead_relu_m40(pipeline: Any) -> float:
    """Dead-by-ReLU fraction at init with a +40 outlier on dim 0 (gamma ~ 3.5)."""
    return _report(pipeline, magnitudes=[40.0], preprocessings=[])["rows"][0]["dead_relu"]


@metric_check
def dead_total_mean_centred_max(pipeline: Any) -> float:
    """Max over m in {0, 40, 320} of total init death after mean-centring (the fix: ~0)."""
    rows = _report(pipeline, magnitudes=[0.0, 40.0, 320.0], preprocessings=["mean"])["rows"]
    return max(r["dead_total_mean"] for r in rows)


def _training(pipeline: Any, how: str) -> float:
    proc = pipeline.samplers["centred-training"]
    rep = proc(seed=0, magnitudes=[160.0])
    return next(r["dead_final"] for r in rep["rows"] if r["b_dec_init"] == how)


@metric_check
def trained_dead_zeros_m160(pipeline: Any) -> float:
    """Final dead fraction after training from b_dec = 0 at gamma ~ 14 (spec params)."""
    return _training(pipeline, "zeros")


@metric_check
def trained_dead_mean_m160(pipeline: Any) -> float:
    """Final dead fraction after training from b_dec = mean at gamma ~ 14 (spec params)."""
    return _training(pipeline, "mean")
