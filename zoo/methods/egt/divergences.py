"""Per-group f-divergences, the δ-EGT diagnostic and the proportion criteria it is contrasted with.

EGT (Vérine, Pinot, Le Bronnec, ICML 2026, arXiv 2602.08660): a generative model Q with group
conditionals Q_a is **δ-EGT** fair for the reference f-divergence D_f when

    max_{a, a'} |D_f(P_a‖Q_a) − D_f(P_{a'}‖Q_{a'})| ≤ δ,

i.e. :func:`egt_gap` ≤ δ (the max–min spread of the per-group divergences). The proportion-based
criteria it argues against only compare the group frequencies Q(a) with a target
(:func:`proportion_gap`: uniform for "equal representation", the data's p_a for "matched
representation") and are blind to per-group quality.

f-divergences ``D_f(P‖Q) = Σ_x q(x) f(p(x)/q(x))`` (Csiszár 1967; Nowozin et al., arXiv 1606.00709,
Table 1) with the generators used here (natural logarithms)::

    kl          f(t) = t ln t                          KL(P‖Q)
    reverse-kl  f(t) = −ln t                           KL(Q‖P)
    chi2        f(t) = (t − 1)²                        Pearson χ²(P‖Q)
    hellinger2  f(t) = ½ (√t − 1)²                     H² = 1 − Σ √(pq) ∈ [0, 1]
    tv          f(t) = ½ |t − 1|                       TV ∈ [0, 1]
    js          f(t) = ½ [t ln t − (1 + t) ln((1+t)/2)]   JS = ½KL(P‖M) + ½KL(Q‖M), M = (P+Q)/2, ≤ ln 2

Exact for discrete laws (:func:`f_divergence`); closed forms between Gaussians for KL, reverse KL,
χ² and H² (:func:`gaussian_divergence`; TV and JS have none in d ≥ 1 in general) and an unbiased
Monte-Carlo estimator with a standard error for any pair of laws with tractable densities
(:func:`mc_f_divergence`, used for TV and JS).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

import torch

__all__ = [
    "DIVERGENCES", "CLOSED_FORM", "Divergence", "f_generator", "f_divergence", "gaussian_kl", "gaussian_chi2",
    "gaussian_hellinger2", "gaussian_divergence", "gaussian_entropy", "gaussian_log_prob", "mc_f_divergence", "egt_gap",
    "is_delta_egt", "proportion_gap",
]

Divergence = Literal["kl", "reverse-kl", "chi2", "hellinger2", "tv", "js"]
DIVERGENCES: tuple[str, ...] = ("kl", "reverse-kl", "chi2", "hellinger2", "tv", "js")
#: divergences with a closed form between two Gaussians
CLOSED_FORM: tuple[str, ...] = ("kl", "reverse-kl", "chi2", "hellinger2")


def f_generator(kind: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The convex generator f (f(1) = 0) of divergence ``kind``; f(0) is the limit (0 ln 0 = 0)."""
    xlogx = lambda t: torch.where(t > 0, t * torch.log(torch.where(t > 0, t, torch.ones_like(t))), torch.zeros_like(t))  # noqa: E731
    gens: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "kl": xlogx,
        "reverse-kl": lambda t: -torch.log(t),
        "chi2": lambda t: (t - 1) ** 2,
        "hellinger2": lambda t: 0.5 * (t.sqrt() - 1) ** 2,
        "tv": lambda t: 0.5 * (t - 1).abs(),
        "js": lambda t: 0.5 * (xlogx(t) - (1 + t) * torch.log((1 + t) / 2)),
    }
    if kind not in gens:
        raise ValueError(f"unknown divergence {kind!r}; have {', '.join(DIVERGENCES)}")
    return gens[kind]


def f_divergence(p: torch.Tensor, q: torch.Tensor, kind: str = "kl") -> float:
    """Exact ``D_f(P‖Q)`` between two discrete laws (probability vectors of equal length, summing to 1).

    Terms with q(x) = 0 use the perspective limit ``q f(p/q) → p · lim_{t→∞} f(t)/t``: +inf for KL
    and χ² when p(x) > 0, ½ p(x) for TV and H², (ln 2)/2 · p(x) for JS. Reverse KL is +inf when
    some p(x) = 0 < q(x)."""
    p = torch.as_tensor(p, dtype=torch.float64).reshape(-1)
    q = torch.as_tensor(q, dtype=torch.float64).reshape(-1)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same length, got {p.numel()} and {q.numel()}")
    if (p < 0).any() or (q < 0).any() or abs(float(p.sum()) - 1) > 1e-6 or abs(float(q.sum()) - 1) > 1e-6:
        raise ValueError("p and q must be probability vectors (non-negative, summing to 1 within 1e-6)")
    p, q = p / p.sum(), q / q.sum()  # float32 inputs round to sums like 1 + 1.5e-8
    f = f_generator(kind)
    pos = q > 0
    slope_inf = {"kl": math.inf, "reverse-kl": 0.0, "chi2": math.inf, "hellinger2": 0.5, "tv": 0.5, "js": 0.5 * math.log(2)}[kind]
    total = float((q[pos] * f(p[pos] / q[pos])).sum())
    tail = p[~pos]
    if tail.numel() and float(tail.sum()) > 0:
        total += math.inf if math.isinf(slope_inf) else slope_inf * float(tail.sum())
    return max(total, 0.0) if not math.isnan(total) else total


