"""The toy protein family with an exactly known fitness landscape (dplm-evo note, Sec. 6; 20-letter alphabet).

A sequence is ``core_left (5) + loop (1..5) + core_right (4)`` (root length 12; latent ``N = 2 · 14 = 28``).
Fitness ``f(x) = Σ_core log PWM_i(x_i) + Σ_loop log q_loop(x_j) + log p_len(|loop|)`` with a position-specific
profile on the 9 core sites, one loop composition (biased to G, S, N, D, P) and a loop-length prior; a length
outside 10..14 has fitness ``-inf``. Insertions and deletions are allowed in the loop only.

**Conserved core** (:func:`core_profile`). Real protein families have conserved cores, which is *why* their indels
concentrate in loops: an indel in the core shifts the register of the conserved residues after it. Each core row
therefore has a consensus residue (drawn from the 15 letters outside the loop-enriched G, S, N, D, P) with
probability ``keep_i ~ U(0.60, 0.85)``, the rest ``1 − keep_i − ε`` over its 3 most similar letters by BLOSUM62
(weights ``2^{S_ab/2}``, the loop-enriched letters excluded: physico-chemically plausible core substitutions), and
``ε = 0.002`` spread evenly over the remaining 16 letters (every mutant has a finite ``Δf``). The first version
used flat Dirichlet(0.5) rows (a member's own core residue had ``p ≈ 0.12``), under which a core indel is nearly as
probable as a loop one: the closed-form Bayes-optimal indel posterior (:func:`.metrics.bayes_indel_loop_share`)
put only 0.515 of its mass in the loop on the evolve metric's starts, so the note's "> 90 % of indels in the loop"
was out of reach of any model of the family's law. This profile was chosen by that ceiling *before* training (0.957
on the same 64 starts, 0.912 on 1,024 members; the loop-like core alternatives of a first draft, e.g. S for A,
made a core residue re-readable as a loop one and held insertions at 0.86), while single-mutant effects keep a
spread (consensus → alternative ``−1.2 .. −3.4``, → rare ``≈ −8.7``, back to consensus ``> 0``) for the Spearman.
The ceiling is a per-sample diagnostic, not a bound in expectation: averaged over the exact law, the Bayes
mass at a position equals the chance that a member has a removable residue there, and rare members with a rare
letter at a core boundary carry large core mass (hence 0.957 on 64 starts vs 0.912 on 1,024; see the card).

Family members evolve along a random binary tree from PWM-sampled roots: every branch applies Metropolis moves
under ``f`` (substitutions at any site; ±1 indels in the loop). Everything is drawn from one NumPy generator
seeded by ``seed``, so the family is reproducible to the bit.

**The mutation-bias family** (``family(bias=β)``, β > 0; issue 37). The conserved-core family's law is exactly
``p(x) ∝ exp f(x)``, so the exact masked conditional *is* ``Δf`` and no scoring can beat the masked marginal
there. The second family keeps the same landscape ``f`` (the same draws of the profile) but evolves its members
under **selection with a mutational bias**: a substitution proposes the new residue from a composition ``μ``
instead of uniformly (Felsenstein's 1981 equal-input model, which is reversible with respect to ``μ``), an
insertion draws its residue from ``μ``, and moves are accepted exactly as in the first family — selection sees
the fitness only, no Hastings correction undoes the bias. Detailed balance then gives the stationary law
``p(x) ∝ exp f(x) · Π_i K μ(x_i)`` (the Halpern–Bruno form, Mol. Biol. Evol. 15:910, 1998: site frequencies ∝
mutational equilibrium × exp(fitness)), so the masked marginal learns ``Δf + Δ log μ``: the family's
composition, not its fitness. ``μ`` is the GC-pressure pattern of real proteomes (Singer & Hickey 2000,
Mol. Biol. Evol. 17:1581): ``log μ(b) = β g_b − log Z`` with ``g = +1`` for G, A, R, P (GC-rich codons),
``−1`` for F, Y, M, I, N, K (AT-rich codons), ``0`` otherwise. Roots and wild types are drawn from that law, so
every member is marginally a draw from it (the tree only correlates members).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from .alphabet import AA, BLOSUM62, K

__all__ = ["Family", "family", "core_profile", "mutation_bias", "fresh_wild_types", "FAMILIES", "named_family", "LEFT",
           "RIGHT", "LOOP_LENGTHS", "MAX_LEN", "N_LATENT"]

LEFT, RIGHT = 5, 4
LOOP_LENGTHS = (1, 2, 3, 4, 5)
LOOP_PRIOR = np.array([0.1, 0.2, 0.4, 0.2, 0.1])
MAX_LEN = LEFT + RIGHT + max(LOOP_LENGTHS)
N_LATENT = 2 * MAX_LEN  # DPLM-Evo's 2L upsampled alignment space


@dataclass(frozen=True)
class Family:
    """The landscape (``log_pwm [9, 20]`` core rows, ``log_loop [20]``, ``log_len`` per loop length), the
    simulated members (lists of index arrays), the generator's ``seed`` and the mutational bias ``log_mu [20]``
    (``None``: no bias, the law is ``∝ exp f``; else the law is ``∝ exp f · Π K μ(x_i)``, see the module docstring)."""

    log_pwm: np.ndarray
    log_loop: np.ndarray
    log_len: dict[int, float]
    train: tuple[tuple[int, ...], ...]
    held_out: tuple[tuple[int, ...], ...]
    seed: int = 0
    log_mu: np.ndarray | None = None

    def law_length_probs(self) -> dict[int, float]:
        """The law's length distribution ``{length: p}`` (loop length ``ℓ`` with ``p ∝ p_len(ℓ) Z^ℓ``,
        ``Z = Σ_b q_loop(b) K μ(b)``; without a bias ``Z = 1``: the loop-length prior)."""
        return {LEFT + RIGHT + n: float(p) for n, p in zip(LOOP_LENGTHS, _loop_length_law(np.exp(self.log_loop), self.log_mu))}

    def law_site_log_probs(self, length: int) -> np.ndarray:
        """``[length, 20]`` log conditional of each site under the family's *law* given the length (each row
        normalised): :meth:`site_log_probs` plus ``log μ``, renormalised. Equal to :meth:`site_log_probs` without a
        bias. This is the exact masked marginal of a site (the sites are independent given the length)."""
        rows = self.site_log_probs(length)
        if self.log_mu is None:
            return rows
        rows = rows + self.log_mu[None, :]
        return rows - np.logaddexp.reduce(rows, axis=1, keepdims=True)

    def fitness(self, seq) -> float:
        """``f(x)`` of a sequence (letters or indices); ``-inf`` for a length outside 10..14."""
        x = [AA.index(c) for c in seq] if isinstance(seq, str) else [int(v) for v in seq]
        loop = len(x) - LEFT - RIGHT
        if loop not in self.log_len or any(v < 0 or v >= K for v in x):
            return float("-inf")
        core = x[:LEFT] + x[len(x) - RIGHT:]
        return float(sum(self.log_pwm[i, a] for i, a in enumerate(core)) + sum(self.log_loop[a] for a in x[LEFT:LEFT + loop])
                     + self.log_len[loop])

    def site_log_probs(self, length: int) -> np.ndarray:
        """``[length, 20]`` per-position ``log`` factor of ``f`` for a sequence of this length (core rows, then
        the loop composition): ``Δf`` of a single substitution ``a → b`` at ``i`` is ``row_i[b] − row_i[a]``."""
        loop = length - LEFT - RIGHT
        rows = [self.log_pwm[i] for i in range(LEFT)] + [self.log_loop] * loop + [self.log_pwm[LEFT + i] for i in range(RIGHT)]
        return np.stack(rows)

    def in_loop(self, position: int, length: int) -> bool:
        """Whether slot ``position`` of a length-``length`` sequence lies in the loop (``LEFT <= p < length − RIGHT``)."""
        return LEFT <= position < length - RIGHT

    def train_tensor(self) -> list[torch.Tensor]:
        return [torch.tensor(s, dtype=torch.long) for s in self.train]


LOOP_LETTERS = "GSNDP"  # the loop composition's enriched letters (Dirichlet alpha 3 vs 0.3)


def core_profile(rng: np.random.Generator, sites: int, keep: tuple[float, float] = (0.60, 0.85), alternatives: int = 3,
                 rare: float = 0.002) -> np.ndarray:
    """``[sites, 20]`` log-probability rows of a conserved core: consensus ``c_i`` (uniform over the letters outside
    :data:`LOOP_LETTERS`) with probability ``keep_i ~ U(keep)``, ``1 − keep_i − rare`` over the ``alternatives``
    letters most similar to ``c_i`` by BLOSUM62 (loop letters excluded; weights ``2^{S/2}``), ``rare`` evenly over
    the rest. Draw order: consensus letters, then ``keep``."""
    pool = [a for a in range(K) if AA[a] not in LOOP_LETTERS]
    cons = rng.choice(pool, size=sites)
    keeps = rng.uniform(*keep, size=sites)
    score = BLOSUM62.numpy().astype(np.float64)
    rows = np.zeros((sites, K))
    for i, c in enumerate(cons):
        w = 2.0 ** (score[c] / 2)
        alts = [int(a) for a in np.argsort(-w, kind="stable") if a != c and AA[a] not in LOOP_LETTERS][:alternatives]
        rest = [a for a in range(K) if a != c and a not in alts]
        rows[i, alts] = (1 - keeps[i] - rare) * w[alts] / w[alts].sum()
        rows[i, rest] = rare / len(rest)
        rows[i, c] = keeps[i]
    return np.log(rows)


#: letters whose codons are GC-rich (+1) or AT-rich (−1) (Singer & Hickey 2000): the sign pattern of ``log μ``.
GC_RICH, AT_RICH = "GARP", "FYMINK"


def mutation_bias(beta: float) -> np.ndarray:
    """``[20]`` log composition of the mutational bias: ``log μ(b) = β g_b − log Σ_c exp(β g_c)`` with ``g_b = +1``
    for :data:`GC_RICH`, ``−1`` for :data:`AT_RICH` and 0 otherwise."""
    g = np.array([1.0 if a in GC_RICH else -1.0 if a in AT_RICH else 0.0 for a in AA])
    return beta * g - np.logaddexp.reduce(beta * g)


def _loop_length_law(loop_p: np.ndarray, log_mu: np.ndarray | None) -> np.ndarray:
    """Loop-length probabilities of the law (:data:`LOOP_LENGTHS` order): the prior, times ``Z^ℓ`` with a bias."""
    if log_mu is None:
        return LOOP_PRIOR
    mu = K * np.exp(log_mu)
    z = float((loop_p * mu).sum())
    p = LOOP_PRIOR * z ** np.array(LOOP_LENGTHS, dtype=np.float64)
    return p / p.sum()


def _sample_member(rng, log_pwm, loop_p, log_mu=None) -> list[int]:
    """One draw of the family's law: loop length, the 9 core residues, the loop residues (in that order). Without
    a bias the PWM / loop / length factors of ``f``; with one, each factor times ``K μ`` renormalised (the loop-length
    law ``∝ p_len(ℓ) Z^ℓ``, ``Z = Σ_b q_loop(b) K μ(b)``)."""
    len_p = _loop_length_law(loop_p, log_mu)
    if log_mu is None:
        p = np.exp(log_pwm)
    else:
        mu = K * np.exp(log_mu)  # the bias relative to a uniform composition (mean 1)
        p = np.exp(log_pwm) * mu
        p = p / p.sum(1, keepdims=True)
        loop_p = loop_p * mu / float((loop_p * mu).sum())
    loop = int(rng.choice(LOOP_LENGTHS, p=len_p))
    core = [int(rng.choice(K, p=p[i])) for i in range(LEFT + RIGHT)]
    return core[:LEFT] + [int(rng.choice(K, p=loop_p)) for _ in range(loop)] + core[LEFT:]


def _evolve(rng, fam: Family, x: list[int], moves: int) -> list[int]:
    """Metropolis-Hastings moves under ``f``: 80 % substitution (uniform site, uniform residue), 20 % a ±1 loop indel
    (an insertion at a uniform loop gap with a uniform residue, or a deletion of a uniform loop residue; the
    Hastings factor ``K`` accounts for the residue choice; gap/residue counts ``ℓ + 1`` vs ``ℓ + 1`` cancel).

    With a mutational bias (``fam.log_mu``) the proposed residue of a substitution or an insertion is drawn from
    the composition ``μ`` instead, and the acceptance stays the same (selection sees ``f`` alone; the factor ``K``
    balances insertion against deletion rates as before). Detailed balance: a substitution ``a → b`` gives
    ``p(y) / p(x) = exp(Δf) μ_b / μ_a``, an insertion of ``b`` gives ``exp(Δf) K μ_b``, so the chain leaves
    ``exp f(x) · Π_i K μ(x_i)`` invariant (``K μ`` = the bias relative to a uniform composition)."""
    mu = None if fam.log_mu is None else np.exp(fam.log_mu)
    f = fam.fitness(x)
    for _ in range(moves):
        y = list(x)
        loop = len(x) - LEFT - RIGHT
        hastings = 0.0  # log q(y -> x) / q(x -> y): an insertion proposes one of K residues, its reverse none
        if rng.random() < 0.8:
            i = int(rng.integers(len(x)))
            y[i] = int(rng.integers(K)) if mu is None else int(rng.choice(K, p=mu))
        elif rng.random() < 0.5:
            y.insert(LEFT + int(rng.integers(loop + 1)), int(rng.integers(K)) if mu is None else int(rng.choice(K, p=mu)))
            hastings = np.log(K)
        else:
            del y[LEFT + int(rng.integers(loop))]
            hastings = -np.log(K)
        g = fam.fitness(y)
        if np.isfinite(g) and np.log(rng.random()) < g - f + hastings:
            x, f = y, g
    return x


@lru_cache(maxsize=4)
def family(seed: int = 0, roots: int = 40, depth: int = 7, moves: int = 3, held_out: int = 8, bias: float = 0.0) -> Family:
    """The toy family: ``roots`` roots drawn from the family's law, each the root of a binary tree of ``depth``
    levels with ``moves`` Metropolis moves per branch (``roots · 2^depth`` leaves, 5120 by default), plus
    ``held_out`` wild types drawn from the law with a different stream. ``bias = β > 0``: the mutation-bias
    family (same landscape, law ``∝ exp f · Π μ``, :func:`mutation_bias`); ``0``: the conserved-core family
    (law ``∝ exp f``), bit for bit the historical one."""
    if not (0.0 <= bias <= 10.0):
        raise ValueError(f"bias: expected 0 <= beta <= 10, got {bias}")
    rng = np.random.default_rng(seed)
    log_pwm = core_profile(rng, LEFT + RIGHT)
    alpha = np.full(K, 0.3)
    for c in LOOP_LETTERS:
        alpha[AA.index(c)] = 3.0
    log_loop = np.log(rng.dirichlet(alpha))
    log_len = {n: float(np.log(p)) for n, p in zip(LOOP_LENGTHS, LOOP_PRIOR)}
    log_mu = mutation_bias(bias) if bias > 0 else None
    fam = Family(log_pwm, log_loop, log_len, (), (), seed, log_mu)
    leaves: list[tuple[int, ...]] = []
    for _ in range(roots):
        level = [_sample_member(rng, log_pwm, np.exp(log_loop), log_mu)]
        for _ in range(depth):
            level = [_evolve(rng, fam, x, moves) for x in level for _ in range(2)]
        leaves += [tuple(x) for x in level]
    wt_rng = np.random.default_rng(seed + 1_000_003)
    wts = tuple(tuple(_sample_member(wt_rng, log_pwm, np.exp(log_loop), log_mu)) for _ in range(held_out))
    return Family(log_pwm, log_loop, log_len, tuple(leaves), wts, seed, log_mu)


def fresh_wild_types(fam: Family, n: int) -> tuple[tuple[int, ...], ...]:
    """``n`` wild types drawn from ``fam``'s law with a stream of their own (``default_rng([seed, 2_000_003])``,
    neither the members' nor :attr:`Family.held_out`'s): the first ``m`` of ``n`` are those of ``m``. The
    evaluation set of the mutation-effect Spearman (a wild type may coincide with a training member by chance,
    as natural wild types are in the training data of protein LMs)."""
    if not 1 <= n <= 100_000:
        raise ValueError(f"n: expected 1..100000 wild types, got {n}")
    rng = np.random.default_rng([fam.seed, 2_000_003])
    return tuple(tuple(_sample_member(rng, fam.log_pwm, np.exp(fam.log_loop), fam.log_mu)) for _ in range(n))


#: The two toy families by name: ``family(**FAMILIES[name])``. ``mutation-bias`` uses β = 1 (chosen by the oracle
#: computation in docs/methods/dplm-evo.md before any training).
FAMILIES: dict[str, dict] = {"conserved-core": {}, "mutation-bias": {"bias": 1.0}}


def named_family(name: str) -> Family:
    """:func:`family` by its name in :data:`FAMILIES` (a ValueError names the known ones)."""
    if name not in FAMILIES:
        raise ValueError(f"family: expected one of {sorted(FAMILIES)}, got {name!r}")
    return family(**FAMILIES[name])
