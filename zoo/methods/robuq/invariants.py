"""Named property checks for ``robuq`` (run by the conformance harness under Hypothesis).

Each invariant calls a ``check_*`` function that takes the implementation under test as an argument,
so ``tests/methods/test_robuq.py`` feeds it a plausible wrong implementation (the negative control) and
sees it fail. All checks are exact (float64 identities, brute force) except
:func:`check_hadamard_helps`, which is deterministic per seed and states its margin."""
from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.contract import invariant

from .attention import QuantAttnProcessor, quantized_attention
from .model import allocate_bits, brute_force_bits, install_quantizers, set_enabled
from .quant import fast_hadamard, hadamard_matrix, quantize_tokens, ste_quantize_tokens, ternarize

_FAST = settings(max_examples=10, deadline=None)
_SEEDS = st.integers(0, 2**31 - 1)
# power-of-two widths and block-diagonal (non-power-of-two) ones: 96 = 3 x 32, 384 = 3 x 128, 1152 = 9 x 128 (DiT-XL/2)
WIDTHS = [(8, None), (64, None), (96, None), (384, None), (1152, 128)]


# ----------------------------------------------------------------------------- Hadamard
def check_hadamard(dense: Callable[..., torch.Tensor], fast: Callable[..., torch.Tensor], n: int, block: int | None, seed: int) -> None:
    """``H H^T = I`` and ``H^T H = I`` (1e-12), fast transform == dense matmul (1e-10), applying it twice
    restores ``x`` (H symmetric, so H is its own inverse), and ``(x H)(W H)^T = x W^T`` (1e-10), float64."""
    g = torch.Generator().manual_seed(seed)
    H = dense(n, block)
    eye = torch.eye(n, dtype=torch.float64)
    assert (H @ H.T - eye).abs().max() <= 1e-12 and (H.T @ H - eye).abs().max() <= 1e-12, f"H not orthonormal (n={n})"
    x = torch.randn(3, n, generator=g, dtype=torch.float64)
    w = torch.randn(5, n, generator=g, dtype=torch.float64)
    assert (fast(x, block) - x @ H).abs().max() <= 1e-10, f"fast != dense (n={n})"
    assert (fast(fast(x, block), block) - x).abs().max() <= 1e-10, f"rotation not self-inverse (n={n})"
    assert (fast(x, block) @ fast(w, block).T - x @ w.T).abs().max() <= 1e-10 * (1 + (x @ w.T).abs().max()), f"(xH)(WH)^T != xW^T (n={n})"


@invariant("hadamard-orthonormal-fast-equals-dense-rotation-exact")
@_FAST
@given(_SEEDS, st.sampled_from(WIDTHS))
def hadamard_exact(seed: int, nb: tuple[int, int | None]) -> None:
    """The (block-)Hadamard matrix is orthonormal, the butterfly equals the dense matrix, the rotation
    is its own inverse and leaves a linear layer's output unchanged, for power-of-two and block widths."""
    check_hadamard(hadamard_matrix, fast_hadamard, nb[0], nb[1], seed)


