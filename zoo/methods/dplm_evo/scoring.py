"""Mutation-effect scoring (arXiv 2605.00182, Sec. 4 "ProteinGym"; ESM-1v's masked-marginal for the baseline).

* **wild-type marginal** (DPLM-Evo): feed the wild type *unmasked*, read the substitution head:
  ``s(i, a → b) = log p_sub(b | x_wt)_i − log p_sub(a | x_wt)_i`` (one forward for all single mutants);
* **masked marginal** (DPLM / ESM baseline, Meier et al. 2021, bioRxiv 10.1101/2021.07.09.450648):
  mask site ``i``, ``s = log p(b | x_wt^{∖i}) − log p(a | x_wt^{∖i})`` (one forward per site).
"""
from __future__ import annotations

import numpy as np
import torch

from .alphabet import K
from .model import MASK

__all__ = ["wt_marginal", "masked_marginal", "marginals", "mutant_scores", "spearman"]


def _logp(net, rows: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        sub, _, _ = net(rows, torch.full((rows.shape[0],), rows.shape[1], dtype=torch.long))
    return torch.log_softmax(sub.double(), -1)


def wt_marginal(net, wt) -> torch.Tensor:
    """``[L, 20]`` log-probabilities of the substitution head on the unmasked wild type."""
    return _logp(net, torch.as_tensor(wt, dtype=torch.long)[None])[0]


def masked_marginal(net, wt) -> torch.Tensor:
    """``[L, 20]``: row ``i`` = log-probabilities at site ``i`` with site ``i`` masked (L rows, one batch)."""
    x = torch.as_tensor(wt, dtype=torch.long)
    rows = x[None].repeat(len(x), 1)
    rows[torch.arange(len(x)), torch.arange(len(x))] = MASK
    lp = _logp(net, rows)
    return lp[torch.arange(len(x)), torch.arange(len(x))]


def marginals(net, wts, scoring: str) -> list[torch.Tensor]:
    """``[L_w, 20]`` log-probabilities of every wild type in ``wts`` under ``scoring`` (``"wt-marginal"``: one
    unmasked row per wild type; ``"masked-marginal"``: one row per site, that site masked), all rows in one
    right-padded forward. Equal to :func:`wt_marginal` / :func:`masked_marginal` per wild type up to float
    rounding (padding is masked out of attention)."""
    if scoring not in ("wt-marginal", "masked-marginal"):
        raise ValueError(f"scoring: expected 'wt-marginal' or 'masked-marginal', got {scoring!r}")
    from zoo.common.varlen import pad_rows

    from .model import PAD

    xs = [torch.as_tensor(w, dtype=torch.long) for w in wts]
    rows, owner, site = [], [], []
    for j, x in enumerate(xs):
        if scoring == "wt-marginal":
            rows.append(x)
            owner.append(j)
            site.append(-1)
            continue
        for i in range(len(x)):
            r = x.clone()
            r[i] = MASK
            rows.append(r)
            owner.append(j)
            site.append(i)
    tok, lengths = pad_rows(rows, PAD)
    with torch.no_grad():
        sub, _, _ = net(tok, lengths)
    lp = torch.log_softmax(sub.double(), -1)
    if scoring == "wt-marginal":
        return [lp[j, : len(x)] for j, x in enumerate(xs)]
    out = [torch.empty(len(x), K, dtype=torch.float64) for x in xs]
    for r, (j, i) in enumerate(zip(owner, site)):
        out[j][i] = lp[r, i]
    return out


def mutant_scores(logp: torch.Tensor, wt) -> torch.Tensor:
    """``[L, 20]`` score of every single substitution ``wt_i → b``: ``logp[i, b] − logp[i, wt_i]`` (0 on ``b = wt_i``)."""
    x = torch.as_tensor(wt, dtype=torch.long)
    return logp - logp[torch.arange(len(x)), x][:, None]


def spearman(scores: np.ndarray, truth: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties) of two flat arrays."""
    from scipy.stats import spearmanr

    return float(spearmanr(np.asarray(scores).ravel(), np.asarray(truth).ravel()).statistic)


def single_mutant_table(wt, site_log_probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices ``(i * 20 + b)`` of the ``19 L`` single mutants of ``wt`` and their true ``Δf``."""
    x = np.asarray(wt)
    delta = site_log_probs - site_log_probs[np.arange(len(x)), x][:, None]
    keep = np.ones_like(delta, dtype=bool)
    keep[np.arange(len(x)), x] = False
    return np.flatnonzero(keep.ravel()), delta.ravel()[keep.ravel()]


__all__ += ["single_mutant_table", "K"]
