"""Metric checks ``fn(pipeline, ...) -> float`` on the toy variants, shared with ``zoo bench dplm-evo``.

* mutation-effect Spearman: every single substitution of 256 fresh wild types drawn from the family's law
  (:mod:`.evaluation`), model score vs the exact ``Δf`` of the landscape (:mod:`.family`), mean over wild types;
  on either toy family (``family="conserved-core"`` or ``"mutation-bias"``);
* loop-indel rate: of the indels of simulated-evolution outputs relative to their start rows (family members;
  read from the recorded trajectories, :func:`provenance_indels`), the fraction placed in the loop (``LEFT <= index < length −
  RIGHT`` for a deletion, gap ``LEFT .. length − RIGHT`` for an insertion); :func:`bayes_indel_loop_share` is where
  Bayes-optimal edit heads would put their mass on the same clean rows (a per-sample diagnostic, not a bound);
* post-editing fitness gain: start from low-fitness variants (3 random core sites of a held-out wild type
  replaced by uniform residues), run the post-edit sampler, ``f(end) − f(start)``; mean with a 95 % normal CI.
All draws are seeded, so every number is reproducible.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from registry.contract import metric_check
from zoo.common import rows

from .alphabet import AA, K
from .family import LEFT, RIGHT, family
from .model import MASK
from .params import (
    DeNovoLengthTvParams,
    LoopIndelRateParams,
    MutationSpearmanParams,
    OracleMutationSpearmanParams,
    PostEditGainParams,
    SpearmanMarginParams,
)
from .scoring import masked_marginal, mutant_scores, single_mutant_table, spearman, wt_marginal

__all__ = ["mutation_spearman", "spearman_margin", "oracle_mutation_spearman", "loop_indel_rate", "post_edit_gain",
           "de_novo_length_tv", "low_fitness_starts", "indel_events", "independent_rows", "provenance_indels", "net_indels", "net_indels_traceback", "indel_posterior", "IndelPosterior",
           "bayes_indel_loop_share", "head_indel_loop_share", "indel_label_loop_share", "scoring_diagnostics",
           "ConstantEditHeads", "BayesPlacedEditHeads", "log_marginal", "length_tv_noise_floor"]


def _memo(pipeline: Any, key: tuple, fn):
    return pipeline.memo(key, fn) if hasattr(pipeline, "memo") else fn()


def spearman_of(net, scoring: str = "wt-marginal", family_name: str = "conserved-core",
                wild_types: int | str = 256) -> dict:
    """Mean, standard error, minimum and per-wild-type Spearman of ``scoring`` ∈ {wt-marginal, masked-marginal}
    over ``wild_types`` fresh wild types of the toy family ``family_name`` (``"held-out"``: its 8 held-out wild
    types, the first version's set; :func:`.evaluation.wild_types_of`)."""
    from .evaluation import spearman_per_wt, summarize, wild_types_of
    from .family import named_family

    fam = named_family(family_name)
    return summarize(spearman_per_wt(net, scoring, fam, wild_types_of(fam, wild_types)))


def scoring_diagnostics(net) -> dict[str, float]:
    """Why wild-type-marginal scoring ties masked-marginal scoring (a diagnostic for the bench, not a metric).

    The substitution head is trained only where an observed letter is a noise draw (:func:`.noise.edit_loss`), so
    at an observed letter ``a`` it learns ``p(z_0 = b | a, context) ∝ p(b | context) · T_sub(a | b, context)``.
    With a kernel whose draw does not depend on the source residue — uniform, or the contextual kernel, which masks
    the site and reads the network's prediction (arXiv 2605.00182, Sec. "contextualised kernel") — the ``T_sub``
    factor is constant in ``b``, so the Bayes-optimal head ignores the letter it is shown and returns
    ``p(b | context)``: the quantity the masked marginal reads. BLOSUM62's ``T(a | b)`` does depend on ``b``.
    Returns, averaged over the conserved-core family's 8 held-out wild types: the Spearman between the net's
    wt-marginal and masked-marginal single-mutant scores (``agreement``), and the mean total variation of the
    head's distribution at a site across the 20 letters shown there, from its mean (``letter_tv``; 0 = the head
    ignores the shown letter)."""
    import torch

    from .scoring import _logp

    fam = family()
    agree, tv = [], []
    for wt in fam.held_out:
        idx, _ = single_mutant_table(wt, fam.site_log_probs(len(wt)))
        a = mutant_scores(wt_marginal(net, wt), wt).numpy().ravel()[idx]
        b = mutant_scores(masked_marginal(net, wt), wt).numpy().ravel()[idx]
        agree.append(spearman(a, b))
        x = torch.as_tensor(wt, dtype=torch.long)
        for i in range(len(wt)):
            shown = x[None].repeat(K, 1)  # every letter at site i
            shown[:, i] = torch.arange(K)
            pr = _logp(net, shown)[:, i].exp()
            tv.append(float(0.5 * (pr - pr.mean(0)).abs().sum(-1).mean()))
    return {"agreement": float(np.mean(agree)), "letter_tv": float(np.mean(tv))}


def indel_events(initial: str, trajectory: list[dict]) -> tuple[int, int]:
    """``(in_loop, total)`` deletions + insertions of one trajectory, classified at the time of the edit."""
    n = len(initial)
    inside = total = 0
    for st in trajectory:
        for k in st["deleted"]:
            inside += LEFT <= k < n - RIGHT
            total += 1
        n -= len(st["deleted"])
        for gi in st["inserted"]:
            inside += LEFT <= gi <= n - RIGHT
            total += 1
        n += len(st["inserted"])
    return inside, total


@dataclass(frozen=True)
class IndelPosterior:
    """Expected indels of ``final`` relative to ``initial`` under the uniform law on minimum-cost alignments:
    ``deletions[i]`` = fraction of optimal alignments that delete ``initial[i]``; ``insertions[g]`` = expected number
    of residues inserted into gap ``g`` of ``initial`` (before ``initial[g]``; ``g = n`` is the end);
    ``paths`` = number of optimal alignments; ``cost`` = the edit distance."""

    deletions: np.ndarray
    insertions: np.ndarray
    paths: int
    cost: int


def indel_posterior(initial: str, final: str, fewest_indels: bool = False) -> IndelPosterior:
    """Exact edge marginals of the uniform distribution over all minimum-cost alignments (match 0, substitution 1,
    insertion / deletion 1) of ``initial`` to ``final``, by forward/backward dynamic programming on the edit graph.

    Nodes ``(i, j)`` (prefixes of length ``i`` of ``initial`` and ``j`` of ``final``); ``D`` / ``E`` the minimum cost
    from ``(0, 0)`` / to ``(n, m)``; ``F`` / ``B`` the number of minimum-cost paths from ``(0, 0)`` / to ``(n, m)``
    (Python ints: exact). An edge ``u → v`` of cost ``c`` lies on an optimal path iff ``D[u] + c + E[v] = D[n, m]``,
    and then on ``F[u] · B[v]`` of the ``F[n, m]`` optimal paths. Deletion edges ``(i, j) → (i + 1, j)`` remove
    ``initial[i]``; insertion edges ``(i, j) → (i, j + 1)`` insert ``final[j]`` into gap ``i``. Per-position numerators
    are summed as ints and divided once, so the result is exact up to the final rounding (and a relabelling of the
    positions, e.g. reversing both strings, gives bit-identical values). Every optimal path has
    ``#del − #ins = n − m``, hence ``deletions.sum() − insertions.sum() = n − m`` exactly in expectation.

    ``fewest_indels=True`` (a diagnostic, not the metric): costs are compared as pairs ``(edit cost, #indels)``, i.e.
    the uniform law on those minimum-cost alignments that have the fewest indels (a deletion + insertion pair
    costs 2, the same as two substitutions, so the plain law also counts alignments that re-read two substitutions
    as a shifted register)."""
    n, m = len(initial), len(final)
    big = (n + m + 1, n + m + 1)
    step = (1, 1) if fewest_indels else (1, 0)  # an indel's (cost, indel count) contribution

    def diag(a: str, b: str) -> tuple[int, int]:
        return (int(a != b), 0)

    def add(u: tuple[int, int], v: tuple[int, int]) -> tuple[int, int]:
        return (u[0] + v[0], u[1] + v[1])

    D = [[big] * (m + 1) for _ in range(n + 1)]
    F = [[0] * (m + 1) for _ in range(n + 1)]
    D[0][0], F[0][0] = (0, 0), 1
    for i in range(n + 1):
        for j in range(m + 1):
            if i == j == 0:
                continue
            cands = []
            if i and j:
                cands.append((add(D[i - 1][j - 1], diag(initial[i - 1], final[j - 1])), F[i - 1][j - 1]))
            if i:
                cands.append((add(D[i - 1][j], step), F[i - 1][j]))
            if j:
                cands.append((add(D[i][j - 1], step), F[i][j - 1]))
            best = min(c for c, _ in cands)
            D[i][j], F[i][j] = best, sum(k for c, k in cands if c == best)
    E = [[big] * (m + 1) for _ in range(n + 1)]
    B = [[0] * (m + 1) for _ in range(n + 1)]
    E[n][m], B[n][m] = (0, 0), 1
    for i in range(n, -1, -1):
        for j in range(m, -1, -1):
            if i == n and j == m:
                continue
            cands = []
            if i < n and j < m:
                cands.append((add(E[i + 1][j + 1], diag(initial[i], final[j])), B[i + 1][j + 1]))
            if i < n:
                cands.append((add(E[i + 1][j], step), B[i + 1][j]))
            if j < m:
                cands.append((add(E[i][j + 1], step), B[i][j + 1]))
            best = min(c for c, _ in cands)
            E[i][j], B[i][j] = best, sum(k for c, k in cands if c == best)
    cost, total = D[n][m], F[n][m]
    dels, ins = [0] * n, [0] * (n + 1)
    for i in range(n + 1):
        for j in range(m + 1):
            if i < n and add(add(D[i][j], step), E[i + 1][j]) == cost:
                dels[i] += F[i][j] * B[i + 1][j]
            if j < m and add(add(D[i][j], step), E[i][j + 1]) == cost:
                ins[i] += F[i][j] * B[i][j + 1]
    return IndelPosterior(np.array([v / total for v in dels], dtype=np.float64),
                          np.array([v / total for v in ins], dtype=np.float64), total, cost[0])


def net_indels(initial: str, final: str, left: int = LEFT, right: int = RIGHT,
               fewest_indels: bool = False) -> tuple[float, float]:
    """``(in_loop, total)`` *expected* indels of ``final`` relative to ``initial``: the mean over all minimum-cost
    alignments (match 0, substitution 1, insertion / deletion 1), uniformly weighted (:func:`indel_posterior`).
    A deleted residue is classified by its index in ``initial`` (loop: ``left <= i < n − right``), an inserted one
    by the gap of ``initial`` it falls into (loop: ``left <= g <= n − right``). Edits a trajectory made and later
    undid (a forward-noise indel that the reverse heads repaired) are not indels of the output.

    Why an expectation: the output does not say which of several co-optimal alignments "happened" (deleting
    either ``A`` of ``AAB`` gives ``AB``), and a fixed traceback (:func:`net_indels_traceback`, the first version)
    is a biased tie-break — it always takes the same end of a run of equal letters, which on the toy moves loop
    indels next to a core residue of the same letter across the left core boundary. The uniform average has no
    preference for loop or core (it is invariant under reversing both strings with the loop bounds mirrored), and
    it equals the fixed traceback whenever the optimal alignment is unique. ``fewest_indels``: the diagnostic of
    :func:`indel_posterior` (not the metric)."""
    post = indel_posterior(initial, final, fewest_indels)
    n = len(initial)
    loop_del = post.deletions[left:max(left, n - right)].sum()
    loop_ins = post.insertions[left:max(left, n - right + 1)].sum()
    return float(loop_del + loop_ins), float(post.deletions.sum() + post.insertions.sum())


def net_indels_traceback(initial: str, final: str, left: int = LEFT, right: int = RIGHT) -> tuple[int, int]:
    """Reference only (the metric's first version; :func:`provenance_indels` is the metric): ``(in_loop, total)`` indels
    of ``final`` relative to ``initial`` along *one* minimum-edit-distance alignment
    (match 0, substitution 1, insertion / deletion 1; the traceback prefers match/substitution, then deletion,
    then insertion), each deleted residue classified by its index in ``initial`` (loop: ``left <= i < n − right``),
    each inserted one by the gap of ``initial`` it falls into (loop: ``left <= g <= n − right``). Edits a trajectory
    made and later undid (a forward-noise indel that the reverse heads repaired) are not indels of the output. The
    fixed tie-break is biased: among co-optimal alignments it moves an indel to the left end of a run of equal
    letters, e.g. across the left core boundary."""
    n, m = len(initial), len(final)
    d = np.zeros((n + 1, m + 1), dtype=np.int64)
    d[:, 0], d[0, :] = np.arange(n + 1), np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = min(d[i - 1, j - 1] + (initial[i - 1] != final[j - 1]), d[i - 1, j] + 1, d[i, j - 1] + 1)
    i, j, inside, total = n, m, 0, 0
    while i > 0 or j > 0:
        if i > 0 and j > 0 and d[i, j] == d[i - 1, j - 1] + (initial[i - 1] != final[j - 1]):
            i, j = i - 1, j - 1
        elif i > 0 and d[i, j] == d[i - 1, j] + 1:
            inside += left <= i - 1 < n - right
            total, i = total + 1, i - 1
        else:
            inside += left <= i <= n - right
            total, j = total + 1, j - 1
    return inside, total


def provenance_indels(initial: str, trajectory: list[dict], left: int = LEFT, right: int = RIGHT) -> tuple[float, float]:
    """``(in_loop, total)`` net indels read from the recorded trajectory instead of an alignment (the metric of
    :func:`loop_indel_rate`): every residue is tagged with its origin (an index of ``initial`` or "inserted") while the edits
    are replayed; the net deletions are the residues of ``initial`` that do not survive (loop: ``left <= i <
    n − right``), the net insertions the inserted residues that do (edits undone later, e.g. an inserted mask that
    is deleted again, count nowhere; substitutions never change a tag). A surviving inserted residue lies in gap
    ``g`` of ``initial`` with ``l < g <= r`` for its nearest surviving original neighbours ``l`` (left, −1 if none)
    and ``r`` (right, ``n`` if none); when the neighbours' deletion leaves several candidate gaps it is split
    uniformly over them (no left/right preference)."""
    n = len(initial)
    tags: list[int] = list(range(n))  # -1: inserted
    for st in trajectory:
        for k in sorted(st["deleted"], reverse=True):
            del tags[k]
        for gi in sorted(st["inserted"], reverse=True):
            tags.insert(gi, -1)
    kept = {t for t in tags if t >= 0}
    inside = float(sum(left <= i < n - right for i in range(n) if i not in kept))
    total = float(n - len(kept))
    last = -1
    for pos, t in enumerate(tags):
        if t >= 0:
            last = t
            continue
        nxt = next((u for u in tags[pos + 1:] if u >= 0), n)
        gaps = range(last + 1, nxt + 1)
        inside += sum(left <= g <= n - right for g in gaps) / len(gaps)
        total += 1.0
    return inside, total


def independent_rows(sampler, starts: list[str], seed: int = 0):
    """Run ``sampler`` on ``starts`` with an independent random stream per row (:func:`zoo.common.rows.row_seed`)
    and gather the rows into one output. Why: the samplers seed every row of a call with the same ``seed`` (so a
    row in a batch equals the row alone), so the rows of one call share their uniforms and are strongly
    correlated; a population statistic over them has the effective size of a few draws (measured: one call over
    512 starts gave loop-indel rates 0.94 / 0.68 / 0.50 / 0.62 for seeds 0 – 3)."""
    return rows.independent_rows(lambda s, row_seed: sampler(sequences=[s], seed=row_seed), starts, seed)


class ConstantEditHeads(torch.nn.Module):
    """``net`` with its deletion and insertion heads replaced by one constant probability ``p`` (substitution head
    unchanged): the control that tells where the editing loop lets edits happen (the noisy set) from where the
    trained heads put them."""

    def __init__(self, net: torch.nn.Module, p: float):
        super().__init__()
        self.net, self.logit = net, math.log(p / (1.0 - p))

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor):
        sub, dl, il = self.net(tokens, lengths)
        return sub, torch.full_like(dl, self.logit), torch.full_like(il, self.logit)


