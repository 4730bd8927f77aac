"""Gaussian kernel density estimation, its score, score-debiased KDE, whitening, and the exact
cross-attention construction of a Gaussian KDE (DiScoFormer, Ilin & Sushko, arXiv 2511.05924, Props 3.3-3.6).

Notation: context ``X`` ``(..., n, d)`` (samples of an unknown law ``f``), queries ``Y`` ``(..., m, d)``.

* Isotropic Gaussian KDE with bandwidth ``h``:
  ``f_h(y) = (1/n) sum_j N(y; x_j, h^2 I)``, so
  ``log f_h(y) = logsumexp_j(-|y - x_j|^2 / (2h^2)) - log n - (d/2) log(2 pi h^2)`` and
  ``grad log f_h(y) = h^-2 (sum_j K_h(y, x_j) x_j / sum_j K_h(y, x_j) - y)``.
* Whitening (the DiScoFormer input layer, section 4.1 of the method note): ``mu = mean(X)``,
  ``S = cov(X) + eps tr(cov(X))/d I`` (normalised by ``n``; the trace-relative ridge keeps scale
  equivariance exact), ``A = S^{-1/2}`` (symmetric), ``x_w = (x - mu) A``. An isotropic KDE on whitened
  points is the full-covariance KDE ``N(y; x_j, h^2 S)`` in the original coordinates after the change of
  variables ``log f = log f_w + log det A``, ``grad log f = A grad_w log f_w``. With Scott's factor
  ``h = n^{-1/(d+4)}`` this is scipy's ``gaussian_kde`` default (the "Scott-rule KDE" of the paper's tables).
* Score-debiased KDE (SD-KDE): move every sample by half a kernel covariance along a score estimate,
  ``x_j' = x_j + (h^2/2) S s(x_j)``, then KDE with the same kernel; the O(h^2) bias becomes O(h^4), so the
  bandwidth shrinks at the rate ``n^{-1/(d+8)}`` (Epstein et al., "SD-KDE: Score-Debiased Kernel Density
  Estimation", https://arxiv.org/abs/2504.19084: one step ``x + (h^2/2) s(x)``, MISE ``O(n^{-8/(d+8)})`` with an
  exact score; the bandwidth *constant* 1, in units of the data covariance, is ours, not theirs). The score
  ``s`` may be the KDE's own (pilot, Scott bandwidth), an oracle (the true score) or DiScoFormer's.
* Attention = KDE (Props 3.3-3.6): token embedding ``e(z) = [z, 0_d, |z|^2]`` (width ``2d + 1``);
  query map ``q_i = [y_i / h^2, -1 / (2h^2)]`` (weights + bias), key map ``k_j = [x_j, |x_j|^2]``, value map
  ``v_j = x_j`` written into the middle block by the output map. Then
  ``q_i . k_j = -|y_i - x_j|^2/(2h^2) + |y_i|^2/(2h^2)`` (the appended ``|x|^2`` cancels the weight
  ``w_j = exp(|x_j|^2 / (2h^2))``), the softmax is the KDE responsibility, one residual cross-attention block
  (no FFN, no LayerNorm) leaves ``[y_i, m_i, |y_i|^2]`` with ``m_i`` the kernel-weighted mean, and the affine
  readouts ``score = (m_i - y_i) / h^2``, ``log f = l_i - |y_i|^2/(2h^2) - log n - (d/2) log(2 pi h^2)`` with
  ``l_i = logsumexp_j q_i . k_j`` (the attention's own log-normaliser) are the KDE's score and log-density.
"""
from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from .attention import CrossAttention

__all__ = [
    "scott_factor", "sdkde_factor", "gaussian_kde", "whiten", "kde_log_density_score", "sd_kde",
    "KDEAttentionBlock", "kde_attention_block",
]

LOG_2PI = math.log(2 * math.pi)


def scott_factor(n: int, d: int) -> float:
    """Scott's rule ``h = n^{-1/(d+4)}`` (in units of the data's standard deviation; scipy ``gaussian_kde``)."""
    return float(n) ** (-1.0 / (d + 4))


