"""DPLM-Evo's forward process, training labels and loss in the 2L latent alignment space
(arXiv 2605.00182, Sec. 3; :mod:`zoo.common.varlen` does the collapse/alignment bookkeeping).

Latent states: residues ``0..19``, mask ``m`` = :data:`~.model.MASK`, gap ``φ`` = :data:`~.model.GAP`.

**Forward noising** ``q_t(z_t | z_0) = ᾱ_t δ_{z_0} + (1 − ᾱ_t) π(z_0)``, factorised over latent sites, linear
``ᾱ_t = 1 − t``. The one-site noise law ``π`` has three knobs [recon of the exact branching]:

* residue ``a`` -> ``φ`` with probability ``ω_del`` (deletion); otherwise ``m`` with ratio ``ρ_mask`` and else a
  residue drawn from ``T_sub(· | a, context)``;
* ``φ`` -> a residue with probability ``ω_ins`` (insertion: ``m`` with ratio ``ρ_mask``, else a residue from the
  kernel's insertion law: uniform for the uniform and BLOSUM kernels [recon], the model's prediction at the
  inserted site for the contextual kernel); otherwise it stays ``φ``.

``ω_del = ω_ins = 0, ρ_mask = 1`` is absorbing masked diffusion (DPLM) exactly.

**Contextual kernel** ``T_sub^{(j)} = E_{z'_t}[p_θ(· | z'^{∖j}_t, m at j)]``: every site that draws from the kernel
is set to ``m`` in ``z'_t`` and one stop-gradient forward of the network gives all of their distributions at
once [recon: the paper's per-site masking is approximated by masking the drawn sites jointly, "about one extra
forward per batch"].

**Labels** at observed token ``k`` (latent slot ``I(k)``): deletion iff ``z_0^{I(k)} = φ``; substitution target
``z_0^{I(k)}`` where the slot was noised and its source is a residue [recon: the note's "both amino acids and
differ" widened to every noised residue slot, masks included]; insertion count per gap = the number of ``z_0``
residues that are ``φ`` in ``z_t`` inside the gap (:func:`zoo.common.varlen.gap_counts`), the binary head's
target being ``count > 0`` (BCE, the paper's fix of the multinomial indel loss).

**Loss** ``Σ_k λ_t (γ_sub CE + γ_del BCE + γ_ins BCE) / normalizer`` (:func:`edit_loss`) with the diffusion ELBO
weight ``λ_t = 1/t`` of the note's loss (``weighting="elbo"``, the training default of every DPLM-Evo network,
:mod:`.training`) or a constant ``λ = 1`` (``weighting="none"``: DPLM's public-code default, kept by the
``dplm-masked`` baseline; ``masked-elbo`` is the same baseline with the ELBO weight) [recon: the γ values are
unpublished]; in the degenerate setting its substitution part is
:func:`zoo.common.masked_dlm.masked_diffusion_loss` with the same ``weighting``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import torch
import torch.nn.functional as F

from zoo.common.varlen import Contracted, contract, gap_sums

from .alphabet import K, blosum_kernel, uniform_kernel
from .model import GAP, MASK, PAD

__all__ = ["Knobs", "one_site_matrix", "Noised", "noise_latent", "Labels", "labels", "edit_loss", "kernel_sampler",
           "sub_law", "oracle_replay"]

Kernel = Literal["contextual", "uniform", "blosum62"]


@dataclass(frozen=True)
class Knobs:
    """``(ω_del, ω_ins, ρ_mask)``, the substitution kernel, and the letter law of an inserted residue: ``"kernel"``
    (the kernel's own: uniform for the matrix kernels, the network's prediction at the inserted site for the
    contextual one) or ``"uniform"`` (a uniform prior for every kernel; the note allows either, "drawn from T_sub
    or a prior")."""

    omega_del: float = 0.1
    omega_ins: float = 0.02
    rho_mask: float = 0.5
    kernel: Kernel = "contextual"
    ins_law: Literal["kernel", "uniform"] = "kernel"

    @property
    def degenerate(self) -> bool:
        return self.omega_del == 0 and self.omega_ins == 0 and self.rho_mask == 1


def one_site_matrix(alpha_bar: float, knobs: Knobs, t_sub: torch.Tensor, t_ins: torch.Tensor) -> torch.Tensor:
    """``[22, 22]`` one-site transition ``Q_t[z_0, z_t] = ᾱ δ + (1 − ᾱ) π`` over residues, ``m`` (20), ``φ`` (21);
    ``t_sub [20, 20]`` rows ``T_sub(· | a)``, ``t_ins [20]`` the insertion law."""
    s = K + 2
    pi = torch.zeros(s, s, dtype=torch.float64)
    wd, wi, rho = knobs.omega_del, knobs.omega_ins, knobs.rho_mask
    pi[:K, GAP] = wd
    pi[:K, MASK] = (1 - wd) * rho
    pi[:K, :K] = (1 - wd) * (1 - rho) * t_sub.double()
    pi[MASK, MASK] = 1.0
    pi[GAP, GAP] = 1 - wi
    pi[GAP, MASK] = wi * rho
    pi[GAP, :K] = wi * (1 - rho) * t_ins.double()
    return alpha_bar * torch.eye(s, dtype=torch.float64) + (1 - alpha_bar) * pi


@dataclass(frozen=True)
class Noised:
    """``z_0``, ``z_t`` (``[B, N]``), which sites were noised, and ``t [B]``."""

    z0: torch.Tensor
    zt: torch.Tensor
    noised: torch.Tensor
    t: torch.Tensor


def sub_law(kernel: Kernel, z0: torch.Tensor, net: Callable | None, zt_masked: torch.Tensor) -> torch.Tensor:
    """``[B, N, 20]`` the law each latent site would draw a residue from: matrix rows ``T[z_0]`` (uniform
    insertion law where ``z_0 = φ``), or the contextual kernel: the network's sub-head distribution on the
    collapse of ``zt_masked`` (the drawn sites already set to ``m``), put back in latent slots."""
    b, n = z0.shape
    if kernel == "contextual":
        if net is None:
            raise ValueError("the contextual kernel needs the network")
        present = zt_masked != GAP
        rows = contract(zt_masked, present, PAD)
        with torch.no_grad():
            sub, _, _ = net(rows.tokens, rows.lengths)
        probs = torch.softmax(sub.double(), -1)
        out = torch.full((b, n + 1, K), 1.0 / K, dtype=torch.float64)
        idx = rows.positions.masked_fill(rows.positions < 0, n)
        out.scatter_(1, idx[..., None].expand(-1, -1, K), probs)
        return out[:, :n]
    table = uniform_kernel() if kernel == "uniform" else blosum_kernel()
    rows = table[z0.clamp(0, K - 1)]
    return torch.where((z0 < K)[..., None], rows, torch.full_like(rows, 1.0 / K))


def noise_latent(z0: torch.Tensor, t: torch.Tensor, knobs: Knobs, generator: torch.Generator | None = None,
                 net: Callable | None = None) -> Noised:
    """One draw of ``z_t ~ q_t(· | z_0)`` (``t [B]`` in (0, 1]). Exactly four ``torch.rand(B, N)`` draws from
    ``generator`` (noised / del-ins / mask-vs-kernel / kernel draw), so runs are reproducible."""
    b, n = z0.shape
    u = [torch.rand(b, n, generator=generator, dtype=torch.float64) for _ in range(4)]
    noised = u[0] < t.double()[:, None]
    is_aa = z0 < K
    delete = noised & is_aa & (u[1] < knobs.omega_del)
    insert = noised & ~is_aa & (u[1] < knobs.omega_ins)
    emit = (noised & is_aa & ~delete) | insert  # sites that become m or a drawn residue
    to_mask = emit & (u[2] < knobs.rho_mask)
    draw = emit & ~to_mask
    zt = z0.clone()
    zt[delete] = GAP
    zt[to_mask | draw] = MASK
    if bool(draw.any()):
        law = sub_law(knobs.kernel, z0, net, zt)
        if knobs.ins_law == "uniform":
            law = torch.where((z0 == GAP)[..., None], torch.full_like(law, 1.0 / K), law)
        cdf = law.cumsum(-1)
        pick = (cdf < u[3][..., None] * cdf[..., -1:]).sum(-1).clamp_max(K - 1)
        zt = torch.where(draw, pick, zt)
    return Noised(z0, zt, noised, t)


@dataclass(frozen=True)
class Labels:
    """Contracted ``x_t`` rows and their oracle labels: ``source [B, L]`` (``z_0`` at ``I(k)``, PAD on padding),
    ``sub_mask`` (noised residue-sourced slots), ``delete`` (source φ), ``ins_count [B, L + 1]`` per gap."""

    rows: Contracted
    source: torch.Tensor
    sub_mask: torch.Tensor
    delete: torch.Tensor
    ins_count: torch.Tensor

    @property
    def gap_valid(self) -> torch.Tensor:
        w = self.rows.tokens.shape[1]
        return torch.arange(w + 1)[None, :] <= self.rows.lengths[:, None]


def labels(z0: torch.Tensor, zt: torch.Tensor, noised: torch.Tensor) -> Labels:
    """The oracle labels of ``(z_0, z_t)`` at every observed token of ``x_t = Γ⁻¹(z_t)`` (index map ``I`` =
    ``rows.positions``)."""
    present = zt != GAP
    rows = contract(zt, present, PAD)
    valid = rows.attention_mask
    pos = rows.positions.clamp_min(0)
    source = torch.gather(z0, 1, pos).masked_fill(~valid, PAD)
    was_noised = torch.gather(noised, 1, pos) & valid
    sub_mask = was_noised & (source < K)
    delete = valid & (source == GAP)
    ins_count = gap_sums((z0 < K).long(), present, rows)
    return Labels(rows, source, sub_mask, delete, ins_count)


def edit_loss(net: Callable, lab: Labels, gamma_sub: float = 1.0, gamma_del: float = 1.0, gamma_ins: float = 1.0,
              normalizer: float | None = None, t: torch.Tensor | None = None,
              weighting: Literal["none", "elbo"] = "none",
              row_weight: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """``(total, {"sub", "del", "ins"})``: summed per-token terms divided by ``normalizer`` (default ``B · L``).

    ``weighting="elbo"`` multiplies row ``b``'s terms by ``λ_t = 1 / t_b`` (``t [B]`` required): the diffusion ELBO
    weight of the linear schedule ``ᾱ_t = 1 − t`` that the note's loss ``Σ_k λ_{t−1} (γ_sub L_sub + γ_del L_del +
    γ_ins L_ins)`` carries (the same ``1/t`` as MDLM/LLaDA, :func:`zoo.common.masked_dlm.masked_diffusion_loss`);
    ``"none"`` is the constant weighting. ``row_weight [B]`` (optional) further multiplies row ``b``'s terms: the
    importance weight ``p_U(t_b) / p_prop(t_b)`` when ``t`` was drawn from a non-uniform proposal
    (:func:`.training.sample_t`), which keeps the expectation of the loss that of ``t ~ U``."""
    rows = lab.rows
    sub, dl, il = net(rows.tokens, rows.lengths)
    b, w = rows.tokens.shape
    norm = normalizer if normalizer is not None else b * w
    if weighting == "elbo":
        if t is None:
            raise ValueError("weighting='elbo' needs t")
        lam = (1.0 / t.to(sub.dtype)).reshape(b, 1)
    elif weighting == "none":
        lam = torch.ones(b, 1, dtype=sub.dtype)
    else:
        raise ValueError(f"unknown weighting {weighting!r}; 'elbo' or 'none'")
    if row_weight is not None:
        lam = lam * row_weight.to(sub.dtype).reshape(b, 1)
    ce = F.cross_entropy(sub.transpose(1, 2), lab.source.clamp(0, K - 1), reduction="none")
    parts = {
        "sub": (lam * ce * lab.sub_mask).sum() / norm,
        "del": (lam * F.binary_cross_entropy_with_logits(dl, lab.delete.float(), reduction="none") * rows.attention_mask).sum() / norm,
        "ins": (lam * F.binary_cross_entropy_with_logits(il, (lab.ins_count > 0).float(), reduction="none") * lab.gap_valid).sum() / norm,
    }
    total = gamma_sub * parts["sub"] + gamma_del * parts["del"] + gamma_ins * parts["ins"]
    return total, parts


def kernel_sampler(knobs: Knobs):
    """The ``(z0, t, generator, net) -> Noised`` function of these knobs (for training loops)."""
    return lambda z0, t, generator, net=None: noise_latent(z0, t, knobs, generator, net)


def oracle_replay(lab: Labels, z0: torch.Tensor, row: int) -> list[int]:
    """Apply the oracle edits of one row to ``x_t``: insert ``ins_count[g]`` residues into gap ``g`` (the ``z_0``
    residues missing there, in latent order), delete the tokens labelled ``delete``, and replace every other token
    by its substitution target where ``sub_mask`` says so. Returns the edited row (it must equal ``Γ⁻¹(z_0)``)."""
    n = int(lab.rows.lengths[row])
    toks = lab.rows.tokens[row, :n].tolist()
    pos = lab.rows.positions[row, :n].tolist()
    bounds = [-1] + pos + [z0.shape[1]]
    out: list[int] = []
    for g in range(n + 1):
        missing = [int(z0[row, j]) for j in range(bounds[g] + 1, bounds[g + 1]) if int(z0[row, j]) < K]
        assert len(missing) == int(lab.ins_count[row, g])
        out += missing
        if g < n:
            if bool(lab.delete[row, g]):
                continue
            out.append(int(lab.source[row, g]) if bool(lab.sub_mask[row, g]) else toks[g])
    return out