def _law_is_exp_f(fam) -> None:
    """The Bayes-placement closed forms below read the law as ``∝ exp f``: true of the conserved-core family only."""
    if fam.log_mu is not None:
        raise ValueError("this closed form assumes the family's law is proportional to exp(f): the conserved-core "
                         "family, not the mutation-bias one")


def log_marginal(fam, x: list[int]) -> float:
    """``log Σ exp f`` over the letters of the masked sites of ``x`` (``MASK`` entries): ``f`` factorises over the
    positions of a given length and every row of :meth:`.family.Family.site_log_probs` sums to one, so a masked
    site contributes 0; ``-inf`` for a length outside the family's."""
    _law_is_exp_f(fam)
    loop = len(x) - LEFT - RIGHT
    if loop not in fam.log_len:
        return float("-inf")
    rows_ = fam.site_log_probs(len(x))
    return float(sum(rows_[i, a] for i, a in enumerate(x) if a < K) + fam.log_len[loop])


class BayesPlacedEditHeads(torch.nn.Module):
    """``net`` with its deletion / insertion mass *placed* by the family's exact law: per row, the trained heads'
    total ``Σ_k p_del(k)`` (and ``Σ_g p_ins(g)``) is spread over the tokens (gaps) in proportion to the
    single-event posterior of :func:`bayes_indel_loop_share`, with masks summed out (:func:`log_marginal`):
    ``p_del(k) ∝ exp f(x without k)`` and ``p_ins(g) ∝ Σ_b exp f(x with b at g) = exp f(x with a mask at g)``.
    The substitution head is ``net``'s, and it decides the noisy set, so the rate this control reaches is ``net``'s
    own reference, not a bound on other models. The control that asks where ideal heads would put the trained heads'
    edits, with the sampler unchanged."""

    def __init__(self, net: torch.nn.Module, fam=None):
        super().__init__()
        self.net, self.fam = net, fam or family()
        _law_is_exp_f(self.fam)

    @staticmethod
    def _place(total: float, log_w: list[float]) -> torch.Tensor:
        w = torch.tensor(log_w, dtype=torch.float64)
        if not bool(torch.isfinite(w).any()):
            return torch.full_like(w, -30.0)
        p = (total * torch.softmax(w, 0)).clamp(1e-13, 1 - 1e-9)
        return torch.log(p) - torch.log1p(-p)

    @torch.no_grad()
    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor):
        sub, dl_net, il_net = self.net(tokens, lengths)
        p_del, p_ins = torch.sigmoid(dl_net.double()), torch.sigmoid(il_net.double())
        dl, il = torch.full_like(p_del, -30.0), torch.full_like(p_ins, -30.0)
        for b in range(tokens.shape[0]):
            n = int(lengths[b])
            x = [int(v) for v in tokens[b, :n]]
            dl[b, :n] = self._place(float(p_del[b, :n].sum()), [log_marginal(self.fam, x[:k] + x[k + 1:]) for k in range(n)])
            il[b, : n + 1] = self._place(float(p_ins[b, : n + 1].sum()),
                                         [log_marginal(self.fam, x[:g] + [MASK] + x[g:]) for g in range(n + 1)])
        return sub, dl.to(sub.dtype), il.to(sub.dtype)


