"""DPLM-Evo's sampling / editing loop (arXiv 2605.00182, Sec. 3 "Sampling"), one row at a time, with the edit
trajectory recorded. Per step ``t → t − 1``:

0. **localise** the noisy set ``N_t``: the masks and the residues whose own substitution probability is below
   ``τ_sub`` (:func:`noisy_set`);
1. **delete** the residues with ``p_del > τ_del`` (with ``edit_sites="all"`` masks are deleted only by ancestral
   edits; with ``stochastic_edits``, as in simulated evolution, each token is deleted with probability ``p_del``
   and each gap gets a mask with probability ``p_ins`` instead of the thresholds [recon]);
2. **insert** a mask into every gap with ``p_ins > τ_ins`` (gap ``k + 1`` = right of token ``k``; gap 0 from
   ``<cls>``), never beyond ``max_length`` (the 2L latent);

   With ``edit_sites="noisy"`` steps 1 – 2 act on ``N_t`` only, as in the note's loop ("localise the noisy index
   set N_t; delete the sites with p_del > τ_del; insert a mask to the right of the sites with p_ins > τ_ins; fill
   all noisy and masked sites") and its edit-step invariant "non-noisy positions are unchanged": only tokens of
   ``N_t`` are deleted (masks included: a mask may be a noise insertion) and a mask is inserted only right of a
   token of ``N_t``. ``"all"`` (de novo's ancestral reverse, where a forward deletion leaves no noisy token to
   insert beside) lets every token and gap be edited;
3. **fill**: re-run the network on the edited row; the ``⌈#masks / steps left⌉`` most confident masks are drawn from
   the substitution head (temperature ``temperature``; 0 = argmax), and every residue whose own substitution
   probability is below ``τ_sub`` (the "noisy" set) is redrawn;
4. **re-noise** (not at the last step): the ``renoise_fraction`` least-confident residues go back to ``m`` (the
   evolutionary kernel: the next fill redraws them from the model's own masked prediction, i.e. the contextual
   kernel) [recon: thresholds, step counts and the re-noise fraction are not given in the paper note].

``residue_scoring="masked-marginal"`` (the masked-diffusion baseline, whose substitution head is trained on masks
only) reads the noisy-set and re-noise confidences with each residue masked in turn (one forward per residue).

De novo generation starts from ``m^L``; simulated evolution and post-editing start from a protein.

An :class:`EditStep` records, in order: ``deleted`` (indices in the row before the step), ``inserted`` (gaps of
the row after deletion), ``substituted`` ``(index, old, new)`` in the row after insertion (fills, redraws,
re-noising to ``#``). :func:`replay` applies a trajectory to the initial row and must give the output.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .alphabet import AA, K
from .model import MASK

__all__ = ["EditConfig", "EditStep", "edit_row", "noisy_set", "replay", "to_text", "from_text", "MASK_CHAR"]

MASK_CHAR = "#"


def to_text(row) -> str:
    return "".join(MASK_CHAR if int(v) == MASK else AA[int(v)] for v in row)


def from_text(text: str) -> list[int]:
    bad = [c for c in text if c not in AA and c != MASK_CHAR]
    if bad:
        raise ValueError(f"sequence has {bad[0]!r}: expected letters of {AA} or {MASK_CHAR!r} for a mask")
    return [MASK if c == MASK_CHAR else AA.index(c) for c in text]


@dataclass(frozen=True)
class EditConfig:
    steps: int = 10
    tau_del: float = 0.5
    tau_ins: float = 0.5
    tau_sub: float = 0.0
    renoise_fraction: float = 0.0
    temperature: float = 1.0
    max_length: int = 28
    min_length: int = 1
    stochastic_edits: bool = False  # evolve: delete / insert with probability p_del / p_ins instead of thresholds
    ancestral: bool = False  # with stochastic_edits: probability p · (1 − t_{k+1} / t_k) at step k (masks deletable)
    renoise_omega_del: float = 0.0  # evolve: the re-noise also applies the forward kernel's deletions ...
    renoise_omega_ins: float = 0.0  # ... and insertions at t = renoise_fraction (uniform sites, as in training)
    residue_scoring: str = "wt-marginal"  # or "masked-marginal": the noisy set / re-noise read p(own) with the site masked
    edit_sites: str = "all"  # or "noisy": delete only tokens of N_t, insert only right of a token of N_t (note's loop)


@dataclass
class EditStep:
    deleted: list[int] = field(default_factory=list)
    inserted: list[int] = field(default_factory=list)
    substituted: list[tuple[int, str, str]] = field(default_factory=list)
    forward: bool = False  # a forward-kernel (re-noising) step of simulated evolution, not a reverse edit

    def as_dict(self) -> dict:
        return {"deleted": list(self.deleted), "inserted": list(self.inserted),
                "substituted": [list(s) for s in self.substituted], "forward": self.forward}


def _heads(net, row: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.tensor([row], dtype=torch.long)
    with torch.no_grad():
        sub, dl, il = net(x, torch.tensor([len(row)]))
    return torch.log_softmax(sub[0].double(), -1), torch.sigmoid(dl[0].double()), torch.sigmoid(il[0].double())


def _masked_logp(net, row: list[int], logp: torch.Tensor) -> torch.Tensor:
    """``logp`` with every residue row replaced by the masked marginal (site masked, one forward per residue)."""
    res = [k for k in range(len(row)) if row[k] != MASK]
    if not res:
        return logp
    x = torch.tensor([row] * len(res), dtype=torch.long)
    x[torch.arange(len(res)), torch.tensor(res)] = MASK
    with torch.no_grad():
        sub, _, _ = net(x, torch.full((len(res),), len(row), dtype=torch.long))
    out = logp.clone()
    out[torch.tensor(res)] = torch.log_softmax(sub.double(), -1)[torch.arange(len(res)), torch.tensor(res)]
    return out


def noisy_set(row: list[int], logp: torch.Tensor, tau_sub: float) -> list[bool]:
    """``N_t`` of the note's editing loop, per token: a mask, or a residue whose own substitution probability
    ``p_sub(x_k | x)_k`` is below ``tau_sub`` (the noisy set the fill redraws)."""
    return [v == MASK or math.exp(float(logp[k, v])) < tau_sub for k, v in enumerate(row)]


def _draw(logp: torch.Tensor, temperature: float, g: torch.Generator) -> int:
    if temperature == 0:
        return int(logp.argmax())
    p = torch.softmax(logp / temperature, -1)
    u = torch.rand(1, generator=g, dtype=torch.float64)
    return int(min((p.cumsum(0) < u * p.sum()).sum(), K - 1))


def _ancestral_scale(s: int, steps: int) -> float:
    """``1 − t_{k+1} / t_k`` for step ``k = s`` of ``t_k = 1 − k / steps``: under the linear schedule a latent site
    that is noised at ``t`` was already noised at ``t' < t`` with probability ``t' / t`` (its noising time is uniform
    on ``[0, t]``), so the reverse step ``t_k → t_{k+1}`` undoes a noise edit with probability
    ``p_edit · (1 − t_{k+1} / t_k)`` (``p_edit``: the head's posterior that the edit is due), and the last step with
    ``p_edit`` itself (the ancestral sampler of the forward process in :mod:`.noise`)."""
    t_now, t_next = 1.0 - s / steps, 1.0 - (s + 1) / steps
    return 1.0 - t_next / t_now


def _forward_indels(row: list[int], cfg: EditConfig, g: torch.Generator) -> tuple[list[int], EditStep]:
    """The forward kernel's indels at ``t = renoise_fraction`` (:func:`.noise.noise_latent`'s branching, uniform
    sites): every token (a residue of this step's ``z_0``, or a mask the re-noise just put on one) is deleted with
    probability ``t · ω_del``; the row is placed in a uniform alignment of
    ``max_length`` latent slots (:func:`zoo.common.varlen.random_alignment`) and every gap slot φ becomes a mask
    with probability ``t · ω_ins``, inserted into the row's gap that holds the slot. Returns the new row and the
    :class:`EditStep` (``forward=True``) that records it."""
    from zoo.common.varlen import random_alignment

    t, n = cfg.renoise_fraction, len(row)
    step = EditStep(forward=True)
    u = torch.rand(n, generator=g, dtype=torch.float64)
    dels = [k for k in range(n) if float(u[k]) < t * cfg.renoise_omega_del][: max(0, n - cfg.min_length)]
    present = random_alignment(torch.tensor([n]), max(cfg.max_length, n), g)[0]
    v = torch.rand(present.shape[0], generator=g, dtype=torch.float64)
    before = present.long().cumsum(0) - present.long()  # row tokens left of each latent slot = its gap in the old row
    old_gaps = [int(before[j]) for j in range(present.shape[0]) if not bool(present[j]) and float(v[j]) < t * cfg.renoise_omega_ins]
    gone = set(dels)
    kept = [k for k in range(n) if k not in gone]
    gaps = sorted(sum(1 for k in kept if k < gi) for gi in old_gaps)[: max(0, cfg.max_length - len(kept))]
    step.deleted, step.inserted = dels, gaps
    new = [row[k] for k in kept]
    for gi in reversed(gaps):
        new.insert(gi, MASK)
    return new, step


def edit_row(net, row: list[int], cfg: EditConfig, g: torch.Generator) -> tuple[list[int], list[EditStep], dict]:
    """Run ``cfg.steps`` edit steps on one row; returns ``(final row, trajectory, stats)``."""
    row = list(row)
    traj: list[EditStep] = []
    forwards = 0
    for s in range(cfg.steps):
        step = EditStep()
        logp, p_del, p_ins = _heads(net, row)
        forwards += 1
        # 0. the sites steps 1 - 2 may edit: N_t, or every token (masks only with ancestral edits)
        if cfg.edit_sites == "noisy":
            if cfg.residue_scoring == "masked-marginal" and cfg.tau_sub > 0:
                editable = noisy_set(row, _masked_logp(net, row, logp), cfg.tau_sub)
                forwards += sum(1 for v in row if v != MASK)
            else:
                editable = noisy_set(row, logp, cfg.tau_sub)
        else:
            editable = [(cfg.stochastic_edits and cfg.ancestral) or v != MASK for v in row]
        # 1. deletions (keeping at least min_length tokens)
        scale = _ancestral_scale(s, cfg.steps) if cfg.ancestral else 1.0
        if cfg.stochastic_edits:
            u = torch.rand(len(row), generator=g, dtype=torch.float64)
            cand = [k for k in range(len(row)) if editable[k] and float(u[k]) < scale * float(p_del[k])]
        else:
            cand = [k for k in range(len(row)) if editable[k] and float(p_del[k]) > cfg.tau_del]
        cand = sorted(cand, key=lambda k: -float(p_del[k]))[: max(0, len(row) - cfg.min_length)]
        step.deleted = sorted(cand)
        kept = [k for k in range(len(row)) if k not in set(cand)]
        # gap g of the row after deletion = gap k_g of the old row where k_g is the g-th kept token (gap before it);
        # the trailing gap maps to the old trailing gap. Merged gaps take the largest insertion probability of the
        # old gaps they merge that may be edited (old gap j is right of old token j - 1; gap 0 is no token's).
        insertable = [cfg.edit_sites != "noisy" or (j > 0 and editable[j - 1]) for j in range(len(row) + 1)]
        bounds = kept + [len(row)]
        ins_p = []
        prev = -1
        for b in bounds:
            ins_p.append(max(float(p_ins[j]) if insertable[j] else 0.0 for j in range(prev + 1, b + 1)))
            prev = b
        room = cfg.max_length - len(kept)
        if cfg.stochastic_edits:
            u = torch.rand(len(ins_p), generator=g, dtype=torch.float64)
            gaps = [gi for gi, p in enumerate(ins_p) if float(u[gi]) < scale * p]
        else:
            gaps = [gi for gi, p in enumerate(ins_p) if p > cfg.tau_ins]
        gaps = sorted(sorted(gaps, key=lambda gi: -ins_p[gi])[: max(0, room)])
        step.inserted = gaps
        new = [row[k] for k in kept]
        for gi in reversed(gaps):
            new.insert(gi, MASK)
        row = new
        # 3. fill
        if step.deleted or step.inserted:
            logp, _, _ = _heads(net, row)
            forwards += 1
        if cfg.residue_scoring == "masked-marginal" and (cfg.tau_sub > 0 or cfg.renoise_fraction > 0):
            logp = _masked_logp(net, row, logp)
            forwards += sum(1 for v in row if v != MASK)
        masks = [k for k in range(len(row)) if row[k] == MASK]
        left = cfg.steps - s
        n_fill = len(masks) if left <= 1 else math.ceil(len(masks) / left)
        conf = {k: float(logp[k].max()) for k in masks}
        fill = sorted(sorted(masks, key=lambda k: -conf[k])[:n_fill])
        noisy = [k for k, v in enumerate(noisy_set(row, logp, cfg.tau_sub)) if v and row[k] != MASK]
        for k in sorted(fill + noisy):
            new_tok = _draw(logp[k], cfg.temperature, g)
            if new_tok != row[k]:
                step.substituted.append((k, to_text([row[k]]), AA[new_tok]))
                row[k] = new_tok
        # 4. re-noise the least confident residues back to masks
        if s < cfg.steps - 1 and cfg.renoise_fraction > 0:
            res = [k for k in range(len(row)) if row[k] != MASK and k not in set(fill)]
            n_re = int(round(cfg.renoise_fraction * len(row)))
            for k in sorted(sorted(res, key=lambda k: float(logp[k, row[k]]))[:n_re]):
                step.substituted.append((k, AA[row[k]], MASK_CHAR))
                row[k] = MASK
        traj.append(step)
        if s < cfg.steps - 1 and cfg.renoise_fraction > 0 and (cfg.renoise_omega_del > 0 or cfg.renoise_omega_ins > 0):
            row, fwd = _forward_indels(row, cfg, g)
            if fwd.deleted or fwd.inserted:
                traj.append(fwd)
    if MASK in row:  # a final fill so that no mask remains
        logp, _, _ = _heads(net, row)
        forwards += 1
        step = EditStep()
        for k in range(len(row)):
            if row[k] == MASK:
                row[k] = _draw(logp[k], cfg.temperature, g)
                step.substituted.append((k, MASK_CHAR, AA[row[k]]))
        traj.append(step)
    stats = {"forwards": forwards, "deletions": sum(len(t.deleted) for t in traj),
             "insertions": sum(len(t.inserted) for t in traj),
             "forward_indels": sum(len(t.deleted) + len(t.inserted) for t in traj if t.forward), "edits": sum(len(t.deleted) + len(t.inserted) + len(t.substituted) for t in traj)}
    return row, traj, stats


def replay(initial: str, trajectory: list) -> str:
    """Apply a trajectory (:class:`EditStep` or its ``as_dict()``) to ``initial``; raises if an edit does not fit."""
    row = list(initial)
    for st in trajectory:
        d = st.as_dict() if isinstance(st, EditStep) else st
        for k in sorted(d["deleted"], reverse=True):
            del row[k]
        for gi in sorted(d["inserted"], reverse=True):
            if not 0 <= gi <= len(row):
                raise ValueError(f"insertion gap {gi} outside a row of length {len(row)}")
            row.insert(gi, MASK_CHAR)
        for k, old, new in d["substituted"]:
            if row[k] != old:
                raise ValueError(f"substitution at {k}: row has {row[k]!r}, trajectory says {old!r}")
            row[k] = new
    return "".join(row)
