"""Variable-length bookkeeping for insertion/deletion diffusion: a fixed-length *latent* of ``N`` slots,
some of them absent (LoFlexMDM's "dropped" ``[D]``, DPLM-Evo's gap ``φ``), and the *contracted* sequence
the network sees (absent slots removed, order kept).

Conventions (batched, rows padded on the right):

* ``present [B, N]`` (bool): which latent slots survive contraction.
* contracted rows: ``tokens [B, L]``, ``lengths [B]``, ``positions [B, L]`` = the latent index of each
  contracted slot (``-1`` on padding), strictly increasing on the valid part of a row.
* gaps: a row of length ``n`` has ``n + 1`` gaps; gap ``g`` lies *before* contracted slot ``g``
  (gap ``n`` is after the last slot). LoFlexMDM inserts into the gap to the left of a slot
  (arXiv 2602.18695, Alg. 2: gap ``g``); DPLM-Evo inserts to the right of slot ``k`` (arXiv 2605.00182:
  gap ``k + 1``). Gap tensors are ``[B, L + 1]``, zero beyond a row's own ``n + 1`` gaps.

Both papers' maps are the same two operations: the contraction ``f_contract`` (LoFlexMDM §3) /
collapse ``Γ⁻¹`` (DPLM-Evo §3) is :func:`contract`; placing a sequence back in its latent slots is
:func:`expand`; the per-gap sum of a latent quantity over the absent slots it contains (LoFlexMDM's insertion
target, "the sum of hazards of the still-dropped positions in that gap", computed with a cumulative sum)
is :func:`gap_sums`; the sampler's edits are :func:`insert_at_gaps` and :func:`delete_slots`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Contracted:
    """A batch of contracted rows: ``tokens [B, L]`` (``pad_id`` beyond ``lengths``), ``positions [B, L]``
    (latent index of each slot, ``-1`` on padding) and ``lengths [B]``."""

    tokens: torch.Tensor
    positions: torch.Tensor
    lengths: torch.Tensor

    @property
    def attention_mask(self) -> torch.Tensor:
        """``[B, L]`` bool, True on real slots."""
        return length_mask(self.lengths, self.tokens.shape[1])


def length_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """``[B, width]`` bool mask that is True on the first ``lengths[b]`` columns of row ``b``."""
    return torch.arange(width, device=lengths.device)[None, :] < lengths[:, None]


def contract(latent: torch.Tensor, present: torch.Tensor, pad_id: int, width: int | None = None) -> Contracted:
    """Remove the absent slots of every row, keeping the survivors' order (LoFlexMDM's ``f_contract``,
    DPLM-Evo's collapse ``Γ⁻¹``). ``width`` defaults to the longest row; it may be larger (fixed shapes)."""
    if latent.shape != present.shape:
        raise ValueError(f"latent {tuple(latent.shape)} and present {tuple(present.shape)} must have the same shape")
    present = present.bool()
    lengths = present.sum(1)
    width = int(lengths.max()) if width is None and lengths.numel() else (width or 0)
    if lengths.numel() and int(lengths.max()) > width:
        raise ValueError(f"width {width} is shorter than the longest contracted row ({int(lengths.max())})")
    # A stable sort on "absent" puts the present slots first, in their latent order.
    order = torch.sort((~present).to(torch.int8), dim=1, stable=True).indices
    n = latent.shape[1]
    if width > n:
        order = torch.cat([order, order.new_zeros(order.shape[0], width - n)], 1)
    positions = order[:, :width]
    valid = length_mask(lengths, width)
    tokens = torch.gather(latent, 1, positions).masked_fill(~valid, pad_id)
    return Contracted(tokens, positions.masked_fill(~valid, -1), lengths)


def expand(rows: Contracted, n_latent: int, fill_id: int) -> torch.Tensor:
    """Put contracted rows back in their latent slots (``fill_id`` in the absent ones): the inverse of
    :func:`contract` given the positions it returned."""
    b = rows.tokens.shape[0]
    out = rows.tokens.new_full((b, n_latent + 1), fill_id)
    idx = rows.positions.masked_fill(rows.positions < 0, n_latent)  # padding goes to a spill column
    out.scatter_(1, idx, rows.tokens)
    return out[:, :n_latent].clone()


