"""Mutation-effect scoring on fresh wild types, its Bayes limits, and the training-seed spread (issue 37, item 3).

**What is scored.** Every single substitution of each wild type, model score vs the exact fitness effect ``Δf``
(:func:`.scoring.single_mutant_table`), Spearman per wild type, mean over wild types. The wild types are fresh
draws from the family's law (:func:`.family.fresh_wild_types`, :data:`WILD_TYPES` of them, paired standard
error ≈ 0.003 – 0.004 at 256 here); the first version used the family's 8 ``held_out`` wild types, whose mean
flattered DPLM-Evo (see the card).

**Bayes limits** (:func:`oracle_log_probs`). The substitution head is trained only where an observed letter is a
noise draw (:func:`.noise.edit_loss`), so at a shown letter ``a`` the Bayes-optimal head is
``p(z_0^i = b | x_t) ∝ p(z_0^i = b | x_t^{−i}) · T_sub(a | b)`` (site ``i`` noised). For the uniform kernel, and for
the contextual kernel (which masks the site and draws from the network's prediction, so its draw does not depend
on the source residue), ``T_sub(a | b)`` is constant in ``b``: the head returns ``p(z_0^i = b | x_t^{−i})``, which
is also what the same network reads at a masked site. So in the Bayes limit *a network's wild-type marginal and
its own masked marginal coincide* under these kernels, indels included. For the masked baseline (no indel noise)
that quantity is the clean law's conditional of the site given the length (:meth:`.family.Family.law_site_log_probs`,
oracle ``law``); DPLM-Evo's training inputs carry indel noise, so its version is that conditional mixed with the
chance that an indel shifted the frame — a blur the baseline does not have (not computed here). BLOSUM62's
``T(a | b)`` depends on ``b``: its Bayes head adds ``log T(a | b) − log T(a | a)``, a fixed prior (oracle
``blosum62``, frame blur ignored likewise). None reads the fitness unless the law is ``∝ exp f``; on the
mutation-bias family the law is ``∝ exp f · Π K μ(x_i)``, so each reads ``Δf + Δ log μ``.
"""
from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np
import torch

from .alphabet import K, blosum_kernel
from .family import Family, fresh_wild_types, named_family
from .scoring import marginals, mutant_scores, single_mutant_table, spearman

__all__ = ["WILD_TYPES", "ORACLES", "ROLES", "scoring_report", "wild_types_of", "spearman_per_wt", "summarize", "paired_gap", "oracle_log_probs",
           "oracle_spearman", "count_model_log_probs", "count_model_spearman", "SCORED_NETWORKS", "seed_spread"]

#: Fresh wild types per evaluation (paired standard error of a Spearman margin ≈ 0.003 – 0.004 here).
WILD_TYPES = 256
#: The Bayes-limit scorings of :func:`oracle_log_probs`.
ORACLES = ("law", "blosum62", "fitness")


def wild_types_of(fam: Family, wild_types: int | str = WILD_TYPES) -> tuple[tuple[int, ...], ...]:
    """The evaluation wild types: ``wild_types`` fresh draws from the family's law, or ``"held-out"`` for the
    family's 8 ``held_out`` wild types (the first version's set)."""
    if wild_types == "held-out":
        return fam.held_out
    if isinstance(wild_types, bool) or not isinstance(wild_types, int):
        raise ValueError(f"wild_types: expected a count or 'held-out', got {wild_types!r}")
    return fresh_wild_types(fam, wild_types)


def _spearmans(fam: Family, wts, log_probs: Iterable) -> np.ndarray:
    """Per wild type: Spearman of the single-mutant scores ``lp[i, b] − lp[i, wt_i]`` (:func:`.scoring.mutant_scores`;
    ``lp`` a tensor or an array) with the exact ``Δf``."""
    per = []
    for wt, lp in zip(wts, log_probs):
        idx, truth = single_mutant_table(wt, fam.site_log_probs(len(wt)))
        scores = mutant_scores(torch.as_tensor(lp, dtype=torch.float64), wt).numpy()
        per.append(spearman(scores.ravel()[idx], truth))
    return np.array(per)


def spearman_per_wt(net, scoring: str, fam: Family, wts) -> np.ndarray:
    """Spearman of ``net``'s ``scoring`` (``wt-marginal`` / ``masked-marginal``) single-mutant scores with the
    exact ``Δf``, one value per wild type (all wild types in one batched forward, :func:`.scoring.marginals`)."""
    return _spearmans(fam, wts, marginals(net, wts, scoring))


