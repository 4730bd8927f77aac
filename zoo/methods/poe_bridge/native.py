"""The native transformers object of an AR sampler (issue #11 item 14): ``pipe.native`` of
``ar-decoding`` is the target model's own ``generate()``, set up to decode exactly as
:class:`~zoo.methods.poe_bridge.baselines.ARDecoding` does, so that for the same seed it returns the
same tokens.

What ``generate()`` is given (:meth:`ARGenerate.generate_kwargs`):

* ``generation_config``: a fresh ``GenerationConfig`` in greedy mode (``do_sample=False``) with the
  sampler's ``max_new_tokens``, its EOS id (one id, as the zoo sampler stops on) and every penalty or
  warper that a checkpoint's ``generation_config`` may switch on set to its neutral value (a checkpoint
  such as Qwen2.5-Instruct ships ``repetition_penalty=1.05``; the zoo sampler applies none of them);
* ``logits_processor``: at ``temperature > 0``, :class:`TemperatureTopPLogitsWarper` (the sampler's
  order: ``top_p_filter(logits / temperature, top_p)``, :func:`zoo.common.discrete.top_p_filter`) then
  :class:`SeededGumbelLogitsProcessor`, which adds float64 Gumbel noise drawn from a seeded
  ``torch.Generator`` per row. ``argmax(l + G)`` is a draw from ``softmax(l)`` (the Gumbel-max trick,
  Gumbel 1954; Maddison et al. 2014, https://arxiv.org/abs/1411.0030), so greedy ``generate()`` samples,
  reproducibly, the token :func:`zoo.common.discrete.gumbel_max` draws in the zoo call
  (transformers' own ``do_sample=True`` path draws with ``torch.multinomial`` from the global RNG and
  cannot take a generator). At ``temperature == 0`` the list is empty: plain greedy decoding;
* the cache: a fresh transformers ``Cache`` per call from the sampler's ``cache_factory`` (else a
  ``DynamicCache``; :func:`zoo.common.ar_cache.new_cache`), passed under the keyword the installed
  transformers uses (``cache=`` in 5.2x, where ``past_key_values=`` is deprecated; read from the model's
  forward signature by :func:`zoo.common.ar_cache.cache_kwarg`).

Rows: the zoo decodes each prompt row with its own generator seeded by ``seed``; :meth:`ARGenerate.__call__`
gives every row of ``input_ids`` its own generator seeded by ``seed`` as well. Rows of a batch must have
the same length (no padding: a left-padded row runs different positions, so it would not be the zoo's row).
With ``output_scores=True`` the stored scores are the noised ones.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from transformers import GenerationConfig, LogitsProcessor, LogitsProcessorList

from zoo.common.ar_cache import CacheFactory, cache_kwarg, new_cache
from zoo.common.discrete import gumbel_noise, top_p_filter

__all__ = ["ARGenerate", "SeededGumbelLogitsProcessor", "TemperatureTopPLogitsWarper"]

# Every generation option with a processor or a search mode that a checkpoint's generation_config can
# switch on, at the value that switches it off (transformers' own defaults). generate() fills options
# left at None from the model's generation_config, so they are set explicitly.
NEUTRAL = dict(do_sample=False, num_beams=1, num_beam_groups=1, num_return_sequences=1, temperature=1.0, top_k=50,
               top_p=1.0, typical_p=1.0, epsilon_cutoff=0.0, eta_cutoff=0.0, min_length=0,
               repetition_penalty=1.0, encoder_repetition_penalty=1.0, length_penalty=1.0, no_repeat_ngram_size=0,
               encoder_no_repeat_ngram_size=0, diversity_penalty=0.0, remove_invalid_values=False,
               renormalize_logits=False)
# Options whose "off" value is None (min_new_tokens: 0 and min_length together make generate() warn), so a checkpoint that sets them cannot be overridden through a
# GenerationConfig: refused with one line rather than silently decoding differently.
UNNEUTRALISABLE = ("min_new_tokens", "bad_words_ids", "forced_bos_token_id", "forced_eos_token_id", "exponential_decay_length_penalty",
                   "suppress_tokens", "begin_suppress_tokens", "sequence_bias", "guidance_scale", "watermarking_config",
                   "stop_strings", "max_time", "penalty_alpha", "dola_layers", "constraints", "force_words_ids",
                   "prompt_lookup_num_tokens", "token_healing")


class TemperatureTopPLogitsWarper(LogitsProcessor):
    """``top_p_filter(scores / temperature, top_p)`` row by row: temperature first, then the nucleus on
    the tempered law (the smallest set reaching ``top_p``, the most likely token always kept), exactly
    the zoo sampler's expression (:func:`zoo.common.discrete.top_p_filter`)."""

    def __init__(self, temperature: float, top_p: float = 1.0):
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {top_p}")
        self.temperature, self.top_p = float(temperature), float(top_p)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        return torch.stack([top_p_filter(row / self.temperature, self.top_p) for row in scores])