def present_from_positions(rows: Contracted, n_latent: int) -> torch.Tensor:
    """``[B, n_latent]`` bool mask of the latent slots the contracted rows occupy."""
    b = rows.positions.shape[0]
    out = torch.zeros(b, n_latent + 1, dtype=torch.bool, device=rows.positions.device)
    out.scatter_(1, rows.positions.masked_fill(rows.positions < 0, n_latent), True)
    return out[:, :n_latent]


def gap_sums(values: torch.Tensor, present: torch.Tensor, rows: Contracted) -> torch.Tensor:
    """``[B, L + 1]``: for every gap of every contracted row, the sum of ``values [B, N]`` over the absent
    latent slots in that gap (LoFlexMDM's insertion target with ``values`` = the dropped positions' hazards).

    With ``C[j] = Σ_{i<j, absent} values[i]``, gap ``g`` of a row with slots at latent positions
    ``p_0 < … < p_{n-1}`` spans ``[p_{g-1} + 1, p_g)`` (``p_{-1} = -1``, ``p_n = N``), so its sum is
    ``C[p_g] − C[p_{g-1} + 1]``."""
    b, n = values.shape
    absent_vals = torch.where(present.bool(), torch.zeros_like(values), values)
    c = torch.cat([absent_vals.new_zeros(b, 1), absent_vals.cumsum(1)], 1)  # [B, N + 1]
    width = rows.positions.shape[1]
    g = torch.arange(width + 1, device=values.device)[None, :]
    pos = torch.cat([rows.positions, rows.positions.new_full((b, 1), -1)], 1)
    lengths = rows.lengths[:, None]
    end = torch.where(g < lengths, pos, torch.full_like(pos, n))  # p_g, or N for the trailing gap
    prev = torch.cat([rows.positions.new_full((b, 1), -1), rows.positions], 1)
    start = prev + 1  # p_{g-1} + 1 (0 for g = 0)
    valid = g <= lengths
    end, start = end.clamp(0, n), start.clamp(0, n)
    out = torch.gather(c, 1, end) - torch.gather(c, 1, start)
    return torch.where(valid, out, torch.zeros_like(out))


def gap_counts(present: torch.Tensor, rows: Contracted) -> torch.Tensor:
    """``[B, L + 1]`` number of absent latent slots in every gap; per row, ``Σ gaps + length = N``."""
    return gap_sums(torch.ones(present.shape, dtype=torch.long, device=present.device), present, rows)


@dataclass(frozen=True)
class Edited:
    """Rows after an edit: ``tokens [B, L']``, ``lengths [B]`` and ``origin [B, L']`` = the index of each
    slot in the rows before the edit (``-1`` for a newly inserted slot and on padding)."""

    tokens: torch.Tensor
    lengths: torch.Tensor
    origin: torch.Tensor


def insert_at_gaps(tokens: torch.Tensor, lengths: torch.Tensor, counts: torch.Tensor, fill_id: int, pad_id: int,
                   max_length: int | None = None) -> tuple[Edited, torch.Tensor]:
    """Insert ``counts[b, g]`` copies of ``fill_id`` into gap ``g`` of row ``b`` (gap ``g`` is before slot
    ``g``; ``counts`` is ``[B, L + 1]``). Existing slots keep their relative order.

    A row whose new length would exceed ``max_length`` is left unchanged (LoFlexMDM's sampler skips the
    insertion step then); the second return value says which rows were edited."""
    b, width = tokens.shape
    if counts.shape != (b, width + 1):
        raise ValueError(f"counts must be [B, L + 1] = {(b, width + 1)}, got {tuple(counts.shape)}")
    counts = counts.long().clamp_min(0) * (torch.arange(width + 1, device=tokens.device)[None, :] <= lengths[:, None])
    new_lengths = lengths + counts.sum(1)
    applied = torch.ones(b, dtype=torch.bool, device=tokens.device)
    if max_length is not None:
        applied = new_lengths <= max_length
        counts = counts * applied[:, None]
        new_lengths = lengths + counts.sum(1)
    new_width = int(new_lengths.max()) if b else 0
    # Old slot k moves right by the insertions in gaps 0..k.
    shift = counts[:, :width].cumsum(1)
    new_pos = torch.arange(width, device=tokens.device)[None, :] + shift
    valid = length_mask(lengths, width)
    new_pos = torch.where(valid, new_pos, torch.full_like(new_pos, new_width))  # padding -> spill column
    out = tokens.new_full((b, new_width + 1), fill_id)
    out.scatter_(1, new_pos, tokens)
    origin = torch.full((b, new_width + 1), -1, dtype=torch.long, device=tokens.device)
    origin.scatter_(1, new_pos, torch.arange(width, device=tokens.device).expand(b, width).contiguous())
    out, origin = out[:, :new_width], origin[:, :new_width]
    new_valid = length_mask(new_lengths, new_width)
    return Edited(out.masked_fill(~new_valid, pad_id), new_lengths, origin.masked_fill(~new_valid, -1)), applied


