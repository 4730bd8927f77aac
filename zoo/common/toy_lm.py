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
from pydantic import Field, create_model
from pydantic.fields import FieldInfo
from torch import nn

from registry.contract import FactoryParams

__all__ = ["MaskedLMSize", "Qwen2Size", "build_masked_lm", "build_qwen2", "sized"]

WIDTH, FFN, LAYERS, HEADS, POSITIONS = 1024, 4096, 16, 32, 4096

#: one row per dimension, the same bounds for both architectures:
#: (TinyMaskedLM field, its default, Qwen2Config field, its default, lower bound, upper bound, what it is)
SIZES: tuple[tuple[str | None, int | None, str, int, int, int, str], ...] = (
    ("d_model", 64, "hidden_size", 64, 8, WIDTH, "model width"),
    ("d_ff", 128, "intermediate_size", 192, 8, FFN, "feed-forward (MLP) width"),
    ("n_layers", 2, "num_hidden_layers", 2, 1, LAYERS, "layers"),
    ("n_heads", 4, "num_attention_heads", 4, 1, HEADS, "attention heads"),
    (None, None, "num_key_value_heads", 2, 1, HEADS, "key/value heads (grouped-query attention)"),
    ("max_len", 64, "max_position_embeddings", 64, 8, POSITIONS, "longest sequence (positions)"),
)


def _size_model(name: str, doc: str, qwen2: bool) -> type[FactoryParams]:
    fields = {}
    for m_name, m_default, q_name, q_default, low, high, what in SIZES:
        field, default = (q_name, q_default) if qwen2 else (m_name, m_default)
        if field is not None:
            fields[field] = (int, Field(default, ge=low, le=high, description=what))
    return create_model(name, __base__=FactoryParams, __doc__=doc, __module__=__name__, **fields)  # type: ignore[call-overload]


MaskedLMSize = _size_model("MaskedLMSize", "Size fields of :class:`~zoo.common.masked_dlm.TinyMaskedLM` (bounded: the "
                           "toys run on a CPU).", qwen2=False)
Qwen2Size = _size_model("Qwen2Size", "Size fields of a tiny ``Qwen2ForCausalLM`` (``transformers.Qwen2Config`` names; "
                        "the bounds of :class:`MaskedLMSize`).", qwen2=True)


def sized(model: type[FactoryParams], defaults: Mapping[str, Any]) -> type[FactoryParams]:
    """``model`` with the defaults ``defaults`` (a toy's own sizes; each key a field of ``model``): the same fields,
    bounds and descriptions. Subclass the result to add the toy's own fields."""
    unknown = sorted(set(defaults) - set(model.model_fields))
    if unknown:
        raise ValueError(f"sized({model.__name__}): {unknown} are not size fields; fields: {', '.join(model.model_fields)}")
    fields = {k: (model.model_fields[k].annotation, FieldInfo.merge_field_infos(model.model_fields[k], default=v))
              for k, v in defaults.items()}
    return create_model(f"{model.__name__}Sized", __base__=model, __module__=model.__module__, **fields)  # type: ignore[call-overload]


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
