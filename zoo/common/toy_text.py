"""A toy reasoning task with checkable answers and its character tokenizer, shared by the
discrete-LM methods' CPU variants (PoE-Bridge first), and a general symbol tokenizer for other toys.

Task: column addition of two ``digits``-digit numbers, written out step by step from the least
significant column, each step ``a+b+carry=ss;``, then ``>`` and the zero-padded sum::

    prompt  "<bos>347+285="
    answer  "7+5+0=12;4+8+1=13;3+2+1=06;>0632<eos>"

The answer is a deterministic function of the prompt, so exact-match accuracy is computable; the
chain of carries makes far positions depend on near ones (what one-shot parallel decoding gets wrong).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

SPECIALS = ["<pad>", "<bos>", "<eos>", "<mask>"]
CHARS = list("0123456789+=;>")


class SymbolTokenizer:
    """A general character/symbol tokenizer for toy tasks: ids ``0..3`` are ``<pad> <bos> <eos> <mask>``,
    then one id per symbol of ``symbols`` (single characters, or multi-character symbols matched
    longest-first). ``encode(text)`` prepends ``<bos>``; ``decode`` stops at ``<eos>`` and drops specials
    when ``skip_special_tokens``. ``example_prompts`` (optional) are what the samplers' conformance
    checks and CLI use when no prompt is given.
    """

    def __init__(self, symbols, example_prompts: tuple[str, ...] = ()):
        symbols = list(symbols)
        if len(set(symbols)) != len(symbols) or any(not s for s in symbols):
            raise ValueError("symbols must be distinct non-empty strings")
        clash = set(symbols) & set(SPECIALS)
        if clash:
            raise ValueError(f"symbols may not be special tokens: {sorted(clash)}")
        self.vocab = SPECIALS + symbols
        self.stoi = {s: i for i, s in enumerate(self.vocab)}
        self.pad_token_id, self.bos_token_id, self.eos_token_id, self.mask_token_id = 0, 1, 2, 3
        self.vocab_size = len(self.vocab)
        self.example_prompts = tuple(example_prompts)
        self._by_length = sorted(symbols, key=len, reverse=True)
        self._single_chars = all(len(sym) == 1 for sym in symbols)

    def __len__(self) -> int:
        return self.vocab_size

    def encode_raw(self, text: str) -> list[int]:
        """Ids of ``text`` (no BOS); an unknown character is an error naming its position."""
        if self._single_chars:  # fast path (training scripts encode every example)
            try:
                return [self.stoi[ch] for ch in text]
            except KeyError:
                pass  # fall through for the positioned error
        out, i = [], 0
        while i < len(text):
            for sym in self._by_length:
                if text.startswith(sym, i):
                    out.append(self.stoi[sym])
                    i += len(sym)
                    break
            else:
                raise ValueError(f"character {text[i]!r} at position {i} is not in the tokenizer's symbols")
        return out

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        return ([self.bos_token_id] if add_bos else []) + self.encode_raw(text)

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_token_id and skip_special_tokens:
                break
            if i < 0 or i >= self.vocab_size:
                out.append("?")
                continue
            s = self.vocab[i]
            if skip_special_tokens and s in SPECIALS:
                continue
            out.append(s)
        return "".join(out)


class ArithTokenizer(SymbolTokenizer):
    """Character tokenizer of the toy task: ``<pad> <bos> <eos> <mask> 0-9 + = ; >`` (18 ids).

    ``encode`` is lenient with prompts: any text containing ``A + B`` (e.g. "What is 17+23?") becomes
    the canonical prompt ``<bos>017+023=`` so that ``pipe("17+23")`` works.
    """

    def __init__(self, digits: int = 3):
        super().__init__(CHARS, example_prompts=("347+285=", "512+489="))
        self.digits = digits

    def canonical_prompt(self, text: str) -> str:
        m = re.search(r"(\d+)\s*\+\s*(\d+)", text)
        if m is None:
            raise ValueError(f"the toy variant answers additions like '347+285', got {text!r}")
        a, b = int(m.group(1)), int(m.group(2))
        lim = 10**self.digits
        if a >= lim or b >= lim:
            raise ValueError(f"the toy variant adds numbers below {lim}, got {a}+{b}")
        return f"{a:0{self.digits}d}+{b:0{self.digits}d}="

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of a prompt (canonicalised) with a leading ``<bos>``."""
        body = self.canonical_prompt(text)
        return ([self.bos_token_id] if add_bos else []) + self.encode_raw(body)

    # the task, as methods (so that code can take the task from a model's ``zoo_tokenizer``)
    def solution(self, a: int, b: int) -> str:
        """:func:`solution` at this tokenizer's ``digits``."""
        return solution(a, b, self.digits)

    def answer_length(self) -> int:
        """:func:`answer_length` at this tokenizer's ``digits``."""
        return answer_length(self.digits)

    def is_correct(self, prompt: str, completion: str) -> bool:
        """:func:`is_correct` at this tokenizer's ``digits``."""
        return is_correct(prompt, completion, self.digits)

    def eval_problems(self, n: int = 64) -> list["ToyExample"]:
        """:func:`eval_problems` at this tokenizer's ``digits``."""
        return eval_problems(n, self.digits)

    def training_batch(self, n: int, generator: "torch.Generator", banned: set[tuple[int, int]],
                       max_new_tokens: int = 40) -> tuple["torch.Tensor", int]:
        """:func:`training_batch` at this tokenizer's ``digits``."""
        return training_batch(self, n, generator, self.digits, banned, max_new_tokens)


