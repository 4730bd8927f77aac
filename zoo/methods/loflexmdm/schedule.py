"""Per-position Kumaraswamy insertion / unmasking schedules of LoFlexMDM (Patel et al. 2026, arXiv 2602.18695,
Sec. 3; code github.com/dhruvdcoder/LoFlexMDM ``lflexmdm/schedules.py``) and FlexMDM's linear schedule
(Kim et al. 2025, arXiv 2509.01025), which is the special case ``a = b = 1``.

Time runs from 0 (empty sequence) to 1 (clean). Position ``i`` is *dropped* until ``T_in``, *masked* on
``[T_in, T_um)`` and *clean* from ``T_um`` on, with

* ``T_in ~ Kumaraswamy(a, b_in)``: ``F(t; a, b) = 1 - (1 - t^a)^b``, density ``a b t^(a-1) (1 - t^a)^(b-1)``;
* ``T_um ~ Kumaraswamy(a, b_um)`` truncated to ``[T_in, 1]`` (``u' = u (1 - F(T_in)) + F(T_in)``, then invert);
* hazard ``λ(t) = f / (1 - F) = a b t^(a-1) / (1 - t^a)``: insertion and unmasking share the shape
  ``a t^(a-1) / (1 - t^a)`` and differ by their multipliers ``b_in``, ``b_um``.

Closed-form state probabilities, with ``ℓ = log(1 - t^a)``:
``P_drop = exp(b_in ℓ)``, ``P_mask = b_in / (b_in - b_um) (exp(b_um ℓ) - exp(b_in ℓ))`` (limit
``-b_in ℓ exp(b_um ℓ)`` at ``b_in = b_um``), ``P_clean = 1 - P_drop - P_mask``. Everything is computed in log
space with ``log1p``/``expm1`` so that the branch ``b_in ≈ b_um`` and the tails stay finite.
"""
from __future__ import annotations

import torch

__all__ = [
    "EPS", "log_one_minus_ta", "kuma_cdf", "kuma_pdf", "kuma_hazard", "hazard_shape", "kuma_inverse",
    "kuma_sample", "kuma_sample_truncated", "state_log_probs", "state_probs", "kuma_kl_uniform",
    "schedule_regulariser", "bregman",
]

EPS = 1e-4  # t is drawn in [EPS, 1 - EPS] (the schedule class's eps)
_BRANCH = 1e-6  # |b_in - b_um| below this uses the b_in = b_um limit of P_mask


def log_one_minus_ta(t: torch.Tensor, a: float | torch.Tensor) -> torch.Tensor:
    """``ℓ = log(1 - t^a)`` (``-inf`` at t = 1), via log1p."""
    return torch.log1p(-(t**a))


def kuma_cdf(t: torch.Tensor, a: float | torch.Tensor, b: float | torch.Tensor) -> torch.Tensor:
    """``F(t; a, b) = 1 - (1 - t^a)^b`` = ``-expm1(b log(1 - t^a))``."""
    return -torch.expm1(b * log_one_minus_ta(t, a))


def kuma_pdf(t: torch.Tensor, a: float | torch.Tensor, b: float | torch.Tensor) -> torch.Tensor:
    """``f(t; a, b) = a b t^(a-1) (1 - t^a)^(b-1)``."""
    return a * b * t ** (a - 1) * torch.exp((b - 1) * log_one_minus_ta(t, a))


def hazard_shape(t: torch.Tensor, a: float | torch.Tensor) -> torch.Tensor:
    """``a t^(a-1) / (1 - t^a)``: the hazard per unit multiplier (``λ = b · hazard_shape``)."""
    return a * t ** (a - 1) / (-torch.expm1(a * torch.log(t)))


def kuma_hazard(t: torch.Tensor, a: float | torch.Tensor, b: float | torch.Tensor) -> torch.Tensor:
    """``λ(t; a, b) = f / (1 - F) = a b t^(a-1) / (1 - t^a)`` (paper Sec. 3: ``R_in = b_in α_t``)."""
    return b * hazard_shape(t, a)


def kuma_inverse(u: torch.Tensor, a: float | torch.Tensor, b: float | torch.Tensor) -> torch.Tensor:
    """Inverse CDF ``t = (1 - (1 - u)^(1/b))^(1/a)``, computed as ``(-expm1(log1p(-u) / b))^(1/a)``."""
    return (-torch.expm1(torch.log1p(-u) / b)).clamp(0.0, 1.0) ** (1.0 / a)


