"""Named 2-D toys, random rotated mixtures and the density/samples PNG."""
from __future__ import annotations

import math

import torch

from zoo.common.exact import chi2_pvalue
from zoo.common.toys2d import (
    RISKY_BANDIT_MODES, bandit_mode_of, eight_gaussians, named_toy, plot_density_samples, random_rotated_mixtures, random_rotation, risky_bandit,
    risky_bandit_reward,
)


def test_eight_gaussians_modes_on_circle():
    """8 equal-weight modes at radius 2, 45 degrees apart; samples hit the modes with equal frequency (chi-square)."""
    g = eight_gaussians()
    assert torch.allclose(g.means.norm(dim=1), torch.full((8,), 2.0, dtype=torch.float64))
    ang = torch.atan2(g.means[:, 1], g.means[:, 0]).sort().values
    assert torch.allclose(ang.diff(), torch.full((7,), math.pi / 4, dtype=torch.float64))
    x = g.sample(8000, torch.Generator().manual_seed(0))
    nearest = torch.cdist(x, g.means).argmin(1)
    assert chi2_pvalue(torch.full((8,), 1 / 8), torch.bincount(nearest, minlength=8).double()) > 1e-3


def test_risky_bandit_rewards_match_stated_law():
    """Behaviour samples lie in their modes (off-support rate ~ 3-sigma tail); safe rewards have mean 5,
    risky rewards mean 0.8*9 + 0.2*(-8) = 5.6 and a lower 10 % tail near -8; off-support mean -5."""
    g = risky_bandit()
    x = g.sample(20000, torch.Generator().manual_seed(0))
    mode = bandit_mode_of(x)
    p_out = math.exp(-4.5)  # P(||N(0, I_2)|| > 3)
    assert abs(float((mode < 0).double().mean()) - p_out) < 4 * math.sqrt(p_out / 20000)
    r = risky_bandit_reward(x, torch.Generator().manual_seed(1))
    risky = torch.tensor([i for i, (_, rk) in enumerate(RISKY_BANDIT_MODES.values()) if rk])
    is_r = torch.isin(mode, risky)
    safe = (mode >= 0) & ~is_r
    assert abs(float(r[safe].mean()) - 5.0) < 0.03
    assert abs(float(r[is_r].mean()) - 5.6) < 0.15
    lower = r[is_r].sort().values[: int(0.1 * int(is_r.sum()))]
    assert abs(float(lower.mean()) - (-8.8)) < 0.3
    far = torch.tensor([[0.9, 0.9]] * 4000, dtype=torch.float64)
    assert abs(float(risky_bandit_reward(far, torch.Generator().manual_seed(2)).mean()) + 5.0) < 0.2


def test_random_rotations_and_mixtures():
    """Haar rotations are orthogonal with det +1; random mixtures are valid, PSD, reproducible per seed."""
    R = random_rotation(4, torch.Generator().manual_seed(0))
    assert torch.allclose(R @ R.T, torch.eye(4, dtype=torch.float64), atol=1e-12) and float(torch.det(R)) > 0
    a = random_rotated_mixtures(3, 3, 4, torch.Generator().manual_seed(1))
    b = random_rotated_mixtures(3, 3, 4, torch.Generator().manual_seed(1))
    assert len(a) == 3 and all(torch.equal(m.means, n.means) for m, n in zip(a, b))
    assert all(float(m.evals.min()) >= 0.05 - 1e-12 and float(m.evals.max()) <= 0.5 + 1e-12 for m in a)
    assert named_toy("ring", k=5).num_components == 5


def test_plot_density_samples_writes_png(tmp_path):
    g = eight_gaussians()
    p = plot_density_samples(g, g.sample(500, torch.Generator().manual_seed(0)), tmp_path / "x.png", lim=3.0, title="8 gaussians", grid=60)
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