# ----------------------------------------------------------------------------- ternary weights
def check_ternary(tern: Callable[[torch.Tensor], torch.Tensor], seed: int) -> None:
    """Each row of ``T(W)`` takes values in ``{-a_j, 0, a_j}`` with ``a_j = mean_i |W_ji|`` (rel. 1e-6); signs
    agree with ``W`` where non-zero; ``T(cW) = c T(W)`` for ``c > 0`` (1e-6: the 1e-8 floor of a_j); rows are independent; a zero row stays zero."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(6, 17, generator=g, dtype=torch.float64) * torch.exp(torch.randn(6, 1, generator=g, dtype=torch.float64))
    w[2] = 0.0
    t = tern(w)
    for j in range(w.shape[0]):
        a = float(w[j].abs().mean())
        vals = t[j].unique()
        for v in vals.tolist():
            assert abs(v) <= 1e-6 * a + 1e-12 or abs(abs(v) - a) <= 1e-6 * a, f"row {j}: value {v} not in {{-a, 0, a}}, a = {a}"
    nz = t != 0
    assert torch.equal(torch.sign(t[nz]), torch.sign(w[nz])), "ternary sign differs from the weight's"
    c = float(torch.rand(1, generator=g, dtype=torch.float64)) * 10 + 0.1
    assert torch.allclose(tern(c * w), c * t, rtol=1e-6, atol=1e-12), "not positively homogeneous"  # eps = 1e-8 in a_j
    assert torch.equal(tern(w[3:4]), t[3:4]), "rows are not quantised independently"
    assert torch.count_nonzero(t[2]) == 0


@invariant("ternary-weights-three-values-per-channel")
@_FAST
@given(_SEEDS)
def ternary_values(seed: int) -> None:
    """Ternary weights are per-output-channel {-a_j, 0, a_j}, a_j = absmean of the row, sign-preserving and scale-equivariant."""
    check_ternary(ternarize, seed)


# ----------------------------------------------------------------------------- activation quantiser
def check_token_quantizer(q: Callable[[torch.Tensor, int], torch.Tensor], bits: int, seed: int) -> None:
    """Per token: at most ``2^b`` distinct values; the min and max are reconstruction points; ``|x^ - x| <= s/2``
    (+1e-12); idempotent ``Q(Q(x)) = Q(x)`` (1e-12 relative); affine-equivariant up to float error; b = 16 gives
    relative error < 1e-4. float64."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(7, 33, generator=g, dtype=torch.float64) * torch.exp(torch.randn(7, 1, generator=g, dtype=torch.float64))
    xq = q(x, bits)
    m, M = x.amin(-1, keepdim=True), x.amax(-1, keepdim=True)
    s = (M - m) / (2**bits - 1)
    for r in range(x.shape[0]):
        assert xq[r].unique().numel() <= 2**bits, f"token {r}: more than 2^{bits} levels"
    assert torch.allclose(xq.amin(-1, keepdim=True), m, atol=1e-12) and torch.allclose(xq.amax(-1, keepdim=True), M, atol=1e-12), "min/max not kept"
    assert ((xq - x).abs() <= s / 2 + 1e-12).all(), f"error exceeds s/2 at {bits} bits"
    scale = (M - m).abs().amax()
    assert (q(xq, bits) - xq).abs().max() <= 1e-12 * scale, "not idempotent"
    a, c = 2.5, -0.75
    assert (q(a * x + c, bits) - (a * xq + c)).abs().max() <= 1e-9 * scale * a, "not affine-equivariant"
    assert ((q(x, 16) - x).abs() / (M - m)).max() < 1e-4


@invariant("token-quantizer-idempotent-error-bounded")
@_FAST
@given(_SEEDS, st.integers(1, 8))
def token_quantizer(seed: int, bits: int) -> None:
    """The per-token min-max uniform quantiser keeps the range ends, errs by at most half a step, and is idempotent."""
    check_token_quantizer(quantize_tokens, bits, seed)


