"""KV-cache helpers for autoregressive (causal) LMs, shared by the text samplers.

transformers 5.x renamed the forward keyword ``past_key_values`` to ``cache`` (5.2x); :func:`cache_kwarg`
reads the model's forward signature once so that one code path serves both. :func:`new_cache` builds a
``DynamicCache`` unless the caller passes a ``cache_factory`` (any zero-argument callable returning a
transformers ``Cache``, e.g. a ``DynamicCache`` subclass that counts or offloads) or the model offers
its own ``zoo_new_cache()`` (non-transformers targets used by tests).

Crop/select/repeat wrap the ``Cache`` methods with the conventions the samplers rely on: crop with the
negative form (tokens to remove), which means the same in every 5.x release; select keeps one batch row.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

CacheFactory = Callable[[], Any]


def new_cache(model: Any, cache_factory: CacheFactory | None = None):
    """A fresh cache for ``model``: ``cache_factory()`` when given, else the model's own ``zoo_new_cache()``,
    else a ``DynamicCache`` built from the model's config."""
    if cache_factory is not None:
        return cache_factory()
    if hasattr(model, "zoo_new_cache"):
        return model.zoo_new_cache()
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:  # older signatures
        return DynamicCache()


def cache_kwarg(model: Any) -> str:
    """``cache`` (transformers >= 5.2x) or ``past_key_values`` (older 5.x), by the forward signature."""
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def ar_forward(model: Any, input_ids: torch.Tensor, cache: Any, kwarg: str | None = None):
    """One AR forward that appends to ``cache`` in place and returns the logits ``[B, T, V]``."""
    kw = {kwarg or cache_kwarg(model): cache}
    return model(input_ids=input_ids, use_cache=True, **kw).logits


def cache_len(cache: Any) -> int:
    """Positions held by ``cache`` (0 for ``None``)."""
    return 0 if cache is None else int(cache.get_seq_length())


def cache_crop(cache: Any, length: int) -> None:
    """Crop the cache to ``length`` positions. Uses the negative form (tokens to remove), the only one
    that means the same in every transformers 5.x (positive values are absolute lengths before 5.2x and
    errors after)."""
    extra = cache_len(cache) - length
    if extra > 0:
        cache.crop(-extra)


def cache_select(cache: Any, index: int) -> None:
    """Keep batch row ``index`` only (in place)."""
    cache.batch_select_indices(torch.tensor([index], device=cache_device(cache)))


def cache_repeat(cache: Any, k: int) -> None:
    """Repeat every batch row ``k`` times (in place); no-op for ``k == 1``."""
    if k > 1:
        cache.batch_repeat_interleave(k)


def cache_device(cache: Any):
    """Device of the cached keys (CPU for an empty cache)."""
    for layer in getattr(cache, "layers", []):
        keys = getattr(layer, "keys", None)
        if isinstance(keys, torch.Tensor):
            return keys.device
    return "cpu"