def sdkde_factor(n: int, d: int) -> float:
    """SD-KDE's bandwidth rate ``n^{-1/(d+8)}`` (bias O(h^4) against variance O(1/(n h^d))) [paper-note]."""
    return float(n) ** (-1.0 / (d + 8))


def gaussian_kde(X: torch.Tensor, Y: torch.Tensor, h: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Isotropic Gaussian KDE of context ``X`` (..., n, d) at queries ``Y`` (..., m, d): ``(log f_h, grad log f_h)``.

    Direct formula (no attention): the reference the attention construction is checked against."""
    h2 = float(h) ** 2
    n, d = X.shape[-2], X.shape[-1]
    sq = ((Y[..., :, None, :] - X[..., None, :, :]) ** 2).sum(-1)  # (..., m, n)
    logits = -sq / (2 * h2)
    log_f = torch.logsumexp(logits, dim=-1) - math.log(n) - 0.5 * d * (LOG_2PI + math.log(h2))
    score = (torch.softmax(logits, dim=-1) @ X - Y) / h2
    return log_f, score


def whiten(X: torch.Tensor, eps: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """DiScoFormer's whitening layer: ``(mu, A, log det A)`` with ``A = (cov(X) + eps tr(cov)/d I)^{-1/2}``
    (symmetric inverse square root by eigendecomposition, ``cov`` normalised by ``n``). Batched over leading dims."""
    n, d = X.shape[-2], X.shape[-1]
    mu = X.mean(-2, keepdim=True)
    Xc = X - mu
    C = Xc.transpose(-1, -2) @ Xc / n
    tr = torch.diagonal(C, dim1=-2, dim2=-1).sum(-1)[..., None, None] / d
    S = C + eps * tr * torch.eye(d, dtype=X.dtype, device=X.device)
    evals, evecs = torch.linalg.eigh(S)
    evals = evals.clamp_min(torch.finfo(X.dtype).tiny)
    A = evecs @ torch.diag_embed(evals.rsqrt()) @ evecs.transpose(-1, -2)
    logdet_A = -0.5 * torch.log(evals).sum(-1)
    return mu, A, logdet_A


def kde_log_density_score(X: torch.Tensor, Y: torch.Tensor, factor: float | None = None, eps: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor]:
    """Full-covariance Gaussian KDE (kernel covariance ``h^2 S``, ``h = factor``, default Scott's rule): whiten,
    isotropic KDE, change of variables back. Returns ``(log f, score)`` at ``Y``."""
    n, d = X.shape[-2], X.shape[-1]
    h = scott_factor(n, d) if factor is None else factor
    mu, A, logdet = whiten(X, eps)
    log_fw, s_w = gaussian_kde((X - mu) @ A, (Y - mu) @ A, h)
    return log_fw + logdet[..., None], s_w @ A.transpose(-1, -2)


def sd_kde(X: torch.Tensor, Y: torch.Tensor, score_at_x: torch.Tensor | None = None, factor: float | None = None,
           pilot_factor: float | None = None, eps: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor]:
    """Score-debiased KDE: ``x_j' = x_j + (h^2 / 2) S s(x_j)`` then the KDE (kernel ``h^2 S``) of the moved points.

    ``score_at_x`` (..., n, d): the score estimate at the context points (an oracle or DiScoFormer); ``None``
    uses the Scott-rule KDE's own score at the samples (the empirical, oracle-free SD-KDE). ``factor`` defaults
    to :func:`sdkde_factor`. Whitening uses the *original* samples' covariance for both steps."""
    n, d = X.shape[-2], X.shape[-1]
    h = sdkde_factor(n, d) if factor is None else factor
    mu, A, logdet = whiten(X, eps)
    Xw, Yw = (X - mu) @ A, (Y - mu) @ A
    if score_at_x is None:
        _, s_w = gaussian_kde(Xw, Xw, scott_factor(n, d) if pilot_factor is None else pilot_factor)
    else:
        # s_w = grad_w log f_w = A^{-1} grad log f (row vectors: s @ A^{-T}); A symmetric
        s_w = torch.linalg.solve(A, score_at_x.transpose(-1, -2)).transpose(-1, -2)
    moved = Xw + 0.5 * h * h * s_w
    log_fw, sc_w = gaussian_kde(moved, Yw, h)
    return log_fw + logdet[..., None], sc_w @ A.transpose(-1, -2)


class KDEAttentionBlock(nn.Module):
    """One residual single-head cross-attention block (no FFN, no LayerNorm) with hand-set weights that
    computes a Gaussian KDE exactly (module docstring; Props 3.3-3.6 of arXiv 2511.05924).

    ``forward(X, Y)`` returns ``(log_density, score)``: ``score`` is the affine readout of the residual stream,
    ``log_density`` the affine readout plus the attention's per-query log-normaliser. ``cancel_norm=False``
    drops the appended ``|x|^2`` key feature (a negative control: the softmax then carries the weights
    ``w_j = exp(|x_j|^2/(2h^2))`` and is no longer a KDE)."""

    def __init__(self, d: int, h: float, d_model: int | None = None, dtype: torch.dtype = torch.float64, cancel_norm: bool = True):
        super().__init__()
        D = 2 * d + 1 if d_model is None else d_model
        if D < 2 * d + 1:
            raise ValueError(f"the exact-KDE construction needs d_model >= 2d + 1 = {2 * d + 1}, got {D}")
        self.d, self.h, self.d_model = d, float(h), D
        self.attn = CrossAttention(D, n_heads=1, head_dim=d + 1, bias=True, scale=1.0, dtype=dtype)
        h2 = self.h**2
        with torch.no_grad():
            for p in self.attn.parameters():
                p.zero_()
            Wq, bq = self.attn.q.weight, self.attn.q.bias  # (d+1, D): q = e W^T + b
            Wq[:d, :d] = torch.eye(d, dtype=dtype) / h2
            bq[d] = -1.0 / (2 * h2)
            Wk = self.attn.k.weight
            Wk[:d, :d] = torch.eye(d, dtype=dtype)
            if cancel_norm:
                Wk[d, 2 * d] = 1.0
            self.attn.v.weight[:d, :d] = torch.eye(d, dtype=dtype)  # v_j = x_j
            self.attn.o.weight[d:2 * d, :d] = torch.eye(d, dtype=dtype)  # written to the middle block
        self.attn.requires_grad_(False)  # a construction, not trained
        # affine readouts from the residual stream r = [y, m, |y|^2, 0...]
        score_w = torch.zeros(d, D, dtype=dtype)
        score_w[:, :d] = -torch.eye(d, dtype=dtype) / h2
        score_w[:, d:2 * d] = torch.eye(d, dtype=dtype) / h2
        logf_w = torch.zeros(D, dtype=dtype)
        logf_w[2 * d] = -1.0 / (2 * h2)
        self.register_buffer("score_readout", score_w)
        self.register_buffer("logf_readout", logf_w)

    def embed(self, Z: torch.Tensor) -> torch.Tensor:
        """``e(z) = [z, 0_d, |z|^2, 0...]`` (width ``d_model``)."""
        pad = torch.zeros(*Z.shape[:-1], self.d_model - 2 * self.d - 1, dtype=Z.dtype, device=Z.device)
        return torch.cat([Z, torch.zeros_like(Z), (Z**2).sum(-1, keepdim=True), pad], -1)

    def forward(self, X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = X.shape[-2]
        ey = self.embed(Y)
        out, lse = self.attn(ey, self.embed(X), return_lse=True)
        r = ey + out  # the residual stream after the block
        score = r @ self.score_readout.T
        const = -math.log(n) - 0.5 * self.d * (LOG_2PI + math.log(self.h**2))
        log_f = lse[..., 0] + r @ self.logf_readout + const
        return log_f, score


def kde_attention_block(d: int, h: float, d_model: int | None = None, dtype: torch.dtype = torch.float64,
                        variant: Literal["exact", "no-norm-feature"] = "exact") -> KDEAttentionBlock:
    """The construction of :class:`KDEAttentionBlock` (``variant="no-norm-feature"``: the negative control)."""
    return KDEAttentionBlock(d, h, d_model, dtype, cancel_norm=variant == "exact")