def check_ste(f: Callable[[torch.Tensor, int], torch.Tensor], seed: int) -> None:
    """The straight-through estimator: the gradient of ``sum(v * Q(x))`` w.r.t. ``x`` is exactly ``v`` (min-max
    range: nothing is clipped), while the forward value is the quantised one."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 16, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(4, 16, generator=g, dtype=torch.float64)
    y = f(x, 3)
    assert (y.detach() - quantize_tokens(x.detach(), 3)).abs().max() <= 1e-12, "forward is not the quantised value"  # x + (q - x): one rounding
    (gx,) = torch.autograd.grad((v * y).sum(), x)
    assert torch.equal(gx, v), "gradient is not the identity"


@invariant("ste-gradient-is-identity")
@_FAST
@given(_SEEDS)
def ste_gradient(seed: int) -> None:
    """Straight-through gradients: the quantised forward, the identity backward."""
    check_ste(ste_quantize_tokens, seed)


# ----------------------------------------------------------------------------- the gate
def hadamard_gain(seed: int, bits: int, outliers: int, n: int = 256, tokens: int = 64, mag: float = 30.0) -> tuple[float, float]:
    """Output MSE of ``y = Q(x) W^T`` without / with rotation (``Q(xH)(WH)^T``) for N(0,1) tokens with
    ``outliers`` channels scaled by ``mag`` (the note's sec. 6 check), float64."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, n, generator=g, dtype=torch.float64)
    idx = torch.randperm(n, generator=g)[:outliers]
    x[:, idx] *= mag
    w = torch.randn(64, n, generator=g, dtype=torch.float64) / n**0.5
    y = x @ w.T
    plain = float(((quantize_tokens(x, bits) @ w.T - y) ** 2).mean())
    rot = float(((quantize_tokens(fast_hadamard(x), bits) @ fast_hadamard(w).T - y) ** 2).mean())
    return plain, rot


def check_hadamard_helps(gain: Callable[..., tuple[float, float]], seed: int, bits: int, outliers: int) -> None:
    """With 1-4 outlier channels of 10-30 sigma the rotated quantiser's output MSE is at least 3x lower."""
    plain, rot = gain(seed, bits, outliers)
    assert rot * 3 <= plain, f"Hadamard did not lower the error 3x: {plain:.4g} vs {rot:.4g} (b={bits}, outliers={outliers})"


@invariant("hadamard-lowers-activation-quantisation-error")
@_FAST
@given(_SEEDS, st.sampled_from([2, 3, 4]), st.integers(1, 4))
def hadamard_helps(seed: int, bits: int, outliers: int) -> None:
    """RobustQuantizer's premise at operator level: rotating spiky tokens before per-token quantisation
    lowers the linear layer's output error (>= 3x for 1-4 outlier channels at 30 sigma, b in {2, 3, 4})."""
    check_hadamard_helps(hadamard_gain, seed, bits, outliers)


# ----------------------------------------------------------------------------- AMPN DP
def greedy_bits(sens, costs, choices, avg_bits):
    """A plausible wrong allocation (negative control): start at the top choice, lower the layer whose
    sensitivity rises least until the budget holds."""
    picks = [len(choices) - 1] * len(costs)
    budget = avg_bits * sum(costs) + 1e-9
    while sum(c * choices[j] for c, j in zip(costs, picks)) > budget:
        cands = [(sens[l][picks[l] - 1] - sens[l][picks[l]], l) for l in range(len(costs)) if picks[l] > 0]
        _, l = min(cands)
        picks[l] -= 1
    return [choices[j] for j in picks], sum(sens[l][j] for l, j in enumerate(picks))


def check_dp(alloc: Callable, seed: int, L: int) -> None:
    """For random sensitivities (decreasing in the bits) and integer costs: the DP respects the budget and
    its objective equals the brute-force optimum (1e-12) for L <= 6 layers and 4 choices; the optimum
    is non-increasing as the budget grows."""
    g = torch.Generator().manual_seed(seed)
    choices = [1, 2, 3, 4]
    costs = torch.randint(1, 6, (L,), generator=g).tolist()
    sens = (torch.rand(L, 4, generator=g, dtype=torch.float64) * torch.exp(2 * torch.randn(L, 1, generator=g, dtype=torch.float64))).sort(dim=1, descending=True).values.tolist()
    prev = float("inf")
    for avg in (1.0, 1.5, 2.0, 2.5, 3.0, 4.0):
        bits, obj = alloc(sens, costs, choices, avg)
        assert sum(c * b for c, b in zip(costs, bits)) <= avg * sum(costs) + 1e-9, "budget exceeded"
        assert abs(obj - sum(sens[l][choices.index(b)] for l, b in enumerate(bits))) <= 1e-12
        _, ref = brute_force_bits(sens, costs, choices, avg)
        assert abs(obj - ref) <= 1e-12, f"DP objective {obj} != brute force {ref} (avg {avg})"
        assert obj <= prev + 1e-12
        prev = obj


@invariant("ampn-dp-allocation-optimal")
@_FAST
@given(_SEEDS, st.integers(1, 6))
def ampn_dp(seed: int, L: int) -> None:
    """AMPN's dynamic programme is the exact multiple-choice-knapsack optimum (brute force, L <= 6)."""
    check_dp(allocate_bits, seed, L)


# ----------------------------------------------------------------------------- module surgery
def tiny_dit(seed: int, heads: int = 2, head_dim: int = 8, layers: int = 2):
    """A random diffusers DiTTransformer2DModel (16 tokens; width heads x head_dim)."""
    from diffusers import DiTTransformer2DModel

    torch.manual_seed(seed)
    m = DiTTransformer2DModel(num_attention_heads=heads, attention_head_dim=head_dim, in_channels=1, out_channels=1, num_layers=layers,
                              sample_size=8, patch_size=2, num_embeds_ada_norm=10).eval()
    with torch.no_grad():  # adaLN-Zero initialises the modulation to zero: randomise it so every path is live
        for p in m.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return m


def check_passthrough(install: Callable, seed: int, head_dim: int) -> None:
    """(a) Installing the quantised modules in passthrough settings (FP weights, FP activations, FP
    attention products, no low-rank branch, Hadamard rotation ON, so ``(xH)(WH)^T`` is computed) leaves the
    DiT output unchanged (1e-5); (b) the full W1.58A3 install (8-bit attention products included) with
    ``enabled=False`` is unchanged too, and with it on the output moves (the modules are live)."""
    m = tiny_dit(seed, head_dim=head_dim)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 1, 8, 8, generator=g)
    t = torch.randint(0, 1000, (3,), generator=g)
    y = torch.randint(0, 10, (3,), generator=g)
    with torch.no_grad():
        ref = m(x, t, class_labels=y).sample
        p = install(copy.deepcopy(m), a_bits=None, hadamard=True, lowrank_rank=0, weight="fp", adaln=False, attention_bits=None)
        passthrough = p(x, t, class_labels=y).sample
        q = install(copy.deepcopy(m), a_bits=3, hadamard=True, lowrank_rank=4)
        set_enabled(q, False)
        off = q(x, t, class_labels=y).sample
        set_enabled(q, True)
        on = q(x, t, class_labels=y).sample
    assert (passthrough - ref).abs().max() <= 1e-5, f"passthrough changed the output by {(passthrough - ref).abs().max():.3g}"
    assert (off - ref).abs().max() <= 1e-5, f"quantisation off changed the output by {(off - ref).abs().max():.3g}"
    assert (on - ref).abs().max() > 1e-4, "quantisation on did not change the output"


