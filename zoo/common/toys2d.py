"""Named 2-D (and d-D) toy laws for continuous methods, batches of random rotated mixtures, and a PNG
helper that plots a density with samples on top. All laws are :class:`zoo.common.gmm.GaussianMixture`s,
so every exact quantity (denoiser, score, flow map, PFGM++ denoiser, log-likelihood) is available.

* ``eight_gaussians``: 8 equal modes on a circle of radius 2, isotropic variance 0.02 (IPFM CPU version,
  ``/work/shared/methods/ipfm.md`` section 6; the classic "8 Gaussians" of the flow literature).
* ``risky_bandit``: the RAMAC 2-D behaviour law (``ramac.md`` section 6): four equal modes, sigma = 0.08,
  at (+-0.6, 0) ("safe") and (0, +-0.6) ("risky"); :data:`RISKY_BANDIT_MODES` names them and
  :func:`risky_bandit_reward` draws the stated rewards (safe N(5, 0.5^2); risky N(9, 0.5^2) w.p. 0.8 else
  N(-8, 1); off-support N(-5, 3^2), where off-support = farther than 3 sigma from every mode centre).
* ``ring``: ``k`` modes on a circle (EGT's group-B ring).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from .gmm import GaussianMixture

__all__ = [
    "ring", "eight_gaussians", "risky_bandit", "RISKY_BANDIT_MODES", "RISKY_BANDIT_SIGMA", "risky_bandit_reward", "bandit_mode_of",
    "random_rotation", "random_rotated_mixtures", "named_toy", "TOYS", "plot_density_samples", "samples_report",
]


def ring(k: int = 8, radius: float = 2.0, variance: float = 0.02, weights: Sequence[float] | None = None, phase: float = 0.0) -> GaussianMixture:
    """``k`` isotropic modes equally spaced on a circle."""
    ang = torch.arange(k, dtype=torch.float64) * (2 * math.pi / k) + phase
    means = radius * torch.stack([ang.cos(), ang.sin()], 1)
    return GaussianMixture(torch.ones(k) if weights is None else weights, means, variances=[variance] * k)


def eight_gaussians(radius: float = 2.0, variance: float = 0.02) -> GaussianMixture:
    return ring(8, radius, variance)


RISKY_BANDIT_SIGMA = 0.08
RISKY_BANDIT_MODES: dict[str, tuple[tuple[float, float], bool]] = {  # name: (centre, risky)
    "safe+x": ((0.6, 0.0), False), "safe-x": ((-0.6, 0.0), False), "risky+y": ((0.0, 0.6), True), "risky-y": ((0.0, -0.6), True),
}


def risky_bandit(sigma: float = RISKY_BANDIT_SIGMA) -> GaussianMixture:
    """RAMAC's 4-mode behaviour law (modes in the order of :data:`RISKY_BANDIT_MODES`)."""
    means = [c for c, _ in RISKY_BANDIT_MODES.values()]
    return GaussianMixture([1.0] * 4, means, variances=[sigma**2] * 4)


def bandit_mode_of(actions: torch.Tensor, sigma: float = RISKY_BANDIT_SIGMA) -> torch.Tensor:
    """Index of the mode within 3 sigma of each action (order of :data:`RISKY_BANDIT_MODES`), -1 if off-support."""
    centres = torch.tensor([c for c, _ in RISKY_BANDIT_MODES.values()], dtype=torch.float64)
    d = torch.cdist(actions.double().reshape(-1, 2), centres)
    m, i = d.min(1)
    return torch.where(m <= 3 * sigma, i, torch.full_like(i, -1))


def risky_bandit_reward(actions: torch.Tensor, generator: torch.Generator | None = None, sigma: float = RISKY_BANDIT_SIGMA) -> torch.Tensor:
    """Stochastic rewards of ``actions`` ``(B, 2)``: safe N(5, 0.5^2); risky N(9, 0.5^2) w.p. 0.8 else N(-8, 1);
    off-support N(-5, 3^2). Float64 ``(B,)``."""
    mode = bandit_mode_of(actions, sigma)
    risky_idx = torch.tensor([i for i, (_, r) in enumerate(RISKY_BANDIT_MODES.values()) if r])
    n = mode.shape[0]
    z = torch.randn(n, dtype=torch.float64, generator=generator)
    u = torch.rand(n, dtype=torch.float64, generator=generator)
    safe_r = 5 + 0.5 * z
    risky_r = torch.where(u < 0.8, 9 + 0.5 * z, -8 + 1.0 * z)
    ood_r = -5 + 3.0 * z
    is_risky = torch.isin(mode, risky_idx)
    return torch.where(mode < 0, ood_r, torch.where(is_risky, risky_r, safe_r))


