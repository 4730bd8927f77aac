"""The ``float-ad-networks`` recipe: build the exact network for random target tables on float
grids and measure how many grid points match bit for bit, plus the network's size."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import torch

from registry.contract import Procedure
from registry.results import ProcedureOutput

from .construction import ConstructionError, build_network, exact_match, float_grid
from .params import ExactnessReportCli, ExactnessReportParams

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def random_targets(n: int, dtype: torch.dtype, gen: torch.Generator, lo: float = 1e-20, hi: float = 1e20,
                   zeros: float = 0.05) -> torch.Tensor:
    """``n`` targets of random sign with log-uniform magnitudes in [lo, hi] (a ``zeros`` fraction
    exactly 0), rounded to ``dtype``."""
    e = torch.rand(n, generator=gen, dtype=torch.float64) * (math.log10(hi) - math.log10(lo)) + math.log10(lo)
    s = torch.where(torch.rand(n, generator=gen, dtype=torch.float64) < 0.5, -1.0, 1.0)
    v = s * 10.0**e
    v[torch.rand(n, generator=gen, dtype=torch.float64) < zeros] = 0.0
    return v.to(dtype)


def measure(grid_start: float, n: int, dtype: torch.dtype, gate: str, seed: int, step_scale: str = "per-threshold",
            lo: float = 1e-20, hi: float = 1e20, timing: bool = False) -> dict[str, Any]:
    """One construction on ``n`` consecutive floats from ``grid_start``: exact value / gradient
    counts, layer widths, parameter counts (and, with ``timing``, build and check seconds)."""
    gen = torch.Generator().manual_seed(seed)
    grid = float_grid(grid_start, n, dtype)
    y, g = random_targets(n, dtype, gen, lo, hi), random_targets(n, dtype, gen, lo, hi)
    t0 = time.perf_counter()
    net = build_network(grid, y, g, gate=gate, step_scale=step_scale)  # type: ignore[arg-type]
    t1 = time.perf_counter()
    ok_v, ok_g = exact_match(net, grid, y, g)
    row = {"start": grid_start, "n": n, "dtype": str(dtype).removeprefix("torch."), "gate": gate, "step_scale": step_scale,
           "exact_values": ok_v, "exact_grads": ok_g, "exact_rate": min(ok_v, ok_g) / n, "widths": net.widths,
           "params": net.n_params, "nonzero": net.n_nonzero}
    if timing:
        row.update(build_s=t1 - t0, check_s=time.perf_counter() - t1)
    return row


@dataclass
class ExactnessOutput(ProcedureOutput):
    """What :class:`ExactnessReport` returns (attribute, key and index access, ``to_tuple()``).

    * ``rows`` -- one dict per (grid start, size, gate): ``start``, ``n``, ``dtype``, ``gate``,
      ``step_scale`` and either ``exact_values`` / ``exact_grads`` (bit-exact entries of n),
      ``exact_rate``, ``widths``, ``params``, ``nonzero`` or, where the construction fails, ``error``;
    * ``config`` -- the parameters used (``Params.model_dump()``).
    """

    rows: list[dict[str, Any]]
    config: dict[str, Any]


class ExactnessReport(Procedure):
    """Bit-exactness of values and ``torch.autograd`` input gradients of the constructed network
    against random target tables (magnitudes ``lo``..``hi``, random signs, some zeros), for each
    grid start, gate activation and grid size. Returns an :class:`ExactnessOutput` (``rows``, ``config``).

    The construction is this project's (see :mod:`.construction`), not the paper's proof."""

    kind = "analysis"

    Params = ExactnessReportParams

    CliInputs = ExactnessReportCli

    def __call__(self, *, seed: int = 0) -> ExactnessOutput:
        # per-call parameters (pipe(seed=0, sizes=(8,))) arrive as self.params through Procedure.with_params
        p = self.params
        dt = DTYPES[p.dtype]
        rows = []
        for start in p.starts:
            for n in p.sizes:
                for gate in p.gates:
                    try:
                        rows.append(measure(start, n, dt, gate, seed, p.step_scale, p.lo, p.hi))
                    except ConstructionError as exc:
                        rows.append({"start": start, "n": n, "dtype": p.dtype, "gate": gate, "step_scale": p.step_scale,
                                     "error": str(exc)})
        return ExactnessOutput(rows=rows, config=p.model_dump())

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"starts": (1.0, -3.0), "sizes": (8,), "gates": ("tanh", "gelu")}

    def run_cli(self, inputs: Any, seed: int) -> str:
        rep = self(seed=seed)
        out = inputs.out if inputs is not None else "float-ad-networks.png"
        return format_report(rep) + f"\nwrote {plot_report(rep, out)}"


def format_report(rep: dict[str, Any]) -> str:
    lines = ["   start |    n | dtype   | gate      | steps         | exact f | exact df/dx | params (non-zero) | widths"]
    for r in rep["rows"]:
        if "error" in r:
            lines.append(f"{r['start']:8g} | {r['n']:4d} | {r['dtype']:<7} | {r['gate']:<9} | {r['step_scale']:<13} | {r['error']}")
            continue
        lines.append(f"{r['start']:8g} | {r['n']:4d} | {r['dtype']:<7} | {r['gate']:<9} | {r['step_scale']:<13} | "
                     f"{r['exact_values']:4d}/{r['n']:<3d}| {r['exact_grads']:6d}/{r['n']:<4d} | {r['params']:7d} ({r['nonzero']:5d}) | {r['widths']}")
    return "\n".join(lines)


def plot_report(rep: dict[str, Any], out: str) -> str:
    """Exactness rate and parameter count against grid size (one line per start / gate)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in rep["rows"]:
        if "error" not in r:
            groups.setdefault(f"{r['start']:g} {r['gate']} {r['step_scale']}", []).append(r)
    for label, rows in groups.items():
        rows.sort(key=lambda r: r["n"])
        axes[0].plot([r["n"] for r in rows], [r["exact_rate"] for r in rows], marker="o", label=label)
        axes[1].plot([r["n"] for r in rows], [r["params"] for r in rows], marker="o", color="C0")
        axes[1].plot([r["n"] for r in rows], [r["nonzero"] for r in rows], marker="s", color="C1")
    axes[0].set_ylabel("bit-exact fraction (values and gradients)")
    axes[1].set_ylabel("parameters (dense ●, non-zero ■)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("grid size n")
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=6)
    fig.suptitle(f"exact float network ({rep['config']['dtype']}; this project's construction)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
