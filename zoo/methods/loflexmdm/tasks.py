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

Every sequence is stored in a fixed-length latent of ``max_len + 1`` slots: the tokens, one fixed ``<eos>``
(present and clean at every t; the gap to its left is the end-of-sequence gap) and ``<pad>`` (never inserted).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from zoo.common.toy_text import SymbolTokenizer

TASKS = ("checksum", "brackets")
DIGITS = "01234"
BRACKETS = "()[]"


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
        return DIGITS + "=" if self.name == "checksum" else BRACKETS

    @property
    def max_len(self) -> int:
        return 8 if self.name == "checksum" else 10

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
        return {2 * m: 0.2 for m in range(1, 6)}

    def valid(self, text: str) -> bool:
        """Membership in the task's support."""
        if self.name == "checksum":
            if len(text) < 5 or text[-2] != "=":
                return False
            free, check = text[:-2], text[-1]
            if not 3 <= len(free) <= 6 or any(c not in DIGITS for c in free) or check not in DIGITS:
                return False
            return free[-1] == check
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
