"""An explicit floating-point network whose values and ``torch.autograd`` input gradients equal
arbitrary target tables bit-exactly on a grid of consecutive floats.

Paper: Hwang et al., "Floating-point networks with automatic differentiation represent almost all
float functions and their gradients", ICML 2026, https://arxiv.org/abs/2605.01702 (theory; no
public code, no public construction). **The construction below is this project's, not the
paper's proof** (shared note ``methods/floating-point.md`` §4.3, generalised here): it shows the
paper's phenomenon — values f(x_i) = y_i and AD derivatives D^AD f(x_i) = g_i can be prescribed
independently — for φ = identity and one scalar input.

Layers (every hidden layer is ``Linear`` + activation; weights are exact floats):

1. ``a_j = ReLU(K_j x - K_j t_j)`` with thresholds ``t_j = x_{j-1}`` (``t_1`` = the float before
   ``x_1``) and ``K_j = 2 / (x_j - t_j)`` a power of two, so ``a_j`` is 0 for ``x <= t_j`` and
   ``>= 2`` on the grid above it; ``v = ReLU(K_0 (x - x_1) + 1)`` (slope ``K_0``, a power of two
   <= 1 keeping ``v`` in [1, 2]).
2. ``r1_j = ReLU(a_j)``, ``r2_j = ReLU(a_j - 1)`` (steps ``r1 - r2 = 1[x >= x_j]``, AD slope
   ``K - K = 0`` above, ``0`` at ``a = 0`` by PyTorch's ReLU'(0) = 0); ``v`` carried.
3. one-hot ``e_i = ReLU(r1_i - r2_i - r1_{i+1} + r2_{i+1})`` (value 0/1, AD derivative exactly 0).
4. ``q_i = ReLU(B e_i + (g_i / K_0) v - B/2)``: at ``x_i`` the ``g`` term is absorbed
   (value exactly ``B/2``) while AD still carries its slope; elsewhere negative (value 0).
5. ``z_i = σ(q_i - (B/2) e_i)``: pre-activation exactly 0 on the whole grid, so ``z = σ(0) = 0``
   while AD multiplies by ``σ'(0) = c`` (tanh 1, GELU / SiLU 0.5, ...).
6. ``f = Σ_i y_i e_i + Σ_i z_i / c``: one non-zero term per grid point, so the sum is exact in any order.

The note's original uses one fixed ``K = 2^24`` for grids in (1, 2): on a grid starting exactly at
1.0 the first step is one ulp *below* 1.0 (half the spacing above), ``a = 1``, ``r2``'s
pre-activation is 0 and one gradient breaks. ``step_scale="fixed"`` keeps that behaviour as a
negative control; the default scales each threshold by its own spacing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import torch
import torch.nn.functional as F

Gate = Literal["tanh", "gelu", "gelu-tanh", "silu", "elu", "softsign", "hardtanh"]

#: gate activations with σ(0) = 0 exactly and σ'(0) a power of two under PyTorch's autograd
#: (pinned by tests/methods/test_float_ad_networks.py)
GATES: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], float]] = {
    "tanh": (torch.tanh, 1.0),
    "gelu": (F.gelu, 0.5),
    "gelu-tanh": (lambda t: F.gelu(t, approximate="tanh"), 0.5),
    "silu": (F.silu, 0.5),
    "elu": (F.elu, 1.0),
    "softsign": (F.softsign, 1.0),
    "hardtanh": (F.hardtanh, 1.0),
}
#: activations the construction cannot use as the gate, and why
UNSUPPORTED_GATES = {
    "relu": "ReLU'(0) = 0: a zero-valued ReLU unit carries no gradient",
    "sigmoid": "sigmoid(0) = 0.5: centring needs an extra activation-free layer (not built)",
    "mish": "mish'(0) = tanh(log 2) is not a power of two: the slope cannot be cancelled exactly",
}


#: stored significand bits
NMANT = {torch.float32: 23, torch.float64: 52}


class ConstructionError(ValueError):
    """The targets or grid are outside what this construction represents exactly in the dtype."""


def float_grid(start: float, n: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``n`` consecutive floats of ``dtype`` from ``start`` (rounded to ``dtype``) upwards."""
    x = torch.empty(n, dtype=dtype)
    cur = torch.tensor(start, dtype=dtype)
    inf = torch.tensor(math.inf, dtype=dtype)
    for k in range(n):
        x[k] = cur
        cur = torch.nextafter(cur, inf)
    return x


