"""RobuQ operators (Yang, Zhang et al., "RobuQ: Pushing DiTs to W1.58A2 via Robust Activation
Quantization", arXiv 2509.23582): ternary weights, (block-)Hadamard rotation, per-token uniform
activation quantisation with a straight-through estimator, and the quantised ``nn.Linear``.

No RobuQ code is public (github.com/racoonykc/RobuQ holds a README only); the formulas below follow
the method note ``shared/methods/robuq.md`` sec. 4.2, and the reconstructions are marked there and here.

* Ternary weights, per output channel j (scale rule reconstructed from BitNet b1.58's absmean,
  arXiv 2402.17764 eq. 1-3): ``a_j = mean_i |W_ji| + eps``, ``W^_ji = a_j clip(round(W_ji / a_j), -1, 1)``.
* Per-token uniform activation quantiser (min-max), b bits: ``s = (M - m) / (2^b - 1)``,
  ``x^ = m + s clamp(round((x - m) / s), 0, 2^b - 1)``; straight-through gradient ``dx^/dx = 1``
  (Bengio et al. arXiv 1308.3432).
* ``clip="gaussian"`` (the note's sec. 4.2 item 5, an option; the paper's RobustQuantizer chose a uniform
  quantiser because the rotated tokens are near-normal): per-token levels ``mu + sigma c_b (j - (2^b - 1)/2)``,
  ``j = 0 .. 2^b - 1``, with ``c_b`` the MSE-optimal uniform step for a unit Gaussian (Max, "Quantizing for
  minimum distortion", IRE Trans. IT 1960: 1.596, 0.996, 0.586, 0.335 for b = 1..4), computed here by
  quadrature; values beyond the outer decision points are clipped (gradient 0 there).
* Hadamard rotation (RobuQ sec. "RobustQuantizer"; QuaRot, arXiv 2404.00456): with orthonormal ``H``,
  ``y = (x H)(W H)^T + b = x W^T + b`` exactly; the rotated token ``x H`` is quantised per token. Widths
  that are not powers of two use a block-diagonal Hadamard with the largest power-of-two block dividing
  the width (e.g. 1152 = 9 x 128); the fast transform is the O(n log n) Walsh-Hadamard butterfly on
  each block and equals the dense matrix.
* The FP low-rank branch (RobuQ's "enhanced baseline"; rank and init reconstructed): ``y = Q_a(x H)
  T(W H)^T + (x H) D^T U^T + b`` with ``U D`` the rank-r truncated SVD of ``W H - T(W H)`` at
  installation.
* adaLN modulation: per-channel symmetric 4-bit weights (absmax) and 4-bit activations (the paper's
  fixed W4A4 for adaLN; the scale rule is ours).
"""
from __future__ import annotations

import functools
import math
from typing import Literal

import torch
from torch import nn

__all__ = [
    "hadamard_block", "hadamard_matrix", "fast_hadamard", "ternarize", "ternary_codes", "int_codes", "int_weight", "quantize_tokens", "ste_quantize_tokens", "quantize_tokens_gaussian",
    "QuantLinear", "WeightMode", "ClipMode", "gaussian_step",
]

WeightMode = Literal["fp", "ternary", "int4"]
ClipMode = Literal["minmax", "gaussian"]


# ----------------------------------------------------------------------------- Hadamard
def hadamard_block(n: int, block: int | None = None) -> int:
    """The Hadamard block size used for width ``n``: ``block`` if given (it must be a power of two
    dividing ``n``), else the largest power of two dividing ``n`` (``n`` itself when ``n`` is one)."""
    if n < 1:
        raise ValueError(f"width must be >= 1, got {n}")
    if block is None:
        return n & (-n)
    if block < 1 or block & (block - 1) or n % block:
        raise ValueError(f"hadamard block {block} must be a power of two dividing the width {n}")
    return block


