"""Behaviour tests for float-ad-networks beyond the spec's invariants and metric checks: what the
construction refuses, that its exactness does not depend on summation order or on the pipeline
dtype, the structure that makes it exact, and the zoo.load / zoo run / bench paths."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import zoo
from zoo.cli import main
from zoo.methods.float_ad_networks import (
    GATES,
    UNSUPPORTED_GATES,
    ConstructionError,
    ExactNetwork,
    build_network,
    float_grid,
    random_targets,
    values_and_grads,
)


def _targets(n: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return random_targets(n, dtype, g), random_targets(n, dtype, g)


@pytest.mark.parametrize("gate", sorted(UNSUPPORTED_GATES))
def test_unsupported_gates_are_refused_with_the_reason(gate: str) -> None:
    grid = float_grid(1.5, 4)
    y, g = _targets(4)
    with pytest.raises(ConstructionError, match="supported"):
        build_network(grid, y, g, gate=gate)


def test_bad_grids_and_dtypes_are_refused() -> None:
    y, g = _targets(4)
    with pytest.raises(ConstructionError, match="float32 and float64"):
        build_network(float_grid(1.5, 4, torch.float16), y.half(), g.half())
    with pytest.raises(ConstructionError, match="strictly increasing"):
        build_network(float_grid(1.5, 4).flip(0), y, g)
    with pytest.raises(ConstructionError, match="subnormals"):
        build_network(float_grid(-2e-45, 4), y, g)  # crosses zero through the subnormals


def test_exactness_does_not_depend_on_summation_order() -> None:
    """Permuting the hidden units of every layer (and the matching input columns of the next)
    leaves every value and gradient bit-identical: each dot product has at most one non-zero term
    that is not a small integer, so the order BLAS sums in cannot matter."""
    grid = float_grid(0.3, 32)
    y, g = _targets(32, seed=1)
    net = build_network(grid, y, g, gate="gelu")
    f0, d0 = values_and_grads(net, grid)
    gen = torch.Generator().manual_seed(0)
    layers, prev = [], None
    for i, (w, b, act) in enumerate(net.layers):
        perm = torch.randperm(w.shape[0], generator=gen) if i < 4 else torch.arange(w.shape[0])  # layer 5 splits gate|carry by position
        w = w if prev is None else w[:, prev]
        layers.append((w[perm], b[perm], act))
        prev = perm
    shuffled = ExactNetwork(layers, net.out_weight[:, prev], net.out_bias)
    f1, d1 = values_and_grads(shuffled, grid)
    assert torch.equal(f0, f1) and torch.equal(d0, d1)
    assert torch.equal(f0, y) and torch.equal(d0, g)


def test_gate_layer_is_exactly_zero_and_steps_have_zero_gradient() -> None:
    """The mechanism: on the grid every gate unit outputs exactly 0 and the one-hot layer's AD
    derivative is exactly 0, so the gradient reaches x only through the absorbed slope term."""
    grid = float_grid(1.0, 16)
    y, g = _targets(16, seed=2)
    net = build_network(grid, y, g)
    x = grid.clone().requires_grad_(True)
    h = x.reshape(-1, 1)
    acts = []
    for w, b, act in net.layers:
        h = act(torch.nn.functional.linear(h, w, b))
        acts.append(h)
    n = 16
    onehot = acts[2][:, :n]
    assert torch.equal(onehot.detach(), torch.eye(n))
    (d_onehot,) = torch.autograd.grad(onehot.sum(), x, retain_graph=True)
    assert torch.equal(d_onehot, torch.zeros(n))
    assert torch.equal(acts[4][:, :n].detach(), torch.zeros(n, n))


def test_recipe_ignores_the_pipeline_dtype() -> None:
    """The network's dtype is the recipe's own parameter: building the pipeline in float64 (a
    declared dtype) gives the same float32 report, bit for bit."""
    a = zoo.load("float-ad-networks")(seed=0, starts=(1.0,), sizes=(32,))
    b = zoo.load("float-ad-networks", dtype="float64")(seed=0, starts=(1.0,), sizes=(32,))
    assert a == b and a["rows"][0]["dtype"] == "float32" and a["rows"][0]["exact_rate"] == 1.0


def test_every_gate_is_listed_with_its_derivative() -> None:
    assert set(GATES) == {"tanh", "gelu", "gelu-tanh", "silu", "elu", "softsign", "hardtanh"}
    assert {k: c for k, (_, c) in GATES.items()}["gelu"] == 0.5


def test_cli_run_prints_table_and_writes_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fan.png"
    assert main(["run", "float-ad-networks", "--sampler", "fixed-step-scale", "--param", "sizes=[16]", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fixed" in text and " 15/16" in text and out.stat().st_size > 1000


def test_bench_quick_writes_table_png_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "float-ad-networks", "--quick", "--starts", "1.0", "--out-dir", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "| float32 | 1 | 64 | 1.0000 | 0.9844 |" in text
    rows = json.loads((tmp_path / "float-ad-networks-bench.json").read_text())["result"]["rows"]
    assert sorted({r["n"] for r in rows}) == [4, 16, 64]
    assert all(r["exact_rate"] == 1.0 for r in rows if r["step_scale"] == "per-threshold")
    assert (tmp_path / "float-ad-networks.png").stat().st_size > 1000