def delete_slots(tokens: torch.Tensor, lengths: torch.Tensor, delete: torch.Tensor, pad_id: int) -> Edited:
    """Remove the slots where ``delete [B, L]`` is True (ignored on padding); the rest keep their order."""
    keep = length_mask(lengths, tokens.shape[1]) & ~delete.bool()
    rows = contract(tokens, keep, pad_id)
    return Edited(rows.tokens, rows.lengths, rows.positions)


def pad_rows(rows: list[torch.Tensor], pad_id: int, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack 1-D token rows of different lengths into ``([B, width], lengths [B])``, right-padded."""
    lengths = torch.tensor([int(r.numel()) for r in rows], dtype=torch.long)
    width = int(lengths.max()) if width is None and rows else (width or 0)
    if rows and int(lengths.max()) > width:
        raise ValueError(f"width {width} is shorter than the longest row ({int(lengths.max())})")
    out = torch.full((len(rows), width), pad_id, dtype=rows[0].dtype if rows else torch.long)
    for i, r in enumerate(rows):
        out[i, : r.numel()] = r
    return out, lengths


def unpad_rows(tokens: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
    """The inverse of :func:`pad_rows`: one 1-D tensor per row, cut at its length."""
    return [tokens[i, : int(n)].clone() for i, n in enumerate(lengths.tolist())]


def positions_of(present: torch.Tensor, width: int | None = None) -> Contracted:
    """The contracted index map of a ``present`` mask alone (``tokens`` = the latent indices): the slots a
    sequence occupies once aligned to ``present``; use its ``positions`` with the sequence's own tokens."""
    idx = torch.arange(present.shape[1], device=present.device).expand(present.shape).contiguous()
    return contract(idx, present, -1, width)


def align(tokens: torch.Tensor, lengths: torch.Tensor, present: torch.Tensor, fill_id: int) -> torch.Tensor:
    """Place right-padded rows into the latent slots marked by ``present`` (``present[b].sum() == lengths[b]``),
    ``fill_id`` elsewhere: the alignment ``z`` whose collapse is the row."""
    if not torch.equal(present.sum(1), lengths):
        raise ValueError("present must mark exactly lengths[b] slots in every row")
    idx = positions_of(present, tokens.shape[1])
    return expand(Contracted(tokens, idx.positions, lengths), present.shape[1], fill_id)


def random_alignment(lengths: torch.Tensor, n_latent: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``present [B, n_latent]`` with ``lengths[b]`` slots chosen uniformly among all ``C(n_latent, n)``
    subsets: a uniform draw of an alignment ``z ∈ Γ(x)`` of a length-``n`` sequence in an ``n_latent``-slot
    latent (DPLM-Evo's upsampled alignment space; place ``x`` in it with :func:`expand`)."""
    if lengths.numel() and int(lengths.max()) > n_latent:
        raise ValueError(f"a row of length {int(lengths.max())} does not fit {n_latent} latent slots")
    u = torch.rand(lengths.shape[0], n_latent, generator=generator, device=lengths.device if generator is None else generator.device)
    rank = u.argsort(1).argsort(1)  # a uniform random permutation's ranks
    return rank < lengths[:, None].to(rank.device)