def _pow2_floor(v: float) -> float:
    return 2.0 ** math.floor(math.log2(v))


@dataclass
class ExactNetwork:
    """The layered network: ``layers`` is a list of ``(weight, bias, activation)``; call it on a
    1-D tensor of inputs (one scalar input per row)."""

    layers: list[tuple[torch.Tensor, torch.Tensor, Callable[[torch.Tensor], torch.Tensor] | None]]
    out_weight: torch.Tensor
    out_bias: torch.Tensor

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        h = x.reshape(-1, 1)
        for w, b, act in self.layers:
            h = F.linear(h, w, b)
            h = act(h) if act is not None else h
        return F.linear(h, self.out_weight, self.out_bias).reshape(-1)

    @property
    def widths(self) -> list[int]:
        return [w.shape[0] for w, _, _ in self.layers]

    @property
    def n_nonzero(self) -> int:
        """Non-zero weights and biases (the construction is sparse: O(n) of the O(n²) dense entries)."""
        ts = [t for w, b, _ in self.layers for t in (w, b)] + [self.out_weight, self.out_bias]
        return int(sum(int(torch.count_nonzero(t)) for t in ts))

    @property
    def n_params(self) -> int:
        """Dense parameter count (every entry of every weight matrix and bias)."""
        return sum(w.numel() + b.numel() for w, b, _ in self.layers) + self.out_weight.numel() + self.out_bias.numel()


