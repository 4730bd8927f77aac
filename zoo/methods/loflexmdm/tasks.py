"""The two CPU toy tasks of LoFlexMDM/FlexMDM (loflexmdm.md Sec. 6), both with exactly known laws.

* ``checksum`` (the star-graph analogue): ``n ∈ {3, 4, 5, 6}`` free digits ``0..4`` (uniform), the separator
  ``=``, then the check digit, a copy of the last free digit ``d_n``. The check digit is determined by a free
  digit, so the easy order is "free digits first, check digit last": generated in the same τ-leaping step as
  ``d_n`` (or before it, by a generator that has not learned the reverse conditional) it is right only 1/5 of
  the time. Lengths 5..8, uniform. Earlier rules did not train within the 5-minute budget: the note's sum of
  *all* digits mod 5, and ``(d_{n-1} + d_n) mod 5`` (checksum accuracy 0.20 = chance at every step count; with
  the linear schedule only 2.8 % of noised training samples have the checksum masked while both inputs are
  clean, 6.5 % for a single input; see the card).
* ``brackets`` (the length-fidelity toy): balanced words over ``()[]`` with half-length ``m ∈ {1..5}`` uniform and,
  given the length, uniform over all such words (Catalan(m)·2^m of them). Lengths 2..10 (even), uniform.
* ``chain`` (the order toy, issue 37): root-to-leaf paths of a fixed random forest (:class:`ChainTree`: 2 roots,
  every internal node has exactly 2 children, leaves at depths 2..5), written root first. Every token is the
  parent of its right neighbour, so right-to-left each token is a deterministic function of the token after it,
  while left-to-right the next token is a guess among 2 children: the leaf (the last token) determines the whole
  sequence, and no other token determines the ones to its right. Length 3..6 uniform, then the leaf uniform among
  the leaves at that depth (20 sequences). Star-graph path-finding (the paper's order task) has the same shape.

Every sequence is stored in a fixed-length latent of ``max_len + 1`` slots: the tokens, one fixed ``<eos>``
(present and clean at every t; the gap to its left is the end-of-sequence gap) and ``<pad>`` (never inserted).
"""
from __future__ import annotations

import functools
import random
from dataclasses import dataclass

import torch

from zoo.common.toy_text import SymbolTokenizer

TASKS = ("checksum", "brackets", "chain")
DIGITS = "01234"
BRACKETS = "()[]"
CHAIN_SYMBOLS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKL"  # 38 node names