def kuma_sample(shape_like: torch.Tensor, a: float | torch.Tensor, b: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """``T ~ Kumaraswamy(a, b)`` by inverse-CDF sampling, one draw per entry of ``b``."""
    u = torch.rand(shape_like.shape, generator=generator, dtype=b.dtype, device=b.device)
    return kuma_inverse(u, a, b)


def kuma_sample_truncated(u: torch.Tensor, a: float | torch.Tensor, b: torch.Tensor, lower: torch.Tensor) -> torch.Tensor:
    """``T ~ Kumaraswamy(a, b)`` conditioned on ``T >= lower``: ``u' = u (1 - F(lower)) + F(lower)``, inverted.

    Stable form: ``log(1 - u') = log1p(-u) + b log(1 - lower^a)``, so ``t = (-expm1(log1p(-u)/b + ℓ(lower)))^(1/a)``;
    the result is clamped to ``[lower, 1]`` against rounding."""
    t = (-torch.expm1(torch.log1p(-u) / b + log_one_minus_ta(lower, a))).clamp(0.0, 1.0) ** (1.0 / a)
    return torch.maximum(t, lower)


def state_log_probs(t: torch.Tensor, a: float | torch.Tensor, b_in: torch.Tensor, b_um: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(log P_drop, log P_mask, log P_clean)`` at time ``t`` (broadcast against ``b_in``, ``b_um``).

    ``P_mask = b_in/|d| · exp(min(b_in, b_um) ℓ) · (-expm1(|d| ℓ))`` with ``d = b_in - b_um`` covers both signs of
    ``d`` without cancellation; for ``|d| < 1e-6`` the limit ``exp(b_um ℓ) (-b_in ℓ)`` is used."""
    ell = log_one_minus_ta(t, a)
    ell = torch.as_tensor(ell).expand(torch.broadcast_shapes(torch.as_tensor(ell).shape, b_in.shape, b_um.shape))
    ell = ell.clamp_max(-1e-30)  # t > 0
    log_drop = b_in * ell
    d = (b_in - b_um).abs()
    small = d < _BRANCH
    d_safe = torch.where(small, torch.ones_like(d), d)
    log_mask_branch = torch.log(b_in) - torch.log(d_safe) + torch.minimum(b_in, b_um) * ell + torch.log(-torch.expm1(d_safe * ell))
    log_mask_limit = b_um * ell + torch.log(b_in) + torch.log(-ell)
    log_mask = torch.where(small, log_mask_limit, log_mask_branch)
    not_clean = torch.logaddexp(log_drop, log_mask).clamp_max(0.0)
    log_clean = torch.log((-torch.expm1(not_clean)).clamp_min(1e-38))  # finite gradients where P_clean underflows
    return log_drop, log_mask, log_clean


def state_probs(t: torch.Tensor, a: float | torch.Tensor, b_in: torch.Tensor, b_um: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(P_drop, P_mask, P_clean)``; see :func:`state_log_probs`."""
    return tuple(torch.exp(x) for x in state_log_probs(t, a, b_in, b_um))  # type: ignore[return-value]


def kuma_kl_uniform(a: float | torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``KL(Kumaraswamy(a, b) || U[0, 1]) = log(ab) + ((a-1)/a)(ψ(1) - ψ(b+1)) - (b-1)/b`` (>= 0, 0 at a = b = 1)."""
    a_t = torch.as_tensor(a, dtype=b.dtype, device=b.device)
    return torch.log(a_t * b) + ((a_t - 1) / a_t) * (torch.digamma(torch.ones_like(b)) - torch.digamma(b + 1)) - (b - 1) / b


def schedule_regulariser(a: float, b: torch.Tensor, valid: torch.Tensor, grid: int = 100, boundary_eps: float = 0.01,
                         boundary_delta: float = 0.01, weights: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> torch.Tensor:
    """The schedule regulariser on the multipliers ``b [B, N]`` of the ``valid`` positions (LoFlexMDM code,
    ``FlexMDMSchedule``; weights mean/boundary/KL = 1/1/1):

    * mean: ``Σ_k (mean_i F(t_k; a, b_i) - t_k)²`` over a ``grid``-point t-grid (pushes the mixture schedule to linear);
    * boundary: ``relu(F(ε) - δ)² + relu(1 - F(1-ε) - δ)²`` per position, averaged (no extreme tail mass);
    * KL: ``KL(Kumaraswamy(a, b_i) || U[0,1])`` averaged over positions."""
    w_mean, w_bound, w_kl = weights
    v = valid.to(b.dtype)
    n = v.sum().clamp_min(1.0)
    tk = torch.linspace(0.0, 1.0, grid, dtype=b.dtype, device=b.device).clamp(1e-6, 1 - 1e-6)  # finite d/db at the ends
    cdf = kuma_cdf(tk[:, None, None], a, b[None])  # [K, B, N]
    mix = (cdf * v[None]).sum((1, 2)) / n
    mean_term = ((mix - tk) ** 2).sum()
    e = torch.tensor(boundary_eps, dtype=b.dtype, device=b.device)
    lo = torch.relu(kuma_cdf(e, a, b) - boundary_delta) ** 2
    hi = torch.relu(1 - kuma_cdf(1 - e, a, b) - boundary_delta) ** 2
    bound_term = ((lo + hi) * v).sum() / n
    kl_term = (kuma_kl_uniform(a, b) * v).sum() / n
    return w_mean * mean_term + w_bound * bound_term + w_kl * kl_term


def bregman(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Generalised-KL Bregman divergence ``D(x, y) = y - x + x log(x / y)`` (>= 0, = 0 iff x = y; ``0 log 0 = 0``):
    the projected rate-matching loss of a target rate ``x`` and a predicted rate ``y`` (paper Sec. 3.2)."""
    y = y.clamp_min(1e-12)
    return y - x + x * (torch.log(x.clamp_min(1e-30)) - torch.log(y))  # finite d/dx at x = 0 (empty gaps)
