"""Plain autoregressive decoding of the target with a KV cache: the ``ar-decoding`` baseline
(one AR forward per token; greedy at ``temperature == 0``, else tempered top-p sampling)."""
from __future__ import annotations

from typing import Any

import torch

from zoo.common.ar_cache import CacheFactory, ar_forward, cache_kwarg, new_cache
from zoo.common.discrete import gumbel_max, top_p_filter
from zoo.common.masked_dlm import TextSampler, eos_of, resolve_max_new_tokens

from .params import ARDecodingParams


class ARDecoding(TextSampler):
    """Token-by-token decoding of the causal LM ``target`` (role name: parameter ``target_role``);
    ``cache_factory`` replaces the default ``DynamicCache``."""

    Params = ARDecodingParams

    def __init__(self, models, params, device="cpu", dtype=None, cache_factory: CacheFactory | None = None):
        super().__init__(models, params, device, dtype)
        self.target = self.role("target")
        self._kw = cache_kwarg(self.target)
        self.cache_factory = cache_factory

    def clone_kwargs(self) -> dict[str, Any]:
        return {"cache_factory": self.cache_factory}  # a per-call override keeps the caller's cache

    def _models_for_tokenizer(self) -> list[Any]:
        return [self.target]

    def native(self) -> Any:
        """The target's own ``generate()`` decoding as this sampler does (an
        :class:`~zoo.methods.poe_bridge.native.ARGenerate` on the built target, with this sampler's
        ``cache_factory`` and, at ``temperature > 0``, its temperature/top-p and seeded Gumbel-max as
        logits processors): ``native(input_ids, seed=s)[:, len(prompt):]`` are the tokens of
        ``self(input_ids=..., seed=s).token_ids``. Only for a transformers model (one with ``generate``)."""
        from .native import ARGenerate

        if not callable(getattr(self.target, "generate", None)):
            raise ValueError(f"ARDecoding: no native generate() for a non-transformers target ({type(self.target).__name__})")
        p = self.params
        return ARGenerate(self.target, temperature=p.temperature, top_p=p.top_p,
                          max_new_tokens=resolve_max_new_tokens(p.max_new_tokens, self.target),
                          eos_token_id=eos_of(self.tokenizer(), self.target), cache_factory=self.cache_factory)

    @torch.no_grad()
    def generate_row(self, prompt_ids: list[int], g: torch.Generator, eos: int | None):
        p = self.params
        n_max = resolve_max_new_tokens(p.max_new_tokens, self.target)
        cache = new_cache(self.target, self.cache_factory)
        feed = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        new: list[int] = []
        forwards = 0
        for _ in range(n_max):
            logits = ar_forward(self.target, feed, cache, self._kw)[0, -1].float()
            forwards += 1
            if p.temperature == 0:
                t = int(logits.argmax())
            else:
                t = int(gumbel_max(top_p_filter(logits / p.temperature, p.top_p), g))
            new.append(t)
            if eos is not None and t == eos:
                break
            feed = torch.tensor([[t]], dtype=torch.long, device=self.device)
        return new, {"ar_forwards": forwards, "new_tokens": len(new)}
