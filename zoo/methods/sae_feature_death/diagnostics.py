"""The paper's diagnostics: outlier severity gamma, effective rank, closed-form death predictions,
dead-by-ReLU / dead-by-TopK accounting and the preprocessing fixes.

Simon, Adams & Zou, "SAE feature death from activation outliers", ICML 2026, arXiv 2605.31518;
code github.com/ElanaPearl/sae-feature-death (``metrics.py``). Formulas implemented from the
paper's definitions (no code copied):

* gamma (post-LN, the paper's default): per-token LayerNorm without affine, scaled by sqrt(d),
  x~ = (x - mean_j x_j) / sqrt(var_j x_j + 1e-5) * sqrt(d); mu = mean over tokens of x~,
  sigma = per-dimension std over tokens (ddof 0); **gamma = ||mu||_2 / ||sigma||_2**.
  gamma_raw is the same without the LayerNorm step.
* effective rank = exp(entropy of the normalised squared singular values) of the LN'd,
  mean-centred activation matrix, in [1, d].
* With C = Phi^-1(1 - 1/N_eval), t_k = Phi^-1(1 - k/F):
  P(dead-by-ReLU) = Phi(-C/gamma);  P(dead, TopK incl. ReLU-dead) = Phi(t_k - C/gamma).
  Paper constants N_eval = 100,000, k = 64, F = 8192.
* Accounting over an eval set: dead-by-ReLU = max over tokens of h_f <= 0; dead-by-TopK = ever
  positive but never in any token's top-k; total = their sum.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
import numpy as np
import torch

from zoo.common.sae import SparseAutoencoder, geometric_median

from .params import Preprocess

_N = NormalDist()

__all__ = [
    "DeathCounts",
    "dead_by_pathway",
    "effective_rank",
    "gamma",
    "layernorm_rows",
    "predicted_dead_by_relu",
    "predicted_dead_by_topk",
    "preprocess",
]


def layernorm_rows(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Per-token LayerNorm without affine, scaled by sqrt(d) (the paper's gamma_postLN step)."""
    x = np.asarray(x, dtype=np.float64)
    d = x.shape[1]
    m = x.mean(1, keepdims=True)
    v = x.var(1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * math.sqrt(d)


def gamma(x: np.ndarray | torch.Tensor, post_ln: bool = True) -> float:
    """Outlier severity gamma = ||mu|| / ||sigma|| (post-LN by default; ``post_ln=False`` = gamma_raw).

    As in the authors' ``compute_gamma``, data without per-token variation (||sigma|| < 1e-10,
    e.g. all-zero or constant activations) give ``inf``: the mean is all there is."""
    x = _np(x)
    if post_ln:
        x = layernorm_rows(x)
    mu = x.mean(0)
    sigma = x.std(0)  # ddof 0
    s = float(np.linalg.norm(sigma))
    if s < 1e-10:
        return math.inf
    return float(np.linalg.norm(mu)) / s


def effective_rank(x: np.ndarray | torch.Tensor, post_ln: bool = True) -> float:
    """exp(entropy of the normalised squared singular values) of the (LN'd) mean-centred data,
    over all rows. The squared singular values are the eigenvalues of the d x d scatter matrix
    (computed that way, in float64, when there are more rows than columns); eigenvalue shares
    <= 1e-12 are dropped as in the authors' ``effective_rank``."""
    x = _np(x)
    if post_ln:
        x = layernorm_rows(x)
    xc = x - x.mean(0)
    if xc.shape[0] > xc.shape[1]:
        s2 = np.clip(np.linalg.eigvalsh(xc.T @ xc), 0.0, None)
    else:
        s2 = np.linalg.svd(xc, compute_uv=False) ** 2
    tot = s2.sum()
    if tot <= 0:
        return 1.0
    p = s2 / tot
    p = p[p > 1e-12]
    return float(np.exp(-(p * np.log(p)).sum()))


def _consts(n_eval: int, k: int, n_features: int) -> tuple[float, float]:
    c = _N.inv_cdf(1.0 - 1.0 / n_eval)
    t_k = _N.inv_cdf(1.0 - k / n_features)
    return c, t_k


def predicted_dead_by_relu(g: float, n_eval: int = 100_000) -> float:
    """Phi(-C/gamma), C = Phi^-1(1 - 1/N_eval); a fraction in [0, 1/2)."""
    if g <= 0:
        return 0.0
    c = _N.inv_cdf(1.0 - 1.0 / n_eval)
    return _N.cdf(-c / g)


def predicted_dead_by_topk(g: float, n_eval: int = 100_000, k: int = 64, n_features: int = 8192) -> float:
    """Phi(t_k - C/gamma), t_k = Phi^-1(1 - k/F): total predicted TopK death (incl. ReLU-dead)."""
    if g <= 0:
        return 0.0
    c, t_k = _consts(n_eval, k, n_features)
    return _N.cdf(t_k - c / g)


@dataclass(frozen=True)
class DeathCounts:
    """Fractions of features dead by pathway over an eval set (disjoint; total = relu + topk)."""

    relu: float
    topk: float
    n_features: int

    @property
    def total(self) -> float:
        return self.relu + self.topk

    def as_dict(self) -> dict:
        return {**asdict(self), "total": self.total}


@torch.no_grad()
def dead_masks(sae: SparseAutoencoder, x: torch.Tensor, k: int | None = None, chunk: int = 2048) -> tuple[torch.Tensor, torch.Tensor]:
    """Boolean masks (dead_relu, dead_topk) over features, from pre-activations on ``x``.

    dead_relu[f]  = max_t h_tf <= 0;
    dead_topk[f]  = not dead_relu[f] and f is never among a token's top-k positive latents.
    ``k`` defaults to the SAE's k (for a ReLU SAE only dead_relu is meaningful: pass k=F)."""
    k = sae.k if k is None else k
    F = sae.n_features
    max_h = torch.full((F,), -math.inf)
    in_topk = torch.zeros(F, dtype=torch.bool)
    for i in range(0, x.shape[0], chunk):
        h = sae.pre_acts(x[i : i + chunk].float())
        max_h = torch.maximum(max_h, h.max(0).values)
        vals, idx = h.topk(min(k, F), dim=-1)
        sel = idx[vals > 0]
        in_topk[sel] = True
    dead_relu = max_h <= 0
    dead_topk = (~dead_relu) & (~in_topk)
    return dead_relu, dead_topk


def dead_by_pathway(sae: SparseAutoencoder, x: torch.Tensor, k: int | None = None) -> DeathCounts:
    """Fractions dead-by-ReLU and dead-by-TopK (see :func:`dead_masks`)."""
    r, t = dead_masks(sae, x, k)
    F = sae.n_features
    return DeathCounts(relu=float(r.sum()) / F, topk=float(t.sum()) / F, n_features=F)


def preprocess(x: torch.Tensor, how: Preprocess, seed: int = 0) -> tuple[torch.Tensor, str]:
    """Preprocessing before a b_dec = 0 SAE: ``none``; ``mean`` (subtract the mean);
    ``geometric_median`` (subtract it); ``pca_whiten`` (scikit-learn PCA(whiten=True), all
    components, output rescaled so the mean squared norm matches the centred input);
    ``layernorm`` (per-token LN, the paper's negative control: it does not fix death).
    Returns the transformed data and a one-line description."""
    x = x.float()
    if how == "none":
        return x, "raw activations"
    if how == "mean":
        return x - x.double().mean(0).float(), "mean-centred"
    if how == "geometric_median":
        return x - geometric_median(x), "geometric-median-centred"
    if how == "layernorm":
        return torch.from_numpy(layernorm_rows(x.numpy())).float(), "per-token LayerNorm"
    if how == "pca_whiten":
        from sklearn.decomposition import PCA

        xn = x.double().numpy()
        xc = xn - xn.mean(0)  # centre in float64 first: the covariance solver cancels badly on a big mean
        w = PCA(whiten=True, svd_solver="full", random_state=seed).fit_transform(xc)
        scale = math.sqrt((xc**2).sum(1).mean() / max((w**2).sum(1).mean(), 1e-30))
        return torch.from_numpy(w * scale).float(), "PCA-whitened"
    raise ValueError(f"preprocess must be none, mean, geometric_median, pca_whiten or layernorm, not {how!r}")


def _np(x: np.ndarray | torch.Tensor) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)
