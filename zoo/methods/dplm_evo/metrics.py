"""Metric checks ``fn(pipeline, ...) -> float`` on the toy variants, shared with ``zoo bench dplm-evo``.

* mutation-effect Spearman: every single substitution of the family's held-out wild types (never trained on),
  model score vs the exact ``Δf`` of the landscape (:mod:`.family`), mean over wild types;
* loop-indel rate: of all deletions and insertions in simulated-evolution trajectories started from family
  members, the fraction placed in the loop (``LEFT <= index < length − RIGHT`` for a deletion, gap
  ``LEFT .. length − RIGHT`` for an insertion);
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

__all__ = ["mutation_spearman", "spearman_margin", "loop_indel_rate", "post_edit_gain", "low_fitness_starts", "indel_events"]


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


def loop_indel_rate_of(sampler, starts: list[str], seed: int = 0) -> dict[str, float]:
    out = sampler(sequences=starts, seed=seed)
    inside = total = 0
    for s, tr in zip(out.initial, out.trajectories):
        a, b = indel_events(s, tr)
        inside, total = inside + a, total + b
    lengths = [len(x) for x in out.sequences]
    return {"rate": inside / total if total else float("nan"), "indels": total, "in_loop": inside,
            "rows": len(starts), "mean_length": float(np.mean(lengths))}


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
    """Fraction of the indels of ``n`` simulated-evolution runs (from family members) placed in the loop."""
    starts = ["".join(AA[v] for v in s) for s in family().train[:: max(1, len(family().train) // n)][:n]]
    return _memo(pipeline, ("dplm_evo.loop", sampler, n, seed),
                 lambda: loop_indel_rate_of(pipeline.samplers[sampler], starts, seed))["rate"]


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
