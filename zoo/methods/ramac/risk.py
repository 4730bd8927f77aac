"""Risk measures and quantile losses of RAMAC (Fukazawa, Mundada, Soltani, ICML 2026, arXiv 2510.02695).

* :func:`cvar_lower_tail` -- the paper's empirical CVaR_alpha: the mean of the worst ``ceil(alpha n)``
  samples (sec. 4.3 of the method note; Rockafellar & Uryasev 2000 for CVaR);
* :func:`cvar_normal` / :func:`cvar_normal_mixture` -- closed forms: for N(mu, s^2),
  ``CVaR_alpha = mu - s phi(z_alpha) / alpha``; for a mixture, ``CVaR_alpha = (1/alpha) sum_k w_k
  [mu_k Phi(u_k) - s_k phi(u_k)]`` with ``u_k = (VaR_alpha - mu_k) / s_k`` and ``VaR_alpha`` the
  mixture's alpha-quantile (bisection);
* :func:`sample_taus` -- risk-distortion samplers of the actor's quantile fractions (IQN, Dabney et al.,
  arXiv 1806.06923, sec. 3 / table: CVaR ``tau = alpha U``; Wang ``Phi(Phi^-1(U) + eta)``; CPW
  ``U^eta / (U^eta + (1-U)^eta)^(1/eta)``; power ``U^(1/(1+eta))`` for eta >= 0,
  ``1 - (1-U)^(1/(1+|eta|))`` for eta < 0 (risk-averse)); ``neutral`` is U(0, 1) (risk-neutral mean);
* :func:`pinball_loss` / :func:`quantile_huber_loss` -- the quantile regression loss (Koenker & Bassett
  1978) and the quantile Huber loss of QR-DQN / IQN (Dabney et al., arXiv 1710.10044 eq. 10,
  arXiv 1806.06923 eq. 3): ``rho^kappa_tau(d) = |tau - 1{d < 0}| L_kappa(d) / kappa`` with
  ``d = target_j - current_i``, ``kappa = 0`` the pure pinball loss. ``pairing="standard"`` weights pair
  (i, j) by the current quantile's level ``tau_i``; ``pairing="radac_released"`` by the *target's* level
  ``tau'_j``, as the authors' released RADAC code does (method note sec. 9): every quantile then drifts
  to the median;
* :func:`huber_quantile_normal` -- the exact minimiser of the quantile Huber loss at level tau for
  N(mu, s^2) targets (the shrinkage of tail quantiles a kappa = 1 critic converges to).
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

from .params import Pairing, RiskMeasure

__all__ = [
    "cvar_lower_tail", "cvar_normal", "normal_quantile", "mixture_quantile", "cvar_normal_mixture", "mixture_mean",
    "sample_taus", "RiskMeasure", "pinball_loss", "quantile_huber_loss", "Pairing", "huber_quantile_normal", "fit_free_quantiles", "stratified_normal",
]

_SQRT2 = math.sqrt(2.0)


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _Phi(x: float) -> float:
    return 0.5 * math.erfc(-x / _SQRT2)


def normal_quantile(p: float) -> float:
    """Standard normal quantile ``Phi^-1(p)`` (float64, ``torch.special.ndtri``)."""
    return float(torch.special.ndtri(torch.tensor(p, dtype=torch.float64)))


def cvar_lower_tail(x: torch.Tensor, alpha: float, dim: int = -1) -> torch.Tensor:
    """Empirical CVaR_alpha: the mean of the ``ceil(alpha n)`` smallest values along ``dim`` (the paper's
    evaluation rule). ``alpha`` in (0, 1]; ``alpha = 1`` is the mean."""
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    n = x.shape[dim]
    k = max(1, math.ceil(alpha * n - 1e-9))
    return torch.topk(x, k, dim=dim, largest=False).values.mean(dim)


def cvar_normal(mu: float, sigma: float, alpha: float) -> float:
    """Closed form CVaR_alpha (lower tail) of N(mu, sigma^2): ``mu - sigma phi(Phi^-1(alpha)) / alpha``."""
    return mu - sigma * _phi(normal_quantile(alpha)) / alpha


def mixture_mean(weights: Sequence[float], mus: Sequence[float]) -> float:
    w = torch.tensor(weights, dtype=torch.float64)
    return float((w / w.sum() * torch.tensor(mus, dtype=torch.float64)).sum())


def mixture_quantile(p: float, weights: Sequence[float], mus: Sequence[float], sigmas: Sequence[float]) -> float:
    """The p-quantile of a 1-D Gaussian mixture (bisection on its CDF to 1e-12)."""
    tot = float(sum(weights))
    ws = [w / tot for w in weights]
    lo = min(m - 12 * s for m, s in zip(mus, sigmas))
    hi = max(m + 12 * s for m, s in zip(mus, sigmas))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if sum(w * _Phi((mid - m) / s) for w, m, s in zip(ws, mus, sigmas)) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


def cvar_normal_mixture(alpha: float, weights: Sequence[float], mus: Sequence[float], sigmas: Sequence[float]) -> float:
    """Closed form CVaR_alpha of a Gaussian mixture: ``(1/alpha) sum_k w_k [mu_k Phi(u_k) - s_k phi(u_k)]``,
    ``u_k = (VaR_alpha - mu_k) / s_k`` (the lower-tail expectation of each component up to VaR)."""
    tot = float(sum(weights))
    ws = [w / tot for w in weights]
    q = mixture_quantile(alpha, ws, mus, sigmas)
    acc = 0.0
    for w, m, s in zip(ws, mus, sigmas):
        u = (q - m) / s
        acc += w * (m * _Phi(u) - s * _phi(u))
    return acc / alpha


def sample_taus(shape: tuple[int, ...], measure: RiskMeasure = "cvar", alpha: float = 0.1, eta: float = 0.0,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """Quantile fractions for the actor's risk objective, distorted from ``U ~ U(0, 1)``:
    ``cvar``: ``alpha U`` (= U(0, alpha)); ``neutral``: ``U``; ``wang``: ``Phi(Phi^-1(U) + eta)`` (eta < 0
    risk-averse; the paper's -0.7); ``cpw``: ``U^eta / (U^eta + (1 - U)^eta)^(1/eta)`` (0.71);
    ``power``: ``U^(1/(1+eta))`` if eta >= 0 else ``1 - (1 - U)^(1/(1+|eta|))`` (the paper's -2: mean 1/4)."""
    u = torch.rand(shape, generator=generator)
    if measure == "cvar":
        return alpha * u
    if measure == "neutral":
        return u
    if measure == "wang":
        z = torch.special.ndtri(u.double().clamp(1e-12, 1 - 1e-12))
        return torch.special.ndtr(z + eta).float()
    if measure == "cpw":
        if eta <= 0:
            raise ValueError("cpw needs eta > 0")
        num = u.pow(eta)
        return (num / (num + (1 - u).pow(eta)).pow(1 / eta)).clamp(0, 1)
    if measure == "power":
        return u.pow(1 / (1 + eta)) if eta >= 0 else 1 - (1 - u).pow(1 / (1 + abs(eta)))
    raise ValueError(f"unknown risk measure {measure!r}; have cvar, neutral, wang, cpw, power")


def pinball_loss(pred: torch.Tensor, target: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
    """Elementwise quantile (pinball) loss ``rho_tau(d) = d (tau - 1{d < 0})``, ``d = target - pred``; >= 0."""
    d = target - pred
    return d * (tau - (d < 0).to(d.dtype))


def quantile_huber_loss(current: torch.Tensor, taus: torch.Tensor, target: torch.Tensor, kappa: float = 1.0,
                        pairing: Pairing = "standard", target_taus: torch.Tensor | None = None) -> torch.Tensor:
    """Quantile Huber loss over all (current i, target j) pairs, ``current`` / ``taus`` ``(B, N)``,
    ``target`` ``(B, M)`` (detached here): ``|w_ij - 1{d_ij < 0}| L_kappa(d_ij) / kappa``, ``d_ij = target_j -
    current_i``, ``L_kappa`` the Huber loss (``kappa = 0``: ``|d|``, the pinball loss). ``w_ij = tau_i``
    (standard) or ``tau'_j`` (``radac_released``, needs ``target_taus`` ``(B, M)``). Summed over targets,
    averaged over the batch and current quantiles (the released code's reduction; the minimiser does not
    depend on it)."""
    d = target.detach()[:, None, :] - current[:, :, None]  # (B, N, M)
    if pairing == "standard":
        w = taus[:, :, None]
    elif pairing == "radac_released":
        if target_taus is None:
            raise ValueError("pairing radac_released weights pairs by the target's tau: pass target_taus")
        w = target_taus[:, None, :]
    else:
        raise ValueError(f"unknown pairing {pairing!r}; have standard, radac_released")
    if kappa > 0:
        a = d.abs()
        hub = torch.where(a <= kappa, 0.5 * d * d, kappa * (a - 0.5 * kappa)) / kappa
    else:
        hub = d.abs()
    loss = (w - (d < 0).to(d.dtype)).abs() * hub
    return loss.sum(-1).mean()


def huber_quantile_normal(tau: float, kappa: float = 1.0, mu: float = 0.0, sigma: float = 1.0) -> float:
    """The q minimising ``E[|tau - 1{X < q}| L_kappa(X - q)]`` for ``X ~ N(mu, sigma^2)`` (``kappa = 0``:
    the tau-quantile). Stationarity: ``tau E[min(U, kappa); U > 0] = (1 - tau) E[min(-U, kappa); U < 0]``,
    ``U = X - q``, each side in closed form for the normal law; solved by bisection. For N(0, 1), kappa = 1:
    q(0.1) = -0.993 (vs the true quantile -1.282)."""
    if kappa <= 0:
        return mu + sigma * normal_quantile(tau)
    k = kappa / sigma

    def g(q: float) -> float:  # standardised units
        b = q + k
        e_pos = (_phi(q) - _phi(b)) - q * (_Phi(b) - _Phi(q)) + k * (1 - _Phi(b))
        a = q - k
        e_neg = q * (_Phi(q) - _Phi(a)) - (_phi(a) - _phi(q)) + k * _Phi(a)
        return tau * e_pos - (1 - tau) * e_neg

    lo, hi = -20.0, 20.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if g(mid) > 0:
            lo = mid
        else:
            hi = mid
    return mu + sigma * 0.5 * (lo + hi)


def stratified_normal(n: int = 2048) -> torch.Tensor:
    """``Phi^-1((i + 1/2) / n)``, i = 0..n-1 (float64): a deterministic N(0, 1) "sample" whose empirical
    quantiles are the normal's, for fits with no sampling error."""
    return torch.special.ndtri((torch.arange(n, dtype=torch.float64) + 0.5) / n)


def fit_free_quantiles(taus: Sequence[float], sample: Callable[[int, torch.Generator], torch.Tensor], kappa: float = 0.0,
                       pairing: Pairing = "standard", steps: int = 3000, batch: int = 64, lr: float = 0.05,
                       generator: torch.Generator | None = None) -> torch.Tensor:
    """Fit a free vector ``q`` (one value per level in ``taus``) to draws of ``sample(batch, g)`` with
    :func:`quantile_huber_loss` by Adam with a cosine-decayed step (the note's recovery test, sec. 7/9):
    each step pairs the K current quantiles with ``batch`` targets; the released pairing draws the
    targets' levels ``tau' ~ U(0, 1)``. Returns ``q`` (float64 ``(K,)``)."""
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    t = torch.tensor(list(taus), dtype=torch.float64)[None]
    q = torch.zeros_like(t, requires_grad=True)
    opt = torch.optim.Adam([q], lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    for _ in range(steps):
        y = sample(batch, g).double()[None]
        tt = torch.rand(1, y.shape[1], dtype=torch.float64, generator=g)
        loss = quantile_huber_loss(q, t, y, kappa, pairing, tt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    return q.detach()[0]