def summarize(per: np.ndarray) -> dict:
    """``{"mean", "se", "min", "per_wt"}`` of per-wild-type values (``se``: standard error of the mean)."""
    per = np.asarray(per, dtype=np.float64)
    se = float(per.std(ddof=1) / np.sqrt(len(per))) if len(per) > 1 else float("nan")
    return {"mean": float(per.mean()), "se": se, "min": float(per.min()), "per_wt": per.tolist()}


def paired_gap(a, b) -> dict:
    """``{"diff", "se"}``: mean of ``a − b`` over the same wild types and its paired standard error."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return {"diff": float(d.mean()), "se": float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")}


def oracle_log_probs(fam: Family, wt, kind: str) -> np.ndarray:
    """``[L, 20]`` per-site log scores of a Bayes-limit scoring of ``wt`` (module docstring):

    * ``law``: the exact masked conditional of the family's law (:meth:`.family.Family.law_site_log_probs`) — the
      Bayes limit of masked-marginal scoring without indel noise, and of wild-type-marginal scoring under the
      uniform and contextual kernels up to the indel-noise frame blur (module docstring);
    * ``blosum62``: the Bayes wild-type-marginal head under the BLOSUM62 kernel, ``log p(b) + log T(wt_i | b)``
      (frame blur ignored likewise);
    * ``fitness``: ``Δf``'s own site factors (Spearman 1 by construction: the reference, not a model).
    """
    n = len(wt)
    if kind == "fitness":
        return fam.site_log_probs(n)
    law = fam.law_site_log_probs(n)
    if kind == "law":
        return law
    if kind == "blosum62":
        t = np.log(blosum_kernel().numpy())  # t[b, a] = log T(a | b)
        return law + t[:, list(wt)].T
    raise ValueError(f"kind: expected one of {ORACLES}, got {kind!r}")


def oracle_spearman(fam: Family, wts) -> dict[str, dict]:
    """:func:`summarize` of each Bayes-limit scoring (:data:`ORACLES`) over ``wts``."""
    return {k: summarize(_spearmans(fam, wts, [oracle_log_probs(fam, w, k) for w in wts])) for k in ORACLES}


def count_model_log_probs(fam: Family, length: int, alpha: float = 0.5) -> np.ndarray:
    """``[length, 20]`` add-``alpha`` letter frequencies of the training members: per core site (the 5 left and 4
    right core positions of every member) and one pooled loop row. A site-independent estimate from the same
    data the networks see — a reference for what the data allow, not a bound."""
    from .family import LEFT, RIGHT

    core = np.full((LEFT + RIGHT, K), alpha)
    loop = np.full(K, alpha)
    for x in fam.train:
        for i in range(LEFT):
            core[i, x[i]] += 1
        for i in range(RIGHT):
            core[LEFT + i, x[len(x) - RIGHT + i]] += 1
        for a in x[LEFT:len(x) - RIGHT]:
            loop[a] += 1
    rows = [core[i] for i in range(LEFT)] + [loop] * (length - LEFT - RIGHT) + [core[LEFT + i] for i in range(RIGHT)]
    p = np.stack(rows)
    return np.log(p / p.sum(1, keepdims=True))


def count_model_spearman(fam: Family, wts, alpha: float = 0.5) -> dict:
    """:func:`summarize` of the count model's scores (:func:`count_model_log_probs`) over ``wts``."""
    return summarize(_spearmans(fam, wts, [count_model_log_probs(fam, len(w), alpha) for w in wts]))


#: The scored networks (``training.CONFIGS`` names): the three DPLM-Evo kernels read by the wild-type marginal
#: (the paper's scoring), the two masked baselines by the masked marginal (DPLM's / ESM's).
SCORED_NETWORKS: dict[str, str] = {"contextual": "wt-marginal", "uniform": "wt-marginal", "blosum62": "wt-marginal",
                                   "masked": "masked-marginal", "masked-elbo": "masked-marginal"}


#: The spec roles (``specs/dplm-evo.yaml``) of the shipped networks, per toy family and ``training.CONFIGS`` name.
ROLES: dict[str, dict[str, str]] = {
    "conserved-core": {"contextual": "net", "uniform": "net_uniform", "blosum62": "net_blosum", "masked": "net_masked",
                       "masked-elbo": "net_masked_elbo"},
    "mutation-bias": {"contextual": "net_mb", "uniform": "net_mb_uniform", "blosum62": "net_mb_blosum",
                      "masked": "net_mb_masked", "masked-elbo": "net_mb_masked_elbo"},
}


