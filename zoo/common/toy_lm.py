"""The two tiny language models the discrete-LM toys build (CoDiLA, PoE-Bridge, and the specs that reuse their
toys): one definition of their size fields with their bounds (a spec's ``config`` of the factory) and of how
each is built over a toy tokenizer, so that a toy states only its default sizes and its own fields.

* :class:`MaskedLMSize` / :func:`build_masked_lm`: :class:`~zoo.common.masked_dlm.TinyMaskedLM`, a
  bidirectional masked denoiser (the DLM drafter / proposal);
* :class:`Qwen2Size` / :func:`build_qwen2`: a tiny ``Qwen2ForCausalLM`` with tied embeddings (an AR model,
  or with ``is_causal=False`` a bidirectional one);
* :func:`sized`: a size model with a toy's own defaults (the bounds stay these).

Bounds (:data:`SIZES`, one row per dimension for both): width <= 1024, feed-forward width <= 4096, <= 16 layers,
<= 32 heads, <= 4096 positions, so the largest model a ``config`` can ask for has ~0.27 B parameters (the Qwen2,
~1.1 GB in fp32) and still builds on a CPU. CoDiLA's copy had these but max_len <= 1024; PoE-Bridge's had
drifted to 4096 / 16384 / 64 / 64 / 8192, which admits a ~17 B-parameter "toy"; no shipped or declared config
comes near either.
Both builders seed the global RNG (``torch.manual_seed(seed)``) right before the module is made, so a build
consumes the RNG exactly as the toys' factories always did.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from zoo.common.params import FFN, HEADS, LAYERS, POSITIONS, SIZES, WIDTH, MaskedLMSize, Qwen2Size, sized  # noqa: F401

__all__ = ["MaskedLMSize", "Qwen2Size", "build_masked_lm", "build_qwen2", "sized"]


def build_masked_lm(tok: Any, config: Mapping[str, Any], seed: int = 0) -> nn.Module:
    """A :class:`~zoo.common.masked_dlm.TinyMaskedLM` of sizes ``config`` over ``tok`` (its vocabulary and mask id),
    randomly initialised after ``torch.manual_seed(seed)``, in eval mode, carrying ``zoo_tokenizer``."""
    from .masked_dlm import TinyMaskedLM

    torch.manual_seed(seed)
    model = TinyMaskedLM(tok.vocab_size, tok.mask_token_id, **config).eval()
    model.zoo_tokenizer = tok
    return model


def build_qwen2(tok: Any, config: Mapping[str, Any], seed: int = 0, **extra: Any) -> nn.Module:
    """A ``Qwen2ForCausalLM`` of sizes ``config`` over ``tok`` (vocabulary, BOS/EOS/PAD ids; tied embeddings; ``extra``
    further ``Qwen2Config`` fields), randomly initialised after ``torch.manual_seed(seed)``, in eval mode, carrying
    ``zoo_tokenizer``."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    conf = Qwen2Config(vocab_size=tok.vocab_size, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       pad_token_id=tok.pad_token_id, tie_word_embeddings=True, **extra, **config)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(conf).eval()
    model.zoo_tokenizer = tok
    return model
