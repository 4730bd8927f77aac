"""Named property checks for ``float-ad-networks`` (run by the conformance harness under Hypothesis).

All are exact (bitwise equality, no tolerance), so none has a false-fail rate. The construction is
this project's (:mod:`.construction`); the mechanisms and the binade edge case come from the shared
note ``methods/floating-point.md`` §4.2, §6, §9."""
from __future__ import annotations

import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from registry.contract import invariant

from .construction import GATES, ConstructionError, build_network, exact_match, float_grid

_FAST = settings(max_examples=20, deadline=None)
_DT = {"float32": torch.float32, "float64": torch.float64}


@st.composite
def _targets(draw: st.DrawFn, n: int) -> list[float]:
    """Random-sign magnitudes 10^u, u in [-20, 20], and some exact zeros."""
    mags = draw(st.lists(st.one_of(st.floats(-20, 20), st.just(None)), min_size=n, max_size=n))
    signs = draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=n, max_size=n))
    return [0.0 if u is None else s * 10.0**u for u, s in zip(mags, signs)]


@st.composite
def _case(draw: st.DrawFn) -> tuple[float, int, list[float], list[float]]:
    # grid starts: powers of two exactly (the binade edge), just below them, or anywhere, |x| in [2^-40, 2^40]
    e = draw(st.integers(-40, 40))
    kind = draw(st.sampled_from(["pow2", "below-pow2", "any"]))
    base = 2.0**e if kind != "any" else draw(st.floats(1.0, 2.0)) * 2.0**e
    start = base * (1 - 2.0**-20) if kind == "below-pow2" else base
    start = -start if draw(st.booleans()) else start
    n = draw(st.integers(1, 24))
    return start, n, draw(_targets(n)), draw(_targets(n))


def _check_exact(start: float, n: int, y: list[float], g: list[float], dtype: torch.dtype, gate: str) -> None:
    grid = float_grid(start, n, dtype)
    yt, gt = torch.tensor(y, dtype=dtype), torch.tensor(g, dtype=dtype)
    net = build_network(grid, yt, gt, gate=gate)
    assert exact_match(net, grid, yt, gt) == (n, n), (start, n, gate, exact_match(net, grid, yt, gt))


@invariant("float32-values-and-autograd-grads-bit-exact")
@_FAST
@given(_case(), st.sampled_from(sorted(GATES)))
@example((1.0, 8, [1e-20] * 8, [1e20] * 8), "tanh")  # the note's binade edge: grid starting exactly at 1.0
def float32_exact(case: tuple[float, int, list[float], list[float]], gate: str) -> None:
    """float32: f(x_i) == y_i and torch.autograd df/dx(x_i) == g_i bit for bit at every grid point,
    for targets of either sign with magnitudes 1e-20..1e20 (and zeros), grids of consecutive floats
    anywhere in |x| in [2^-40, 2^41] including starts exactly at a power of two, every gate."""
    _check_exact(*case, torch.float32, gate)


@invariant("float64-values-and-autograd-grads-bit-exact")
@_FAST
@given(_case(), st.sampled_from(sorted(GATES)))
@example((1.0, 8, [-1e-20] * 8, [1e20] * 8), "gelu")
def float64_exact(case: tuple[float, int, list[float], list[float]], gate: str) -> None:
    """The same bit-exactness in float64 (targets rounded to float64)."""
    _check_exact(*case, torch.float64, gate)


@invariant("pytorch-derivative-conventions-at-zero")
@settings(max_examples=1, deadline=None)
@given(st.sampled_from(["float32", "float64"]))
def derivative_conventions(dtype: str) -> None:
    """PyTorch's autograd at 0 (what the construction relies on): ReLU'(0) = 0, tanh'(0) = 1,
    GELU'(0) = SiLU'(0) = 0.5 (both GELU forms), ELU'(0) = softsign'(0) = hardtanh'(0) = 1, and
    every gate is exactly 0 at 0."""
    expected = {"relu": (torch.relu, 0.0), **{k: (fn, c) for k, (fn, c) in GATES.items()}}
    assert expected["tanh"][1] == 1.0 and expected["gelu"][1] == 0.5 and expected["silu"][1] == 0.5
    for name in ("float32", "float64"):
        for act, (fn, c) in expected.items():
            x = torch.zeros(1, dtype=_DT[name], requires_grad=True)
            out = fn(x)
            (d,) = torch.autograd.grad(out.sum(), x)
            assert float(out.detach()) == 0.0 and float(d) == c, (act, name, float(out.detach()), float(d))
    _ = dtype


@invariant("fixed-step-scale-breaks-one-gradient-at-binade-edge")
@_FAST
@given(st.integers(2, 24), st.floats(1e-3, 1e3), st.sampled_from(["float32", "float64"]))
def fixed_scale_binade_edge(n: int, g0: float, dtype: str) -> None:
    """Negative control: the note's fixed step scale K = 2^(p+1) on a grid starting exactly at 1.0
    (the float below 1.0 is half a spacing away, so a = 1 and r2's pre-activation is 0) breaks the
    gradient at x_1 and only there, with every value still exact; starting one float later (the
    note's fix) or scaling per threshold (ours) is exact."""
    dt = _DT[dtype]
    y = torch.linspace(-1, 1, n, dtype=dt)
    g = torch.full((n,), g0, dtype=dt)
    grid = float_grid(1.0, n, dt)
    net = build_network(grid, y, g, step_scale="fixed")
    x = grid.clone().requires_grad_(True)
    f = net(x)
    (dx,) = torch.autograd.grad(f.sum(), x)
    assert torch.equal(f.detach(), y)
    assert dx[0] != g[0] and torch.equal(dx[1:], g[1:])
    later = float_grid(float(torch.nextafter(torch.tensor(1.0, dtype=dt), torch.tensor(2.0, dtype=dt))), n, dt)
    assert exact_match(build_network(later, y, g, step_scale="fixed"), later, y, g) == (n, n)
    assert exact_match(build_network(grid, y, g), grid, y, g) == (n, n)


def _relu_one_at_zero(x: torch.Tensor) -> torch.Tensor:
    """ReLU whose derivative at 0 is 1 (another framework's convention)."""
    return x.clamp_min(0).detach() + (x - x.detach()) * (x >= 0).to(x.dtype)


@invariant("other-relu-convention-or-small-absorber-breaks-exactness")
@_FAST
@given(st.integers(3, 16), st.floats(1e-3, 1e3))
def negative_controls(n: int, g0: float) -> None:
    """Negative controls that a plausible wrong construction fails: (1) ReLU'(0) = 1 instead of
    PyTorch's 0 corrupts the gradients (the steps' ramps leak slope K at the grid point below);
    (2) an absorber B too small for the gradient targets (B = 2^8 < 2^(p+3)·|g|) corrupts the
    values or the gradients; (3) gradient targets beyond what B can absorb in float32 (|g| = 1e30)
    are refused with ConstructionError rather than built wrong."""
    grid = float_grid(1.5, n, torch.float32)
    y = torch.linspace(1, 2, n, dtype=torch.float32)
    g = torch.full((n,), g0, dtype=torch.float32)
    bad = build_network(grid, y, g, relu=_relu_one_at_zero)
    assert exact_match(bad, grid, y, g)[1] < n
    small = build_network(grid, y, g * 1e6, big=2.0**8)
    assert exact_match(small, grid, y, g * 1e6) != (n, n)
    try:
        build_network(grid, y, torch.full((n,), 1e30, dtype=torch.float32))
    except ConstructionError:
        pass
    else:
        raise AssertionError("|g| = 1e30 in float32 was accepted")
