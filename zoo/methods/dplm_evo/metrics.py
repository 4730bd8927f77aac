"""Metric checks ``fn(pipeline, ...) -> float`` on the toy variants, shared with ``zoo bench dplm-evo``.

* mutation-effect Spearman: every single substitution of the family's held-out wild types (never trained on),
  model score vs the exact ``Δf`` of the landscape (:mod:`.family`), mean over wild types;
* loop-indel rate: of the indels of simulated-evolution outputs relative to their start rows (family members;
  an edit-distance alignment, :func:`net_indels`), the fraction placed in the loop (``LEFT <= index < length −
  RIGHT`` for a deletion, gap ``LEFT .. length − RIGHT`` for an insertion); :func:`bayes_indel_loop_share` is the
  ceiling that Bayes-optimal edit heads would reach on the same rows;
* post-editing fitness gain: start from low-fitness variants (3 random core sites of a held-out wild type
  replaced by uniform residues), run the post-edit sampler, ``f(end) − f(start)``; mean with a 95 % normal CI.
All draws are seeded, so every number is reproducible.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from registry.contract import metric_check

from .alphabet import AA, K
from .family import LEFT, RIGHT, family
from .scoring import masked_marginal, mutant_scores, single_mutant_table, spearman, wt_marginal

__all__ = ["mutation_spearman", "spearman_margin", "loop_indel_rate", "post_edit_gain", "de_novo_length_tv", "low_fitness_starts", "indel_events", "net_indels",
           "bayes_indel_loop_share", "indel_label_loop_share"]


def _memo(pipeline: Any, key: tuple, fn):
    return pipeline.memo(key, fn) if hasattr(pipeline, "memo") else fn()


def spearman_of(net, scoring: str = "wt-marginal") -> dict[str, float]:
    """Mean (and per-wild-type) Spearman of ``scoring`` ∈ {wt-marginal, masked-marginal} over the held-out wts."""
    fam = family()
    per = []
    for wt in fam.held_out:
        lp = wt_marginal(net, wt) if scoring == "wt-marginal" else masked_marginal(net, wt)
        idx, truth = single_mutant_table(wt, fam.site_log_probs(len(wt)))
        per.append(spearman(mutant_scores(lp, wt).numpy().ravel()[idx], truth))
    return {"mean": float(np.mean(per)), "min": float(np.min(per)), "per_wt": per}


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


def net_indels(initial: str, final: str) -> tuple[int, int]:
    """``(in_loop, total)`` indels of ``final`` relative to ``initial``: a minimum-edit-distance alignment
    (match 0, substitution 1, insertion / deletion 1; the traceback prefers match/substitution, then deletion,
    then insertion), each deleted residue classified by its index in ``initial`` (loop: ``LEFT <= i < n − RIGHT``),
    each inserted one by the gap of ``initial`` it falls into (loop: ``LEFT <= g <= n − RIGHT``). Edits a trajectory
    made and later undid (a forward-noise indel that the reverse heads repaired) are not indels of the output."""
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
            inside += LEFT <= i - 1 < n - RIGHT
            total, i = total + 1, i - 1
        else:
            inside += LEFT <= i <= n - RIGHT
            total, j = total + 1, j - 1
    return inside, total


def loop_indel_rate_of(sampler, starts: list[str], seed: int = 0) -> dict[str, float]:
    """Net indels of the outputs relative to their start rows (:func:`net_indels`, the metric) and, for reference,
    every indel event of the trajectories (:func:`indel_events`; forward-noise events included)."""
    out = sampler(sequences=starts, seed=seed)
    inside = total = ev_in = ev_total = 0
    for s, f, tr in zip(out.initial, out.sequences, out.trajectories):
        a, b = net_indels(s, f)
        inside, total = inside + a, total + b
        a, b = indel_events(s, tr)
        ev_in, ev_total = ev_in + a, ev_total + b
    lengths = [len(x) for x in out.sequences]
    return {"rate": inside / total if total else float("nan"), "indels": total, "in_loop": inside,
            "event_rate": ev_in / ev_total if ev_total else float("nan"), "events": ev_total,
            "rows": len(starts), "mean_length": float(np.mean(lengths))}


def bayes_indel_loop_share(starts: list, fam=None) -> dict[str, float]:
    """How much of the *Bayes-optimal* indel posterior on clean rows lies in the loop: the ceiling of any sampler
    whose edit heads are a model of the data law. The family's law is exactly ``p(x) ∝ exp f(x)`` (roots are drawn
    from the PWM / loop / length factors of ``f`` and the Metropolis–Hastings moves leave ``exp f`` invariant), so
    the single-event posteriors of the heads on a clean row ``x`` are closed forms (uniform insertion law):
    ``p_del(k) ∝ exp f(x without k) / 20`` (token ``k`` was a noise insertion) and
    ``p_ins(g) ∝ Σ_b exp f(x with b at gap g)`` (a residue was deleted from gap ``g``). Returns the loop shares of
    the summed deletion and insertion posterior mass over ``starts`` (index lists), and their mean."""
    fam = fam or family()
    dl = da = il = ia = 0.0
    for x in starts:
        x, n = [int(v) for v in x], len(x)
        f0 = fam.fitness(x)
        for k in range(n):
            fy = fam.fitness(x[:k] + x[k + 1:])
            w = math.exp(fy - f0) / K if math.isfinite(fy) else 0.0
            da, dl = da + w, dl + w * (LEFT <= k < n - RIGHT)
        for g in range(n + 1):
            fs = [fam.fitness(x[:g] + [b] + x[g:]) for b in range(K)]
            w = sum(math.exp(v - f0) for v in fs if math.isfinite(v))
            ia, il = ia + w, il + w * (LEFT <= g <= n - RIGHT)
    out = {"del": dl / da if da else float("nan"), "ins": il / ia if ia else float("nan")}
    out["mean"] = 0.5 * (out["del"] + out["ins"])
    return out


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
    out = sampler(sequences=starts, seed=seed)
    f0 = np.array([fam.fitness(s) for s in starts])
    f1 = np.array([fam.fitness(s) for s in out.sequences])
    ok = np.isfinite(f1)
    gain = f1[ok] - f0[ok]
    se = float(gain.std(ddof=1) / math.sqrt(len(gain))) if len(gain) > 1 else float("nan")
    return {"mean_gain": float(gain.mean()) if len(gain) else float("nan"), "ci95": 1.96 * se, "valid": float(ok.mean()),
            "start_mean": float(f0.mean()), "end_mean": float(f1[ok].mean()) if ok.any() else float("nan"),
            "edits": float(np.mean([st["edits"] for st in out.stats])), "f0": f0.tolist(), "f1": f1.tolist()}


@metric_check
def mutation_spearman(pipeline: Any, scoring: str = "wt-marginal", role: str = "net") -> float:
    """Mean Spearman (over the held-out wild types) between ``scoring`` scores and the exact ``Δf``."""
    net = pipeline.models[role]
    return _memo(pipeline, ("dplm_evo.spearman", scoring, role), lambda: spearman_of(net, scoring))["mean"]


@metric_check
def loop_indel_rate(pipeline: Any, sampler: str = "evolve", n: int = 32, seed: int = 0) -> float:
    """Fraction of the net indels (output vs start, :func:`net_indels`) of ``n`` simulated-evolution runs from family
    members that lie in the loop."""
    starts = ["".join(AA[v] for v in s) for s in family().train[:: max(1, len(family().train) // n)][:n]]
    return _memo(pipeline, ("dplm_evo.loop", sampler, n, seed),
                 lambda: loop_indel_rate_of(pipeline.samplers[sampler], starts, seed))["rate"]


def de_novo_length_tv_of(sampler, n: int = 64, seed: int = 0) -> dict:
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


@metric_check
def de_novo_length_tv(pipeline: Any, sampler: str = "de-novo", n: int = 64, seed: int = 0) -> float:
    """TV distance between the de novo samples' length law and the family's (lower is better)."""
    return _memo(pipeline, ("dplm_evo.len", sampler, n, seed), lambda: de_novo_length_tv_of(pipeline.samplers[sampler], n, seed))["tv"]


@metric_check
def post_edit_gain(pipeline: Any, sampler: str = "post-edit", n: int = 64, seed: int = 0) -> float:
    """Mean fitness gain ``f(end) − f(start)`` of post-editing ``n`` low-fitness variants."""
    return _memo(pipeline, ("dplm_evo.post", sampler, n, seed), lambda: post_edit_gain_of(pipeline.samplers[sampler], n, seed))["mean_gain"]


@metric_check
def spearman_margin(pipeline: Any, role: str = "net", baseline_role: str = "net_masked") -> float:
    """DPLM-Evo's wild-type-marginal Spearman minus the masked baseline's masked-marginal Spearman, in one run
    (the paper's claim: >= 0)."""
    evo = mutation_spearman(pipeline, "wt-marginal", role)
    return evo - mutation_spearman(pipeline, "masked-marginal", baseline_role)