def loop_indel_rate_of(sampler, starts: list[str], seed: int = 0) -> dict[str, float]:
    """Net indels of the outputs relative to their start rows: the trajectory's own (:func:`provenance_indels`,
    ``rate_provenance``, the metric) and, for reference, the alignment-based counts: expected over all co-optimal
    alignments (:func:`net_indels`, ``rate`` = Σ expected in-loop / Σ expected total over rows), along one fixed
    traceback (:func:`net_indels_traceback`, ``rate_traceback``) and uniform over the co-optimal alignments with the
    fewest indels (``rate_fewest_indels``); and every indel event of the trajectories (:func:`indel_events`;
    forward-noise events included)."""
    out = independent_rows(sampler, starts, seed)
    inside = total = few_in = few_total = pv_in = pv_total = 0.0
    tb_in = tb_total = ev_in = ev_total = 0
    for s, f, tr in zip(out.initial, out.sequences, out.trajectories):
        a, b = net_indels(s, f)
        inside, total = inside + a, total + b
        a, b = net_indels(s, f, fewest_indels=True)
        few_in, few_total = few_in + a, few_total + b
        a, b = net_indels_traceback(s, f)
        tb_in, tb_total = tb_in + a, tb_total + b
        a, b = indel_events(s, tr)
        ev_in, ev_total = ev_in + a, ev_total + b
        a, b = provenance_indels(s, tr)
        pv_in, pv_total = pv_in + a, pv_total + b
    lengths = [len(x) for x in out.sequences]
    return {"rate": inside / total if total else float("nan"), "indels": total, "in_loop": inside,
            "rate_traceback": tb_in / tb_total if tb_total else float("nan"), "indels_traceback": tb_total,
            "in_loop_traceback": tb_in,
            "rate_fewest_indels": few_in / few_total if few_total else float("nan"), "indels_fewest_indels": few_total,
            "rate_provenance": pv_in / pv_total if pv_total else float("nan"), "indels_provenance": pv_total,
            "event_rate": ev_in / ev_total if ev_total else float("nan"), "events": ev_total,
            "rows": len(starts), "mean_length": float(np.mean(lengths))}