def random_rotation(d: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """A Haar-random rotation in SO(d) (QR of a Gaussian matrix with sign fix; Mezzadri, arXiv math-ph/0609050)."""
    a = torch.randn(d, d, dtype=torch.float64, generator=generator)
    q, r = torch.linalg.qr(a)
    q = q * torch.sign(torch.diagonal(r))[None]
    if torch.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def random_rotated_mixtures(n: int, dim: int = 2, k: int = 3, generator: torch.Generator | None = None, mean_scale: float = 2.0,
                            var_range: tuple[float, float] = (0.05, 0.5)) -> list[GaussianMixture]:
    """``n`` random mixtures in ``R^dim``: ``k`` components with Dirichlet(1) weights (floored at 0.05), means
    ``~ N(0, mean_scale^2 I)`` and covariances ``R diag(v) R^T`` with a Haar rotation ``R`` and log-uniform
    eigenvalues ``v`` in ``var_range``."""
    out = []
    lo, hi = math.log(var_range[0]), math.log(var_range[1])
    for _ in range(n):
        w = -torch.log(torch.rand(k, dtype=torch.float64, generator=generator))
        w = (w / w.sum()).clamp_min(0.05)
        means = mean_scale * torch.randn(k, dim, dtype=torch.float64, generator=generator)
        covs = []
        for _ in range(k):
            R = random_rotation(dim, generator)
            v = torch.exp(lo + (hi - lo) * torch.rand(dim, dtype=torch.float64, generator=generator))
            covs.append(R @ torch.diag(v) @ R.T)
        out.append(GaussianMixture(w, means, covs=torch.stack(covs)))
    return out


TOYS: dict[str, Callable[..., GaussianMixture]] = {"eight_gaussians": eight_gaussians, "risky_bandit": risky_bandit, "ring": ring}


def named_toy(name: str, **kw: Any) -> GaussianMixture:
    if name not in TOYS:
        raise ValueError(f"unknown toy {name!r}; have {sorted(TOYS)}")
    return TOYS[name](**kw)


def plot_density_samples(law: GaussianMixture | None, samples: torch.Tensor | None, path: str | Path, lim: float | tuple[float, float, float, float] | None = None,
                         title: str | None = None, grid: int = 200, max_points: int = 5000) -> Path:
    """PNG of a 2-D law's density (contour fill of ``exp(log_prob)``) with samples scattered on top."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = None if samples is None else samples.detach().double().reshape(-1, 2)[:max_points].cpu()
    if lim is None:
        ref = pts if pts is not None else law.sample(2000, torch.Generator().manual_seed(0))
        m = float(ref.abs().max()) * 1.15 + 1e-6
        box = (-m, m, -m, m)
    elif isinstance(lim, (int, float)):
        box = (-lim, lim, -lim, lim)
    else:
        box = tuple(lim)
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    if law is not None:
        if law.dim != 2:
            raise ValueError("plot_density_samples needs a 2-D law")
        xs = torch.linspace(box[0], box[1], grid, dtype=torch.float64)
        ys = torch.linspace(box[2], box[3], grid, dtype=torch.float64)
        X, Y = torch.meshgrid(xs, ys, indexing="xy")
        dens = law.log_prob(torch.stack([X.reshape(-1), Y.reshape(-1)], 1)).exp().reshape(grid, grid)
        ax.contourf(X.numpy(), Y.numpy(), dens.numpy(), levels=20, cmap="Blues")
    if pts is not None:
        ax.scatter(pts[:, 0].numpy(), pts[:, 1].numpy(), s=2, c="tab:red", alpha=0.5)
    ax.set_xlim(box[0], box[1])
    ax.set_ylim(box[2], box[3])
    ax.set_aspect("equal")
    if title:
        ax.set_title(title, fontsize=9)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def samples_report(law: GaussianMixture, samples: torch.Tensor, seed: int = 0, out: str | Path | None = None,
                   title: str | None = None) -> list[str]:
    """What ``zoo run`` prints for samples of a known law: sliced W2 to as many exact data samples (128
    projections), next to the same distance between two exact samples (the floor at this n), and the mean
    exact log-density, next to the data's own; with ``out``, a PNG of the samples over the density (2-D)."""
    from .gmm import sliced_wasserstein2

    x = samples.detach().double().reshape(samples.shape[0], -1).cpu()
    n = x.shape[0]
    lines = []
    if n >= 2:
        ref = law.sample(n, torch.Generator().manual_seed(seed + 1))
        data = law.sample(n, torch.Generator().manual_seed(seed + 7))
        sw = sliced_wasserstein2(x, ref, 128, torch.Generator().manual_seed(seed))
        floor = sliced_wasserstein2(data, ref, 128, torch.Generator().manual_seed(seed))
        lines.append(f"  sliced W2 to {n} exact data samples: {sw:.4g} (two exact samples of this size: {floor:.4g})")
        lines.append(f"  mean log p(samples): {float(law.log_prob(x).mean()):.4f} (exact data samples: {float(law.log_prob(data).mean()):.4f})")
    if out is not None:
        if law.dim != 2:
            lines.append(f"  no picture: the law is {law.dim}-D")
        else:
            lines.append(f"  wrote {plot_density_samples(law, x, out, title=title)}")
    return lines