def hadamard_matrix(n: int, block: int | None = None, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Dense orthonormal (block-diagonal) Sylvester Hadamard matrix ``(n, n)``: ``H H^T = I``, symmetric."""
    b = hadamard_block(n, block)
    h = torch.ones(1, 1, dtype=dtype)
    while h.shape[0] < b:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    h = h / math.sqrt(b)
    return torch.block_diag(*([h] * (n // b))) if n // b > 1 else h


def fast_hadamard(x: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """``x @ H`` along the last axis by the Walsh-Hadamard butterfly on each block (O(n log b))."""
    n = x.shape[-1]
    b = hadamard_block(n, block)
    if b == 1:
        return x
    shape = x.shape
    y = x.reshape(-1, n // b, b)
    h = 1
    while h < b:
        y = y.reshape(y.shape[0], n // b, b // (2 * h), 2, h)
        a, c = y[..., 0, :], y[..., 1, :]
        y = torch.stack([a + c, a - c], dim=-2)
        h *= 2
    return (y.reshape(shape) / math.sqrt(b))


# ----------------------------------------------------------------------------- weights
def ternarize(w: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Per-output-channel ternary weights ``a_j clip(round(W_j / a_j), -1, 1)``, ``a_j = mean|W_j| + eps``."""
    codes, alpha = ternary_codes(w, eps)
    return alpha * codes.to(w.dtype)


def ternary_codes(w: torch.Tensor, eps: float = 1e-8) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes in {-1, 0, 1} as int8, per-row scale ``a_j``) with ``ternarize(w) == a * codes``."""
    alpha = w.abs().mean(dim=-1, keepdim=True) + eps
    return (w / alpha).round().clamp(-1, 1).to(torch.int8), alpha


def int_codes(w: torch.Tensor, bits: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel symmetric absmax ``bits``-bit codes (``-(2^(b-1)-1) .. 2^(b-1)-1``, int8) and scales."""
    qmax = 2 ** (bits - 1) - 1
    s = w.abs().amax(dim=-1, keepdim=True).clamp_min(1e-8) / qmax
    return (w / s).round().clamp(-qmax, qmax).to(torch.int8), s


def int_weight(w: torch.Tensor, bits: int = 4) -> torch.Tensor:
    """Per-output-channel symmetric absmax ``bits``-bit weights ``s_j code``."""
    codes, s = int_codes(w, bits)
    return s * codes.to(w.dtype)