def _loop_shares(per_row, levels: bool = False) -> dict[str, float]:
    """Loop shares of summed per-position indel mass: ``per_row`` yields ``(n, del_w [n], ins_w [n + 1])`` (deletion
    mass on token ``k``, insertion mass on gap ``g`` = between tokens ``g − 1`` and ``g``). A deletion is in the loop
    iff ``LEFT <= k < n − RIGHT``, an insertion iff ``LEFT <= g <= n − RIGHT`` (the evolve metric's convention,
    :func:`provenance_indels`). Returns ``{"del", "ins", "mean"}``; with ``levels`` also the mean mass per loop and
    per core position (``del_loop``, ``del_core``, ``ins_loop``, ``ins_core``)."""
    dl = da = il = ia = 0.0
    nd = nd_loop = ni = ni_loop = 0
    for n, dw, iw in per_row:
        for k in range(n):
            inside = LEFT <= k < n - RIGHT
            da, dl, nd, nd_loop = da + dw[k], dl + dw[k] * inside, nd + 1, nd_loop + inside
        for g in range(n + 1):
            inside = LEFT <= g <= n - RIGHT
            ia, il, ni, ni_loop = ia + iw[g], il + iw[g] * inside, ni + 1, ni_loop + inside
    nan = float("nan")
    out = {"del": dl / da if da else nan, "ins": il / ia if ia else nan}
    out["mean"] = 0.5 * (out["del"] + out["ins"])
    if levels:
        out.update(del_loop=dl / nd_loop if nd_loop else nan, del_core=(da - dl) / (nd - nd_loop) if nd > nd_loop else nan,
                   ins_loop=il / ni_loop if ni_loop else nan, ins_core=(ia - il) / (ni - ni_loop) if ni > ni_loop else nan)
    return out


