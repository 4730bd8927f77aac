"""The 20-letter amino-acid alphabet, the ESM-2 / DPLM token vocabulary and the substitution kernels
``T_sub`` of DPLM-Evo (arXiv 2605.00182, Sec. 3: uniform ``U_K = 11ᵀ/K``, a static BLOSUM-derived matrix,
and the contextual kernel, which lives in :mod:`.noise` because it needs the network).

BLOSUM62 (Henikoff & Henikoff 1992, PNAS 89:10915) is the public NCBI table, written here as data in the
order ``ARNDCQEGHILKMFPSTWYV``. Its half-bit log-odds ``S_ab = 2 log2(q_ab / (p_a p_b))`` turn into a
row-stochastic kernel with uniform background: ``T(b | a) ∝ 2^{S_ab / 2}`` [recon: the paper's exact
normalisation of ``M_BLOSUM`` is not given in the available material].
"""
from __future__ import annotations

import torch

__all__ = ["AA", "ESM_VOCAB", "BLOSUM62", "K", "aa_ids", "blosum_kernel", "uniform_kernel", "encode", "decode"]

AA = "ARNDCQEGHILKMFPSTWYV"
K = len(AA)

#: ESM-2's 33-token alphabet (fair-esm ``Alphabet.from_architecture("ESM-1b")``), which DPLM inherits.
ESM_VOCAB = ("<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I", "D", "P", "K", "Q",
             "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O", ".", "-", "<null_1>", "<mask>")
CLS_ID, PAD_ID, EOS_ID, MASK_ID = 0, 1, 2, 32

_BLOSUM62_ROWS = """
 4 -1 -2 -2  0 -1 -1  0 -2 -1 -1 -1 -1 -2 -1  1  0 -3 -2  0
-1  5  0 -2 -3  1  0 -2  0 -3 -2  2 -1 -3 -2 -1 -1 -3 -2 -3
-2  0  6  1 -3  0  0  0  1 -3 -3  0 -2 -3 -2  1  0 -4 -2 -3
-2 -2  1  6 -3  0  2 -1 -1 -3 -4 -1 -3 -3 -1  0 -1 -4 -3 -3
 0 -3 -3 -3  9 -3 -4 -3 -3 -1 -1 -3 -1 -2 -3 -1 -1 -2 -2 -1
-1  1  0  0 -3  5  2 -2  0 -3 -2  1  0 -3 -1  0 -1 -2 -1 -2
-1  0  0  2 -4  2  5 -2  0 -3 -3  1 -2 -3 -1  0 -1 -3 -2 -2
 0 -2  0 -1 -3 -2 -2  6 -2 -4 -4 -2 -3 -3 -2  0 -2 -2 -3 -3
-2  0  1 -1 -3  0  0 -2  8 -3 -3 -1 -2 -1 -2 -1 -2 -2  2 -3
-1 -3 -3 -3 -1 -3 -3 -4 -3  4  2 -3  1  0 -3 -2 -1 -3 -1  3
-1 -2 -3 -4 -1 -2 -3 -4 -3  2  4 -2  2  0 -3 -2 -1 -2 -1  1
-1  2  0 -1 -3  1  1 -2 -1 -3 -2  5 -1 -3 -1  0 -1 -3 -2 -2
-1 -1 -2 -3 -1  0 -2 -3 -2  1  2 -1  5  0 -2 -1 -1 -1 -1  1
-2 -3 -3 -3 -2 -3 -3 -3 -1  0  0 -3  0  6 -4 -2 -2  1  3 -1
-1 -2 -2 -1 -3 -1 -1 -2 -2 -3 -3 -1 -2 -4  7 -1 -1 -4 -3 -2
 1 -1  1  0 -1  0  0  0 -1 -2 -2  0 -1 -2 -1  4  1 -3 -2 -2
 0 -1  0 -1 -1 -1 -1 -2 -2 -1 -1 -1 -1 -2 -1  1  5 -2 -2  0
-3 -3 -4 -4 -2 -2 -3 -2 -2 -3 -2 -3 -1  1 -4 -3 -2 11  2 -3
-2 -2 -2 -3 -2 -1 -2 -3  2 -1 -1 -2 -1  3 -3 -2 -2  2  7 -1
 0 -3 -3 -3 -1 -2 -2 -3 -3  3  1 -2  1 -1 -2 -2  0 -3 -1  4
"""
#: ``[20, 20]`` BLOSUM62 scores (half bits), rows/columns in :data:`AA` order.
BLOSUM62 = torch.tensor([[int(v) for v in line.split()] for line in _BLOSUM62_ROWS.strip().splitlines()], dtype=torch.long)


def aa_ids() -> torch.Tensor:
    """``[20]`` ESM vocabulary ids of :data:`AA` (the sub head reads these 20 logits)."""
    return torch.tensor([ESM_VOCAB.index(a) for a in AA], dtype=torch.long)


def uniform_kernel(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``U_K = 11ᵀ / K`` (paper Sec. 3, option 1)."""
    return torch.full((K, K), 1.0 / K, dtype=dtype)


def blosum_kernel(dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Row-stochastic ``T(b | a) ∝ 2^{S_ab / 2}`` from BLOSUM62 (option 2; [recon] normalisation)."""
    w = torch.pow(torch.tensor(2.0, dtype=dtype), BLOSUM62.to(dtype) / 2)
    return w / w.sum(1, keepdim=True)


def encode(seq: str) -> torch.Tensor:
    """Letters of :data:`AA` -> indices ``0..19`` (a ValueError names the first bad letter)."""
    bad = [c for c in seq if c not in AA]
    if bad:
        raise ValueError(f"sequence has {bad[0]!r}, not one of the 20 amino acids {AA}")
    return torch.tensor([AA.index(c) for c in seq], dtype=torch.long)


def decode(idx) -> str:
    return "".join(AA[int(i)] for i in idx)