def solution(a: int, b: int, digits: int = 3) -> str:
    """The step-by-step answer text of ``a + b`` (without EOS)."""
    steps, carry = [], 0
    for i in range(digits):
        da, db = (a // 10**i) % 10, (b // 10**i) % 10
        s = da + db + carry
        steps.append(f"{da}+{db}+{carry}={s:02d};")
        carry = s // 10
    return "".join(steps) + f">{a + b:0{digits + 1}d}"


def answer_length(digits: int = 3) -> int:
    """Tokens of a full answer including the final EOS."""
    return 9 * digits + 1 + (digits + 1) + 1


def parse_answer(text: str) -> int | None:
    """The final number after ``>`` (``None`` if absent or malformed)."""
    m = re.search(r">(\d+)", text)
    return int(m.group(1)) if m else None


def is_correct(prompt: str, completion: str, digits: int = 3) -> bool:
    """Exact match of the completion's final number against the true sum."""
    m = re.search(r"(\d+)\+(\d+)", prompt)
    if m is None:
        return False
    return parse_answer(completion) == int(m.group(1)) + int(m.group(2))


@dataclass
class ToyExample:
    a: int
    b: int
    prompt: str
    answer: str


def sample_problems(n: int, seed: int, digits: int = 3) -> list[ToyExample]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b = rng.randrange(10**digits), rng.randrange(10**digits)
        out.append(ToyExample(a, b, f"{a:0{digits}d}+{b:0{digits}d}=", solution(a, b, digits)))
    return out


# fixed held-out evaluation set (training draws from a different seed stream and skips these pairs)
EVAL_SEED = 20260601


def eval_problems(n: int = 64, digits: int = 3) -> list[ToyExample]:
    return sample_problems(n, EVAL_SEED, digits)


def training_batch(tok: ArithTokenizer, n: int, generator: "torch.Generator", digits: int, banned: set[tuple[int, int]],
                   max_new_tokens: int = 40) -> tuple["torch.Tensor", int]:
    """A training batch for the addition task: ``[n, P + max_new_tokens]`` token rows (prompt, step-by-step
    answer, EOS, EOS padding as in LLaDA's SFT) and the prompt length ``P``. Operand pairs come from
    ``torch.randint(0, 10**digits, (2,), generator=generator)``; pairs in ``banned`` (the held-out
    :func:`eval_problems`) are redrawn. The draw order is the one the shipped toy checkpoints were trained with."""
    import torch

    lim = 10**digits
    rows = []
    while len(rows) < n:
        a, b = (int(v) for v in torch.randint(0, lim, (2,), generator=generator))
        if (a, b) in banned:
            continue
        prompt = tok.encode(f"{a}+{b}")
        ans = tok.encode_raw(solution(a, b, digits)) + [tok.eos_token_id]
        rows.append(prompt + ans + [tok.eos_token_id] * (max_new_tokens - len(ans)))
    return torch.tensor(rows), len(prompt)