@invariant("quantisation-off-leaves-dit-unchanged")
@settings(max_examples=2, deadline=None)
@given(_SEEDS, st.sampled_from([8, 12]))
def passthrough(seed: int, head_dim: int) -> None:
    """Module surgery on a diffusers DiT (widths 16 and 24 = 3 x 8, block Hadamard) is exact when quantisation is off."""
    check_passthrough(install_quantizers, seed, head_dim)



# ----------------------------------------------------------------------------- 8-bit attention products
def _dit_inputs(seed: int, n: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 1000, (n,), generator=g), torch.randint(0, 10, (n,), generator=g)


def check_attention_off_exact(make: Callable[[int | None], object], seed: int, head_dim: int) -> None:
    """On a random DiT: every block's ``attn1`` given ``make(None)`` (quantisation off) or ``make(8)`` with
    ``enabled=False`` returns the stock processor's output bit for bit (``torch.equal``); ``make(8)`` on
    changes the output (the processor is live)."""
    m = tiny_dit(seed, head_dim=head_dim)
    x, t, y = _dit_inputs(seed)

    def run(bits: int | None, enabled: bool = True) -> torch.Tensor:
        q = copy.deepcopy(m)
        for blk in q.transformer_blocks:
            proc = make(bits)
            proc.enabled = enabled
            blk.attn1.set_processor(proc)
        return q(x, t, class_labels=y).sample

    with torch.no_grad():
        ref = m(x, t, class_labels=y).sample
        off, disabled, on = run(None), run(8, enabled=False), run(8)
    assert torch.equal(off, ref), f"attention quantisation off changed the output by {(off - ref).abs().max():.3g}"
    assert torch.equal(disabled, ref), f"enabled=False changed the output by {(disabled - ref).abs().max():.3g}"
    assert not torch.equal(on, ref), "8-bit attention quantisation did not change the output"