class SeededGumbelLogitsProcessor(LogitsProcessor):
    """Adds float64 Gumbel(0, 1) noise drawn from ``generators[i]`` to row ``i`` (one vocabulary-sized
    draw per row per step, as :func:`zoo.common.discrete.gumbel_max` draws for one row), so that the
    greedy argmax of ``generate(do_sample=False)`` is a seeded sample of ``softmax(scores)``."""

    def __init__(self, generators: torch.Generator | Sequence[torch.Generator]):
        self.generators = [generators] if isinstance(generators, torch.Generator) else list(generators)
        if not self.generators:
            raise ValueError("give at least one torch.Generator")

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if scores.shape[0] != len(self.generators):
            raise ValueError(f"{scores.shape[0]} rows but {len(self.generators)} generators (one per row)")
        noise = [gumbel_noise(row.shape, g, row.device) for row, g in zip(scores, self.generators)]
        return scores.double() + torch.stack(noise)


class ARGenerate:
    """``model.generate()`` decoding as :class:`~zoo.methods.poe_bridge.baselines.ARDecoding` with the
    same parameters does (see the module docstring). ``native(input_ids, seed=s)`` returns what
    ``generate()`` returns (prompt + new tokens); ``native.model.generate(input_ids,
    **native.generate_kwargs(seed=s))`` is the same call spelled out. Attributes: ``model`` (the built
    target, not a copy), ``generation_config``, ``temperature``, ``top_p``, ``cache_factory``."""

    def __init__(self, model: Any, *, temperature: float, top_p: float, max_new_tokens: int, eos_token_id: int | None,
                 cache_factory: CacheFactory | None = None):
        bad = [k for k in UNNEUTRALISABLE if getattr(getattr(model, "generation_config", None), k, None) not in (None, [], {})]
        if bad:
            raise ValueError(f"the model's generation_config sets {', '.join(bad)}, which generate() would apply and "
                             "ARDecoding does not; unset them for a native generate() that matches")
        self.model = model
        self.temperature, self.top_p = float(temperature), float(top_p)
        self.cache_factory = cache_factory
        pad = getattr(model.config, "pad_token_id", None)
        self.generation_config = GenerationConfig(**NEUTRAL, max_new_tokens=int(max_new_tokens), eos_token_id=eos_token_id,
                                                  pad_token_id=pad if pad is not None else eos_token_id, use_cache=True)

    def logits_processor(self, seed: int = 0, batch_size: int = 1,
                         generator: torch.Generator | Sequence[torch.Generator] | None = None) -> LogitsProcessorList:
        """The sampler as logits processors: empty when greedy, else the warper and the seeded noise
        (``generator``: one per row, else ``batch_size`` generators seeded by ``seed``)."""
        if self.temperature == 0:
            return LogitsProcessorList()
        gens = generator if generator is not None else [torch.Generator().manual_seed(int(seed)) for _ in range(batch_size)]
        return LogitsProcessorList([TemperatureTopPLogitsWarper(self.temperature, self.top_p), SeededGumbelLogitsProcessor(gens)])

    def new_cache(self) -> Any:
        """A fresh transformers ``Cache`` (the sampler's ``cache_factory``, else a ``DynamicCache``)."""
        return new_cache(self.model, self.cache_factory)

    def generate_kwargs(self, seed: int = 0, batch_size: int = 1,
                        generator: torch.Generator | Sequence[torch.Generator] | None = None) -> dict[str, Any]:
        """Keyword arguments of ``model.generate`` for one call (a fresh cache and fresh generators)."""
        return {"generation_config": self.generation_config,
                "logits_processor": self.logits_processor(seed, batch_size, generator),
                cache_kwarg(self.model): self.new_cache()}

    @torch.no_grad()
    def __call__(self, input_ids: Any, *, seed: int = 0, generator: torch.Generator | Sequence[torch.Generator] | None = None,
                 attention_mask: torch.Tensor | None = None, **generate_kwargs: Any) -> Any:
        """``model.generate(input_ids, ...)`` for rows of equal length (a list of ids or a tensor
        ``[B, T]``); every row gets its own generator seeded by ``seed`` unless ``generator`` is given."""
        ids = input_ids if isinstance(input_ids, torch.Tensor) else torch.tensor(input_ids, dtype=torch.long)
        if ids.dim() == 1:
            ids = ids.unsqueeze(0)
        ids = ids.to(self.model.device)
        if attention_mask is None:
            attention_mask = torch.ones_like(ids)
        return self.model.generate(ids, attention_mask=attention_mask,
                                   **self.generate_kwargs(seed, ids.shape[0], generator), **generate_kwargs)

    def __repr__(self) -> str:
        return (f"ARGenerate({type(self.model).__name__}.generate, temperature={self.temperature}, top_p={self.top_p}, "
                f"max_new_tokens={self.generation_config.max_new_tokens}, "
                f"cache={'DynamicCache' if self.cache_factory is None else self.cache_factory})")