# ----------------------------------------------------------------------------- Gaussians, closed form
def _sym(S: torch.Tensor) -> torch.Tensor:
    return 0.5 * (S + S.transpose(-1, -2))


def gaussian_entropy(S: torch.Tensor) -> torch.Tensor:
    """Differential entropy ``½ (d (1 + ln 2π) + ln|S|)`` of N(·, S) (nats)."""
    d = S.shape[-1]
    return 0.5 * (d * (1 + math.log(2 * math.pi)) + torch.logdet(S))


def gaussian_log_prob(x: torch.Tensor, m: torch.Tensor, S: torch.Tensor) -> torch.Tensor:
    """``ln N(x; m, S)`` for rows of ``x`` (``(n, d)``)."""
    L = torch.linalg.cholesky(_sym(S))
    z = torch.linalg.solve_triangular(L, (x - m).T, upper=False)
    d = x.shape[-1]
    return -0.5 * (z**2).sum(0) - torch.log(torch.diagonal(L)).sum() - 0.5 * d * math.log(2 * math.pi)


def gaussian_kl(m1: torch.Tensor, S1: torch.Tensor, m2: torch.Tensor, S2: torch.Tensor) -> torch.Tensor:
    """``KL(N(m1, S1) ‖ N(m2, S2)) = ½ [tr(S2⁻¹S1) − d + (m2−m1)ᵀS2⁻¹(m2−m1) + ln|S2| − ln|S1|]``.

    Differentiable in every argument; batched over leading dimensions."""
    d = S1.shape[-1]
    diff = (m2 - m1).unsqueeze(-1)
    tr = torch.diagonal(torch.linalg.solve(S2, S1), dim1=-2, dim2=-1).sum(-1)
    maha = (diff.transpose(-1, -2) @ torch.linalg.solve(S2, diff)).reshape(tr.shape)
    return 0.5 * (tr - d + maha + torch.logdet(S2) - torch.logdet(S1))


def gaussian_chi2(m1: torch.Tensor, S1: torch.Tensor, m2: torch.Tensor, S2: torch.Tensor) -> float:
    """Pearson ``χ²(P‖Q) = ∫ p²/q − 1`` for P = N(m1, S1), Q = N(m2, S2).

    ``∫ p²/q = |S2|^{½} |S1|⁻¹ |A|^{-½} exp(½ (bᵀA⁻¹b − c))`` with ``A = 2S1⁻¹ − S2⁻¹``,
    ``b = 2S1⁻¹m1 − S2⁻¹m2``, ``c = 2m1ᵀS1⁻¹m1 − m2ᵀS2⁻¹m2`` (completing the square in the
    Gaussian integral); +inf when A is not positive definite (the integral diverges)."""
    P1, P2 = torch.linalg.inv(_sym(S1).double()), torch.linalg.inv(_sym(S2).double())
    m1, m2 = m1.double(), m2.double()
    A = _sym(2 * P1 - P2)
    if float(torch.linalg.eigvalsh(A).min()) <= 0:
        return math.inf
    b = 2 * P1 @ m1 - P2 @ m2
    c = 2 * m1 @ P1 @ m1 - m2 @ P2 @ m2
    log_int = 0.5 * torch.logdet(S2.double()) - torch.logdet(S1.double()) - 0.5 * torch.logdet(A) + 0.5 * (b @ torch.linalg.solve(A, b) - c)
    return float(torch.expm1(log_int))


