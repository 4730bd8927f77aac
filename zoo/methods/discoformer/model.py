"""DiScoFormer (Ilin & Sushko, "DiScoFormer: Plug-In Density and Score Estimation with Transformers",
arXiv 2511.05924): an equivariant set transformer mapping a sample set ``X`` and query points ``Y`` to
``log f(y)`` and ``grad log f(y)`` in one forward pass.

Pipeline (method note section 4.1; our reading where the public material is silent is marked [inferred]):

1. Whitening: ``mu = mean(X)``, ``A = (cov(X) + eps tr(cov)/d I)^{-1/2}``, ``X_w = (X - mu) A``,
   ``Y_w = (Y - mu) A`` (:func:`zoo.methods.discoformer.kde.whiten`).
2. Position-free pre-norm transformer blocks (GELU). Per block [inferred layout]: the context tokens run
   self-attention + FFN; the query tokens cross-attend to the (updated) context and run an FFN. Queries never
   attend to each other, so each query's output depends only on ``X`` and itself (batch independence).
3. Two heads on the shared query stream: a scalar ``t`` and a vector ``u``. [inferred] They are residuals
   around the standard normal, ``log f_w = log N(y_w; 0, I) + t``, ``s_w = -y_w + u`` (a whitened Gaussian
   context is then the zero function, which keeps a 5-minute CPU training stable).
4. Change of variables: ``log f = log f_w + log det A``, ``s = s_w A^T``.

Hence (exactly, for any weights): invariance to permutations of ``X``, equivariance to permutations of ``Y``,
``T(X + 1 mu^T, Y + mu) = T(X, Y)``, ``T(cX, cY) = T(X, Y) - d log c`` and ``S(cX, cY) = S(X, Y) / c`` for
``c > 0``; a general invertible linear map ``M`` reaches the backbone as the orthogonal polar factor of
``M`` (rotation equivariance is only learned, from rotated training mixtures).

``score_mode="autograd"`` replaces the score head by ``grad_y T`` (exact consistency ``S = grad T`` by
construction; twice the cost); ``"head"`` is the paper's two-head design.
"""
from __future__ import annotations

from typing import Annotated, Literal

import torch
from torch import nn

from registry.contract import factory

from .attention import CrossAttention
from .kde import LOG_2PI, whiten
from .params import DiScoFormerConfig

__all__ = ["DiScoFormer", "DiScoFormerConfig", "build_discoformer", "consistency_loss", "test_time_train"]


class _FFN(nn.Sequential):
    def __init__(self, d_model: int, mult: int):
        super().__init__(nn.Linear(d_model, mult * d_model), nn.GELU(), nn.Linear(mult * d_model, d_model))


