"""The UniDFlow model on the toy: a frozen bidirectional transformer (the stand-in for the paper's pretrained
vision-language transformer), two LoRA adapters (understanding Δu, generation Δg) mixed per row by a
timestep router, and timestep-guided RMSNorm with zero-initialised modulation.

* **Router** (UniDFlow Eq. 6, arXiv 2602.12221): ``Δθ_t = α_t Δu + (1 − α_t) Δg``, applied per
  LoRA-wrapped linear as ``y = W x + α_t B_u A_u x + (1 − α_t) B_g A_g x`` (``zoo.common.lora`` per-call
  scales), ``α_t = σ(MLP(h_t))``. [recon] ``h_t`` = MLP(sinusoid(t)) + a learned task embedding (the paper
  says "the diffusion-step hidden state"; with t alone, understanding and generation at the same t would
  get the same mixture).
* **TSG-RMSNorm** (Eq. 2): ``y = γ ⊙ RMSNorm(x) ⊙ (1 + s(h_t)) + b(h_t)`` with ``(s, b)`` a zero-initialised
  linear map of ``SiLU(h_t)``, so at init it *is* the pretrained RMSNorm for every t (the intended
  identity-at-init; the review's reading of Eq. 2 applies γ twice, ``gamma_twice=True`` keeps that variant
  as the negative control of the invariant).
* ``shared=True`` is the single-adapter ablation (paper Table 4): one adapter, scale 1, no routing.
"""
from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from registry.contract import factory
from zoo.common.lora import inject_lora, lora_scales

from .params import ToyConfig
from .world import SEQ_LEN, TASKS, TOK

__all__ = ["Backbone", "TSGRMSNorm", "UniDFlowModel", "build_unidflow", "LORA_TARGETS", "ADAPTERS"]

LORA_TARGETS = ("blocks.*.attn.q", "blocks.*.attn.k", "blocks.*.attn.v", "blocks.*.attn.o", "blocks.*.mlp.fc1", "blocks.*.mlp.fc2")
ADAPTERS = ("und", "gen")


class RMSNorm(nn.Module):
    """``γ ⊙ x / sqrt(mean(x²) + ε)`` (Zhang & Sennrich 2019, arXiv 1910.07467)."""

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def normed(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * self.normed(x)


class TSGRMSNorm(nn.Module):
    """Timestep-guided RMSNorm around a (frozen) :class:`RMSNorm`: ``γ ⊙ n(x) ⊙ (1 + s) + b`` with
    ``[s, b] = W SiLU(h) + c``, ``W = c = 0`` at init (UniDFlow Eq. 2, intended form). ``h=None``: the base norm."""

    def __init__(self, base: RMSNorm, d_cond: int, gamma_twice: bool = False):
        super().__init__()
        self.__dict__["base"] = base  # not a submodule: its γ is the backbone's frozen parameter
        d = base.weight.shape[0]
        self.mod = nn.Linear(d_cond, 2 * d)
        nn.init.zeros_(self.mod.weight)
        nn.init.zeros_(self.mod.bias)
        self.gamma_twice = gamma_twice

    def forward(self, x: torch.Tensor, h: torch.Tensor | None = None) -> torch.Tensor:
        if h is None:
            return self.base(x)
        s, b = self.mod(nn.functional.silu(h)).unsqueeze(1).chunk(2, -1)
        y = self.base.weight * self.base.normed(x) * (1 + s) + b
        return self.base.weight * y if self.gamma_twice else y


class Attention(nn.Module):
    def __init__(self, d: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, d = x.shape
        split = lambda t: t.reshape(B, L, self.n_heads, d // self.n_heads).transpose(1, 2)  # noqa: E731
        y = nn.functional.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)), split(self.v(x)))
        return self.o(y.transpose(1, 2).reshape(B, L, d))


class MLP(nn.Module):
    def __init__(self, d: int, d_ff: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(nn.functional.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, d: int, n_heads: int, d_ff: int):
        super().__init__()
        self.norm1, self.attn, self.norm2, self.mlp = RMSNorm(d), Attention(d, n_heads), RMSNorm(d), MLP(d, d_ff)

    def forward(self, x: torch.Tensor, norm=None) -> torch.Tensor:
        n1 = norm(self.norm1) if norm else self.norm1
        n2 = norm(self.norm2) if norm else self.norm2
        x = x + self.attn(n1(x))
        return x + self.mlp(n2(x))


class Backbone(nn.Module):
    """A tiny bidirectional pre-norm transformer (RMSNorm, separate q/k/v/o) over the joint vocabulary:
    ``forward(ids) -> logits [B, L, V]``. The stand-in for the paper's frozen VLT."""

    def __init__(self, vocab_size: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 4, d_ff: int = 128, max_len: int = SEQ_LEN):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff) for _ in range(n_layers))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)

    def forward(self, ids: torch.Tensor, norms: dict[int, TSGRMSNorm] | None = None, h: torch.Tensor | None = None) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))[None]
        wrap = None
        if norms is not None:
            wrap = lambda base: (lambda y: norms[id(base)](y, h))  # noqa: E731
        for blk in self.blocks:
            x = blk(x, wrap)
        return self.head(wrap(self.norm)(x) if wrap else self.norm(x))