def _ste(x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    return x + (q - x).detach()


# ----------------------------------------------------------------------------- activations
def quantize_tokens(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Per-token (last axis) min-max uniform quantisation to ``bits`` bits (no gradient trick).

    Levels ``m + s q``, ``q = 0 .. 2^b - 1``, ``s = (M - m) / (2^b - 1)``; a constant token is returned
    unchanged. Error ``|x^ - x| <= s / 2``; the token min and max are reconstruction points."""
    if bits < 1:
        raise ValueError(f"bits must be >= 1, got {bits}")
    levels = 2 ** bits - 1
    m = x.amin(dim=-1, keepdim=True)
    M = x.amax(dim=-1, keepdim=True)
    s = (M - m) / levels
    safe = torch.where(s > 0, s, torch.ones_like(s))
    q = ((x - m) / safe).round().clamp(0, levels)
    return torch.where(s > 0, m + q * s, x)


@functools.lru_cache(maxsize=None)
def gaussian_step(bits: int) -> float:
    """MSE-optimal step ``c_b`` (in units of sigma) of a symmetric uniform ``2^b``-level quantiser for N(0, 1):
    argmin_c E[(x - Q_c(x))^2] by golden-section search on a 200k-point quadrature over [-12, 12]
    (Max 1960's values: 1.596, 0.996, 0.586, 0.335 for b = 1..4)."""
    if not 1 <= bits <= 16:
        raise ValueError(f"bits must be 1..16, got {bits}")
    x = torch.linspace(-12, 12, 200_001, dtype=torch.float64)
    w = torch.exp(-0.5 * x**2)
    w = w / w.sum()
    half = (2**bits - 1) / 2

    def mse(c: float) -> float:
        q = ((x / c + half).round().clamp(0, 2 * half) - half) * c
        return float((w * (x - q) ** 2).sum())

    lo, hi = 1e-4, 4.0
    r = (math.sqrt(5) - 1) / 2
    a, b = hi - r * (hi - lo), lo + r * (hi - lo)
    fa, fb = mse(a), mse(b)
    for _ in range(80):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - r * (hi - lo)
            fa = mse(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + r * (hi - lo)
            fb = mse(b)
    return (lo + hi) / 2


def quantize_tokens_gaussian(x: torch.Tensor, bits: int) -> torch.Tensor:
    """Per-token uniform quantiser sized for a Gaussian token: levels ``mu + sigma c_b (j - (2^b - 1)/2)``
    (``mu``, ``sigma`` = the token's mean and population std; ``c_b`` = :func:`gaussian_step`); values beyond
    the outer levels are clipped to them. A constant token is returned unchanged."""
    half = (2**bits - 1) / 2
    mu = x.mean(dim=-1, keepdim=True)
    step = x.std(dim=-1, keepdim=True, correction=0) * gaussian_step(bits)
    safe = torch.where(step > 0, step, torch.ones_like(step))
    q = ((x - mu) / safe + half).round().clamp(0, 2 * half)
    return torch.where(step > 0, mu + (q - half) * step, x)


def ste_quantize_tokens(x: torch.Tensor, bits: int | None, clip: ClipMode = "minmax") -> torch.Tensor:
    """:func:`quantize_tokens` with the straight-through gradient (identity); ``bits=None``: ``x``.
    ``clip="gaussian"``: :func:`quantize_tokens_gaussian`, gradient 1 inside the outer levels and 0 beyond them."""
    if bits is None:
        return x
    if clip == "minmax":
        return _ste(x, quantize_tokens(x, bits))
    if clip != "gaussian":
        raise ValueError(f"clip: expected minmax or gaussian, got {clip!r}")
    q = quantize_tokens_gaussian(x, bits)
    with torch.no_grad():
        mu = x.mean(dim=-1, keepdim=True)
        reach = x.std(dim=-1, keepdim=True, correction=0) * gaussian_step(bits) * (2**bits - 1) / 2
    return _ste(torch.minimum(torch.maximum(x, mu - reach), mu + reach), q)


# ----------------------------------------------------------------------------- the quantised Linear
class QuantLinear(nn.Module):
    """Drop-in replacement of ``nn.Linear`` with RobuQ's fake quantisation (see the module docstring).

    ``weight_mode``: ``fp`` / ``ternary`` / ``int4``; ``a_bits``: activation bits (``None`` = FP); ``a_clip``:
    the per-token range (``minmax`` or ``gaussian``, see the module docstring);
    ``hadamard``: rotate the input (block ``block``); ``lowrank_rank``: rank of the FP SVD branch
    (0 = none). ``enabled=False`` runs the plain FP Linear (the latent weight) whatever the settings.
    After :meth:`freeze` the ternary rotated weight is a fixed buffer (the packed-export form).
    """

    def __init__(self, linear: nn.Linear, weight_mode: WeightMode = "ternary", a_bits: int | None = 4, hadamard: bool = True,
                 block: int | None = None, lowrank_rank: int = 0, a_clip: ClipMode = "minmax"):
        super().__init__()
        if a_clip not in ("minmax", "gaussian"):
            raise ValueError(f"a_clip: expected minmax or gaussian, got {a_clip!r}")
        self.a_clip: ClipMode = a_clip
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = nn.Parameter(linear.weight.detach().clone())
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().clone())
        self.weight_mode: WeightMode = weight_mode
        self.a_bits = a_bits
        self.hadamard = hadamard
        self.block = hadamard_block(self.in_features, block) if hadamard else None
        self.enabled = True
        self.frozen = False
        r = min(int(lowrank_rank), self.in_features, self.out_features)
        self.lowrank_rank = r
        if r > 0:
            with torch.no_grad():
                wr = self.rotated_weight()
                err = (wr - self.quantize_weight(wr)).double()
                u, s, vh = torch.linalg.svd(err, full_matrices=False)
            self.lr_up = nn.Parameter((u[:, :r] * s[:r]).to(linear.weight.dtype))
            self.lr_down = nn.Parameter(vh[:r].to(linear.weight.dtype).clone())
        else:
            self.lr_up = self.lr_down = None

    def rotate(self, x: torch.Tensor) -> torch.Tensor:
        return fast_hadamard(x, self.block) if self.hadamard else x

    def rotated_weight(self) -> torch.Tensor:
        """``W H`` (``W`` when no rotation)."""
        return self.rotate(self.weight)

    def quantize_weight(self, w: torch.Tensor) -> torch.Tensor:
        if self.weight_mode == "ternary":
            return ternarize(w)
        if self.weight_mode == "int4":
            return int_weight(w, 4)
        return w

    def effective_weight(self) -> torch.Tensor:
        """The (rotated, quantised) weight used by the forward pass, with the STE to the latent weight."""
        if self.frozen:
            return self.w_hat
        wr = self.rotated_weight()
        return _ste(wr, self.quantize_weight(wr)) if self.weight_mode != "fp" else wr

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            if self.frozen:
                raise RuntimeError("a frozen QuantLinear has no FP weight: it cannot run with enabled=False")
            return nn.functional.linear(x, self.weight, self.bias)
        xr = self.rotate(x)
        y = nn.functional.linear(ste_quantize_tokens(xr, self.a_bits, self.a_clip), self.effective_weight(), self.bias)
        if self.lr_up is not None:
            y = y + nn.functional.linear(nn.functional.linear(xr, self.lr_down), self.lr_up)
        return y

    @torch.no_grad()
    def freeze(self) -> None:
        """Replace the latent weight by the fixed quantised rotated weight (inference / packed export)."""
        w_hat = self.quantize_weight(self.rotated_weight()).detach().clone()
        del self.weight
        self.register_buffer("w_hat", w_hat)
        self.frozen = True

    def extra_repr(self) -> str:
        return (f"{self.in_features}, {self.out_features}, weight={self.weight_mode}, a_bits={self.a_bits}, clip={self.a_clip}, hadamard={self.hadamard}"
                f"(block={self.block}), lowrank={self.lowrank_rank}, enabled={self.enabled}")
