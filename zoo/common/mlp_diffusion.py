"""Small MLP diffusion model on vectors: sinusoidal time embedding, optional conditioning, VP / linear /
cosine beta schedules, the epsilon loss, and the reverse DDPM chain with or without gradient.

Used as IPFM's generator backbone, EGT's class-conditional toy DDPM and RAMAC's diffusion actor
(Diffusion-QL style, Wang et al., arXiv 2208.06193: ``a = chain(state)``, differentiated end to end).

* Time embedding: the transformer sinusoid (Vaswani et al., arXiv 1706.03762, sec. 3.5) on the
  integer step, ``[sin(t f_i), cos(t f_i)]`` with ``f_i = max_period^{-i/half}``.
* Schedules: ``linear`` (DDPM, Ho et al., arXiv 2006.11239: 1e-4 .. 0.02 rescaled by 1000/T),
  ``cosine`` (Nichol & Dhariwal, arXiv 2102.09672, eq. 17), ``vp`` (the discretised VP-SDE of Song et al.,
  arXiv 2011.13456 with beta_min = 0.1, beta_max = 10, as in Diffusion-QL:
  ``beta_t = 1 - exp(-beta_min/T - (beta_max - beta_min)(2t - 1)/(2T^2))``, t = 1..T).
* Loss: ``E ||eps - eps_theta(sqrt(ab_t) x0 + sqrt(1 - ab_t) eps, t, c)||^2`` (Ho et al. eq. 14).
* Reverse step (Ho et al. eq. 11, posterior variance ``beta~_t``):
  ``x_{t-1} = (x_t - beta_t / sqrt(1 - ab_t) eps_theta) / sqrt(alpha_t) + sqrt(beta~_t) z`` (no noise at t = 0).
"""
from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

__all__ = ["sinusoidal_embedding", "make_betas", "MLPDenoiser", "VectorDiffusion"]

Schedule = Literal["linear", "cosine", "vp"]


def sinusoidal_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """``(B,)`` times (any real values) -> ``(B, dim)`` sinusoidal features (``dim`` even)."""
    if dim % 2:
        raise ValueError("embedding dim must be even")
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
    args = t.reshape(-1, 1).float() * freqs[None]
    return torch.cat([args.sin(), args.cos()], dim=1)


def make_betas(T: int, schedule: Schedule = "vp") -> torch.Tensor:
    """Float64 ``(T,)`` betas of the named schedule."""
    if schedule == "linear":
        scale = 1000.0 / T
        return torch.linspace(scale * 1e-4, scale * 0.02, T, dtype=torch.float64)
    if schedule == "cosine":
        s = 0.008
        f = lambda u: math.cos((u / T + s) / (1 + s) * math.pi / 2) ** 2  # noqa: E731
        return torch.tensor([min(1 - f(i + 1) / f(i), 0.999) for i in range(T)], dtype=torch.float64)
    if schedule == "vp":
        t = torch.arange(1, T + 1, dtype=torch.float64)
        b_min, b_max = 0.1, 10.0
        return 1 - torch.exp(-b_min / T - 0.5 * (b_max - b_min) * (2 * t - 1) / T**2)
    raise ValueError(f"unknown schedule {schedule!r}; have linear, cosine, vp")


