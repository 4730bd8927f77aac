"""Variable-length bookkeeping (zoo/common/varlen.py): contraction and expansion round-trip, gap counts and
gap sums equal brute force, insertions and deletions keep order and compose back, random alignments are
uniform over subsets (with a negative control)."""
from __future__ import annotations

import itertools
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from zoo.common.exact import EnumeratedLaw, check_law, chi2_pvalue, negative_control
from zoo.common.varlen import (Contracted, align, contract, delete_slots, expand, gap_counts, gap_sums, insert_at_gaps,
                               pad_rows, positions_of, present_from_positions, random_alignment, unpad_rows)

PAD, FILL = -7, -3


@st.composite
def latent_batches(draw, max_b: int = 4, max_n: int = 9):
    b = draw(st.integers(1, max_b))
    n = draw(st.integers(1, max_n))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    latent = torch.randint(0, 50, (b, n), generator=g)
    present = torch.rand(b, n, generator=g) < draw(st.floats(0.0, 1.0))
    return latent, present


def _brute_contract(latent, present):
    return [[(int(t), j) for j, (t, p) in enumerate(zip(row, mask)) if p] for row, mask in zip(latent, present)]


@given(latent_batches())
@settings(max_examples=60, deadline=None)
def test_contract_keeps_survivors_in_order_and_expand_inverts_it(batch):
    """contract removes exactly the absent slots, keeps order, positions strictly increase; expand(contract(z))
    restores every present slot and fills the absent ones; lengths = #present."""
    latent, present = batch
    rows = contract(latent, present, PAD)
    assert torch.equal(rows.lengths, present.sum(1))
    for b, want in enumerate(_brute_contract(latent, present)):
        n = len(want)
        assert rows.tokens[b, :n].tolist() == [t for t, _ in want]
        assert rows.positions[b, :n].tolist() == [j for _, j in want]
        assert (rows.tokens[b, n:] == PAD).all() and (rows.positions[b, n:] == -1).all()
    back = expand(rows, latent.shape[1], FILL)
    assert torch.equal(back, torch.where(present, latent, torch.full_like(latent, FILL)))
    assert torch.equal(present_from_positions(rows, latent.shape[1]), present)
    assert torch.equal(rows.attention_mask, rows.positions >= 0)


@given(latent_batches())
@settings(max_examples=60, deadline=None)
def test_gap_sums_equal_brute_force_and_gap_counts_plus_length_is_latent_size(batch):
    """gap g of a contracted row (before slot g; gap n after the last) sums the values of the absent latent
    slots between its neighbours, exactly as a loop over the latent computes it; Σ gaps + length = N."""
    latent, present = batch
    g = torch.Generator().manual_seed(1)
    values = torch.rand(latent.shape, generator=g, dtype=torch.float64)
    rows = contract(latent, present, PAD)
    sums = gap_sums(values, present, rows)
    counts = gap_counts(present, rows)
    n_latent = latent.shape[1]
    for b in range(latent.shape[0]):
        want, cur, cnt = [], 0.0, 0
        want_c = []
        for j in range(n_latent):
            if present[b, j]:
                want.append(cur), want_c.append(cnt)
                cur, cnt = 0.0, 0
            else:
                cur += float(values[b, j]); cnt += 1
        want.append(cur), want_c.append(cnt)
        n = int(rows.lengths[b])
        assert sums[b, : n + 1].tolist() == pytest.approx(want, abs=1e-12)
        assert counts[b, : n + 1].tolist() == want_c
        assert (sums[b, n + 1:] == 0).all() and (counts[b, n + 1:] == 0).all()
        assert int(counts[b].sum()) + n == n_latent