def bayes_indel_loop_share(starts: list, fam=None) -> dict[str, float]:
    """How much of the *Bayes-optimal* indel posterior on clean rows lies in the loop (a per-sample diagnostic of
    these rows, not a bound on a sampler's rate: the evolve loop edits re-noised rows, see the card). The
    conserved-core family's law is exactly ``p(x) ∝ exp f(x)`` (roots are drawn from the PWM / loop / length
    factors of ``f`` and the Metropolis–Hastings moves leave ``exp f`` invariant), so
    the single-event posteriors of the heads on a clean row ``x`` are closed forms (uniform insertion law):
    ``p_del(k) ∝ exp f(x without k) / 20`` (token ``k`` was a noise insertion) and
    ``p_ins(g) ∝ Σ_b exp f(x with b at gap g)`` (a residue was deleted from gap ``g``). Returns the loop shares of
    the summed deletion and insertion posterior mass over ``starts`` (index lists), and their mean."""
    fam = fam or family()
    _law_is_exp_f(fam)

    def rows():
        for x in starts:
            x, n = [int(v) for v in x], len(x)
            f0 = fam.fitness(x)
            fd = [fam.fitness(x[:k] + x[k + 1:]) for k in range(n)]
            dw = [math.exp(v - f0) / K if math.isfinite(v) else 0.0 for v in fd]
            iw = [sum(math.exp(v - f0) for v in (fam.fitness(x[:g] + [b] + x[g:]) for b in range(K)) if math.isfinite(v))
                  for g in range(n + 1)]
            yield n, dw, iw

    return _loop_shares(rows())


