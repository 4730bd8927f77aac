"""The CPU variants of CoDiLA: a tiny bidirectional masked-diffusion LM (the frozen drafter, standing in for
Dream-Coder) and a tiny ``Qwen2ForCausalLM`` local AR (standing in for Qwen3-0.6B, conditioned through
``inputs_embeds`` exactly as the full model would be), over one symbol tokenizer with the letters
``a b c d`` and the boundary tokens ``<think> </think>``. Trained by ``zoo train codila`` (:mod:`.train`);
the models' size fields and builders are the shared ones of :mod:`zoo.common.toy_lm`.
"""
from __future__ import annotations

from torch import nn

from registry.contract import factory
from zoo.common.toy_lm import build_masked_lm, build_qwen2
from zoo.common.toy_text import SymbolTokenizer

from .params import AR_CONFIG, DLM_CONFIG, ToyARConfig, ToyDLMConfig
from .tasks import LETTERS, Task

__all__ = ["AR_CONFIG", "DLM_CONFIG", "build_dlm", "build_local_ar", "toy_tokenizer"]

THINK, END_THINK = "<think>", "</think>"


def toy_tokenizer(task: str = "xor") -> SymbolTokenizer:
    """``<pad> <bos> <eos> <mask> a b c d <think> </think>`` (10 ids); generation is unconditional (BOS only)."""
    tok = SymbolTokenizer(list(LETTERS) + [THINK, END_THINK])
    tok.think_ids = (tok.stoi[THINK], tok.stoi[END_THINK])
    tok.zoo_task = task
    return tok


@factory(params=ToyDLMConfig)
def build_dlm(task: str = "xor", **config) -> nn.Module:
    """Tiny :class:`~zoo.common.masked_dlm.TinyMaskedLM` over the toy tokenizer (random init; weights come
    from the spec). Carries ``zoo_tokenizer`` and the generation length of its task."""
    model = build_masked_lm(toy_tokenizer(task), {**DLM_CONFIG, **config})
    model.zoo_max_new_tokens = Task(task).length
    return model


@factory(params=ToyARConfig)
def build_local_ar(task: str = "xor", **config) -> nn.Module:
    """Tiny ``Qwen2ForCausalLM`` over the toy tokenizer: the local AR, read through ``inputs_embeds``."""
    return build_qwen2(toy_tokenizer(task), {**AR_CONFIG, **config})