def test_gap_sums_negative_control_present_values_never_count():
    """Changing the values at present slots leaves every gap sum unchanged; changing an absent slot's value
    changes exactly its own gap."""
    present = torch.tensor([[True, False, False, True, False]])
    rows = contract(torch.arange(5)[None], present, PAD)
    v = torch.arange(1.0, 6.0)[None]
    base = gap_sums(v, present, rows)
    assert base.tolist() == [[0.0, 2.0 + 3.0, 5.0]]
    assert torch.equal(gap_sums(v + present * 100.0, present, rows), base)
    bumped = v.clone(); bumped[0, 4] += 10
    assert gap_sums(bumped, present, rows).tolist() == [[0.0, 5.0, 15.0]]


@given(latent_batches(), st.integers(0, 2**31 - 1), st.integers(0, 3))
@settings(max_examples=60, deadline=None)
def test_insert_at_gaps_keeps_order_and_deleting_the_inserted_slots_restores_the_rows(batch, seed, max_count):
    """After inserting counts[g] fills into gap g: new length = old + Σ counts; old slots keep their order and
    values; exactly counts[g] new slots sit before old slot g; deleting the new slots gives the old rows."""
    latent, present = batch
    rows = contract(latent, present, PAD)
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, max_count + 1, (latent.shape[0], rows.tokens.shape[1] + 1), generator=g)
    out, applied = insert_at_gaps(rows.tokens, rows.lengths, counts, FILL, PAD)
    assert applied.all()
    live = counts * (torch.arange(counts.shape[1])[None] <= rows.lengths[:, None])
    assert torch.equal(out.lengths, rows.lengths + live.sum(1))
    for b in range(latent.shape[0]):
        n, m = int(rows.lengths[b]), int(out.lengths[b])
        origin = out.origin[b, :m].tolist()
        assert [o for o in origin if o >= 0] == list(range(n))
        # counts[g] inserted slots precede old slot g (and the trailing gap holds counts[n]).
        runs, run = [], 0
        for o in origin:
            if o < 0:
                run += 1
            else:
                runs.append(run); run = 0
        runs.append(run)
        assert runs == live[b, : n + 1].tolist()
        assert all(out.tokens[b, k] == FILL for k in range(m) if origin[k] < 0)
        assert all(out.tokens[b, k] == rows.tokens[b, origin[k]] for k in range(m) if origin[k] >= 0)
    back = delete_slots(out.tokens, out.lengths, out.origin < 0, PAD)
    assert torch.equal(back.lengths, rows.lengths)
    assert [r.tolist() for r in unpad_rows(back.tokens, back.lengths)] == [r.tolist() for r in unpad_rows(rows.tokens, rows.lengths)]


def test_insert_at_gaps_skips_rows_that_would_exceed_max_length():
    """A row whose insertions would exceed max_length is left unchanged; the others are edited."""
    tokens, lengths = pad_rows([torch.tensor([1, 2]), torch.tensor([3, 4, 5])], PAD)
    counts = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 1]])
    out, applied = insert_at_gaps(tokens, lengths, counts, FILL, PAD, max_length=4)
    assert applied.tolist() == [True, False]
    assert [r.tolist() for r in unpad_rows(out.tokens, out.lengths)] == [[FILL, 1, 2, FILL], [3, 4, 5]]


@given(latent_batches(), st.integers(0, 2**31 - 1))
@settings(max_examples=40, deadline=None)
def test_delete_slots_removes_exactly_the_marked_slots_in_order(batch, seed):
    """delete_slots keeps the unmarked slots in order; origin points at each survivor's old index."""
    latent, present = batch
    rows = contract(latent, present, PAD)
    mark = torch.rand(rows.tokens.shape, generator=torch.Generator().manual_seed(seed)) < 0.4
    out = delete_slots(rows.tokens, rows.lengths, mark, PAD)
    for b in range(latent.shape[0]):
        n = int(rows.lengths[b])
        keep = [k for k in range(n) if not mark[b, k]]
        assert out.origin[b, : int(out.lengths[b])].tolist() == keep
        assert out.tokens[b, : int(out.lengths[b])].tolist() == [int(rows.tokens[b, k]) for k in keep]


