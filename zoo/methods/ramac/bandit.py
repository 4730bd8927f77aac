"""The 2-D risky bandit of the method note (sec. 6; the paper's figure, parameters ours): a stateless
one-step problem (constant state 0, done = 1, so the critic's target is the reward), behaviour actions
from the 4-mode law :func:`zoo.common.toys2d.risky_bandit`, rewards from
:func:`zoo.common.toys2d.risky_bandit_reward`: safe N(5, 0.5^2) (CVaR_0.1 = 4.12), risky N(9, 0.5^2)
w.p. 0.8 else N(-8, 1) (mean 5.6, CVaR_0.1 = -8.8), off-support ("OOD") N(-5, 3^2).

:func:`evaluate_actions` scores a policy's actions two ways: the empirical mean and CVaR_0.1 of one
reward draw per action (the paper's rule), and the *exact* mean and CVaR_0.1 of the return law the
policy induces (the mixture of the three reward laws weighted by the policy's safe / risky / OOD
occupancy), which has no reward-sampling noise.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from zoo.common.toys2d import RISKY_BANDIT_MODES, bandit_mode_of, risky_bandit, risky_bandit_reward

from .risk import cvar_lower_tail, cvar_normal_mixture, mixture_mean

__all__ = ["BanditData", "bandit_dataset", "return_law", "evaluate_actions", "SAFE_LAW", "RISKY_LAW", "OOD_LAW"]

#: (weights, means, sds) of each region's reward law
SAFE_LAW = ([1.0], [5.0], [0.5])
RISKY_LAW = ([0.8, 0.2], [9.0, -8.0], [0.5, 1.0])
OOD_LAW = ([1.0], [-5.0], [3.0])


@dataclass
class BanditData:
    """An offline dataset ``(s, a, r, s', not_done)``; the bandit has ``s = s' = 0`` and ``not_done = 0``."""

    states: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_states: torch.Tensor
    not_done: torch.Tensor

    def __len__(self) -> int:
        return self.actions.shape[0]


def bandit_dataset(n: int = 10_000, generator: torch.Generator | None = None) -> BanditData:
    """``n`` behaviour transitions: actions from the 4-mode law (sigma 0.08), rewards drawn per action."""
    actions = risky_bandit().sample(n, generator).float()
    rewards = risky_bandit_reward(actions, generator).float()
    zeros = torch.zeros(n, 1)
    return BanditData(zeros, actions, rewards, zeros.clone(), torch.zeros(n))


def return_law(p_safe: float, p_risky: float, p_ood: float) -> tuple[list[float], list[float], list[float]]:
    """The Gaussian mixture of returns of a policy with these region occupancies."""
    w, m, s = [], [], []
    for p, (ws, ms, ss) in ((p_safe, SAFE_LAW), (p_risky, RISKY_LAW), (p_ood, OOD_LAW)):
        if p > 0:
            w += [p * x for x in ws]
            m += ms
            s += ss
    return w, m, s


def evaluate_actions(actions: torch.Tensor, alpha: float = 0.1, generator: torch.Generator | None = None) -> dict[str, Any]:
    """Empirical and exact returns of ``actions`` ``(n, 2)``: ``mean``, ``cvar`` (worst ``ceil(alpha n)`` of one
    reward per action), ``exact_mean``, ``exact_cvar``, ``ood_rate`` (farther than 3 sigma from every mode),
    ``safe_rate``, ``risky_rate`` and ``occupancy`` per mode name."""
    mode = bandit_mode_of(actions)
    names = list(RISKY_BANDIT_MODES)
    risky = torch.tensor([i for i, (_, r) in enumerate(RISKY_BANDIT_MODES.values()) if r])
    n = mode.numel()
    p_ood = float((mode < 0).sum()) / n
    p_risky = float(torch.isin(mode, risky).sum()) / n
    p_safe = 1.0 - p_ood - p_risky
    r = risky_bandit_reward(actions, generator)
    w, m, s = return_law(p_safe, p_risky, p_ood)
    return {
        "n": n, "mean": float(r.mean()), "cvar": float(cvar_lower_tail(r, alpha)), "exact_mean": mixture_mean(w, m),
        "exact_cvar": cvar_normal_mixture(alpha, w, m, s), "ood_rate": p_ood, "safe_rate": p_safe, "risky_rate": p_risky,
        "occupancy": {nm: float((mode == i).sum()) / n for i, nm in enumerate(names)}, "alpha": alpha,
    }