def head_indel_loop_share(net, starts: list) -> dict[str, float]:
    """Where a *trained* network's edit heads put their indel mass on clean rows, the learned counterpart of
    :func:`bayes_indel_loop_share` on the same rows and with the same loop convention: ``p_del(k)`` (sigmoid of the
    deletion head at token ``k``) and ``p_ins(g)`` (sigmoid of the right-insertion head read at gap ``g``,
    :class:`.model.DPLMEvoNet`), summed over ``starts`` (index lists); returns the loop shares ``{"del", "ins",
    "mean"}`` and the heads' mean probability per loop / core position (``del_loop``, ``del_core``, ``ins_loop``,
    ``ins_core``). A head that learned only the base rate of the uniform forward kernel scores about the loop's share
    of positions (0.31 of gaps, 0.25 of residues); the Bayes-optimal heads score 0.97 / 0.96 on the bench's 128
    evolve starts. Diagnostic (h) of docs/methods/dplm-evo.NOTES.md; :func:`.diagnostics.head_share_rows` tabulates it."""
    from .editing import _heads

    def rows():
        for x in starts:
            x = [int(v) for v in x]
            _, p_del, p_ins = _heads(net, x)
            yield len(x), p_del.tolist(), p_ins.tolist()

    return _loop_shares(rows(), levels=True)


