"""Exact mRef-DPO on 2-token "images" (``/work/shared/methods/unidflow.md`` section 6, last point).

A masked denoiser over two positions ``(a, b)`` with ``V`` colours is four tables: ``p(x_a | ∅)``,
``p(x_b | ∅)``, ``p(x_b | x_a)``, ``p(x_a | x_b)``. Its two-step sampler (unmask one position, then the other,
in a uniformly random order) has the exact law

    p(x) = ½ p(x_a | ∅) p(x_b | x_a) + ½ p(x_b | ∅) p(x_a | x_b)

(enumerated over all ``V²`` images). With that exact log-likelihood, the population DPO objective for
Bradley-Terry preferences ``P(y ≻ y') = σ(r(y) − r(y'))`` over pairs drawn from a full-support law μ,

    L(θ) = Σ_{y, y'} μ(y) μ(y') [ −P(y ≻ y') log σ(β m(y, y')) − P(y' ≻ y) log σ(−β m(y, y')) ],
    m(y, y') = log p_θ(y)/p_ref(y) − log p_θ(y')/p_ref(y'),

is minimised exactly when ``β log p_θ/p_ref = r + const``, i.e. ``p* ∝ p_ref exp(r / β)`` (Rafailov et al. 2023,
arXiv 2305.18290, section 4), and the four-table family reaches p* (set both orders' tables to p*'s
marginals and conditionals).

The method trains with the *surrogate* instead (:func:`elbo_2tok`): the DFM ELBO with ``κ_t = t``, which for
two tokens is, in closed form, ``ℓ(x) = ½ [log p(x_a|∅) p(x_b|x_a) + log p(x_b|∅) p(x_a|x_b)]`` (masks
{a}, {b} and {a, b} each carry ELBO weight ½), the average of the two orders' log-likelihoods, ≤ log p(x) by
Jensen. Its DPO optimum's sampler law is measured against p* (:func:`surrogate_gap`), not asserted equal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["Tables", "random_tables", "law", "elbo_2tok", "tilted", "population_dpo", "fit_dpo", "surrogate_gap", "tables_for_law"]


@dataclass
class Tables:
    """Logits of the four conditionals: ``a0 [V]``, ``b0 [V]``, ``b_given_a [V, V]`` (row: x_a), ``a_given_b [V, V]`` (row: x_b)."""

    a0: torch.Tensor
    b0: torch.Tensor
    b_given_a: torch.Tensor
    a_given_b: torch.Tensor

    def params(self) -> list[torch.Tensor]:
        return [self.a0, self.b0, self.b_given_a, self.a_given_b]

    def detach(self) -> "Tables":
        return Tables(*(p.detach().clone() for p in self.params()))


def random_tables(V: int, g: torch.Generator, scale: float = 1.5) -> Tables:
    r = lambda *s: scale * torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    return Tables(r(V), r(V), r(V, V), r(V, V))


def _orders(t: Tables) -> tuple[torch.Tensor, torch.Tensor]:
    """log-likelihood tables ``[V, V]`` (index [x_a, x_b]) of the a-first and b-first orders."""
    la = torch.log_softmax(t.a0, -1)[:, None] + torch.log_softmax(t.b_given_a, -1)
    lb = torch.log_softmax(t.b0, -1)[None, :] + torch.log_softmax(t.a_given_b, -1).T
    return la, lb


def law(t: Tables) -> torch.Tensor:
    """The exact sampler law ``[V, V]`` (random unmask order), as log-probabilities."""
    la, lb = _orders(t)
    return torch.logaddexp(la, lb) - math.log(2.0)


def elbo_2tok(t: Tables) -> torch.Tensor:
    """The closed-form DFM ELBO ``[V, V]``: the mean of the two orders' log-likelihoods."""
    la, lb = _orders(t)
    return 0.5 * (la + lb)


def tilted(log_ref: torch.Tensor, r: torch.Tensor, beta: float) -> torch.Tensor:
    """``p* ∝ p_ref exp(r / β)`` as log-probabilities (same shape as ``log_ref``)."""
    z = log_ref + r / beta
    return z - torch.logsumexp(z.reshape(-1), 0)


def population_dpo(logp: torch.Tensor, logp_ref: torch.Tensor, r: torch.Tensor, beta: float, mu: torch.Tensor | None = None) -> torch.Tensor:
    """The exact population DPO loss over all ordered pairs of the ``V²`` images (pair law ``μ ⊗ μ``,
    uniform by default; labels from Bradley-Terry on ``r``)."""
    h = (logp - logp_ref).reshape(-1)
    rr = r.reshape(-1)
    m = h[:, None] - h[None, :]
    pref = torch.sigmoid(rr[:, None] - rr[None, :])
    mu = torch.full_like(h, 1.0 / h.numel()) if mu is None else mu.reshape(-1)
    w = mu[:, None] * mu[None, :]
    lossm = -(pref * torch.nn.functional.logsigmoid(beta * m) + (1 - pref) * torch.nn.functional.logsigmoid(-beta * m))
    return (w * lossm).sum()


def fit_dpo(ref: Tables, r: torch.Tensor, beta: float, objective: str = "exact", iters: int = 300) -> Tables:
    """Minimise the population DPO loss over the four tables from ``ref`` (L-BFGS, float64) with the exact
    log-likelihood (``objective="exact"``) or the ELBO surrogate (``"surrogate"``, for both θ and ref)."""
    th = ref.detach()
    for p in th.params():
        p.requires_grad_(True)
    score = law if objective == "exact" else elbo_2tok
    if objective not in ("exact", "surrogate"):
        raise ValueError(f"objective must be 'exact' or 'surrogate', got {objective!r}")
    with torch.no_grad():
        s_ref = score(ref)
    opt = torch.optim.LBFGS(th.params(), lr=1.0, max_iter=iters, tolerance_grad=1e-13, tolerance_change=1e-16,
                            history_size=50, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = population_dpo(score(th), s_ref, r, beta)
        loss.backward()
        return loss

    for _ in range(4):
        opt.step(closure)
    return th.detach()


def tables_for_law(logp: torch.Tensor) -> Tables:
    """Four tables whose both orders give exactly the law ``logp [V, V]`` (marginals and conditionals)."""
    la = torch.logsumexp(logp, 1)
    lb = torch.logsumexp(logp, 0)
    return Tables(la.clone(), lb.clone(), logp - la[:, None], (logp - lb[None, :]).T.contiguous())


def surrogate_gap(V: int = 4, beta: float = 0.5, seed: int = 0) -> dict[str, float]:
    """TV between p* and the sampler law of (a) the exact-likelihood DPO optimum and (b) the surrogate
    (ELBO) DPO optimum, from a random reference and reward (seeded)."""
    g = torch.Generator().manual_seed(seed)
    ref = random_tables(V, g)
    r = torch.randn(V, V, generator=g, dtype=torch.float64)
    star = tilted(law(ref), r, beta).exp()
    ex = law(fit_dpo(ref, r, beta, "exact")).exp()
    su = law(fit_dpo(ref, r, beta, "surrogate")).exp()
    tv = lambda p, q: 0.5 * float((p - q).abs().sum())  # noqa: E731
    return {"tv_exact": tv(ex, star), "tv_surrogate": tv(su, star), "tv_reference": tv(law(ref).exp(), star)}
