"""The CPU variant of PoE-Bridge: a tiny causal LM (the AR target, a ``Qwen2ForCausalLM`` like the
paper's Qwen2.5 verifiers) and a tiny bidirectional masked-diffusion LM (the proposal, standing in for
Dream), both trained in-repo by ``tools/train_poe_bridge_toy.py`` on the step-by-step addition task of
:mod:`zoo.common.toy_text`, sharing its tokenizer.
"""
from __future__ import annotations

import torch
from pydantic import Field
from torch import nn

from registry.contract import FactoryParams, factory
from zoo.common.toy_text import ArithTokenizer

TOY_MAX_NEW_TOKENS = 40  # answer (33 tokens for 3 digits) + EOS padding, the DLM's training length
AR_CONFIG = dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=64)
DLM_CONFIG = dict(d_model=64, n_layers=2, n_heads=4, d_ff=192, max_len=64)


class ToyARConfig(FactoryParams):
    """``config`` of :func:`build_ar` (bounded: the toy runs on a CPU)."""

    digits: int = Field(3, ge=1, le=9)
    hidden_size: int = Field(AR_CONFIG["hidden_size"], ge=8, le=4096)
    intermediate_size: int = Field(AR_CONFIG["intermediate_size"], ge=8, le=16384)
    num_hidden_layers: int = Field(AR_CONFIG["num_hidden_layers"], ge=1, le=64)
    num_attention_heads: int = Field(AR_CONFIG["num_attention_heads"], ge=1, le=64)
    num_key_value_heads: int = Field(AR_CONFIG["num_key_value_heads"], ge=1, le=64)
    max_position_embeddings: int = Field(AR_CONFIG["max_position_embeddings"], ge=8, le=8192)


class ToyDLMConfig(FactoryParams):
    """``config`` of :func:`build_dlm`."""

    digits: int = Field(3, ge=1, le=9)
    d_model: int = Field(DLM_CONFIG["d_model"], ge=8, le=4096)
    n_layers: int = Field(DLM_CONFIG["n_layers"], ge=1, le=64)
    n_heads: int = Field(DLM_CONFIG["n_heads"], ge=1, le=64)
    d_ff: int = Field(DLM_CONFIG["d_ff"], ge=8, le=16384)
    max_len: int = Field(DLM_CONFIG["max_len"], ge=8, le=8192)


@factory(params=ToyARConfig)
def build_ar(digits: int = 3, **config) -> nn.Module:
    """Tiny ``Qwen2ForCausalLM`` over the toy tokenizer (random init; weights come from the spec)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = ArithTokenizer(digits)
    cfg = dict(AR_CONFIG)
    cfg.update(config)
    conf = Qwen2Config(vocab_size=tok.vocab_size, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       pad_token_id=tok.pad_token_id, tie_word_embeddings=True, **cfg)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(conf).eval()
    model.generation_config.max_new_tokens = TOY_MAX_NEW_TOKENS
    model.zoo_tokenizer = tok
    return model


class TinyMaskedLM(nn.Module):
    """A bidirectional Transformer encoder that predicts every position's token (MDLM/LLaDA-style
    mask predictor; no time input, as LLaDA). ``forward(ids) -> logits [B, L, V]``."""

    shift_logits = False

    def __init__(self, vocab_size: int, mask_token_id: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 4,
                 d_ff: int = 192, max_len: int = 64):
        super().__init__()
        self.mask_token_id = mask_token_id
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout=0.0, batch_first=True, norm_first=True,
                                           activation="gelu")
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        h = self.tok(input_ids) + self.pos(pos)[None]
        return self.head(self.norm(self.encoder(h)))


@factory(params=ToyDLMConfig)
def build_dlm(digits: int = 3, **config) -> nn.Module:
    tok = ArithTokenizer(digits)
    cfg = dict(DLM_CONFIG)
    cfg.update(config)
    torch.manual_seed(0)
    model = TinyMaskedLM(tok.vocab_size, tok.mask_token_id, **cfg).eval()
    model.zoo_max_new_tokens = TOY_MAX_NEW_TOKENS
    model.zoo_tokenizer = tok
    return model
