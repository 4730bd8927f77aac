"""The closed-form Gaussian toy: groups of different difficulty, a model class with a shared
covariance (capacity coupling), exact ERM / min–max solutions, and min–max fine-tuning.

Data (shared note ``methods/egt.md`` §6a): P = Σ_a p_a P_a with P_a = N(μ_a, S_a); the default
``note`` toy has A ~ N((−2, 0), diag(0.25, 0.25)), p_A = 0.9 and B ~ N((2, 0), [[4, 1.2], [1.2, 1]]),
p_B = 0.1 (the note fixes the covariances and proportions; the means are ours and do not affect any
number below, since the model's per-group means are free). Model: Q_a = N(m_a, Σ) with per-group
means m_a and **one** covariance Σ = L Lᵀ (L lower triangular, log-diagonal parametrisation), group
frequencies π_a. Per-group KL in closed form (:func:`~.divergences.gaussian_kl`).

Objectives (each a recipe; all fine-tune the same θ₀ = the ERM solution):

* ``erm`` — frequency-weighted loss Σ_a p_a L_a (maximum likelihood);
* ``proportion`` — the proportion-based fairness baseline: group-balanced loss (1/K) Σ_a L_a and
  equal model frequencies π_a = 1/K (equal representation, the criterion the paper argues against);
* ``minmax`` — the paper's min–max fine-tuning (§4.3 of the note): keep an EMA L̄_a of each group's
  loss, back-propagate only the loss of the currently worst group argmax_a L̄_a;
* ``group-dro`` — the soft variant: exponentiated-gradient group weights (Sagawa et al., "Distributionally
  Robust Neural Networks", arXiv 1911.08731, Algorithm 1): ``q_a ← q_a exp(η_q L_a) / Z``, loss Σ_a q_a L_a.

Per-group loss L_a: ``exact`` = KL(P_a‖Q_a) in closed form; ``sampled`` = the minibatch NLL of P_a
samples under Q_a minus the known entropy H(P_a) (an unbiased KL estimate: the note's §4.5 "subtract
the known offset"; raw NLLs would carry H(P_a), which differs by group).

Exact references: the weighted MLE Σ(w) = Σ_a w_a S_a (means at μ_a) minimises Σ_a w_a KL_a; by
minimax duality (KL is convex in the precision Σ⁻¹) the exact min–max model is Σ(w*) for the w* that
equalises the per-group KLs whenever no single group's own optimum already dominates
(:func:`exact_minmax`, bisection for two groups, exponentiated-gradient ascent on w in general).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from .divergences import egt_gap, gaussian_entropy, gaussian_kl, gaussian_log_prob

__all__ = [
    "GaussianGroups", "note_toy", "GroupModel", "sample_groups", "weighted_mle", "group_kls", "exact_minmax", "eg_update", "FinetuneResult",
    "finetune", "summary", "ALGORITHMS",
]

Algorithm = Literal["erm", "proportion", "minmax", "group-dro"]
ALGORITHMS: tuple[str, ...] = ("erm", "proportion", "minmax", "group-dro")


@dataclass(frozen=True)
class GaussianGroups:
    """Group laws P_a = N(means[a], covs[a]) with data proportions ``props`` (float64)."""

    means: torch.Tensor  # (K, d)
    covs: torch.Tensor  # (K, d, d)
    props: torch.Tensor  # (K,)
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        K = self.means.shape[0]
        if self.covs.shape != (K, self.dim, self.dim) or self.props.shape != (K,):
            raise ValueError(f"means (K, d), covs (K, d, d), props (K,) expected; got {tuple(self.means.shape)}, "
                             f"{tuple(self.covs.shape)}, {tuple(self.props.shape)}")
        if (self.props <= 0).any() or abs(float(self.props.sum()) - 1) > 1e-9:
            raise ValueError("group proportions must be positive and sum to 1")
        if not self.names:
            object.__setattr__(self, "names", tuple(chr(ord("A") + i) if K <= 26 else str(i) for i in range(K)))

    @property
    def K(self) -> int:
        return self.means.shape[0]

    @property
    def dim(self) -> int:
        return self.means.shape[1]

    def permuted(self, perm: Sequence[int]) -> "GaussianGroups":
        """The same toy with groups relabelled (group i of the result is group perm[i] of self)."""
        idx = torch.as_tensor(list(perm))
        return GaussianGroups(self.means[idx], self.covs[idx], self.props[idx], tuple(self.names[i] for i in perm))

    def sample(self, a: int, n: int, generator: torch.Generator) -> torch.Tensor:
        L = torch.linalg.cholesky(self.covs[a])
        return self.means[a] + torch.randn(n, self.dim, generator=generator, dtype=torch.float64) @ L.T


def note_toy(p_b: float = 0.1) -> GaussianGroups:
    """The note's two-group toy: A ~ N((−2,0), 0.25 I) (easy, majority), B ~ N((2,0), [[4,1.2],[1.2,1]])."""
    means = torch.tensor([[-2.0, 0.0], [2.0, 0.0]], dtype=torch.float64)
    covs = torch.stack([torch.diag(torch.tensor([0.25, 0.25], dtype=torch.float64)),
                        torch.tensor([[4.0, 1.2], [1.2, 1.0]], dtype=torch.float64)])
    return GaussianGroups(means, covs, torch.tensor([1 - p_b, p_b], dtype=torch.float64))


