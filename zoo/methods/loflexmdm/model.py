"""A registry-native DDiT (Peebles & Xie 2023 adaLN-Zero blocks as used by MDLM/SEDD/FlexMDM) with rotary
attention over the contracted positions, a vocabulary head and rate heads, and the LoFlexMDM model that
holds the generator θ and the auxiliary schedule network φ (arXiv 2602.18695, Sec. 3.1-3.3).

* Generator θ (reads the contracted, variable-length ``x_t`` and ``t``): vocab logits ``K_θ(·|x_t)`` per slot,
  ``b_in^θ`` per slot (the rate of inserting masks into the gap to the **left** of the slot) and ``b_um^θ`` per slot.
* Aux φ (reads the clean latent ``z_1``): per-position ``b_in^φ`` (and ``b_um^φ`` unless fixed). Departure from the
  public code: φ is *not* time-conditioned here, so every position's schedule is one fixed Kumaraswamy CDF and the
  closed-form state probabilities used by REINFORCE are exact probabilities (the released code feeds t to φ).
* Rate heads: ``softplus(s)·(max - min) + min`` (the public code's default; min 1.01 for φ, 0 for θ, max 100).
* ``insertion_head``: ``"multiplier"`` (the paper) reads θ's insertion multiplier straight off the rate head;
  ``"survival"`` multiplies it by a survival factor so that the implied remaining insertions vanish at the clean
  end by construction (:meth:`LoFlexMDMModel.insertion_survival`, with the derivation).
* ``schedule: linear`` is FlexMDM: ``a = 1`` and every φ multiplier is 1 (no aux network).
"""
from __future__ import annotations

import math
import torch
import torch.nn.functional as F
from torch import nn

from registry.contract import converter, factory

from .params import ModelConfig
from .tasks import Task

__all__ = ["DDiT", "LoFlexMDMModel", "build_model", "from_upstream", "make_model", "to_upstream"]


def _rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, -1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


