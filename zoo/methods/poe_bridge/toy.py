"""The CPU variant of PoE-Bridge: a tiny causal LM (the AR target, a ``Qwen2ForCausalLM`` like the
paper's Qwen2.5 verifiers) and a tiny bidirectional masked-diffusion LM (the proposal, standing in for
Dream), both trained in-repo by ``zoo train poe-bridge`` (entry ``toy``) on the step-by-step addition task of
:mod:`zoo.common.toy_text`, sharing its tokenizer.
"""
from __future__ import annotations

from torch import nn

from registry.contract import factory
from zoo.common.masked_dlm import TinyMaskedLM
from zoo.common.toy_lm import build_masked_lm, build_qwen2
from zoo.common.toy_text import ArithTokenizer

from .columns import ColumnTokenizer
from .params import AR_CONFIG, DLM_CONFIG, TOY_MAX_NEW_TOKENS, ToyARConfig, ToyDLMConfig, ToyDLMQwen2Config

__all__ = ["AR_CONFIG", "DLM_CONFIG", "TOY_MAX_NEW_TOKENS", "TinyMaskedLM", "build_ar", "build_dlm", "build_dlm_qwen2",
           "toy_tokenizer"]

TASKS = ("steps", "columns")


def toy_tokenizer(task: str = "steps", digits: int = 3) -> ArithTokenizer | ColumnTokenizer:
    """The tokenizer (and task) of a toy variant: ``steps``, the step-by-step addition of
    :mod:`zoo.common.toy_text` (``toy``, ``toy-equal``); ``columns``, the column-interleaved addition of
    :mod:`.columns` (``toy-long``)."""
    if task == "steps":
        return ArithTokenizer(digits)
    if task == "columns":
        return ColumnTokenizer(digits)
    raise ValueError(f"toy task must be one of {TASKS}, got {task!r}")


@factory(params=ToyARConfig)
def build_ar(digits: int = 3, max_new_tokens: int = TOY_MAX_NEW_TOKENS, init_seed: int = 0, task: str = "steps",
             **config) -> nn.Module:
    """Tiny ``Qwen2ForCausalLM`` over the toy tokenizer (random init from ``init_seed``; weights come from the
    spec) for the toy ``task`` (:func:`toy_tokenizer`); ``max_new_tokens`` becomes its
    ``generation_config.max_new_tokens``."""
    model = build_qwen2(toy_tokenizer(task, digits), {**AR_CONFIG, **config}, seed=init_seed)
    model.generation_config.max_new_tokens = max_new_tokens
    return model


@factory(params=ToyDLMConfig)
def build_dlm(digits: int = 3, **config) -> nn.Module:
    """Tiny :class:`~zoo.common.masked_dlm.TinyMaskedLM` (no time input) over the toy tokenizer."""
    model = build_masked_lm(ArithTokenizer(digits), {**DLM_CONFIG, **config})
    model.zoo_max_new_tokens = TOY_MAX_NEW_TOKENS
    return model


@factory(params=ToyDLMQwen2Config)
def build_dlm_qwen2(digits: int = 3, max_new_tokens: int = TOY_MAX_NEW_TOKENS, init_seed: int = 0,
                    shift_logits: bool = False, task: str = "steps", **config) -> nn.Module:
    """The ``toy-equal`` proposal: a *bidirectional* Qwen2 of exactly the AR target's width and depth
    (:data:`AR_CONFIG`), read as a mask predictor (mask id ``<mask>``; no shift unless ``shift_logits``, Dream's
    convention for a DLM initialised from an AR model), so that one DLM forward and one AR forward cost the
    same, as Dream-7B and Qwen2.5-7B do in the paper.

    ``max_new_tokens`` is the answer region it was trained to fill (``zoo_max_new_tokens``); ``init_seed``
    seeds the random initialisation. Bidirectional attention: ``Qwen2Config(is_causal=False)``
    (transformers' bidirectional-mask path for decoder-only models) and every attention module's ``is_causal`` flag off (SDPA would otherwise apply a
    causal mask when no explicit mask is built). Trained by ``zoo train poe-bridge --only toy-equal``.
    """
    tok = toy_tokenizer(task, digits)
    model = build_qwen2(tok, {**AR_CONFIG, **config}, seed=init_seed, is_causal=False, mask_token_id=tok.mask_token_id)
    for module in model.modules():
        if hasattr(module, "is_causal"):
            module.is_causal = False
    model.mask_token_id = tok.mask_token_id
    model.shift_logits = shift_logits
    model.zoo_max_new_tokens = max_new_tokens
    return model
