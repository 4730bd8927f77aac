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
"""
from __future__ import annotations

import itertools
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
TASKS = ("xor", "trap")


@dataclass(frozen=True)
class Task:
    """An enumerable toy law over strings of ``length`` letters."""

    name: str

    @property
    def length(self) -> int:
        return 8 if self.name == "xor" else 4

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
        raise ValueError(f"unknown toy task {self.name!r}; one of {TASKS}")

    def valid(self, text: str) -> bool:
        """Whether ``text`` has positive probability under the law."""
        return text in self._support

    @cached_property
    def _support(self) -> frozenset[str]:
        return frozenset(s for s, p in zip(self.law.support, self.law.probs.tolist()) if p > 0)

    def word_validity(self, text: str) -> list[bool]:
        """Per two-letter word: valid on its own (xor: in XOR_WORDS; trap: context word valid, target valid
        given the context)."""
        words = [text[i: i + 2] for i in range(0, self.length, 2)]
        if len(text) != self.length:
            return [False] * (self.length // 2)
        if self.name == "xor":
            return [w in XOR_WORDS for w in words]
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