def gaussian_hellinger2(m1: torch.Tensor, S1: torch.Tensor, m2: torch.Tensor, S2: torch.Tensor) -> float:
    """``H² = 1 − BC`` with the Bhattacharyya coefficient ``BC = exp(−D_B)``,
    ``D_B = ⅛ ΔᵀS⁻¹Δ + ½ ln(|S| / √(|S1||S2|))``, ``S = (S1 + S2)/2`` (Bhattacharyya 1943)."""
    S1, S2 = S1.double(), S2.double()
    S = 0.5 * (S1 + S2)
    delta = (m1 - m2).double()
    db = 0.125 * delta @ torch.linalg.solve(S, delta) + 0.5 * (torch.logdet(S) - 0.5 * (torch.logdet(S1) + torch.logdet(S2)))
    return float(-torch.expm1(-db))


def gaussian_divergence(kind: str, m1: torch.Tensor, S1: torch.Tensor, m2: torch.Tensor, S2: torch.Tensor) -> float:
    """Closed-form ``D_kind(N(m1, S1) ‖ N(m2, S2))`` for ``kind`` in :data:`CLOSED_FORM`."""
    m1, S1, m2, S2 = (torch.as_tensor(v, dtype=torch.float64) for v in (m1, S1, m2, S2))
    if kind == "kl":
        return float(gaussian_kl(m1, S1, m2, S2))
    if kind == "reverse-kl":
        return float(gaussian_kl(m2, S2, m1, S1))
    if kind == "chi2":
        return gaussian_chi2(m1, S1, m2, S2)
    if kind == "hellinger2":
        return gaussian_hellinger2(m1, S1, m2, S2)
    raise ValueError(f"no closed form for {kind!r} between Gaussians; have {', '.join(CLOSED_FORM)} (use mc_f_divergence)")


# ----------------------------------------------------------------------------- Monte Carlo
def mc_f_divergence(kind: str, log_p: Callable[[torch.Tensor], torch.Tensor], log_q: Callable[[torch.Tensor], torch.Tensor],
                    sample_p: Callable[[int, torch.Generator], torch.Tensor], sample_q: Callable[[int, torch.Generator], torch.Tensor],
                    n: int = 20_000, generator: torch.Generator | None = None) -> tuple[float, float]:
    """Unbiased Monte-Carlo ``D_f(P‖Q)`` and its standard error, for laws with tractable densities.

    Draws ``n`` points from the balanced mixture M = (P + Q)/2 (n/2 from each, stratified) and
    averages ``q(x)/m(x) · f(p(x)/q(x))``; the weights ``q/m ≤ 2`` and, for TV, H² and JS, f(p/q)·q/m
    ≤ 2 · const, so their variance is bounded (a plain E_Q[f(p/q)] is not, for heavy ratios). Returns
    ``(estimate, stratified standard error)``."""
    g = generator or torch.Generator().manual_seed(0)
    f = f_generator(kind)
    half = max(n // 2, 2)
    vals = []
    for draw in (sample_p, sample_q):
        x = draw(half, g)
        lp, lq = log_p(x).double(), log_q(x).double()
        lm = torch.logaddexp(lp, lq) - math.log(2)
        r = torch.exp(lp - lq)
        term = torch.exp(lq - lm) * f(r)
        if kind == "kl":  # q f(p/q) = p ln(p/q): avoid inf * 0 when q underflows
            term = torch.exp(lp - lm) * (lp - lq)
        vals.append(term)
    est = 0.5 * (vals[0].mean() + vals[1].mean())
    se = 0.5 * math.sqrt(float(vals[0].var() / half + vals[1].var() / half))
    return float(est), se


# ----------------------------------------------------------------------------- the diagnostic and the criteria
def egt_gap(divergences: Sequence[float] | torch.Tensor) -> float:
    """δ-EGT gap ``max_{a,a'} |D_a − D_{a'}| = max_a D_a − min_a D_a`` (0 for one group)."""
    d = torch.as_tensor(divergences, dtype=torch.float64).reshape(-1)
    if d.numel() == 0:
        raise ValueError("egt_gap needs at least one group")
    return float(d.max() - d.min())


def is_delta_egt(divergences: Sequence[float] | torch.Tensor, delta: float) -> bool:
    """True iff the model is δ-EGT fair: ``egt_gap(divergences) ≤ delta``."""
    return egt_gap(divergences) <= delta


def proportion_gap(model_props: Sequence[float] | torch.Tensor, target: Sequence[float] | torch.Tensor | None = None) -> float:
    """Proportion-based criterion: ``max_a |Q(a) − target_a|`` (target default uniform = equal
    representation; pass the data's p_a for matched representation). 0 = the criterion holds."""
    q = torch.as_tensor(model_props, dtype=torch.float64).reshape(-1)
    t = torch.full_like(q, 1.0 / q.numel()) if target is None else torch.as_tensor(target, dtype=torch.float64).reshape(-1)
    return float((q - t).abs().max())