def sinusoid(t: torch.Tensor, d: int) -> torch.Tensor:
    """Sinusoidal features ``[B, d]`` of ``t ∈ [0, 1]`` (frequencies 1 .. 1e4, t scaled by 1000)."""
    half = d // 2
    freqs = torch.exp(-torch.arange(half, dtype=torch.float32, device=t.device) * (math.log(1e4) / max(half - 1, 1)))
    ang = t.float().reshape(-1, 1) * 1000.0 * freqs
    return torch.cat([ang.sin(), ang.cos()], -1)


class UniDFlowModel(nn.Module):
    """Frozen :class:`Backbone` + LoRA adapters ``und``/``gen`` + timestep router + TSG-RMSNorm.

    ``forward(ids, t, task, alpha=None) -> logits``: ``t [B]`` is the DFM time (0 = all masks, 1 = data),
    ``task [B]`` indexes :data:`~.world.TASKS`; ``alpha`` (a float or ``[B]``) overrides the router.
    """

    def __init__(self, vocab_size: int, d_model: int = 64, n_layers: int = 2, n_heads: int = 4, d_ff: int = 128,
                 rank: int = 8, router_hidden: int = 32, shared: bool = False, gamma_twice: bool = False):
        super().__init__()
        self.backbone = Backbone(vocab_size, d_model, n_layers, n_heads, d_ff)
        self.shared = shared
        self.adapters = ("und",) if shared else ADAPTERS
        inject_lora(self.backbone, LORA_TARGETS, rank=rank, adapters=self.adapters, freeze_base=True)
        norms = [m for m in self.backbone.modules() if isinstance(m, RMSNorm)]
        self.tsg = nn.ModuleList(TSGRMSNorm(n, d_model, gamma_twice) for n in norms)
        self.time_mlp = nn.Sequential(nn.Linear(d_model, d_model), nn.SiLU(), nn.Linear(d_model, d_model))
        self.task_emb = nn.Embedding(len(TASKS), d_model)
        nn.init.normal_(self.task_emb.weight, std=0.02)
        self.router = nn.Sequential(nn.Linear(d_model, router_hidden), nn.SiLU(), nn.Linear(router_hidden, 1))
        nn.init.zeros_(self.router[2].weight)
        nn.init.zeros_(self.router[2].bias)  # α = 0.5 at init
        self.d_model = d_model

    def backbone_parameters(self) -> list[nn.Parameter]:
        """The frozen base weights (everything of the backbone that is not a LoRA tensor)."""
        return [p for n, p in self.backbone.named_parameters() if ".lora_" not in n]

    def cond(self, t: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
        """``h_t = MLP(sinusoid(t)) + E_task``."""
        return self.time_mlp(sinusoid(t, self.d_model)) + self.task_emb(task)

    def alpha(self, t: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
        """The router's ``α_t ∈ [0, 1]`` per row."""
        return torch.sigmoid(self.router(self.cond(t, task))).squeeze(-1)

    def scales(self, t: torch.Tensor, task: torch.Tensor, alpha: Any = None) -> dict[str, Any]:
        if self.shared:
            return {"und": 1.0}
        a = self.alpha(t, task) if alpha is None else alpha
        return {"und": a, "gen": 1 - a}

    def forward(self, ids: torch.Tensor, t: torch.Tensor, task: torch.Tensor, alpha: Any = None, modulate: bool = True) -> torch.Tensor:
        B = ids.shape[0]
        t = torch.as_tensor(t, dtype=torch.float32, device=ids.device).reshape(-1).expand(B)
        task = torch.as_tensor(task, dtype=torch.long, device=ids.device).reshape(-1).expand(B)
        h = self.cond(t, task)
        norms = {id(m.base): m for m in self.tsg} if modulate else None
        with lora_scales(self.backbone, self.scales(t, task, alpha)):
            return self.backbone(ids, norms, h)


@factory(params=ToyConfig)
def build_unidflow(**config: Any) -> UniDFlowModel:
    """The toy UniDFlow model (random init; weights come from the spec's safetensors). Carries the
    world's tokenizer as ``zoo_tokenizer``."""
    torch.manual_seed(0)
    model = UniDFlowModel(TOK.vocab_size, **config).eval()
    model.zoo_tokenizer = TOK
    return model
