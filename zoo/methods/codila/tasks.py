"""The CoDiLA toys: enumerable laws over the letters ``a b c d`` with exactly computable validity.

* ``xor`` (codila.md Sec. 6, "XOR-words"): 4 two-letter words, each uniform over the valid pairs
  ``{ab, ba, cd, dc}`` and independent of the others. Every position's marginal is uniform on the four
  letters, so drawing a fully masked word's two letters independently from their marginals gives a valid
  word with probability exactly ``4 * (1/4)^2 = 0.25`` (a 4-letter block: ``0.25^2 = 0.0625``), while the
  within-word total correlation is ``2 log 4 - log 4 = log 4`` nats.
* ``trap`` (the Theorem 3.3 counterexample as a toy): a context word ``ab`` or ``cd`` (uniform), then a
  target word drawn from ``J_ab`` or ``J_cd`` (:data:`TRAP_JOINTS`). Both joints have the same per-position
  modes ``(a, c)``, the mode pair ``ac`` is invalid under both, and their supports are disjoint: an AR that
  sees only the top-1 of the target's marginals gets the same input in both contexts and is valid with
  probability at most 0.5, whereas the full marginals differ and tell the contexts apart.
* ``stretch`` (the low-entropy stretches of codila.md Sec. 6, "word 1 determines words 2-4"): word 1 uniform
  over ``XOR_WORDS``, word ``j`` the XOR word ``STRETCH_SHIFTS[j]`` places after it (indices mod 4), so the law has
  4 sequences. Fully masked, every letter has entropy ``log 4``; once any one letter is decoded every other letter
  is determined (entropy 0): a stretch of 7 determined letters that the dynamic schedule can take in runs of
  ``B``. The word-to-word relations (+1, +2, -1 between neighbours) differ, so a fully masked block of two words
  has the same uniform marginals wherever it lies but a different joint (the static B = 4 schedule's first block
  cannot be identified from its marginals). :func:`dynamic_schedule_forwards` gives the exact forward counts of
  the sampler's dynamic rule under exact marginals (the ceiling the card pre-registers).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import torch

from zoo.common.exact import EnumeratedLaw

LETTERS = "abcd"
XOR_WORDS = ("ab", "ba", "cd", "dc")
CONTEXT_WORDS = ("ab", "cd")
#: target-word joints of the trap toy, per context word: same top-1 marginals (a, c), disjoint supports
TRAP_JOINTS: dict[str, dict[str, float]] = {
    "ab": {"ad": 0.40, "bc": 0.30, "cc": 0.30},
    "cd": {"aa": 0.30, "ab": 0.30, "dc": 0.40},
}
#: stretch: word j is XOR_WORDS[(i + STRETCH_SHIFTS[j]) % 4] for word 1 = XOR_WORDS[i]
STRETCH_SHIFTS = (0, 1, 3, 2)
TASKS = ("xor", "trap", "stretch")


@dataclass(frozen=True)
class Task:
    """An enumerable toy law over strings of ``length`` letters."""

    name: str

    @property
    def length(self) -> int:
        return 4 if self.name == "trap" else 8

    @cached_property
    def law(self) -> EnumeratedLaw:
        """The exact law of the sequences (as strings)."""
        if self.name == "xor":
            words = list(itertools.product(XOR_WORDS, repeat=4))
            return EnumeratedLaw.from_dict({"".join(w): 1 / len(words) for w in words})
        if self.name == "trap":
            law = {}
            for ctx in CONTEXT_WORDS:
                for tgt, p in TRAP_JOINTS[ctx].items():
                    law[ctx + tgt] = p / len(CONTEXT_WORDS)
            return EnumeratedLaw.from_dict(law)
        if self.name == "stretch":
            return EnumeratedLaw.from_dict({stretch_sequence(i): 1 / len(XOR_WORDS) for i in range(len(XOR_WORDS))})
        raise ValueError(f"unknown toy task {self.name!r}; one of {TASKS}")

    def valid(self, text: str) -> bool:
        """Whether ``text`` has positive probability under the law."""
        return text in self._support

    @cached_property
    def _support(self) -> frozenset[str]:
        return frozenset(s for s, p in zip(self.law.support, self.law.probs.tolist()) if p > 0)

    def word_validity(self, text: str) -> list[bool]:
        """Per two-letter word: valid on its own (xor: in XOR_WORDS; trap: context word valid, target valid
        given the context; stretch: word 1 in XOR_WORDS, word j > 1 valid iff word 1 is and word j is the one
        word 1 determines)."""
        words = [text[i: i + 2] for i in range(0, self.length, 2)]
        if len(text) != self.length:
            return [False] * (self.length // 2)
        if self.name == "xor":
            return [w in XOR_WORDS for w in words]
        if self.name == "stretch":
            if words[0] not in XOR_WORDS:
                return [False] * len(words)
            ref = stretch_sequence(XOR_WORDS.index(words[0]))
            return [w == ref[2 * j: 2 * j + 2] for j, w in enumerate(words)]
        ctx_ok = words[0] in CONTEXT_WORDS
        return [ctx_ok, ctx_ok and words[1] in TRAP_JOINTS[words[0]]]

    def sample(self, n: int, generator: torch.Generator) -> list[str]:
        """``n`` i.i.d. sequences from the law (inverse CDF on one ``torch.rand`` draw)."""
        cdf = self.law.probs.cumsum(0)
        u = torch.rand(n, generator=generator, dtype=torch.float64)
        idx = torch.searchsorted(cdf, u * cdf[-1], right=True).clamp_max(len(cdf) - 1)
        return [self.law.support[int(i)] for i in idx]

    def joint_table(self, positions: tuple[int, ...], given: dict[int, str] | None = None) -> torch.Tensor:
        """The exact joint ``[4]*len(positions)`` of the letters at ``positions`` given the letters ``given``
        (position -> letter): a brute-force reference for the DLM's marginals and the block laws."""
        given = given or {}
        table = torch.zeros((4,) * len(positions), dtype=torch.float64)
        for s, p in zip(self.law.support, self.law.probs.tolist()):
            if all(s[i] == c for i, c in given.items()):
                table[tuple(LETTERS.index(s[i]) for i in positions)] += p
        if table.sum() <= 0:
            raise ValueError(f"the conditioning {given} has probability 0")
        return table / table.sum()


