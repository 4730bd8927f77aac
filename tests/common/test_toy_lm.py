"""zoo.common.toy_lm: the one definition of the discrete-LM toys' model sizes (CoDiLA and PoE-Bridge share it), its
bounds as a spec's `config` meets them, and builders that consume the global RNG as a direct construction does."""
from __future__ import annotations

import pytest
import torch

from registry.build import factory_kwargs
from registry.errors import Location, ParamError
from zoo.common.masked_dlm import TinyMaskedLM
from zoo.common.toy_lm import MaskedLMSize, Qwen2Size, build_masked_lm, build_qwen2, sized
from zoo.common.toy_text import SymbolTokenizer
from zoo.methods.codila import toy as codila_toy
from zoo.methods.poe_bridge import toy as poe_toy


def test_sized_changes_defaults_not_bounds() -> None:
    m = sized(MaskedLMSize, {"d_ff": 96, "max_len": 16})
    assert m().d_ff == 96 and m().max_len == 16 and m().d_model == MaskedLMSize().d_model
    for name, info in MaskedLMSize.model_fields.items():
        assert m.model_fields[name].metadata == info.metadata, name
    with pytest.raises(ValueError, match=r"\['width'\] are not size fields"):
        sized(Qwen2Size, {"width": 8})


@pytest.mark.parametrize("factory, field, top", [
    (codila_toy.build_dlm, "d_model", 1024), (poe_toy.build_dlm, "d_model", 1024),
    (codila_toy.build_local_ar, "hidden_size", 1024), (poe_toy.build_ar, "hidden_size", 1024),
    (poe_toy.build_dlm_qwen2, "num_hidden_layers", 16), (codila_toy.build_dlm, "max_len", 4096),
    (poe_toy.build_dlm, "max_len", 4096), (codila_toy.build_local_ar, "max_position_embeddings", 4096),
])
def test_both_toys_take_the_same_bounds(factory, field, top) -> None:
    """The two toys' configs accept the shared upper bound and refuse one above it in one error naming the field."""
    where = lambda f: Location(None, None, None, f)  # noqa: E731
    assert factory_kwargs(factory, {field: top}, where) == {field: top}
    with pytest.raises(ParamError) as err:
        factory_kwargs(factory, {field: top + 1}, where)
    msg = str(err.value)
    assert f"config.{field}" in msg and str(top) in msg and "\n" not in msg


def test_builders_consume_the_rng_as_direct_construction() -> None:
    """Seeding then constructing inside the builder gives the weights and the global RNG state afterwards of doing it
    by hand (so a factory moved onto the builder keeps its shipped bytes)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = SymbolTokenizer(list("abcd"))
    cfg = dict(d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=8)
    torch.manual_seed(7)
    got = build_masked_lm(tok, cfg, seed=3)
    after = torch.rand(4)
    torch.manual_seed(3)
    want = TinyMaskedLM(tok.vocab_size, tok.mask_token_id, **cfg)
    assert torch.equal(torch.rand(4), after)
    assert all(torch.equal(a, b) for a, b in zip(got.state_dict().values(), want.state_dict().values(), strict=True))
    assert got.zoo_tokenizer is tok and not got.training

    qcfg = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                max_position_embeddings=16)
    got = build_qwen2(tok, qcfg, seed=5, is_causal=False)
    after = torch.rand(4)
    torch.manual_seed(5)
    want = Qwen2ForCausalLM(Qwen2Config(vocab_size=tok.vocab_size, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                        tie_word_embeddings=True, is_causal=False, **qcfg))
    assert torch.equal(torch.rand(4), after)
    assert all(torch.equal(a, b) for a, b in zip(got.state_dict().values(), want.state_dict().values(), strict=True))
    assert got.config.is_causal is False and got.config.tie_word_embeddings and got.zoo_tokenizer is tok