def indel_label_loop_share(rows: int = 2048, seed: int = 0) -> dict[str, float]:
    """Where the forward kernel puts the training labels of the del/ins heads (default knobs, uniform kernel,
    ``t ~ U(0, 1]``, ``rows`` family members in uniform alignments): the fraction of noise insertions (del label 1)
    that fall inside the loop's latent span (strictly between the latent slots of the last left-core and first
    right-core residues), of noise deletions (ins label 1) that remove a loop residue, and the loop's share of
    residues and of gaps. Equal shares mean the labels carry no information on where the family varies in length."""
    import torch

    from zoo.common.varlen import align, pad_rows, random_alignment

    from .family import N_LATENT
    from .model import GAP, PAD
    from .noise import Knobs, noise_latent

    fam = family()
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, len(fam.train), (rows,), generator=g)
    tok, lengths = pad_rows([torch.tensor(fam.train[int(i)]) for i in idx], PAD)
    present = random_alignment(lengths, N_LATENT, g)
    z0 = align(tok, lengths, present, GAP)
    nz = noise_latent(z0, torch.rand(rows, generator=g).clamp_min(1e-3), Knobs(kernel="uniform"), g)
    rank = present.long().cumsum(1) - 1  # index in x_0 of each residue slot (residues left of a slot, minus one)
    after = present.long().cumsum(1)  # residues of x_0 at or left of each slot
    n = lengths[:, None]
    inserted = (nz.z0 == GAP) & (nz.zt != GAP)
    in_loop_span = (after >= LEFT) & (after <= n - RIGHT)
    deleted = (nz.z0 < K) & (nz.zt == GAP)
    loop_res = (rank >= LEFT) & (rank < n - RIGHT)
    return {"del_labels_in_loop": float((inserted & in_loop_span).sum() / inserted.sum()),
            "ins_labels_in_loop": float((deleted & loop_res).sum() / deleted.sum()),
            "loop_share_of_residues": float((lengths - LEFT - RIGHT).sum() / lengths.sum()),
            "loop_share_of_gaps": float((lengths - LEFT - RIGHT + 1).sum() / (lengths + 1).sum())}


def low_fitness_starts(n: int, seed: int = 0, sites: int = 3) -> list[str]:
    """``n`` variants of the held-out wild types with ``sites`` random core sites set to uniform residues."""
    fam = family()
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        wt = list(fam.held_out[i % len(fam.held_out)])
        core = list(range(LEFT)) + list(range(len(wt) - RIGHT, len(wt)))
        for j in rng.choice(core, size=sites, replace=False):
            wt[int(j)] = int(rng.integers(K))
        out.append("".join(AA[v] for v in wt))
    return out


def post_edit_gain_of(sampler, n: int = 64, seed: int = 0) -> dict[str, float]:
    fam = family()
    starts = low_fitness_starts(n, seed)
    out = independent_rows(sampler, starts, seed)
    f0 = np.array([fam.fitness(s) for s in starts])
    f1 = np.array([fam.fitness(s) for s in out.sequences])
    ok = np.isfinite(f1)
    gain = f1[ok] - f0[ok]
    se = float(gain.std(ddof=1) / math.sqrt(len(gain))) if len(gain) > 1 else float("nan")
    return {"mean_gain": float(gain.mean()) if len(gain) else float("nan"), "ci95": 1.96 * se, "valid": float(ok.mean()),
            "start_mean": float(f0.mean()), "end_mean": float(f1[ok].mean()) if ok.any() else float("nan"),
            "edits": float(np.mean([st["edits"] for st in out.stats])), "f0": f0.tolist(), "f1": f1.tolist()}


@metric_check(params=MutationSpearmanParams)
def mutation_spearman(pipeline: Any, scoring: str = "wt-marginal", role: str = "net", family: str = "conserved-core",
                      wild_types: int = 256) -> float:
    """Mean Spearman (over ``wild_types`` fresh wild types of the toy ``family``) between ``scoring`` scores of
    role ``role`` and the exact ``Δf``."""
    net = pipeline.models[role]
    return _memo(pipeline, ("dplm_evo.spearman", scoring, role, family, wild_types),
                 lambda: spearman_of(net, scoring, family, wild_types))["mean"]


@metric_check(params=OracleMutationSpearmanParams)
def oracle_mutation_spearman(pipeline: Any, kind: str = "law", family: str = "conserved-core", wild_types: int = 256) -> float:
    """Mean Spearman of a Bayes-limit scoring (:func:`.evaluation.oracle_log_probs`: ``law`` = the exact masked
    conditional, also the Bayes wild-type marginal of the uniform and contextual kernels; ``blosum62`` = the
    BLOSUM62 kernel's Bayes wild-type marginal) with ``Δf`` over ``wild_types`` fresh wild types of ``family``.
    Needs no network (``pipeline`` is unused): what each scoring rule reaches on the toy in the Bayes limit."""
    from .evaluation import ORACLES, oracle_spearman, wild_types_of
    from .family import named_family

    if kind not in ORACLES:
        raise ValueError(f"kind: expected one of {ORACLES}, got {kind!r}")
    fam = named_family(family)
    return oracle_spearman(fam, wild_types_of(fam, wild_types))[kind]["mean"]


_LOOP_COUNTS = {"co-optimal": "rate", "traceback": "rate_traceback", "fewest-indels": "rate_fewest_indels",
                "provenance": "rate_provenance"}