class _Block(nn.Module):
    """Pre-norm block: context self-attention + FFN, then query cross-attention to the context + FFN."""

    def __init__(self, d_model: int, n_heads: int, mult: int, self_attention: bool):
        super().__init__()
        self.self_attention = self_attention
        if self_attention:
            self.ln_c1, self.sa = nn.LayerNorm(d_model), CrossAttention(d_model, n_heads)
        self.ln_c2, self.ffn_c = nn.LayerNorm(d_model), _FFN(d_model, mult)
        self.ln_q1, self.ln_kv, self.ca = nn.LayerNorm(d_model), nn.LayerNorm(d_model), CrossAttention(d_model, n_heads)
        self.ln_q2, self.ffn_q = nn.LayerNorm(d_model), _FFN(d_model, mult)

    def forward(self, c: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.self_attention:
            h = self.ln_c1(c)
            c = c + self.sa(h, h)
        c = c + self.ffn_c(self.ln_c2(c))
        q = q + self.ca(self.ln_q1(q), self.ln_kv(c))
        q = q + self.ffn_q(self.ln_q2(q))
        return c, q


class DiScoFormer(nn.Module):
    """``forward(X, Y) -> (log_density (..., m), score (..., m, d))`` for context ``X`` (..., n, d) and
    queries ``Y`` (..., m, d) (module docstring)."""

    def __init__(self, dim: int = 2, d_model: int = 64, n_heads: int = 4, n_layers: int = 2, ffn_mult: int = 2,
                 eps: float = 1e-4, score_mode: Literal["head", "autograd"] = "head", self_attention: bool = True):
        super().__init__()
        self.dim, self.eps, self.score_mode = dim, eps, score_mode
        self.embed = nn.Linear(dim, d_model)
        self.blocks = nn.ModuleList([_Block(d_model, n_heads, ffn_mult, self_attention) for _ in range(n_layers)])
        self.ln_out = nn.LayerNorm(d_model)
        self.head_t = nn.Linear(d_model, 1)
        self.head_s = nn.Linear(d_model, dim)
        for head in (self.head_t, self.head_s):  # start at the standard-normal baseline
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)

    def whitened(self, Xw: torch.Tensor, Yw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The backbone on whitened inputs: ``(log f_w, s_w)``."""
        c, q = self.embed(Xw), self.embed(Yw)
        for blk in self.blocks:
            c, q = blk(c, q)
        q = self.ln_out(q)
        log_fw = -0.5 * (Yw**2).sum(-1) - 0.5 * self.dim * LOG_2PI + self.head_t(q)[..., 0]
        s_w = -Yw + self.head_s(q)
        return log_fw, s_w

    def forward(self, X: torch.Tensor, Y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if X.shape[-1] != self.dim or Y.shape[-1] != self.dim:
            raise ValueError(f"DiScoFormer(dim={self.dim}) got context {tuple(X.shape)} and queries {tuple(Y.shape)}")
        mu, A, logdet = whiten(X, self.eps)
        Xw = (X - mu) @ A
        if self.score_mode == "autograd":
            outer = torch.is_grad_enabled() and (self.training or Y.requires_grad)  # keep T, S differentiable
            with torch.enable_grad():
                Yg = Y if Y.requires_grad else Y.detach().requires_grad_(True)
                log_fw, _ = self.whitened(Xw, (Yg - mu) @ A)
                log_f = log_fw + logdet[..., None]
                (score,) = torch.autograd.grad(log_f.sum(), Yg, create_graph=outer)
            return (log_f, score) if outer else (log_f.detach(), score.detach())
        log_fw, s_w = self.whitened(Xw, (Y - mu) @ A)
        return log_fw + logdet[..., None], s_w @ A.transpose(-1, -2)


@factory(params=DiScoFormerConfig)
def build_discoformer(**config: Annotated[object, "validated by DiScoFormerConfig"]) -> DiScoFormer:
    """The DiScoFormer architecture (random init; specs load the shipped safetensors strictly), in eval mode."""
    cfg = DiScoFormerConfig(**config)
    if cfg.d_model % cfg.n_heads:
        raise ValueError(f"d_model ({cfg.d_model}) must be divisible by n_heads ({cfg.n_heads})")
    return DiScoFormer(**cfg.model_dump()).eval()


def consistency_loss(model: DiScoFormer, X: torch.Tensor) -> torch.Tensor:
    """The label-free test-time-training loss of the paper (method note section 4.2):
    ``L_con = (1/n) sum_i |S(C, Q)_i - grad_{q_i} T(C, Q)_i|^2`` with ``C = stopgrad(X)``, ``Q = X``."""
    C = X.detach()
    Q = X.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        T, S = model(C, Q)
        (gT,) = torch.autograd.grad(T.sum(), Q, create_graph=True)
        return ((S - gT) ** 2).sum(-1).mean()


def test_time_train(model: DiScoFormer, X: torch.Tensor, steps: int = 4, lr: float = 1e-4) -> tuple[DiScoFormer, list[float]]:
    """A private copy of ``model`` after ``steps`` plain gradient-descent steps on :func:`consistency_loss` of the
    context ``X`` (n, d) (TTT; the paper uses 4 steps, its optimiser is not in the public notes [inferred: plain
    GD, so a small ``lr`` decreases the loss monotonically]). Returns the copy and the loss before each step
    and after the last. The input model is never changed."""
    import copy

    m = copy.deepcopy(model)
    m.requires_grad_(True)
    params = [p for p in m.parameters()]
    losses = []
    for _ in range(steps):
        loss = consistency_loss(m, X)
        losses.append(loss.item())
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        with torch.no_grad():
            for p, g in zip(params, grads):
                if g is not None:
                    p.sub_(lr * g)
    losses.append(consistency_loss(m, X).item())
    m.requires_grad_(False)
    return m, losses