@dataclass
class GroupModel:
    """Q_a = N(means[a], cov), group frequencies ``props`` (all float64, detached)."""

    means: torch.Tensor
    cov: torch.Tensor
    props: torch.Tensor


def sample_groups(model: GroupModel, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` draws (a, x) from the model's joint Q(a, x) = π_a Q_a(x): the group label a ~ Categorical(π)
    (``model.props``), then x ~ N(means[a], cov). Returns (labels (n,), x (n, d))."""
    a = torch.multinomial(model.props.double(), n, replacement=True, generator=generator)
    L = torch.linalg.cholesky(model.cov)
    x = model.means[a] + torch.randn(n, model.cov.shape[0], generator=generator, dtype=torch.float64) @ L.T
    return a, x


def weighted_mle(toy: GaussianGroups, w: Sequence[float] | torch.Tensor, props: torch.Tensor | None = None) -> GroupModel:
    """argmin over the model class of Σ_a w_a KL(P_a‖Q_a): m_a = μ_a, Σ = Σ_a w_a S_a (w normalised).
    ``w = props`` is ERM (maximum likelihood); ``props`` defaults to the data's."""
    w = torch.as_tensor(w, dtype=torch.float64)
    w = w / w.sum()
    return GroupModel(toy.means.clone(), (w[:, None, None] * toy.covs).sum(0), toy.props.clone() if props is None else props)


def group_kls(toy: GaussianGroups, model: GroupModel) -> torch.Tensor:
    """(K,) closed-form KL(P_a‖Q_a)."""
    return gaussian_kl(toy.means, toy.covs, model.means, model.cov.expand_as(toy.covs))


def exact_minmax(toy: GaussianGroups, iters: int = 200) -> tuple[GroupModel, torch.Tensor]:
    """The exact min–max model min_Σ max_a KL_a and its dual weights w*.

    min_Λ max_{w∈Δ} Σ_a w_a KL_a(Λ) = max_w min_Λ (...) (Sion; KL_a is convex in the precision Λ and the
    mean terms vanish at m_a = μ_a), and the inner minimiser is Σ(w) = Σ_a w_a S_a. The dual
    g(w) = Σ_a w_a KL_a(Σ(w)) is concave; its gradient is (KL_a(Σ(w)))_a (envelope theorem). Two
    groups: bisection on w_A for KL_A = KL_B, or the vertex whose own optimum already dominates.
    More groups: exponentiated-gradient ascent on g with a decreasing step (approximate)."""
    K = toy.K
    if K == 1:
        return weighted_mle(toy, [1.0]), torch.ones(1, dtype=torch.float64)
    if K == 2:
        def kls(wa: float) -> torch.Tensor:
            return group_kls(toy, weighted_mle(toy, [wa, 1 - wa]))
        for wa in (1.0, 0.0):  # a vertex is optimal if that group is the worst even at its own optimum
            k = kls(wa)
            worst = 0 if wa == 1.0 else 1
            if float(k[worst]) >= float(k[1 - worst]):
                w = torch.tensor([wa, 1 - wa], dtype=torch.float64)
                return weighted_mle(toy, w), w
        lo, hi = 0.0, 1.0
        for _ in range(iters):
            mid = 0.5 * (lo + hi)
            k = kls(mid)
            if float(k[0]) > float(k[1]):
                lo = mid
            else:
                hi = mid
        w = torch.tensor([0.5 * (lo + hi), 1 - 0.5 * (lo + hi)], dtype=torch.float64)
        return weighted_mle(toy, w), w
    w = torch.full((K,), 1.0 / K, dtype=torch.float64)
    for i in range(iters * 5):
        k = group_kls(toy, weighted_mle(toy, w))
        w = eg_update(w, k, 1.0 / math.sqrt(i + 1))
    return weighted_mle(toy, w), w


def eg_update(q: torch.Tensor, losses: torch.Tensor, eta: float) -> torch.Tensor:
    """One exponentiated-gradient step on the simplex (Sagawa et al., arXiv 1911.08731, Alg. 1, line 5):
    ``q_a ← q_a exp(η L_a) / Σ_b q_b exp(η L_b)``, computed in log space (stable for large η L)."""
    logits = torch.log(q.double()) + eta * losses.detach().double()
    return torch.softmax(logits, 0)


@dataclass
class FinetuneResult:
    """A fine-tuning run: the final model, per-group KL trajectory and the group weights used."""

    model: GroupModel
    steps: list[int] = field(default_factory=list)
    kl_history: list[list[float]] = field(default_factory=list)  # per recorded step, per group (closed form)
    weight_history: list[list[float]] = field(default_factory=list)  # q (group-dro), one-hot worst group (minmax), fixed w otherwise
    worst_counts: list[int] = field(default_factory=list)  # minmax: how often each group was back-propagated
    averaged: GroupModel | None = None  # tail (Polyak–Ruppert) average of the iterates, see finetune


def _chol(raw: torch.Tensor, d: int) -> torch.Tensor:
    """Lower-triangular L from d(d+1)/2 raw values: log-diagonal, free off-diagonal (row-major)."""
    L = torch.zeros(d, d, dtype=raw.dtype)
    rows, cols = torch.tril_indices(d, d)
    L = L.index_put((rows, cols), raw)
    return L.tril(-1) + torch.diag(torch.diagonal(L).exp())


def _raw_from_cov(cov: torch.Tensor) -> torch.Tensor:
    L = torch.linalg.cholesky(cov)
    rows, cols = torch.tril_indices(cov.shape[0], cov.shape[0])
    vals = L[rows, cols].clone()
    diag = rows == cols
    vals[diag] = vals[diag].log()
    return vals


def finetune(toy: GaussianGroups, algorithm: str = "minmax", steps: int = 3000, lr: float = 0.02, ema_decay: float = 0.9,
             eta_q: float = 0.1, loss: str = "exact", batch: int = 64, init: GroupModel | None = None, seed: int = 0,
             record_every: int = 10, progress: bool = False) -> FinetuneResult:
    """Fine-tune (SGD, ``lr``) the shared-covariance model from ``init`` (default: the ERM solution).

    Each step computes the per-group losses L_a (``loss``: ``exact`` closed-form KL, or ``sampled``
    minibatch excess NLL with ``batch`` draws per group from ``seed``), then the ``algorithm``'s
    objective (module docstring) and one SGD step on (L, m). The min–max EMA starts at the first
    step's losses: L̄ ← decay L̄ + (1 − decay) L. Records the closed-form per-group KL every
    ``record_every`` steps (and at 0 and the end).

    ``averaged``: the tail average of the iterates after steps ⌊steps/2⌋+1 … steps — the uniform mean of
    the per-group means and of the **precisions** Σ_t⁻¹, inverted back (Polyak & Juditsky 1992, "Acceleration
    of stochastic approximation by averaging", SIAM J. Control Optim. 30(4); Ruppert 1988). From the ERM
    start the means stay at μ_a (their gradient is 0 there, exact loss) and KL_a is convex in the precision, so by
    Jensen max_a KL_a(averaged) ≤ the tail mean of max_a KL_a(iterate): the averaged model is no worse than a
    typical iterate of the hard argmax's saw-tooth, and converges to the min–max point where the last iterate
    keeps an lr-sized oscillation."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; have {', '.join(ALGORITHMS)}")
    if loss not in ("exact", "sampled"):
        raise ValueError(f"loss must be 'exact' or 'sampled', got {loss!r}")
    K, d = toy.K, toy.dim
    init = init or weighted_mle(toy, toy.props)
    raw = _raw_from_cov(init.cov).requires_grad_(True)
    means = init.means.clone().requires_grad_(True)
    opt = torch.optim.SGD([raw, means], lr=lr)
    g = torch.Generator().manual_seed(seed)
    chols = torch.linalg.cholesky(toy.covs)
    ent = gaussian_entropy(toy.covs)
    logdet_s = torch.logdet(toy.covs)
    fixed_w = {"erm": toy.props, "proportion": torch.full((K,), 1.0 / K, dtype=torch.float64)}.get(algorithm)
    q = torch.full((K,), 1.0 / K, dtype=torch.float64)
    ema: torch.Tensor | None = None
    res = FinetuneResult(model=init, worst_counts=[0] * K)

    def record(step: int, weights: torch.Tensor) -> None:
        with torch.no_grad():
            cov = (lambda L: L @ L.T)(_chol(raw, d))
            k = gaussian_kl(toy.means, toy.covs, means, cov.expand_as(toy.covs))
        res.steps.append(step)
        res.kl_history.append([float(v) for v in k])
        res.weight_history.append([float(v) for v in weights])

    it = range(steps)
    if progress:
        from zoo.common.training import progress as bar

        it = bar(it, desc=f"egt gaussian {algorithm}")
    weights = fixed_w if fixed_w is not None else q
    record(0, weights)
    tail_from = steps // 2  # average the iterates after steps tail_from+1 .. steps
    acc_prec = torch.zeros(d, d, dtype=torch.float64)
    acc_means = torch.zeros(K, d, dtype=torch.float64)
    for step in it:
        L = _chol(raw, d)
        cov = L @ L.T
        if loss == "exact":  # gaussian_kl via the factors: tr(Σ⁻¹S) = ‖L⁻¹C‖²_F, ln|Σ| = 2 Σ ln L_ii (cheaper to differentiate)
            LC = torch.linalg.solve_triangular(L.expand(K, d, d), chols, upper=False)
            z = torch.linalg.solve_triangular(L, (means - toy.means).T, upper=False)
            losses = 0.5 * ((LC**2).sum((-1, -2)) - d + (z**2).sum(0) + 2 * torch.log(torch.diagonal(L)).sum() - logdet_s)
        else:
            per = []
            for a in range(K):
                x = toy.means[a] + torch.randn(batch, d, generator=g, dtype=torch.float64) @ chols[a].T
                per.append(-gaussian_log_prob(x, means[a], cov).mean() - ent[a])
            losses = torch.stack(per)
        if algorithm == "minmax":
            ema = losses.detach().clone() if ema is None else ema_decay * ema + (1 - ema_decay) * losses.detach()
            worst = int(ema.argmax())
            res.worst_counts[worst] += 1
            weights = torch.zeros(K, dtype=torch.float64)
            weights[worst] = 1.0
            objective = losses[worst]
        elif algorithm == "group-dro":
            q = eg_update(q, losses, eta_q)
            weights = q
            objective = (q * losses).sum()
        else:
            assert fixed_w is not None
            objective = (fixed_w * losses).sum()
        opt.zero_grad()
        objective.backward()
        opt.step()
        if step >= tail_from:
            with torch.no_grad():
                Lt = _chol(raw, d)
                acc_prec += torch.cholesky_inverse(Lt)
                acc_means += means
        if (step + 1) % record_every == 0 or step + 1 == steps:
            record(step + 1, weights)
    with torch.no_grad():
        L = _chol(raw, d)
        props = torch.full((K,), 1.0 / K, dtype=torch.float64) if algorithm == "proportion" else toy.props.clone()
        res.model = GroupModel(means.detach().clone(), (L @ L.T).detach().clone(), props)
        n_tail = steps - tail_from
        res.averaged = (GroupModel(acc_means / n_tail, torch.linalg.inv(acc_prec / n_tail), props.clone()) if n_tail > 0
                        else GroupModel(res.model.means.clone(), res.model.cov.clone(), props.clone()))
    return res


def summary(toy: GaussianGroups, model: GroupModel) -> dict[str, Any]:
    """Per-group KL, δ-EGT gap, worst group, data-weighted average Σ p_a KL_a, joint KL
    KL(P_{A,X}‖Q_{A,X}) = KL(p‖π) + Σ p_a KL_a, and the model's group frequencies."""
    k = group_kls(toy, model)
    p, pi = toy.props, model.props
    return {"kl": [float(v) for v in k], "gap": egt_gap(k), "worst": float(k.max()), "weighted": float((p * k).sum()),
            "joint_kl": float((p * (p / pi).log()).sum() + (p * k).sum()), "props": [float(v) for v in pi]}