def stretch_sequence(i: int) -> str:
    """The ``stretch`` sequence whose first word is ``XOR_WORDS[i]``."""
    return "".join(XOR_WORDS[(i + d) % len(XOR_WORDS)] for d in STRETCH_SHIFTS)


def _consistent(task: Task, given: dict[int, str]) -> list[tuple[str, float]]:
    """The law's sequences that agree with ``given`` (position -> letter), renormalised."""
    rows = [(x, p) for x, p in zip(task.law.support, task.law.probs.tolist()) if p > 0 and all(x[i] == c for i, c in given.items())]
    z = sum(p for _, p in rows)
    if z <= 0:
        raise ValueError(f"the conditioning {given} has probability 0")
    return [(x, p / z) for x, p in rows]


def exact_entropies(task: Task, given: dict[int, str]) -> dict[int, float]:
    """Entropy (nats) of each undecoded position's exact marginal given the decoded letters ``given``."""
    rows = _consistent(task, given)
    out = {}
    for pos in range(task.length):
        if pos not in given:
            m: dict[str, float] = {}
            for x, p in rows:
                m[x[pos]] = m.get(x[pos], 0.0) + p
            out[pos] = -sum(q * math.log(q) for q in m.values() if q > 0)
    return out


def _dynamic_step(task: Task, given: dict[int, str], block_size: int, tau: float, window_blocks: int):
    """One step of the sampler's dynamic rule (:func:`~zoo.methods.codila.sampler.codila_decode`,
    ``schedule="dynamic"``) under exact marginals: the candidate anchors (every masked position of the window with
    the largest ``-H``, i.e. all the tie-break could pick) and, per anchor, the positions that step decodes."""
    L, B = task.length, block_size
    H = exact_entropies(task, given)
    n_blocks = -(-L // B)
    open_blocks = [b for b in range(n_blocks) if any(p in H for p in range(b * B, min((b + 1) * B, L)))]
    cand = [p for b in open_blocks[:window_blocks] for p in range(b * B, min((b + 1) * B, L)) if p in H]
    top = max(-H[p] for p in cand)
    steps = {}
    for a in (p for p in cand if -H[p] >= top - 1e-9):
        run = [a]
        while len(run) < B and run[-1] + 1 < L and run[-1] + 1 not in given:
            run.append(run[-1] + 1)
        k = 1
        if tau > 0 and len(run) > 1:
            hs = [sum(H[p] for p in run[:kk]) / kk for kk in range(1, len(run) + 1)]
            ok = [kk for kk in range(2, len(run) + 1) if hs[kk - 1] <= tau]
            k = max(ok) if ok else 1
        steps[a] = run[:k]
    return steps


def _outcomes(task: Task, given: dict[int, str], pos: list[int]):
    """The exact block draws of ``pos`` given ``given``: ``(letters, probability)`` (an exact AR / DLM)."""
    law: dict[tuple[str, ...], float] = {}
    for x, p in _consistent(task, given):
        key = tuple(x[i] for i in pos)
        law[key] = law.get(key, 0.0) + p
    for key, p in law.items():
        yield dict(zip(pos, key)), p


def dynamic_schedule_forwards(task: Task, block_size: int = 4, tau: float = 0.75, tie: str = "uniform",
                              window_blocks: int = 10) -> dict[int, float]:
    """The exact law of the number of DLM forwards per sample of the dynamic schedule under **exact marginals**
    (the toy's Bayes-optimal DLM, and an AR that draws each block from its exact joint), following the sampler's
    rule step for step: anchor at the most confident masked position of the window (largest ``-H``), run of up to
    ``B`` masked positions to its right, longest prefix ``k`` with ``h(k) <= tau`` (``k = 1`` otherwise). Exact
    marginals tie (all ``log 4`` fully masked, all 0 in a determined stretch), so the anchor is the tie-break's:
    ``tie="uniform"`` (each tied position equally likely) or ``"leftmost"``; :func:`dynamic_schedule_extremes` gives
    the best and worst tie-breaks. Tokens per DLM forward of ``n`` samples: ``L / E[forwards]``."""
    if tie not in ("uniform", "leftmost"):
        raise ValueError(f"tie must be 'uniform' or 'leftmost', got {tie!r}")
    memo: dict[tuple, dict[int, float]] = {}

    def go(given: dict[int, str]) -> dict[int, float]:
        if len(given) == task.length:
            return {0: 1.0}
        key = tuple(sorted(given.items()))
        if key not in memo:
            steps = _dynamic_step(task, given, block_size, tau, window_blocks)
            anchors = sorted(steps)[:1] if tie == "leftmost" else sorted(steps)
            out: dict[int, float] = {}
            for a in anchors:
                for new, p in _outcomes(task, given, steps[a]):
                    for f, q in go({**given, **new}).items():
                        out[f + 1] = out.get(f + 1, 0.0) + p * q / len(anchors)
            memo[key] = out
        return memo[key]

    return dict(sorted(go({}).items()))


def dynamic_schedule_extremes(task: Task, block_size: int = 4, tau: float = 0.75, window_blocks: int = 10) -> tuple[int, int]:
    """The fewest and the most DLM forwards per sample the dynamic rule can take under exact marginals over every
    tie-break and every positive-probability draw: ``L / min`` is the schedule's ceiling in tokens per forward."""
    memo: dict[tuple, tuple[int, int]] = {}

    def go(given: dict[int, str]) -> tuple[int, int]:
        if len(given) == task.length:
            return 0, 0
        key = tuple(sorted(given.items()))
        if key not in memo:
            steps = _dynamic_step(task, given, block_size, tau, window_blocks)
            sub = [go({**given, **new}) for a in steps for new, _ in _outcomes(task, given, steps[a])]
            memo[key] = (1 + min(s[0] for s in sub), 1 + max(s[1] for s in sub))
        return memo[key]

    return go({})


def independent_validity(joint: torch.Tensor, valid: torch.Tensor | None = None) -> float:
    """Probability that drawing each position independently from its marginal of ``joint`` lands in the
    support of ``joint`` (or of ``valid``): the validity of one-shot parallel decoding of a fully masked block
    with exact marginals."""
    p = joint.double()
    B = p.dim()
    marg = [p.sum(dim=[d for d in range(B) if d != j]) if B > 1 else p for j in range(B)]
    prod = marg[0]
    for m in marg[1:]:
        prod = prod.unsqueeze(-1) * m.reshape((1,) * (prod.dim()) + (-1,))
    support = (p > 0) if valid is None else valid
    return float(prod[support].sum())


def top1_indistinguishable_bound(joints: list[torch.Tensor], weights: list[float]) -> float:
    """The best validity any AR that sees only the per-position modes can reach when the block's joint is
    ``joints[i]`` with probability ``weights[i]`` and all of them share the same modes: the AR's output law
    ``q`` is one and the same for every i, so validity ``sum_i w_i q(S_i)`` is maximised by a point mass on
    the block with the largest ``sum_{i: x in S_i} w_i``."""
    modes = {tuple(_modes(j)) for j in joints}
    if len(modes) != 1:
        raise ValueError(f"the joints have different per-position modes {sorted(modes)}: top-1 can tell them apart")
    cover = sum(w * (j > 0).double() for j, w in zip(joints, weights))
    return float(cover.max())


def _modes(joint: torch.Tensor) -> list[int]:
    B = joint.dim()
    return [int(joint.sum(dim=[d for d in range(B) if d != j]).argmax()) if B > 1 else int(joint.argmax()) for j in range(B)]


def pair_table(law: dict[str, float]) -> torch.Tensor:
    """``[4, 4]`` table of a two-letter word law given as ``{"ab": p, ...}``."""
    t = torch.zeros(4, 4, dtype=torch.float64)
    for w, p in law.items():
        t[LETTERS.index(w[0]), LETTERS.index(w[1])] = p
    return t