class ScaledNorm(nn.Module):
    """LayerNorm without bias, with a learned per-channel scale."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:]) * self.scale


class DDiTBlock(nn.Module):
    """Pre-norm attention + MLP, each modulated by adaLN (shift, scale, gate) from the condition ``c``."""

    def __init__(self, d: int, n_heads: int, d_ff: int, d_cond: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.norm1, self.norm2 = ScaledNorm(d), ScaledNorm(d)
        self.attn_qkv = nn.Linear(d, 3 * d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d, d_ff), nn.GELU(approximate="tanh"), nn.Linear(d_ff, d))
        self.ada = nn.Linear(d_cond, 6 * d)
        nn.init.zeros_(self.ada.weight)
        nn.init.zeros_(self.ada.bias)

    def forward(self, x: torch.Tensor, c: torch.Tensor, key_mask: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        sh1, sc1, g1, sh2, sc2, g2 = self.ada(c)[:, None].chunk(6, -1)
        h = self.norm1(x) * (1 + sc1) + sh1
        q, k, v = self.attn_qkv(h).view(b, n, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        q, k = _rotary(q, cos, sin), _rotary(k, cos, sin)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=key_mask[:, None, None, :])
        x = x + g1 * self.o_proj(att.transpose(1, 2).reshape(b, n, d))
        h = self.norm2(x) * (1 + sc2) + sh2
        return x + g2 * self.mlp(h)


class DDiT(nn.Module):
    """Bidirectional DDiT: token embedding, rotary attention, adaLN time conditioning (or a learned constant
    condition when ``time_conditioning`` is False), a vocabulary head (optional) and a 2-output rate head.
    ``max_row_length > 0`` adds a learned embedding of each row's length (its attended tokens) to the condition: a
    toy departure (``build_model(length_conditioning=True)``; docs/methods/loflexmdm.md, "Departures")."""

    def __init__(self, vocab_size: int, d_model: int, n_layers: int, n_heads: int, d_ff: int, d_cond: int,
                 vocab_head: bool = True, time_conditioning: bool = True, freq_dim: int = 64, max_row_length: int = 0) -> None:
        super().__init__()
        self.freq_dim, self.time_conditioning = freq_dim, time_conditioning
        self.embed = nn.Embedding(vocab_size, d_model)
        if time_conditioning:
            self.t_mlp = nn.Sequential(nn.Linear(freq_dim, d_cond), nn.SiLU(), nn.Linear(d_cond, d_cond))
        else:
            self.cond = nn.Parameter(torch.zeros(d_cond))
        # zero-initialised, so training starts from the plain DDiT
        self.length_embed = nn.Embedding(max_row_length + 1, d_cond) if max_row_length > 0 else None
        if self.length_embed is not None:
            nn.init.zeros_(self.length_embed.weight)
        self.blocks = nn.ModuleList(DDiTBlock(d_model, n_heads, d_ff, d_cond) for _ in range(n_layers))
        self.final_norm = ScaledNorm(d_model)
        self.final_ada = nn.Linear(d_cond, 2 * d_model)
        nn.init.zeros_(self.final_ada.weight)
        nn.init.zeros_(self.final_ada.bias)
        self.vocab_head = nn.Linear(d_model, vocab_size) if vocab_head else None
        self.rate_head = nn.Sequential(nn.Linear(d_model, d_model), nn.SiLU(), nn.Linear(d_model, 2))
        head_dim = d_model // n_heads
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim)), persistent=False)

    def condition(self, t: torch.Tensor | None, batch: int) -> torch.Tensor:
        if not self.time_conditioning:
            return self.cond[None].expand(batch, -1)
        half = self.freq_dim // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
        arg = (t.float() * 1000.0)[:, None] * freqs[None]
        return self.t_mlp(torch.cat([torch.cos(arg), torch.sin(arg)], -1))

    def forward(self, tokens: torch.Tensor, key_mask: torch.Tensor, t: torch.Tensor | None = None) -> tuple[torch.Tensor | None, torch.Tensor]:
        """``(logits [B, L, V] or None, raw rate scalars [B, L, 2])``."""
        b, n = tokens.shape
        c = self.condition(t, b)
        if self.length_embed is not None:
            c = c + self.length_embed(key_mask.sum(1).clamp(max=self.length_embed.num_embeddings - 1))
        pos = torch.arange(n, device=tokens.device, dtype=torch.float32)
        ang = pos[:, None] * self.inv_freq[None]
        cos, sin = torch.cos(ang)[None, None], torch.sin(ang)[None, None]
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x, c, key_mask, cos, sin)
        sh, sc = self.final_ada(c)[:, None].chunk(2, -1)
        h = self.final_norm(x) * (1 + sc) + sh
        logits = self.vocab_head(h) if self.vocab_head is not None else None
        return logits, self.rate_head(h)


def _rate(s: torch.Tensor, lo: float, hi: float, fn: str = "softplus") -> torch.Tensor:
    """Rate head: ``softplus(s)·(hi - lo) + lo`` (public code default) or ``exp(s) + lo`` (its SAFE configs)."""
    return torch.exp(s) + lo if fn == "exp" else F.softplus(s) * (hi - lo) + lo


def _init_rate_bias(head: nn.Sequential, value: float, lo: float, hi: float) -> None:
    """Start the rate head at ``value`` (inverse of :func:`_rate` at s = bias)."""
    y = (value - lo) / (hi - lo)
    with torch.no_grad():
        head[-1].bias.fill_(math.log(math.expm1(y)))
        head[-1].weight.mul_(0.1)


class LoFlexMDMModel(nn.Module):
    """Generator θ (+ aux φ for ``schedule: kumaraswamy``) and the schedule constants.

    ``generator_rates`` gives ``(logits, b_in^θ, b_um^θ)`` on contracted rows; ``aux_rates`` gives
    ``(b_in^φ, b_um^φ)`` on latents. ``fix_b_um`` (the paper's best setting: 1.0) fixes both b_um."""

    def __init__(self, vocab_size: int, special_ids: tuple[int, ...], schedule: str, a: float, fix_b_um: float | None,
                 gen: dict, aux: dict | None, min_rate_phi: float = 1.01, max_rate: float = 100.0, scalar_fn: str = "softplus",
                 insertion_head: str = "multiplier", max_row_length: int = 0) -> None:
        super().__init__()
        if insertion_head not in ("multiplier", "survival"):
            raise ValueError(f"insertion_head must be 'multiplier' or 'survival', got {insertion_head!r}")
        self.schedule, self.a, self.fix_b_um, self.scalar_fn = schedule, float(a), fix_b_um, scalar_fn
        self.insertion_head = insertion_head
        self.min_rate_phi, self.max_rate = min_rate_phi, max_rate
        self.generator = DDiT(vocab_size, max_row_length=max_row_length, **gen)
        _init_rate_bias(self.generator.rate_head, 1.0, 0.0, max_rate)
        self.aux = DDiT(vocab_size, vocab_head=False, time_conditioning=False, **aux) if aux is not None else None
        if self.aux is not None:
            _init_rate_bias(self.aux.rate_head, 1.2, min_rate_phi, max_rate)
        banned = torch.zeros(vocab_size, dtype=torch.bool)
        banned[list(special_ids)] = True
        self.register_buffer("banned", banned, persistent=False)

    @property
    def learns_schedule(self) -> bool:
        return self.aux is not None

    @property
    def survival_b(self) -> float:
        """``b_ref`` of :meth:`insertion_survival`: 1 for FlexMDM, ``min(1, min_rate_phi)`` with an aux network."""
        return min(1.0, self.min_rate_phi) if self.aux is not None else 1.0

    def insertion_survival(self, t: torch.Tensor) -> torch.Tensor:
        """``S(t) = (1 - t^a)^b_ref = 1 - F(t; a, b_ref)`` ``[B]``: the factor ``insertion_head: survival`` puts on θ's
        insertion multiplier (a departure from the paper, whose generator rate is ``R_in^θ = b_in^θ α_t`` with
        ``b_in^θ`` the network's output, arXiv 2602.18695 Sec. 3 / Eq. for ``R^θ_in``; FlexMDM arXiv 2509.01025
        likewise predicts the expected number of missing tokens per gap directly).

        Derivation. θ's loss target for a gap is ``Σ_{j dropped in gap} b_in^φ_j h(t)`` with ``h = a t^(a-1)/(1 -
        t^a)``, so its minimiser is ``b_in^θ = E[Σ_{j dropped in gap} b_in^φ_j | x_t]`` (FlexMDM: the expected number
        of missing tokens in the gap). Position ``j`` is still dropped at ``t`` with probability ``(1 - t^a)^{b_j}``
        (Kumaraswamy survival), and ``b_j >= min_rate_phi`` (FlexMDM: ``b_j = 1``), so for a given clean sequence
        ``E[b_in^θ-target | z_1, t] = Σ_j b_j (1 - t^a)^{b_j} <= S(t) Σ_j b_j`` with ``b_ref = min(1, min_rate_phi)``:
        the target vanishes at least like the slowest survival. A softplus head on a time embedding need not learn
        an output that vanishes like ``1 - t`` (the toys trained with the unit time weighting plateaued at ≈ 0.085
        remaining insertions on finished checksum rows at t = 0.99 *and* 0.999, which the sampler's hazard
        ``1/(1 - t)`` turns into spurious insertions); writing ``b_in^θ = r_θ · S(t)`` makes it vanish by
        construction, and the head ``r_θ`` predicts ``λ_in^θ / (a t^(a-1))`` (for a = 1: the insertion *rate*
        itself). The loss, the sampler and every per-t minimiser are unchanged (``r_θ = target / S(t)`` is
        representable for ``S > 0``). The bound holds for a given clean sequence, not given the noised row: a row
        that is missing a token with certainty (an odd-length bracket row, a checksum row shorter than 5) keeps
        ``E[target | x_t] >= 1`` as t → 1 and needs an unbounded ``r_θ ≈ 1/(1 - t)``. Measured (docs/methods/loflexmdm.NOTES.md, "Diagnosis"):
        length TV at 1024 steps better on the checksum toy (FlexMDM 0.051 → 0.022) and worse on brackets (0.079 →
        0.094), so no shipped variant uses it."""
        return torch.exp(self.survival_b * torch.log1p(-(t.to(torch.float32) ** self.a)))

    def generator_rates(self, tokens: torch.Tensor, key_mask: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits, s = self.generator(tokens, key_mask, t)
        logits = logits.masked_fill(self.banned, float("-inf"))
        b_in = _rate(s[..., 0], 0.0, self.max_rate, self.scalar_fn)
        if self.insertion_head == "survival":
            b_in = b_in * self.insertion_survival(t)[:, None]
        b_um = torch.full_like(b_in, self.fix_b_um) if self.fix_b_um is not None else _rate(s[..., 1], 0.0, self.max_rate, self.scalar_fn)
        return logits, b_in, b_um

    def aux_rates(self, z1: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.aux is None:  # FlexMDM: a = b = 1
            ones = torch.ones(z1.shape, dtype=torch.float32, device=z1.device)
            return ones, ones
        _, s = self.aux(z1, valid)
        b_in = _rate(s[..., 0], self.min_rate_phi, self.max_rate, self.scalar_fn)
        b_um = torch.full_like(b_in, self.fix_b_um) if self.fix_b_um is not None else _rate(s[..., 1], self.min_rate_phi, self.max_rate, self.scalar_fn)
        return b_in, b_um


SIZES = {
    # toy: 2 layers d=64 generator, 1-layer d=32 aux (loflexmdm.md Sec. 6)
    "toy": (dict(d_model=64, n_layers=2, n_heads=4, d_ff=128, d_cond=32), dict(d_model=32, n_layers=1, n_heads=2, d_ff=64, d_cond=16)),
    # paper: DDiT 12 layers d=768, 12 heads, FF 4x, d_cond 128; aux medium = same, tiny = 8 layers, xtiny = 6 layers
    "medium": (dict(d_model=768, n_layers=12, n_heads=12, d_ff=3072, d_cond=128), dict(d_model=768, n_layers=12, n_heads=12, d_ff=3072, d_cond=128)),
    "tiny-aux": (dict(d_model=768, n_layers=12, n_heads=12, d_ff=3072, d_cond=128), dict(d_model=768, n_layers=8, n_heads=12, d_ff=3072, d_cond=128)),
    "xtiny-aux": (dict(d_model=768, n_layers=12, n_heads=12, d_ff=3072, d_cond=128), dict(d_model=768, n_layers=6, n_heads=12, d_ff=3072, d_cond=128)),
}


@factory(params=ModelConfig)
def build_model(task: str = "checksum", schedule: str = "kumaraswamy", a: float = 1.0, fix_b_um: float | None = 1.0,
                size: str = "toy", min_rate_phi: float = 1.01, max_rate: float = 100.0, vocab_size: int | None = None,
                scalar_fn: str = "softplus", insertion_head: str = "multiplier", length_conditioning: bool = False) -> LoFlexMDMModel:
    """A random-init LoFlexMDM (``schedule: kumaraswamy``) or FlexMDM (``linear``) model over a toy task's
    tokenizer (weights come from the spec); carries ``zoo_tokenizer`` and ``zoo_task``. ``task: bracket-safe``
    builds the paper-sized model without a tokenizer (specials assumed at ids 0-3). The initial weights are
    those of :func:`make_model` with ``init_seed = 0``."""
    return make_model(task=task, schedule=schedule, a=a, fix_b_um=fix_b_um, size=size, min_rate_phi=min_rate_phi, max_rate=max_rate,
                      vocab_size=vocab_size, scalar_fn=scalar_fn, insertion_head=insertion_head, length_conditioning=length_conditioning)


def make_model(*, init_seed: int = 0, task: str = "checksum", schedule: str = "kumaraswamy", a: float = 1.0,
               fix_b_um: float | None = 1.0, size: str = "toy", min_rate_phi: float = 1.01, max_rate: float = 100.0,
               vocab_size: int | None = None, scalar_fn: str = "softplus", insertion_head: str = "multiplier",
               length_conditioning: bool = False) -> LoFlexMDMModel:
    """:func:`build_model` with its random initialisation drawn from ``torch.manual_seed(init_seed)`` (training
    seeds other than 0 start from other weights; the global RNG is left seeded with ``init_seed``)."""
    gen, aux = SIZES[size]
    if schedule == "linear":
        a, fix_b_um, aux = 1.0, 1.0, None
    if task == "bracket-safe":
        if length_conditioning:
            raise ValueError("length_conditioning is a toy-task option: the released bracket-safe DDiT has no length embedding")
        if vocab_size is None:
            raise ValueError("task bracket-safe needs vocab_size (the Bracket-SAFE tokenizer is not available offline)")
        tok, specials, max_length = None, (0, 1, 2, 3), 257
    else:
        t = Task(task)
        tok = t.tokenizer()
        vocab_size = tok.vocab_size
        specials = (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.mask_token_id)
        max_length = t.latent_len
    torch.manual_seed(init_seed)
    model = LoFlexMDMModel(vocab_size, specials, schedule, a, fix_b_um, dict(gen), dict(aux) if aux else None,
                           min_rate_phi, max_rate, scalar_fn, insertion_head, max_length if length_conditioning else 0).eval()
    model.zoo_tokenizer = tok
    model.zoo_task = task
    model.zoo_max_length = max_length
    return model


# ----------------------------------------------------------------------------- released-checkpoint key mapping
_UPSTREAM = (("generator.", "model."), ("aux.", "aux_model."))


def _rename(state: dict, pairs: tuple[tuple[str, str], ...]) -> dict:
    """Replace the first matching key prefix ``old -> new`` of ``pairs``; other keys are kept."""
    out = {}
    for k, v in state.items():
        for old, new in pairs:
            if k.startswith(old):
                k = new + k[len(old):]
                break
        out[k] = v
    return out


def to_upstream(state: dict) -> dict:
    """Our keys -> the release's top-level prefixes (``model.`` generator, ``aux_model.`` φ) [unverified:
    the Lightning checkpoint's exact key names could not be read offline]."""
    return _rename(state, _UPSTREAM)


@converter(inverse=to_upstream)
def from_upstream(state: dict) -> dict:
    """The release's keys -> ours (inverse of :func:`to_upstream`); an unknown prefix is kept (strict loading
    then names it)."""
    return _rename(state, tuple((theirs, ours) for ours, theirs in _UPSTREAM))
