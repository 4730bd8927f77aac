"""LoRA: B = 0 leaves outputs bit-identical; per-call / per-sample scales mix adapters exactly; only LoRA trains."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from zoo.common.lora import LoRALinear, inject_lora, lora_parameters, lora_scales, lora_state_dict


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))


def test_zero_B_is_bit_identical_on_a_dit():
    """Injecting fresh adapters (B = 0) into the attention projections of a DiT leaves its output bit-identical."""
    from zoo.common.digits import build_digits_dit

    torch.manual_seed(0)
    m = build_digits_dit()
    x = torch.randn(3, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    kw = dict(timestep=torch.tensor([10, 500, 900]), class_labels=torch.tensor([1, 2, 3]))
    ref = m(x, **kw).sample
    names = inject_lora(m, ["transformer_blocks.*.attn1.to_q", "transformer_blocks.*.attn1.to_v", "transformer_blocks.*.attn1.to_out.0"], rank=4, adapters=("u", "g"))
    assert len(names) == 6
    assert torch.equal(m(x, **kw).sample, ref)


def test_router_mixing_matches_single_adapter_references():
    """y = Wx + a B_u A_u x + (1 - a) B_g A_g x: a = 1 equals the u-only model, a = 0 the g-only model, and a
    per-sample tensor a mixes row by row; scales are restored after the context."""
    m = _mlp()
    x = torch.randn(5, 8)
    inject_lora(m, ["0", "2"], rank=2, adapters=("u", "g"))
    with torch.no_grad():
        for p in lora_parameters(m):
            p.normal_()
    with lora_scales(m, {"u": 1.0}):
        yu = m(x)
    with lora_scales(m, {"g": 1.0}):
        yg = m(x)
    alpha = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0])
    with lora_scales(m, {"u": alpha, "g": 1 - alpha}):
        ym = m(x)
    assert torch.allclose(ym[alpha == 1], yu[alpha == 1], atol=1e-6) and torch.allclose(ym[alpha == 0], yg[alpha == 0], atol=1e-6)
    assert all(layer.scales == {"u": 1.0, "g": 1.0} for layer in m.modules() if isinstance(layer, LoRALinear))
    lin = m[0]
    manual = lin.base(x) + 0.3 * (x @ lin.lora_A["u"].T @ lin.lora_B["u"].T)
    assert torch.allclose(lin(x, scales={"u": 0.3}), manual, atol=1e-6)


def test_only_lora_parameters_train_and_base_stays_bitwise():
    """After optimiser steps on the LoRA parameters the frozen base weights are bitwise unchanged and the
    adapter-only state dict holds exactly the A and B tensors."""
    m = _mlp()
    base = {k: v.clone() for k, v in m.state_dict().items()}
    inject_lora(m, ["*"], rank=2)
    trainable = [p for p in m.parameters() if p.requires_grad]
    assert {id(p) for p in trainable} == {id(p) for p in lora_parameters(m)}
    opt = torch.optim.SGD(trainable, lr=0.1)
    for _ in range(3):
        loss = m(torch.randn(4, 8)).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    sd = m.state_dict()
    assert all(torch.equal(sd[k.replace(".weight", ".base.weight").replace(".bias", ".base.bias")], v) for k, v in base.items())
    assert sorted(lora_state_dict(m)) == sorted(k for k in sd if "lora_" in k) and len(lora_state_dict(m)) == 4


def test_bad_targets_and_adapters_are_reported():
    m = _mlp()
    with pytest.raises(ValueError, match="no nn.Linear matches"):
        inject_lora(m, ["nope.*"])
    inject_lora(m, ["0"], adapters=("a",))
    with pytest.raises(KeyError, match="unknown adapter 'b'"):
        m[0](torch.randn(1, 8), scales={"b": 1.0})