@invariant("attention-quantisation-off-is-bit-exact")
@settings(max_examples=3, deadline=None)
@given(_SEEDS, st.sampled_from([8, 12]))
def attention_off_exact(seed: int, head_dim: int) -> None:
    """The attention-product quantiser switched off (``attention_bits: null`` or ``enabled=False``) leaves a
    DiT's output identical to diffusers' stock processor; switched on at 8 bits it moves it."""
    check_attention_off_exact(QuantAttnProcessor, seed, head_dim)


def _ref_quantize_row(row: list[float], bits: int) -> list[float]:
    """Scalar per-row min-max quantiser written independently of ``quant.quantize_tokens`` (reference)."""
    lo, hi = min(row), max(row)
    if hi == lo:
        return list(row)
    step = (hi - lo) / (2**bits - 1)
    return [lo + step * min(max(round((v - lo) / step), 0), 2**bits - 1) for v in row]


def brute_force_attention(attn: torch.nn.Module, x: torch.Tensor, bits: int) -> torch.Tensor:
    """Reference: explicit per (batch, head) loops -- q, k, v from the projections, every operand row
    quantised by :func:`_ref_quantize_row`, scores ``scale q^.k^``, softmax, probabilities quantised per
    query row, ``sum_j p^_ij v^_j``, heads concatenated, output projection. float64 in, float64 out."""
    import math

    b, n, _ = x.shape
    h = attn.heads
    q, k, v = (lin(x).tolist() for lin in (attn.to_q, attn.to_k, attn.to_v))
    d = len(q[0][0]) // h
    out = torch.zeros(b, n, h * d, dtype=torch.float64)
    for bi in range(b):
        for hi in range(h):
            sl = slice(hi * d, (hi + 1) * d)
            qs = [_ref_quantize_row(q[bi][i][sl], bits) for i in range(n)]
            ks = [_ref_quantize_row(k[bi][j][sl], bits) for j in range(n)]
            vs = [_ref_quantize_row(v[bi][j][sl], bits) for j in range(n)]
            for i in range(n):
                scores = [attn.scale * sum(a * c for a, c in zip(qs[i], ks[j])) for j in range(n)]
                top = max(scores)
                e = [math.exp(s_ - top) for s_ in scores]
                p = _ref_quantize_row([w / sum(e) for w in e], bits)
                for c in range(d):
                    out[bi, i, hi * d + c] = sum(p[j] * vs[j][c] for j in range(n))
    return attn.to_out[0](out)


def check_attention_reference(make: Callable[[int | None], object], seed: int, bits: int, heads: int, head_dim: int) -> None:
    """A diffusers ``Attention`` (float64, random weights) with ``make(bits)`` equals
    :func:`brute_force_attention` to 1e-9 (max abs; outputs are O(1))."""
    from diffusers.models.attention_processor import Attention

    torch.manual_seed(seed)
    attn = Attention(query_dim=heads * head_dim, heads=heads, dim_head=head_dim, bias=True, out_bias=True).double().eval()
    attn.set_processor(make(bits))
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, heads * head_dim, generator=g, dtype=torch.float64) * 2
    with torch.no_grad():
        got, ref = attn(x), brute_force_attention(attn, x, bits)
    assert (got - ref).abs().max() <= 1e-9, f"processor != brute-force reference by {(got - ref).abs().max():.3g} (bits {bits})"