class MLPDenoiser(nn.Module):
    """``eps_theta(x, t, cond)``: MLP on ``[x, emb(t), cond]`` with ``layers`` hidden layers of ``width`` (Mish)."""

    def __init__(self, dim: int, cond_dim: int = 0, width: int = 128, layers: int = 3, time_dim: int = 32):
        super().__init__()
        self.dim, self.cond_dim, self.time_dim = dim, cond_dim, time_dim
        self.time_mlp = nn.Sequential(nn.Linear(time_dim, time_dim * 2), nn.Mish(), nn.Linear(time_dim * 2, time_dim))
        blocks: list[nn.Module] = []
        d_in = dim + time_dim + cond_dim
        for _ in range(layers):
            blocks += [nn.Linear(d_in, width), nn.Mish()]
            d_in = width
        blocks.append(nn.Linear(d_in, dim))
        self.net = nn.Sequential(*blocks)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor | None = None) -> torch.Tensor:
        t = torch.as_tensor(t, device=x.device).reshape(-1).expand(x.shape[0])
        h = [x, self.time_mlp(sinusoidal_embedding(t, self.time_dim).to(x.dtype))]
        if self.cond_dim:
            if cond is None:
                raise ValueError(f"this denoiser needs a ({x.shape[0]}, {self.cond_dim}) conditioning tensor")
            h.append(cond.to(x.dtype))
        elif cond is not None:
            raise ValueError("this denoiser takes no conditioning (cond_dim = 0)")
        return self.net(torch.cat(h, dim=1))


class VectorDiffusion(nn.Module):
    """A DDPM on vectors with an :class:`MLPDenoiser` and a discrete ``T``-step schedule."""

    def __init__(self, dim: int, cond_dim: int = 0, T: int = 50, schedule: Schedule = "vp", width: int = 128, layers: int = 3,
                 time_dim: int = 32, clip: float | None = None):
        super().__init__()
        self.T, self.clip = T, clip
        self.model = MLPDenoiser(dim, cond_dim, width, layers, time_dim)
        betas = make_betas(T, schedule)
        ab = torch.cumprod(1 - betas, 0)
        ab_prev = torch.cat([torch.ones(1, dtype=torch.float64), ab[:-1]])
        self.register_buffer("betas", betas.float())
        self.register_buffer("alphas_cumprod", ab.float())
        self.register_buffer("posterior_variance", (betas * (1 - ab_prev) / (1 - ab)).float())

    @property
    def dim(self) -> int:
        return self.model.dim

    def add_noise(self, x0: torch.Tensor, t: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
        ab = self.alphas_cumprod[t].reshape(-1, *([1] * (x0.ndim - 1)))
        return ab.sqrt() * x0 + (1 - ab).sqrt() * eps

    def loss(self, x0: torch.Tensor, cond: torch.Tensor | None = None, generator: torch.Generator | None = None, reduction: str = "mean") -> torch.Tensor:
        """Epsilon loss at uniform ``t``; ``reduction="none"`` gives the per-sample loss ``(B,)``."""
        t = torch.randint(0, self.T, (x0.shape[0],), generator=generator)
        eps = torch.randn(x0.shape, generator=generator, dtype=x0.dtype)
        per = ((self.model(self.add_noise(x0, t, eps), t, cond) - eps) ** 2).mean(-1)
        return per.mean() if reduction == "mean" else per

    def step(self, x: torch.Tensor, t: int, cond: torch.Tensor | None, noise: torch.Tensor | None) -> torch.Tensor:
        """One reverse step ``x_t -> x_{t-1}`` (``noise`` unused at t = 0)."""
        b, ab = self.betas[t], self.alphas_cumprod[t]
        eps = self.model(x, torch.full((x.shape[0],), t), cond)
        mean = (x - b / (1 - ab).sqrt() * eps) / (1 - b).sqrt()
        if t > 0:
            mean = mean + self.posterior_variance[t].sqrt() * noise
        if self.clip is not None:
            mean = mean.clamp(-self.clip, self.clip)
        return mean

    def sample(self, n: int, cond: torch.Tensor | None = None, generator: torch.Generator | None = None, with_grad: bool = False,
               x_T: torch.Tensor | None = None) -> torch.Tensor:
        """Run the reverse chain from ``x_T ~ N(0, I)``; ``with_grad=True`` keeps the graph (for actor / generator training)."""
        x = torch.randn(n, self.dim, generator=generator) if x_T is None else x_T
        with torch.set_grad_enabled(with_grad):
            for t in range(self.T - 1, -1, -1):
                z = torch.randn(x.shape, generator=generator) if t > 0 else None
                x = self.step(x, t, cond, z)
        return x