@dataclass(frozen=True)
class ChainTree:
    """The fixed random forest of the ``chain`` task: level widths ``widths`` (level 0 = the roots), every internal
    node has ``branching`` children, all nodes above ``min_leaf_depth`` are internal, the last level is all leaves,
    and which nodes of the other levels are internal is drawn by ``random.Random(seed)``; node names are a seeded
    permutation of :data:`CHAIN_SYMBOLS` (so a name says nothing about its depth)."""

    widths: tuple[int, ...] = (2, 4, 8, 8, 8, 8)
    branching: int = 2
    min_leaf_depth: int = 2
    seed: int = 37

    @functools.cached_property
    def _built(self) -> tuple[dict[str, str | None], dict[str, int], tuple[tuple[str, ...], ...]]:
        rng = random.Random(self.seed)
        names = list(CHAIN_SYMBOLS[: sum(self.widths)])
        if len(names) < sum(self.widths):
            raise ValueError(f"chain tree needs {sum(self.widths)} symbols, has {len(CHAIN_SYMBOLS)}")
        rng.shuffle(names)
        levels = [names[: self.widths[0]]]
        parent: dict[str, str | None] = {n: None for n in levels[0]}
        pos = self.widths[0]
        leaves_by_depth: list[tuple[str, ...]] = []
        for d in range(len(self.widths)):
            nodes = levels[d]
            if d == len(self.widths) - 1:
                internal: list[str] = []
            else:
                k, rem = divmod(self.widths[d + 1], self.branching)
                if rem or k > len(nodes) or (d < self.min_leaf_depth and k != len(nodes)):
                    raise ValueError(f"chain tree: level {d + 1} width {self.widths[d + 1]} is not {self.branching} x the internal nodes of level {d}")
                internal = sorted(rng.sample(nodes, k), key=nodes.index)
                children = names[pos: pos + self.widths[d + 1]]
                pos += self.widths[d + 1]
                for i, c in enumerate(children):
                    parent[c] = internal[i // self.branching]
                levels.append(children)
            leaves_by_depth.append(tuple(n for n in nodes if n not in internal))
        depth = {n: d for d, lv in enumerate(levels) for n in lv}
        return parent, depth, tuple(leaves_by_depth)

    @property
    def parent(self) -> dict[str, str | None]:
        return self._built[0]

    @property
    def depth(self) -> dict[str, int]:
        return self._built[1]

    @property
    def symbols(self) -> str:
        return "".join(sorted(self.parent, key=CHAIN_SYMBOLS.index))

    def leaves(self, depth: int) -> tuple[str, ...]:
        """The leaves at ``depth`` (a path to one of them has ``depth + 1`` tokens)."""
        return self._built[2][depth]

    def path(self, leaf: str) -> str:
        """The root-to-``leaf`` path as a string, root first."""
        out = [leaf]
        while self.parent[out[-1]] is not None:
            out.append(self.parent[out[-1]])  # type: ignore[arg-type]
        return "".join(reversed(out))

    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(d + 1 for d in range(len(self.widths)) if self.leaves(d))


CHAIN_TREE = ChainTree()


@functools.lru_cache(maxsize=None)
def _dyck_words(m: int) -> tuple[str, ...]:
    """All balanced words with ``m`` pairs over two bracket types."""
    out: list[str] = []

    def rec(prefix: str, stack: str, opened: int) -> None:
        if len(prefix) == 2 * m:
            out.append(prefix)
            return
        if opened < m:
            for o in "([":
                rec(prefix + o, stack + o, opened + 1)
        if stack:
            rec(prefix + (")" if stack[-1] == "(" else "]"), stack[:-1], opened)

    rec("", "", 0)
    return tuple(out)


@dataclass(frozen=True)
class Task:
    """One toy task: tokenizer, exact length law, validity and a batch sampler of latents."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in TASKS:
            raise ValueError(f"unknown task {self.name!r}; one of {TASKS}")

    @property
    def symbols(self) -> str:
        return {"checksum": DIGITS + "=", "brackets": BRACKETS, "chain": CHAIN_TREE.symbols}[self.name]

    @property
    def max_len(self) -> int:
        return {"checksum": 8, "brackets": 10, "chain": max(CHAIN_TREE.lengths)}[self.name]

    @property
    def latent_len(self) -> int:
        """Slots of the latent: ``max_len`` tokens + the fixed ``<eos>``."""
        return self.max_len + 1

    def tokenizer(self) -> SymbolTokenizer:
        tok = SymbolTokenizer(list(self.symbols))
        tok.zoo_task = self.name
        return tok

    def length_law(self) -> dict[int, float]:
        """Exact law of the sequence length."""
        if self.name == "checksum":
            return {n + 2: 0.25 for n in (3, 4, 5, 6)}
        if self.name == "chain":
            return {L: 1.0 / len(CHAIN_TREE.lengths) for L in CHAIN_TREE.lengths}
        return {2 * m: 0.2 for m in range(1, 6)}

    def support(self) -> dict[str, float]:
        """The exact law as ``{text: probability}`` (every sequence of the support)."""
        law = self.length_law()
        if self.name == "chain":
            return {CHAIN_TREE.path(leaf): law[d + 1] / len(CHAIN_TREE.leaves(d))
                    for d in range(len(CHAIN_TREE.widths)) for leaf in CHAIN_TREE.leaves(d)}
        if self.name == "brackets":
            return {w: law[2 * m] / len(_dyck_words(m)) for m in range(1, 6) for w in _dyck_words(m)}
        out = {}
        for n in (3, 4, 5, 6):
            for i in range(5 ** n):
                d = "".join(DIGITS[(i // 5 ** j) % 5] for j in range(n))
                out[d + "=" + d[-1]] = law[n + 2] / 5 ** n
        return out

    def valid(self, text: str) -> bool:
        """Membership in the task's support."""
        if self.name == "checksum":
            if len(text) < 5 or text[-2] != "=":
                return False
            free, check = text[:-2], text[-1]
            if not 3 <= len(free) <= 6 or any(c not in DIGITS for c in free) or check not in DIGITS:
                return False
            return free[-1] == check
        if self.name == "chain":
            if len(text) not in CHAIN_TREE.lengths or any(c not in CHAIN_TREE.parent for c in text):
                return False
            return text[-1] in CHAIN_TREE.leaves(len(text) - 1) and CHAIN_TREE.path(text[-1]) == text
        m = len(text) // 2
        return 1 <= m <= 5 and len(text) == 2 * m and text in set(_dyck_words(m))

    def sample_texts(self, n: int, generator: torch.Generator) -> list[str]:
        """``n`` exact draws from the task law."""
        out = []
        if self.name == "checksum":
            ns = torch.randint(3, 7, (n,), generator=generator).tolist()
            for k in ns:
                d = torch.randint(0, 5, (k,), generator=generator).tolist()
                out.append("".join(map(str, d)) + "=" + str(d[-1]))
            return out
        if self.name == "chain":
            lengths = CHAIN_TREE.lengths
            for k in torch.randint(0, len(lengths), (n,), generator=generator).tolist():
                leaves = CHAIN_TREE.leaves(lengths[k] - 1)
                out.append(CHAIN_TREE.path(leaves[int(torch.randint(0, len(leaves), (1,), generator=generator))]))
            return out
        ms = torch.randint(1, 6, (n,), generator=generator).tolist()
        for m in ms:
            words = _dyck_words(m)
            out.append(words[int(torch.randint(0, len(words), (1,), generator=generator))])
        return out

    def checksum_position(self, text_len: int) -> int:
        """Latent index of the checksum token in a checksum sequence of ``text_len`` tokens."""
        return text_len - 1

    def encode_latents(self, texts: list[str], tok: SymbolTokenizer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(z1 [B, N], fixed [B, N], valid [B, N])``: tokens, then ``<eos>`` (fixed), then ``<pad>`` (not valid)."""
        n = self.latent_len
        z1 = torch.full((len(texts), n), tok.pad_token_id, dtype=torch.long)
        fixed = torch.zeros(len(texts), n, dtype=torch.bool)
        for i, s in enumerate(texts):
            ids = tok.encode_raw(s)
            z1[i, : len(ids)] = torch.tensor(ids)
            z1[i, len(ids)] = tok.eos_token_id
            fixed[i, len(ids)] = True
        valid = z1 != tok.pad_token_id
        return z1, fixed, valid