def _gaps(per: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict]:
    """Paired gap of each DPLM-Evo kernel's wild-type marginal over each masked baseline's masked marginal (the
    pairs whose two networks are both in ``per``)."""
    return {f"{m} - {b}": paired_gap(per[m]["wt-marginal"], per[b]["masked-marginal"])
            for m in ("contextual", "uniform", "blosum62") for b in ("masked", "masked-elbo") if m in per and b in per}


def scoring_report(models: Mapping[str, object], family_name: str, wild_types: int = WILD_TYPES) -> dict:
    """One family's scoring table for the shipped networks (``models``: spec role -> network, :data:`ROLES`):
    both scorings of every network on ``wild_types`` fresh wild types (:func:`summarize`), the paired gaps of the
    DPLM-Evo kernels over the masked baselines, the Bayes limits (:func:`oracle_spearman`), the count model
    (:func:`count_model_spearman`, α = 0.5), and the same networks' means on the family's 8 held-out wild types."""
    fam = named_family(family_name)
    wts = wild_types_of(fam, wild_types)
    per = {name: {s: spearman_per_wt(models[role], s, fam, wts) for s in ("wt-marginal", "masked-marginal")}
           for name, role in ROLES[family_name].items()}
    held = {name: {s: float(spearman_per_wt(models[role], s, fam, fam.held_out).mean()) for s in ("wt-marginal", "masked-marginal")}
            for name, role in ROLES[family_name].items()}
    return {"family": family_name, "wild_types": len(wts),
            "networks": {n: {s: summarize(v) for s, v in by.items()} for n, by in per.items()},
            "gaps": _gaps(per), "oracle": oracle_spearman(fam, wts), "count_model": count_model_spearman(fam, wts),
            "held_out": held}


def seed_spread(family_name: str, replicates: int, wild_types: int = WILD_TYPES,
                shipped: Mapping[str, object] | None = None, show_progress: bool = True,
                networks: Iterable[str] | None = None) -> dict:
    """Mutation-effect Spearman of every network in ``networks`` (default :data:`SCORED_NETWORKS`; a subset keeps
    the training cost down: the gaps are then those of the pairs present) over ``replicates`` training seeds
    (:func:`.training.training_seed`; replicate 0 is ``shipped[name]`` when given, else trained too; trained
    replicates are cached, :func:`.training.trained_replicate`), both scorings
    per network, on ``wild_types`` fresh wild types of ``family_name``; and the gap of each DPLM-Evo kernel's
    wild-type marginal over each masked baseline's masked marginal, per replicate (with its paired standard error
    over wild types) and as mean ± sample sd over replicates. Trains ``5 · replicates`` networks at ~1 CPU minute
    each (fewer with ``shipped``)."""
    from .training import trained_replicate

    if replicates < 1:
        raise ValueError(f"replicates: expected >= 1, got {replicates}")
    names = list(SCORED_NETWORKS) if networks is None else list(networks)
    unknown = [n for n in names if n not in SCORED_NETWORKS]
    if unknown or not names:
        raise ValueError(f"networks: expected some of {list(SCORED_NETWORKS)}, got {names!r}")
    fam = named_family(family_name)
    wts = wild_types_of(fam, wild_types)
    per: dict[str, dict[str, list]] = {n: {"wt-marginal": [], "masked-marginal": []} for n in names}
    for r in range(replicates):
        for name in names:
            net = shipped[name] if (r == 0 and shipped and name in shipped) else trained_replicate(
                name, family_name, r, show_progress=show_progress)
            for scoring in per[name]:
                per[name][scoring].append(spearman_per_wt(net, scoring, fam, wts))
    out: dict = {"family": family_name, "replicates": replicates, "wild_types": len(wts), "networks": {}, "gaps": {}}
    for name, by in per.items():
        out["networks"][name] = {s: {"per_replicate": [float(v.mean()) for v in vals],
                                     "mean": float(np.mean([v.mean() for v in vals])),
                                     "sd": float(np.std([v.mean() for v in vals], ddof=1)) if replicates > 1 else float("nan")}
                                 for s, vals in by.items()}
    by_replicate = [_gaps({n: {s: v[r] for s, v in by.items()} for n, by in per.items()}) for r in range(replicates)]
    for key in by_replicate[0]:
        d = [g[key]["diff"] for g in by_replicate]
        out["gaps"][key] = {"per_replicate": d, "paired_se": [g[key]["se"] for g in by_replicate], "mean": float(np.mean(d)),
                            "sd": float(np.std(d, ddof=1)) if replicates > 1 else float("nan"),
                            "min": float(min(d)), "max": float(max(d))}
    return out
