"""The ``toy-long`` task of PoE-Bridge (issue 40 item 2): column-interleaved addition of two ``digits``-digit
numbers (31 by default), built so that answers are long (63 tokens with EOS) and every answer token sits at a
fixed offset from what it depends on, so that an equal-size DLM can draft long correct windows::

    prompt  <bos> a0 b0 a1 b1 ... a30 b30 =        (digits least significant first; 2 * digits + 2 tokens)
    answer  s0 c0 s1 c1 ... s30 c30 <eos>           (sum digit and carry-out of each column)

with ``s_i + 10 c_i = a_i + b_i + c_{i-1}``. Answer token ``2i`` (``s_i``) reads prompt tokens ``1 + 2i`` and
``2 + 2i`` and the carry token just before it. Only a carry chain (a column summing to 9 fed by a carry)
couples far positions, which is what a mean-field draft can get wrong and the AR's verify corrects.

Prompts are plain decimal text (``"3141...+2718...="``; any ``A+B`` in the text, each below ``10**digits``);
the tokenizer does the interleaving. A completion is correct when it equals the answer text exactly.
"""
from __future__ import annotations

import random
import re
from typing import TYPE_CHECKING

from zoo.common.toy_text import EVAL_SEED, SymbolTokenizer, ToyExample

if TYPE_CHECKING:
    import torch

__all__ = ["ColumnTokenizer", "column_value", "column_solution"]

LONG_DIGITS = 31  # 63-token answers: 2 x 31 + EOS


def column_solution(a: int, b: int, digits: int) -> str:
    """The answer text of ``a + b``: per column (least significant first) the sum digit and the carry-out."""
    out, carry = [], 0
    for i in range(digits):
        s = (a // 10**i) % 10 + (b // 10**i) % 10 + carry
        carry = s // 10
        out.append(f"{s % 10}{carry}")
    return "".join(out)


def column_value(text: str) -> int | None:
    """The number an answer text spells (``sum s_i 10^i + c_last 10^n``), or None if it is not pairs of a digit
    and a carry in {0, 1}."""
    if not text or len(text) % 2 or not text.isdigit() or any(c not in "01" for c in text[1::2]):
        return None
    n = len(text) // 2
    return sum(int(text[2 * i]) * 10**i for i in range(n)) + int(text[-1]) * 10**n


class ColumnTokenizer(SymbolTokenizer):
    """Tokenizer and task of ``toy-long``: ``<pad> <bos> <eos> <mask> 0-9 + =`` (16 ids), prompts interleaved by
    column (module docstring). The task methods (``solution``, ``answer_length``, ``is_correct``,
    ``eval_problems``, ``training_batch``) match those of :class:`zoo.common.toy_text.ArithTokenizer`."""

    def __init__(self, digits: int = LONG_DIGITS):
        if digits < 1:
            raise ValueError(f"ColumnTokenizer: digits must be >= 1, got {digits}")
        rng = random.Random(1)
        ex = tuple(f"{rng.randrange(10**digits)}+{rng.randrange(10**digits)}=" for _ in range(2))
        super().__init__(list("0123456789+="), example_prompts=ex)
        self.digits = digits

    def operands(self, text: str) -> tuple[int, int]:
        """``(a, b)`` of a prompt text containing ``A+B``; a ValueError names what was expected."""
        m = re.search(r"(\d+)\s*\+\s*(\d+)", text)
        if m is None:
            raise ValueError(f"toy-long answers additions like '{self.example_prompts[0]}', got {text!r}")
        a, b = int(m.group(1)), int(m.group(2))
        if a >= 10**self.digits or b >= 10**self.digits:
            raise ValueError(f"toy-long adds numbers below 10**{self.digits}, got {a}+{b}")
        return a, b

    def _ids(self, a: int, b: int) -> list[int]:
        ids = [self.bos_token_id]
        for i in range(self.digits):
            ids += [4 + (a // 10**i) % 10, 4 + (b // 10**i) % 10]  # ids 4..13 are the digits 0..9
        return ids + [self.stoi["="]]

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Interleaved prompt ids of the addition in ``text`` (with ``<bos>`` unless ``add_bos`` is false)."""
        ids = self._ids(*self.operands(text))
        return ids if add_bos else ids[1:]

    def solution(self, a: int, b: int) -> str:
        return column_solution(a, b, self.digits)

    def answer_length(self) -> int:
        """Tokens of a full answer including the EOS."""
        return 2 * self.digits + 1

    def is_correct(self, prompt: str, completion: str) -> bool:
        """Exact match of the completion with the answer text (digits and carries)."""
        try:
            a, b = self.operands(prompt)
        except ValueError:
            return False
        return completion == self.solution(a, b)

    def eval_problems(self, n: int = 64) -> list[ToyExample]:
        """The fixed held-out problems (seed ``EVAL_SEED``, as the 3-digit toy's)."""
        rng = random.Random(EVAL_SEED)
        out = []
        for _ in range(n):
            a, b = rng.randrange(10**self.digits), rng.randrange(10**self.digits)
            out.append(ToyExample(a, b, f"{a}+{b}=", self.solution(a, b)))
        return out

    def training_batch(self, n: int, generator: "torch.Generator", banned: set[tuple[int, int]],
                       max_new_tokens: int, active_digits: int | None = None) -> tuple["torch.Tensor", int]:
        """``[n, P + max_new_tokens]`` rows (prompt, answer, EOS, EOS padding) and the prompt length ``P``;
        operand digits from ``torch.randint(0, 10, (n, 2, digits), generator=generator)``, pairs in ``banned``
        dropped and redrawn. ``active_digits`` (a length curriculum): operand digits from that one up are set to
        0, i.e. shorter additions in the same ``digits``-column layout (same prompt offsets); None: all digits."""
        import torch

        if max_new_tokens < self.answer_length():
            raise ValueError(f"max_new_tokens must be >= {self.answer_length()}, got {max_new_tokens}")
        if active_digits is not None and not 1 <= active_digits <= self.digits:
            raise ValueError(f"active_digits must be in 1..{self.digits}, got {active_digits}")
        powers = [10**i for i in range(self.digits)]
        rows: list[list[int]] = []
        while len(rows) < n:
            drawn = torch.randint(0, 10, (n - len(rows), 2, self.digits), generator=generator)
            if active_digits is not None:
                drawn[:, :, active_digits:] = 0
            for da, db in drawn.tolist():
                a, b = sum(d * p for d, p in zip(da, powers)), sum(d * p for d, p in zip(db, powers))
                if (a, b) in banned:
                    continue
                ans = self.encode_raw(self.solution(a, b)) + [self.eos_token_id]
                rows.append(self._ids(a, b) + ans + [self.eos_token_id] * (max_new_tokens - len(ans)))
        return torch.tensor(rows), 2 * self.digits + 2
