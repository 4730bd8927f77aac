"""Named property checks of DPLM-Evo (dplm-evo note, Sec. 7), run by the conformance harness under Hypothesis.

Each carries a negative control: a plausible wrong implementation that the same assertion rejects. All checks are
exact (no statistical test), on random inputs and a randomly initialised tiny network (the properties hold for any
weights), so none depends on the shipped checkpoints.
"""
from __future__ import annotations

import dataclasses

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.contract import invariant
from zoo.common.masked_dlm import masked_diffusion_loss
from zoo.common.varlen import align, contract, gap_counts, pad_rows, positions_of, random_alignment

from .alphabet import BLOSUM62, K, blosum_kernel, uniform_kernel
from .editing import EditConfig, edit_row, from_text, replay, to_text
from .model import GAP, MASK, PAD, build_toy
from .noise import Knobs, edit_loss, labels, noise_latent, one_site_matrix, oracle_replay, sub_law
from .scoring import masked_marginal, mutant_scores, wt_marginal

seeds = st.integers(0, 2**31 - 1)
N = 28


def _batch(seed: int, b: int = 4, n_latent: int = N) -> tuple[list[torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, n_latent // 2 + 1, (b,), generator=g)
    rows = [torch.randint(0, K, (int(n),), generator=g) for n in lengths]
    tok, lengths = pad_rows(rows, PAD)
    present = random_alignment(lengths, n_latent, g)
    return rows, align(tok, lengths, present, GAP)


_NET = None


def _net():
    global _NET
    if _NET is None:
        _NET = build_toy()
    return _NET


@invariant("collapse-round-trip")
@settings(deadline=None, max_examples=40)
@given(seeds)
def collapse_round_trip(seed):
    """For any x and any z ∈ Γ(x) (a uniform alignment in the 2L latent): Γ⁻¹(z) = x, |z| = 2L, #φ(z) = 2L − |x|,
    the index map I is strictly increasing and z[I(k)] = x[k]. Negative control: a collapse that keeps the gap
    symbols in place of removing them (a masked_fill instead of a compaction) does not return x."""
    rows, z = _batch(seed)
    present = z != GAP
    c = contract(z, present, PAD)
    for i, x in enumerate(rows):
        n = len(x)
        assert z.shape[1] == N and int((z[i] == GAP).sum()) == N - n
        assert torch.equal(c.tokens[i, :n], x) and int(c.lengths[i]) == n
        pos = c.positions[i, :n]
        assert bool((pos[1:] > pos[:-1]).all()) and torch.equal(z[i, pos], x)
        wrong = z[i].masked_fill(~present[i], PAD)[:n]  # not a compaction
        assert not torch.equal(wrong, x) or bool(present[i, :n].all())


@invariant("gap-counts")
@settings(deadline=None, max_examples=40)
@given(seeds)
def gap_counts_identity(seed):
    """Per row, the gap counts of z (φ slots between consecutive observed tokens, n + 1 gaps) equal a brute-force
    scan of the latent and sum with the length to 2L. Negative control: counting each gap from the slot *after*
    the token (an off-by-one in the index map) disagrees with the scan for some row."""
    rows, z = _batch(seed, b=6)
    present = z != GAP
    c = positions_of(present)
    counts = gap_counts(present, c)
    off_by_one_differs = False
    for i, x in enumerate(rows):
        n = len(x)
        pos = [-1] + c.positions[i, :n].tolist() + [N]
        brute = [pos[g + 1] - pos[g] - 1 for g in range(n + 1)]
        assert counts[i, : n + 1].tolist() == brute and sum(brute) + n == N
        shifted = [pos[g + 1] - pos[g] for g in range(n + 1)]
        off_by_one_differs |= shifted != brute
    assert off_by_one_differs


def _contextual_row(seed: int) -> torch.Tensor:
    return torch.softmax(torch.randn(K, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2, 0)


@invariant("kernel-rows-are-distributions")
@settings(deadline=None, max_examples=40)
@given(seeds, st.floats(0, 1), st.floats(0, 1), st.floats(0, 1), st.floats(0, 1))
def kernel_rows_are_distributions(seed, alpha_bar, wd, wi, rho):
    """Q_t = ᾱ I + (1 − ᾱ) π has non-negative rows summing to 1 for the uniform, BLOSUM62 and contextual kernels;
    φ is reached from a residue only by deletion (Q[a, φ] = (1 − ᾱ) ω_del) and a residue from φ only by insertion
    (Σ_b Q[φ, b] = (1 − ᾱ) ω_ins (1 − ρ)); Q → I as ᾱ → 1 and → π as ᾱ → 0. The BLOSUM62 table is symmetric and
    its kernel conservative (each row's mode is the residue itself); the contextual kernel's rows have no mass on
    m or φ, and with a uniform model they equal U_K. Negative control: a π that forgets the (1 − ω_del) factor on
    the substitution branch has rows that do not sum to 1 (for ω_del > 0)."""
    ctx = _contextual_row(seed)
    knobs = Knobs(wd, wi, rho)
    for t_sub, t_ins in [(uniform_kernel(), uniform_kernel()[0]), (blosum_kernel(), uniform_kernel()[0]),
                         (ctx[None].expand(K, K), ctx)]:
        q = one_site_matrix(alpha_bar, knobs, t_sub, t_ins)
        assert bool((q >= -1e-15).all()) and torch.allclose(q.sum(1), torch.ones(K + 2, dtype=torch.float64), atol=1e-12)
        assert torch.allclose(q[:K, GAP], torch.full((K,), (1 - alpha_bar) * wd, dtype=torch.float64), atol=1e-12)
        assert abs(float(q[GAP, :K].sum()) - (1 - alpha_bar) * wi * (1 - rho)) < 1e-12
        assert torch.allclose(one_site_matrix(1.0, knobs, t_sub, t_ins), torch.eye(K + 2, dtype=torch.float64))
    assert torch.equal(BLOSUM62, BLOSUM62.T) and int(BLOSUM62[17, 17]) == 11 and int(BLOSUM62[4, 4]) == 9
    assert torch.equal(blosum_kernel().argmax(1), torch.arange(K))
    # contextual kernel from the network: rows over A only; a uniform model gives U_K
    rows, z0 = _batch(seed, b=2)
    law = sub_law("contextual", z0, _net(), z0.masked_fill(z0 < K, MASK))
    assert law.shape[-1] == K and torch.allclose(law.sum(-1), torch.ones(law.shape[:2], dtype=torch.float64))
    flat = lambda x, y: (torch.zeros(*x.shape, K), torch.zeros(x.shape), torch.zeros(x.shape[0], x.shape[1] + 1))  # noqa: E731
    assert torch.allclose(sub_law("contextual", z0, flat, z0), torch.full((*z0.shape, K), 1.0 / K, dtype=torch.float64))
    if wd > 1e-3 and alpha_bar < 0.999:
        bad = one_site_matrix(alpha_bar, knobs, uniform_kernel(), uniform_kernel()[0])
        bad[:K, :K] /= 1 - wd
        bad[:K, MASK] /= 1 - wd
        assert not torch.allclose(bad.sum(1), torch.ones(K + 2, dtype=torch.float64), atol=1e-9)


@invariant("degenerate-kernel-is-masked-diffusion")
@settings(deadline=None, max_examples=25)
@given(seeds, st.sampled_from(["uniform", "blosum62", "contextual"]))
def degenerate_kernel_is_masked_diffusion(seed, kernel):
    """ω_del = ω_ins = 0, ρ_mask = 1 is absorbing masked diffusion (DPLM) exactly: Q_t equals (1 − t) I + t e_m on
    residues with φ absorbing; a draw keeps every length, only masks appear, x_t = where(noised, m, x_0); no
    deletion or insertion label is ever set; and the edit loss's substitution part equals
    ``masked_diffusion_loss`` on the same x_t, with constant (``"none"``) and ELBO (``1/t``) weighting alike.
    Negative controls: ω_del = 0.3 changes some length, and ρ_mask = 0.5 produces non-mask substitutions."""
    t_val = 0.6
    q = one_site_matrix(1 - t_val, Knobs(0, 0, 1, kernel), blosum_kernel(), uniform_kernel()[0])
    absorbing = torch.eye(K + 2, dtype=torch.float64) * (1 - t_val)
    absorbing[:K, MASK] += t_val
    absorbing[MASK, MASK] += t_val
    absorbing[GAP, GAP] += t_val
    assert torch.allclose(q, absorbing, atol=1e-15)
    rows, z0 = _batch(seed, b=4)
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(4, generator=g) * 0.9 + 0.05
    nz = noise_latent(z0, t, Knobs(0.0, 0.0, 1.0, kernel), g, _net())
    lab = labels(nz.z0, nz.zt, nz.noised)
    x0, lengths = pad_rows(rows, PAD)
    assert torch.equal(lab.rows.lengths, lengths)
    masked = lab.rows.tokens == MASK
    assert torch.equal(lab.rows.tokens, torch.where(masked, torch.full_like(x0, MASK), x0))
    assert torch.equal(masked, lab.sub_mask) and not bool(lab.delete.any()) and not bool((lab.ins_count > 0).any())
    net = _net()
    _, parts = edit_loss(net, lab, normalizer=4 * N / 2)
    sub, _, _ = net(lab.rows.tokens, lab.rows.lengths)
    ref = masked_diffusion_loss(sub, x0.clamp(0, K - 1), masked, t, "none", normalizer=4 * N / 2)
    assert torch.allclose(parts["sub"], ref, rtol=1e-6, atol=1e-7)
    _, parts = edit_loss(net, lab, normalizer=4 * N / 2, t=t, weighting="elbo")
    ref = masked_diffusion_loss(sub, x0.clamp(0, K - 1), masked, t, "elbo", normalizer=4 * N / 2)
    assert torch.allclose(parts["sub"], ref, rtol=1e-6, atol=1e-7)
    # negative controls on four full-length rows (56 residues) at t = 0.95: P(no deletion) = 0.715^56 < 1e-8,
    # P(no residue-changing draw) = (1 - 0.95 * 0.5 * 0.95)^56 < 1e-7
    g2 = torch.Generator().manual_seed(seed)
    long = align(torch.randint(0, K, (4, N // 2), generator=g2), torch.full((4,), N // 2),
                 random_alignment(torch.full((4,), N // 2), N, g2), GAP)
    big = torch.full((4,), 0.95)
    with_del = noise_latent(long, big, Knobs(0.3, 0.0, 1.0, kernel), g2, _net())
    assert not torch.equal((with_del.zt != GAP).sum(1), torch.full((4,), N // 2))
    half = noise_latent(long, big, Knobs(0.0, 0.0, 0.5, "uniform"), g2)
    assert bool(((half.zt != long) & (half.zt < K)).any())


@invariant("oracle-labels-replay")
@settings(deadline=None, max_examples=30)
@given(seeds, st.sampled_from(["uniform", "blosum62", "contextual"]), st.floats(0.05, 1.0))
def oracle_labels_replay(seed, kernel, t_val):
    """The del / ins / sub labels of (z_0, z_t) are consistent with z_0: deleting the tokens whose latent source is
    φ, inserting ``ins_count[g]`` residues into every gap g (those of z_0 missing there) and substituting the
    noised residue-sourced tokens by their targets turns x_t into x_0 exactly (for every kernel and t). The del
    label is 1 iff the source is φ. Negative control: reading the insertion counts one gap to the right (an
    insertion *left* of the token instead of right) does not reproduce x_0 for some row."""
    rows, z0 = _batch(seed, b=6)
    g = torch.Generator().manual_seed(seed)
    nz = noise_latent(z0, torch.full((6,), t_val), Knobs(0.3, 0.2, 0.5, kernel), g, _net())
    lab = labels(nz.z0, nz.zt, nz.noised)
    for i, x in enumerate(rows):
        assert oracle_replay(lab, z0, i) == x.tolist()
        n = int(lab.rows.lengths[i])
        src = z0[i, lab.rows.positions[i, :n]]
        assert torch.equal(lab.delete[i, :n], src == GAP)
    shifted = dataclasses.replace(lab, ins_count=torch.roll(lab.ins_count, 1, dims=1))
    failures = 0
    for i, x in enumerate(rows):
        try:
            failures += oracle_replay(shifted, z0, i) != x.tolist()
        except AssertionError:
            failures += 1
    assert failures > 0 or not bool((lab.ins_count > 0).any())


@invariant("edit-trajectories-replay")
@settings(deadline=None, max_examples=12)
@given(seeds, st.sampled_from(["de-novo", "evolve", "post-edit"]))
def edit_trajectories_replay(seed, mode):
    """Every sampler's trajectory replays to its output: applying the recorded deletions, insertions and
    substitutions to the initial row gives the final row; each step changes the length by #ins − #del; no row
    exceeds the 2L latent; no mask remains at the end. Low thresholds on a random network force deletions and
    insertions. Negative control: the same trajectory with its last step dropped does not replay to the output
    whenever that step edited something. The samplers' spec settings are exercised: de novo with ancestral
    stochastic edits (masks deletable), evolve with Bernoulli edits and the forward kernel's re-noise indels
    (recorded as ``forward`` steps), post-edit with thresholds."""
    g = torch.Generator().manual_seed(seed)
    start = "#" * 8 if mode == "de-novo" else to_text(torch.randint(0, K, (10,), generator=g).tolist())
    cfg = EditConfig(steps=4, tau_del=0.45, tau_ins=0.45, tau_sub=0.1 if mode == "post-edit" else 0.0,
                     renoise_fraction=0.2 if mode == "evolve" else 0.0, temperature=0.0 if mode == "post-edit" else 1.0,
                     max_length=N, stochastic_edits=mode != "post-edit", ancestral=mode == "de-novo",
                     renoise_omega_del=0.5 if mode == "evolve" else 0.0, renoise_omega_ins=0.5 if mode == "evolve" else 0.0)
    final, traj, stats = edit_row(_net(), from_text(start), cfg, g)
    out = to_text(final)
    assert replay(start, traj) == out and "#" not in out and len(out) <= N
    n = len(start)
    for stp in traj:
        n += len(stp.inserted) - len(stp.deleted)
    assert n == len(out)
    if traj[-1].deleted or traj[-1].inserted or traj[-1].substituted:
        try:
            assert replay(start, traj[:-1]) != out
        except ValueError:
            pass


def edits_outside_noisy_set(before: list[int], step, noisy: list[bool]) -> list[str]:
    """The recorded deletions and insertions of one step that touch no site of ``N_t`` (``noisy``, per token of
    ``before``): a deleted token outside ``N_t``, or an inserted mask whose left neighbour in ``before`` (the
    nearest token left of it, deleted ones included, since a deletion merges gaps) is outside ``N_t``."""
    bad = [f"deleted token {k}" for k in step.deleted if not noisy[k]]
    kept = [k for k in range(len(before)) if k not in set(step.deleted)]
    bounds = [-1] + kept + [len(before)]
    for gi in step.inserted:  # gap gi of the row after deletion merges old gaps bounds[gi] + 1 .. bounds[gi + 1]
        lefts = range(bounds[gi], bounds[gi + 1])  # old tokens whose right gap was merged into gap gi
        if not any(j >= 0 and noisy[j] for j in lefts):
            bad.append(f"inserted gap {gi}")
    return bad


@invariant("edits-stay-in-the-noisy-set")
@settings(deadline=None, max_examples=12)
@given(seeds, st.booleans())
def edits_stay_in_the_noisy_set(seed, stochastic):
    """With ``edit_sites="noisy"`` (the note's loop: localise ``N_t``, then delete / insert at its sites; note
    Sec. 7: "non-noisy positions are unchanged") every deletion removes a token of ``N_t`` (a mask, or a residue
    with own ``p_sub < τ_sub``) and every inserted mask lies right of a token of ``N_t``, with Bernoulli or threshold
    edits, on a random network whose heads fire often. ``N_t`` is recomputed from the row before each step
    (:func:`.editing.noisy_set`). Negative control: ``edit_sites="all"`` with zero thresholds on the same row edits
    outside ``N_t``."""
    from .editing import _heads, noisy_set

    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, K, (12,), generator=g).tolist()
    for k in torch.randperm(12, generator=g)[:3].tolist():
        start[k] = MASK
    cfg = EditConfig(steps=4, tau_del=0.3, tau_ins=0.3, tau_sub=0.03, renoise_fraction=0.2, max_length=N,
                     stochastic_edits=stochastic, edit_sites="noisy")
    _, traj, _ = edit_row(_net(), list(start), cfg, g)
    row, edits = to_text(start), 0
    for stp in traj:
        before = from_text(row)
        noisy = noisy_set(before, _heads(_net(), before)[0], cfg.tau_sub)
        assert not edits_outside_noisy_set(before, stp, noisy), (row, stp)
        edits += len(stp.deleted) + len(stp.inserted)
        row = replay(row, [stp])
    assert edits > 0  # the heads of a random network fire often (p_del, p_ins ~ 0.1 - 0.7)
    wrong = dataclasses.replace(cfg, edit_sites="all", tau_del=0.0, tau_ins=0.0, stochastic_edits=False, steps=1)
    _, traj, _ = edit_row(_net(), list(start), wrong, torch.Generator().manual_seed(seed))
    noisy = noisy_set(start, _heads(_net(), start)[0], cfg.tau_sub)
    assert edits_outside_noisy_set(start, traj[0], noisy)


@invariant("scoring-antisymmetry-zero-on-wt")
@settings(deadline=None, max_examples=20)
@given(seeds)
def scoring_antisymmetry(seed):
    """Wild-type-marginal scores are 0 for a → a and antisymmetric: from the same wild-type context, the score of
    a → b at site i is minus that of b → a (log p_sub(b) − log p_sub(a)); the masked-marginal scores are too.
    Negative control: scoring a → b by log p_sub(b) alone (no reference residue) is neither zero on the wild type
    nor antisymmetric."""
    g = torch.Generator().manual_seed(seed)
    wt = torch.randint(0, K, (int(torch.randint(4, 14, (1,), generator=g)),), generator=g)
    for lp in (wt_marginal(_net(), wt), masked_marginal(_net(), wt)):
        s = mutant_scores(lp, wt)
        assert torch.equal(s[torch.arange(len(wt)), wt], torch.zeros(len(wt), dtype=s.dtype))
        i = int(torch.randint(0, len(wt), (1,), generator=g))
        a, b = int(wt[i]), int(torch.randint(0, K, (1,), generator=g))
        pair = lambda x, y: float(lp[i, y] - lp[i, x])  # noqa: E731
        assert abs(pair(a, b) + pair(b, a)) < 1e-12 and abs(pair(a, b) - float(s[i, b])) < 1e-12
        wrong = lambda x, y: float(lp[i, y])  # noqa: E731
        assert abs(wrong(a, a)) > 1e-9 and abs(wrong(a, b) + wrong(b, a)) > 1e-9