def test_pad_and_unpad_round_trip():
    """pad_rows / unpad_rows are inverse; a too-small width is a one-line error."""
    rows = [torch.tensor([4, 5, 6]), torch.tensor([], dtype=torch.long), torch.tensor([7])]
    tokens, lengths = pad_rows(rows, PAD, width=5)
    assert tokens.shape == (3, 5) and lengths.tolist() == [3, 0, 1] and (tokens[1] == PAD).all()
    assert [r.tolist() for r in unpad_rows(tokens, lengths)] == [r.tolist() for r in rows]
    with pytest.raises(ValueError, match="width 2 is shorter than the longest row"):
        pad_rows(rows, PAD, width=2)


@given(st.integers(0, 2**31 - 1))
@settings(max_examples=25, deadline=None)
def test_align_places_rows_so_that_contraction_returns_them(seed):
    """align(x, present) is an alignment of x: contracting it at present gives x back, and the absent slots
    hold the fill symbol (DPLM-Evo's Γ⁻¹(z) = x for z ∈ Γ(x))."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 6, (3,), generator=g)
    tokens, _ = pad_rows([torch.randint(0, 20, (int(n),), generator=g) for n in lengths], PAD, width=6)
    present = random_alignment(lengths, 12, g)
    z = align(tokens, lengths, present, FILL)
    assert torch.equal((z != FILL), present)
    back = contract(z, present, PAD, width=6)
    assert torch.equal(back.tokens, tokens) and torch.equal(back.lengths, lengths)
    assert torch.equal(positions_of(present, 6).positions, back.positions)


def test_random_alignment_is_uniform_over_subsets_with_negative_control():
    """A row of length 2 in 5 latent slots occupies each of the C(5, 2) = 10 subsets with probability 1/10
    (chi-square at the 1e-3 false-fail rate on 20k draws); a biased sampler (first slot favoured) is rejected."""
    n_latent, k, draws = 5, 2, 20_000
    support = list(itertools.combinations(range(n_latent), k))
    law = EnumeratedLaw(tuple(support), torch.full((len(support),), 1.0 / len(support), dtype=torch.float64))
    present = random_alignment(torch.full((draws,), k), n_latent, torch.Generator().manual_seed(0))
    assert (present.sum(1) == k).all()

    def counts_of(mask):
        idx = {s: i for i, s in enumerate(support)}
        c = torch.zeros(len(support), dtype=torch.float64)
        for row in mask.tolist():
            c[idx[tuple(j for j, p in enumerate(row) if p)]] += 1
        return c

    assert check_law(law, counts_of(present)).passed
    g = torch.Generator().manual_seed(1)
    u = torch.rand(draws, n_latent, generator=g)
    u[:, 0] *= 0.7  # biased: slot 0 is chosen too often
    biased = u.argsort(1).argsort(1) < k
    negative_control(lambda c: chi2_pvalue(law.probs, c), {"slot-0 biased": counts_of(biased)})
    assert math.comb(n_latent, k) == len(support)


def test_bad_shapes_are_one_line_errors():
    """Mismatched shapes and rows that do not fit are refused with a one-line message."""
    with pytest.raises(ValueError, match="must have the same shape"):
        contract(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.bool), PAD)
    with pytest.raises(ValueError, match=r"counts must be \[B, L \+ 1\]"):
        insert_at_gaps(torch.zeros(1, 3, dtype=torch.long), torch.tensor([3]), torch.zeros(1, 3), FILL, PAD)
    with pytest.raises(ValueError, match="does not fit 4 latent slots"):
        random_alignment(torch.tensor([5]), 4)
    with pytest.raises(ValueError, match="exactly lengths"):
        align(torch.zeros(1, 2, dtype=torch.long), torch.tensor([2]), torch.tensor([[True, False, False]]), FILL)
    assert isinstance(contract(torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2, dtype=torch.bool), PAD), Contracted)