@invariant("attention-processor-matches-brute-force")
@settings(max_examples=6, deadline=None)
@given(_SEEDS, st.sampled_from([2, 4, 8]), st.sampled_from([1, 2, 3]), st.sampled_from([4, 8]))
def attention_reference(seed: int, bits: int, heads: int, head_dim: int) -> None:
    """The quantised attention processor computes ``Q_b(softmax(scale Q_b(q) Q_b(k)^T)) Q_b(v)`` with every
    operand quantised per (batch, head, token) row, as an explicit loop reference does."""
    check_attention_reference(QuantAttnProcessor, seed, bits, heads, head_dim)


def attention_error_bound(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, bits: int) -> torch.Tensor:
    """Per output row, a rigorous bound on ``max_c |O^_ic - O_ic|`` for :func:`quantized_attention` vs exact
    attention ``O = softmax(scale q k^T) v``. With per-row quantiser errors ``|x^ - x|_inf <= s/2``,
    ``s = (max - min) / (2^b - 1)``:

    * score error ``|d_ij| <= scale (|q^_i|_1 |k^_j - k_j|_inf + |q^_i - q_i|_inf |k_j|_1)``;
    * ``|softmax(a) - softmax(a')|_1 <= max_j (a - a')_j - min_j (a - a')_j <= 2 max_j |d_ij|`` (mean value
      theorem: the softmax Jacobian ``diag(p) - p p^T`` maps a vector of spread r to l1 norm <= r);
    * quantising the probabilities adds ``n s_P / 2`` in l1 (``s_P <= 1 / (2^b - 1)``);
    * ``|P^ V^ - P V|_inf <= |P^ - P|_1 max_j |v^_j|_inf + |P|_1 max_j |v^_j - v_j|_inf`` with ``|P|_1 = 1``."""
    def half_step(x: torch.Tensor) -> torch.Tensor:
        return (x.amax(-1) - x.amin(-1)) / (2**bits - 1) / 2

    qh, kh, vh = (quantize_tokens(t, bits) for t in (q, k, v))
    d = scale * (qh.abs().sum(-1)[..., :, None] * half_step(k)[..., None, :] + half_step(q)[..., :, None] * k.abs().sum(-1)[..., None, :])
    n = k.shape[-2]
    p_err = 2 * d.amax(-1) + n * (1.0 / (2**bits - 1)) / 2
    return p_err * vh.abs().amax((-1, -2))[..., None] + half_step(v).amax(-1)[..., None]


def check_attention_error_bound(fn: Callable[..., torch.Tensor], seed: int, bits: int) -> None:
    """``fn(q, k, v, scale, bits)`` (the quantised attention) stays within :func:`attention_error_bound` of
    exact attention (float64, 1e-12 slack), for random operands with heavy-tailed per-token scales.
    (How small the 8-bit error is on real activations is a measured metric, not a bound: the bound is
    loose when large scores make the softmax sharp.)"""
    g = torch.Generator().manual_seed(seed)
    shape = (2, 3, 7, 8)
    q, k, v = (torch.randn(*shape, generator=g, dtype=torch.float64) * torch.exp(torch.randn(*shape[:-1], 1, generator=g, dtype=torch.float64))
               for _ in range(3))
    scale = shape[-1] ** -0.5
    exact = (q @ k.transpose(-1, -2) * scale).softmax(-1) @ v
    err = (fn(q, k, v, scale, bits) - exact).abs().amax(-1)
    bound = attention_error_bound(q, k, v, scale, bits)
    assert (err <= bound + 1e-12).all(), f"attention error {float((err - bound).max()):.3g} above the quantisation bound (bits {bits})"


@invariant("attention-8bit-error-within-quantisation-bound")
@settings(max_examples=8, deadline=None)
@given(_SEEDS, st.sampled_from([4, 6, 8]))
def attention_error_bounded(seed: int, bits: int) -> None:
    """The quantised attention output differs from exact attention by no more than the analytic bound
    propagated from the per-token quantisers' half steps (scores, softmax, probabilities, values)."""
    check_attention_error_bound(quantized_attention, seed, bits)
