"""Random Gaussian-mixture tasks with analytic targets (DiScoFormer's Algorithm 1, method note section 4.2).

Per task: ``k ~ U{k_min..k_max}`` components, weights Dirichlet(1) (floored at 0.05, renormalised) [inferred],
means ``U[-3, 3]^d``, covariances ``R diag(v) R^T`` with ``v ~ U[0.2, 1]^d`` and a Haar-random rotation ``R``
(:func:`zoo.common.toys2d.random_rotation`, one per component). Context ``X`` and queries ``Y`` are i.i.d.
draws of the mixture; the targets are its exact log-density and score at ``Y`` (:mod:`zoo.common.gmm`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from zoo.common.gmm import GaussianMixture
from zoo.common.toys2d import random_rotation

__all__ = ["random_gmm", "Task", "sample_tasks"]


def random_gmm(dim: int, generator: torch.Generator, k_min: int = 1, k_max: int = 10, mean_range: float = 3.0,
               var_range: tuple[float, float] = (0.2, 1.0)) -> GaussianMixture:
    """One random mixture of Algorithm 1 (module docstring)."""
    k = int(torch.randint(k_min, k_max + 1, (1,), generator=generator))
    w = -torch.log(torch.rand(k, dtype=torch.float64, generator=generator))
    w = (w / w.sum()).clamp_min(0.05)
    means = (2 * torch.rand(k, dim, dtype=torch.float64, generator=generator) - 1) * mean_range
    covs = []
    for _ in range(k):
        v = var_range[0] + (var_range[1] - var_range[0]) * torch.rand(dim, dtype=torch.float64, generator=generator)
        R = random_rotation(dim, generator) if dim > 1 else torch.ones(1, 1, dtype=torch.float64)
        covs.append(R @ torch.diag(v) @ R.T)
    return GaussianMixture(w / w.sum(), means, covs=torch.stack(covs))


@dataclass
class Task:
    """A batch of tasks: context ``X`` (B, n, d), queries ``Y`` (B, m, d), exact ``log_f`` (B, m) and ``score`` (B, m, d)."""

    X: torch.Tensor
    Y: torch.Tensor
    log_f: torch.Tensor
    score: torch.Tensor
    laws: list[GaussianMixture]


def sample_tasks(batch: int, dim: int, n_context: int, n_query: int, generator: torch.Generator, dtype: torch.dtype = torch.float32,
                 k_max: int = 10) -> Task:
    """``batch`` random mixtures, each with its context, queries and exact targets (float64 targets cast to ``dtype``)."""
    Xs, Ys, Ls, Ss, laws = [], [], [], [], []
    for _ in range(batch):
        law = random_gmm(dim, generator, k_max=k_max)
        X = law.sample(n_context, generator)
        Y = law.sample(n_query, generator)
        Xs.append(X), Ys.append(Y), Ls.append(law.log_prob(Y)), Ss.append(law.score(Y, 0.0)), laws.append(law)
    cast = lambda ts: torch.stack(ts).to(dtype)  # noqa: E731
    return Task(cast(Xs), cast(Ys), cast(Ls), cast(Ss), laws)