@metric_check(params=LoopIndelRateParams)
def loop_indel_rate(pipeline: Any, sampler: str = "evolve", n: int = 512, seed: int = 0, count: str = "provenance") -> float:
    """Fraction of the net indels (output vs start) of ``n`` simulated-evolution runs from family members that lie in
    the loop, read from the recorded trajectories (:func:`provenance_indels`). ``count`` picks an alignment-based
    reference instead: ``co-optimal`` (:func:`net_indels`), ``traceback`` (:func:`net_indels_traceback`) or
    ``fewest-indels`` (the diagnostic of :func:`indel_posterior`). Why provenance: with unit costs a deletion +
    insertion pair costs as much as two substitutions, so every alignment-based count invents indels; the
    negative control (dplm-masked never changes a length) gets 21.8 expected indels from the co-optimal mean and 2
    from the traceback on the bench's 64 starts, none from provenance."""
    if count not in _LOOP_COUNTS:
        raise ValueError(f"count: expected one of {sorted(_LOOP_COUNTS)}, got {count!r}")
    starts = ["".join(AA[v] for v in s) for s in family().train[:: max(1, len(family().train) // n)][:n]]
    return _memo(pipeline, ("dplm_evo.loop", sampler, n, seed),
                 lambda: loop_indel_rate_of(pipeline.procedures[sampler], starts, seed))[_LOOP_COUNTS[count]]


def de_novo_length_tv_of(sampler, n: int = 512, seed: int = 0) -> dict:
    """Total variation between the length law of ``n`` de novo samples (one generator, ``num_samples=n``) and the
    family's, plus the mean fitness (``-inf`` floored at -100) and the length counts."""
    from collections import Counter

    fam = family()
    out = sampler(seed=seed, num_samples=n)
    fam_len = Counter(len(s) for s in fam.train)
    gen_len = Counter(len(s) for s in out.sequences)
    tv = 0.5 * sum(abs(fam_len[k] / len(fam.train) - gen_len[k] / n) for k in set(fam_len) | set(gen_len))
    return {"tv": tv, "lengths": dict(sorted(gen_len.items())),
            "fitness": sum(max(fam.fitness(s), -100.0) for s in out.sequences) / n}


def length_tv_noise_floor(n: int, reps: int = 200, seed: int = 0) -> float:
    """The mean TV between the family's length law and the lengths of ``n`` draws *from that law*: what an exact
    sampler scores at ``n`` samples (the sampling noise of the TV estimate; ~0.094 at 64 draws, ~0.034 at 512 on
    this family), the floor against which a de novo length TV of ``n`` samples is read."""
    from collections import Counter

    lengths = np.array([len(s) for s in family().train])
    values, counts = np.unique(lengths, return_counts=True)
    law = counts / counts.sum()
    rng = np.random.default_rng(seed)
    tvs = []
    for _ in range(reps):
        c = Counter(rng.choice(values, size=n, p=law).tolist())
        tvs.append(0.5 * sum(abs(p - c[int(v)] / n) for v, p in zip(values, law)))
    return float(np.mean(tvs))


@metric_check(params=DeNovoLengthTvParams)
def de_novo_length_tv(pipeline: Any, sampler: str = "de-novo", n: int = 512, seed: int = 0) -> float:
    """TV distance between the de novo samples' length law and the family's (lower is better)."""
    return _memo(pipeline, ("dplm_evo.len", sampler, n, seed), lambda: de_novo_length_tv_of(pipeline.procedures[sampler], n, seed))["tv"]


@metric_check(params=PostEditGainParams)
def post_edit_gain(pipeline: Any, sampler: str = "post-edit", n: int = 64, seed: int = 0) -> float:
    """Mean fitness gain ``f(end) − f(start)`` of post-editing ``n`` low-fitness variants."""
    return _memo(pipeline, ("dplm_evo.post", sampler, n, seed), lambda: post_edit_gain_of(pipeline.procedures[sampler], n, seed))["mean_gain"]


@metric_check(params=SpearmanMarginParams)
def spearman_margin(pipeline: Any, role: str = "net", baseline_role: str = "net_masked", family: str = "conserved-core",
                    wild_types: int = 256) -> float:
    """DPLM-Evo's wild-type-marginal Spearman minus the masked baseline's masked-marginal Spearman on the same
    ``wild_types`` fresh wild types of ``family``, in one run (the paper's claim: >= 0)."""
    evo = mutation_spearman(pipeline, "wt-marginal", role, family, wild_types)
    return evo - mutation_spearman(pipeline, "masked-marginal", baseline_role, family, wild_types)
