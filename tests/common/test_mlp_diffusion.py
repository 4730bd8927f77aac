"""Small MLP diffusion on vectors."""
from __future__ import annotations

import math

import pytest
import torch

from zoo.common.mlp_diffusion import MLPDenoiser, VectorDiffusion, make_betas, sinusoidal_embedding


def test_sinusoidal_embedding_values():
    """emb(t)[i] = sin(t f_i), emb(t)[half + i] = cos(t f_i), f_i = 10000^{-i/half}."""
    e = sinusoidal_embedding(torch.tensor([0.0, 3.0]), 8)
    assert torch.equal(e[0], torch.tensor([0, 0, 0, 0, 1, 1, 1, 1], dtype=torch.float32))
    f = 10000 ** (-torch.arange(4) / 4)
    assert torch.allclose(e[1], torch.cat([(3 * f).sin(), (3 * f).cos()]), atol=1e-6)


@pytest.mark.parametrize("schedule", ["linear", "cosine", "vp"])
def test_schedules_are_valid(schedule):
    """Betas in (0, 1), alpha-bar decreasing to near 0 at T (T = 50) and near 1 at t = 1."""
    b = make_betas(50, schedule)
    ab = torch.cumprod(1 - b, 0)
    assert bool(((b > 0) & (b < 1)).all()) and bool((ab.diff() < 0).all())
    assert float(ab[-1]) < 0.05 and float(ab[0]) > 0.95


def test_vp_schedule_formula():
    """vp betas: 1 - exp(-0.1/T - 4.95 (2t - 1)/T^2) (Diffusion-QL / Song et al. VP-SDE discretisation)."""
    T = 5
    b = make_betas(T, "vp")
    assert float(b[2]) == pytest.approx(1 - math.exp(-0.1 / T - 4.95 * 5 / T**2))


def test_conditioning_and_grad_paths():
    """Conditioning changes the output; sample(with_grad=True) back-propagates to the weights, without grad it
    builds no graph; sampling is seed-deterministic."""
    torch.manual_seed(0)
    m = MLPDenoiser(2, cond_dim=3, width=32, layers=2)
    x, t = torch.randn(4, 2), torch.tensor([1, 2, 3, 4])
    c1, c2 = torch.zeros(4, 3), torch.ones(4, 3)
    assert not torch.allclose(m(x, t, c1), m(x, t, c2))
    with pytest.raises(ValueError):
        m(x, t)
    d = VectorDiffusion(2, cond_dim=3, T=5, width=32, layers=2, clip=1.0)
    a = d.sample(6, torch.ones(6, 3), torch.Generator().manual_seed(0), with_grad=True)
    assert a.requires_grad and float(a.detach().abs().max()) <= 1.0
    a.sum().backward()
    assert d.model.net[0].weight.grad is not None
    b = d.sample(6, torch.ones(6, 3), torch.Generator().manual_seed(0))
    assert not b.requires_grad and torch.allclose(a.detach(), b)


def test_trained_chain_samples_the_two_point_law():
    """600 Adam steps on a two-point law lower the loss and the reverse chain (T = 20, vp) puts > 90 % of
    samples within 0.5 of a data point (measured 98 %)."""
    torch.manual_seed(0)
    dd = VectorDiffusion(2, T=20, width=64, layers=2)
    opt = torch.optim.Adam(dd.parameters(), 1e-2)
    g = torch.Generator().manual_seed(0)
    data = torch.tensor([[1.0, 1.0], [-1.0, -1.0]]).repeat(64, 1)
    first = float(dd.loss(data, generator=torch.Generator().manual_seed(5)).detach())
    for _ in range(600):
        loss = dd.loss(data, generator=g)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert float(dd.loss(data, generator=torch.Generator().manual_seed(5)).detach()) < 0.7 * first
    s = dd.sample(400, generator=torch.Generator().manual_seed(1))
    near = torch.cdist(s, torch.tensor([[1.0, 1.0], [-1.0, -1.0]])).min(1).values
    assert float((near < 0.5).double().mean()) > 0.9
