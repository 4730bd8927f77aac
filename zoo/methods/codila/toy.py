"""The CPU variants of CoDiLA: a tiny bidirectional masked-diffusion LM (the frozen drafter, standing in for
Dream-Coder) and a tiny ``Qwen2ForCausalLM`` local AR (standing in for Qwen3-0.6B, conditioned through
``inputs_embeds`` exactly as the full model would be), over one symbol tokenizer with the letters
``a b c d`` and the boundary tokens ``<think> </think>``. Trained by ``zoo train codila`` (:mod:`.train`).
"""
from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import nn

from registry.contract import FactoryParams, factory
from zoo.common.masked_dlm import TinyMaskedLM
from zoo.common.toy_text import SymbolTokenizer

from .tasks import LETTERS, Task

__all__ = ["AR_CONFIG", "DLM_CONFIG", "build_dlm", "build_local_ar", "toy_tokenizer"]

THINK, END_THINK = "<think>", "</think>"
DLM_CONFIG = dict(d_model=64, n_layers=2, n_heads=4, d_ff=128, max_len=16)
AR_CONFIG = dict(hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=32)


def toy_tokenizer(task: str = "xor") -> SymbolTokenizer:
    """``<pad> <bos> <eos> <mask> a b c d <think> </think>`` (10 ids); generation is unconditional (BOS only)."""
    tok = SymbolTokenizer(list(LETTERS) + [THINK, END_THINK])
    tok.think_ids = (tok.stoi[THINK], tok.stoi[END_THINK])
    tok.zoo_task = task
    return tok


class ToyDLMConfig(FactoryParams):
    """``config`` of :func:`build_dlm` (bounded: the toy runs on a CPU)."""

    task: Literal["xor", "trap"] = "xor"
    d_model: int = Field(DLM_CONFIG["d_model"], ge=8, le=1024)
    n_layers: int = Field(DLM_CONFIG["n_layers"], ge=1, le=16)
    n_heads: int = Field(DLM_CONFIG["n_heads"], ge=1, le=32)
    d_ff: int = Field(DLM_CONFIG["d_ff"], ge=8, le=4096)
    max_len: int = Field(DLM_CONFIG["max_len"], ge=8, le=1024)


class ToyARConfig(FactoryParams):
    """``config`` of :func:`build_local_ar`."""

    task: Literal["xor", "trap"] = "xor"
    hidden_size: int = Field(AR_CONFIG["hidden_size"], ge=8, le=1024)
    intermediate_size: int = Field(AR_CONFIG["intermediate_size"], ge=8, le=4096)
    num_hidden_layers: int = Field(AR_CONFIG["num_hidden_layers"], ge=1, le=16)
    num_attention_heads: int = Field(AR_CONFIG["num_attention_heads"], ge=1, le=32)
    num_key_value_heads: int = Field(AR_CONFIG["num_key_value_heads"], ge=1, le=32)
    max_position_embeddings: int = Field(AR_CONFIG["max_position_embeddings"], ge=8, le=4096)


@factory(params=ToyDLMConfig)
def build_dlm(task: str = "xor", **config) -> nn.Module:
    """Tiny :class:`~zoo.common.masked_dlm.TinyMaskedLM` over the toy tokenizer (random init; weights come
    from the spec). Carries ``zoo_tokenizer`` and the generation length of its task."""
    tok = toy_tokenizer(task)
    cfg = dict(DLM_CONFIG)
    cfg.update(config)
    torch.manual_seed(0)
    model = TinyMaskedLM(tok.vocab_size, tok.mask_token_id, **cfg).eval()
    model.zoo_tokenizer = tok
    model.zoo_max_new_tokens = Task(task).length
    return model


@factory(params=ToyARConfig)
def build_local_ar(task: str = "xor", **config) -> nn.Module:
    """Tiny ``Qwen2ForCausalLM`` over the toy tokenizer: the local AR, read through ``inputs_embeds``."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = toy_tokenizer(task)
    cfg = dict(AR_CONFIG)
    cfg.update(config)
    conf = Qwen2Config(vocab_size=tok.vocab_size, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       pad_token_id=tok.pad_token_id, tie_word_embeddings=True, **cfg)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(conf).eval()
    model.zoo_tokenizer = tok
    return model