def build_network(grid: torch.Tensor, y: torch.Tensor, g: torch.Tensor, *, gate: str = "tanh",
                  step_scale: Literal["per-threshold", "fixed"] = "per-threshold",
                  relu: Callable[[torch.Tensor], torch.Tensor] = torch.relu, big: float | None = None) -> ExactNetwork:
    """The network of the module docstring for strictly increasing consecutive floats ``grid`` (all
    of one sign, normal numbers) and targets ``y``, ``g`` (same dtype). ``relu`` and ``big`` exist
    for negative controls (a ReLU with another derivative convention; a too small ``B``)."""
    dtype = grid.dtype
    if dtype not in (torch.float32, torch.float64):
        raise ConstructionError(f"dtype {dtype}: only float32 and float64 are supported")
    if gate not in GATES:
        raise ConstructionError(f"gate {gate!r}: supported {', '.join(GATES)}; not {', '.join(UNSUPPORTED_GATES)}")
    act, c = GATES[gate]
    n = grid.numel()
    fi = torch.finfo(dtype)
    nmant = NMANT[dtype]
    xs = [float(v) for v in grid]
    if n < 1 or any(b <= a for a, b in zip(xs, xs[1:])):
        raise ConstructionError("grid: expected strictly increasing floats")
    if min(abs(xs[0]), abs(xs[-1])) < fi.tiny * 2.0 ** (nmant + 2) or max(abs(xs[0]), abs(xs[-1])) > fi.max / 2.0 ** (nmant + 4):
        raise ConstructionError("grid: must stay clear of zero / subnormals and of overflow")
    prev = float(torch.nextafter(grid[:1], torch.tensor([-math.inf], dtype=dtype)))
    t = [prev] + xs  # thresholds t_1..t_{n+1}: t_j = x_{j-1}
    gaps = [b - a for a, b in zip(t, xs + [float(torch.nextafter(grid[-1:], torch.tensor([math.inf], dtype=dtype)))])]
    if step_scale == "fixed":
        ks = [2.0 ** (nmant + 1)] * (n + 1)  # the note's K = 2^24 (float32), meant for grids in (1, 2)
    else:
        ks = [2.0 / _pow2_floor(gp) for gp in gaps]  # spacing -> 2 exactly (gaps are powers of two)
    span = max(xs[-1] - xs[0], max(gaps))
    k0 = min(1.0, 2.0 ** -math.ceil(math.log2(span)))  # K_0 (x - x_1) in [0, 1]
    a0 = torch.tensor(k0 * xs[0], dtype=dtype)  # exact: scaling by a power of two
    ulp_a0 = float((torch.nextafter(a0.abs(), torch.tensor(math.inf, dtype=dtype)) - a0.abs()))
    u = max(1.0, 2.0 * ulp_a0)  # v's bias K_0 x_1 - u is exact and v's pre-activation >= u > 0 on the grid
    v_bias = float(-a0 + u)
    gy = [float(v) for v in g]
    gp = [v / k0 for v in gy]  # exact: division by a power of two (the gate slope c is undone by the output weight 1/c)
    vmax = u + 1.0
    gmax = max([abs(v) for v in gp] + [fi.tiny])
    if big is None:
        big = 2.0 ** (math.ceil(math.log2(gmax * vmax)) + nmant + 4)
    if not math.isfinite(big) or big * 8 > fi.max or not all(math.isfinite(v) for v in gp):
        raise ConstructionError(f"targets: |g| up to {max(abs(v) for v in gy):g} needs B = 2^{math.log2(big) if big else 0:.0f}, beyond {dtype}")
    z = dict(dtype=dtype)

    # layer 1: steps' ramps and the slope carrier v
    w1 = torch.tensor([[k] for k in ks] + [[k0]], **z)
    b1 = torch.tensor([-k * tj for k, tj in zip(ks, t)] + [v_bias], **z)
    # layer 2: r1_j, r2_j (interleaved as [r1_1..r1_{n+1}, r2_1..r2_{n+1}]) and v
    m = n + 1
    w2 = torch.zeros(2 * m + 1, m + 1, **z)
    b2 = torch.zeros(2 * m + 1, **z)
    for j in range(m):
        w2[j, j] = 1.0
        w2[m + j, j] = 1.0
        b2[m + j] = -1.0
    w2[2 * m, m] = 1.0
    # layer 3: one-hot e_i and v
    w3 = torch.zeros(n + 1, 2 * m + 1, **z)
    for i in range(n):
        w3[i, i], w3[i, m + i], w3[i, i + 1], w3[i, m + i + 1] = 1.0, -1.0, -1.0, 1.0
    w3[n, 2 * m] = 1.0
    b3 = torch.zeros(n + 1, **z)
    # layer 4: q_i (absorbing) and e carried
    w4 = torch.zeros(2 * n, n + 1, **z)
    b4 = torch.zeros(2 * n, **z)
    for i in range(n):
        w4[i, i], w4[i, n], b4[i] = big, gp[i], -big / 2
        w4[n + i, i] = 1.0
    # layer 5: zero-valued gate units and e carried
    w5 = torch.zeros(2 * n, 2 * n, **z)
    for i in range(n):
        w5[i, i], w5[i, n + i] = 1.0, -big / 2
        w5[n + i, n + i] = 1.0
    b5 = torch.zeros(2 * n, **z)

    def gate_then_carry(h: torch.Tensor) -> torch.Tensor:
        return torch.cat([act(h[:, :n]), relu(h[:, n:])], dim=1)

    out_w = torch.cat([torch.full((1, n), 1.0 / c, **z), torch.tensor([[float(v) for v in y]], **z)], dim=1)
    # f = Σ (1/c) z_i + Σ y_i e_i: z is exactly 0, e one-hot, so one non-zero term
    layers = [(w1, b1, relu), (w2, b2, relu), (w3, b3, relu), (w4, b4, relu), (w5, b5, gate_then_carry)]
    return ExactNetwork(layers, out_w, torch.zeros(1, **z))


def values_and_grads(net: ExactNetwork, grid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``f(x)`` and ``torch.autograd`` ``df/dx`` at every grid point (one backward of ``f.sum()``:
    each output depends on its own input only)."""
    x = grid.detach().clone().requires_grad_(True)
    f = net(x)
    (dx,) = torch.autograd.grad(f.sum(), x)
    return f.detach(), dx


def exact_match(net: ExactNetwork, grid: torch.Tensor, y: torch.Tensor, g: torch.Tensor) -> tuple[int, int]:
    """How many grid points match ``y`` and ``g`` bit for bit (values, gradients); compares bit
    patterns, so -0.0 vs 0.0 counts as a mismatch only where the target says so (it never does
    for value 0 in this construction: ``0 * y`` sums are +0)."""
    f, dx = values_and_grads(net, grid)
    return int(_bits_equal(f, y).sum()), int(_bits_equal(dx, g).sum())


def _bits_equal(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # equal as numbers (so +0 == -0) and both NaN-free; targets are finite
    return (a == b) & torch.isfinite(a)
