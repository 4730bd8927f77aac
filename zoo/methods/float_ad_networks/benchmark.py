"""Benchmark of ``float-ad-networks``: the fraction of grid points whose value and torch.autograd
gradient match random targets (1e-20..1e20) bit for bit, and the network size, against grid size,
for this project's construction (per-threshold step scale) beside the shared note's fixed
K = 2^24 (the baseline), in float32 and float64. The paper states no numbers (existence
theorems). Run as ``zoo bench float-ad-networks [--quick] [--out-dir D]``."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark

from .analysis import DTYPES, measure
from .params import BenchOptions


def measure_grid(sizes: list[int], starts: list[float], dtypes: list[str]) -> dict[str, Any]:
    rows = []
    t0 = time.perf_counter()
    for dt in dtypes:
        for start in starts:
            for n in sizes:
                for scale in ("per-threshold", "fixed"):
                    rows.append(measure(start, n, DTYPES[dt], "tanh", 0, scale, timing=True))
    return {"rows": rows, "seconds": time.perf_counter() - t0}


def table(res: dict[str, Any]) -> str:
    lines = ["| dtype | start | n | exact (ours) | exact grads (note's K=2^24) | params dense | non-zero | build s | check s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    rows = res["rows"]
    for ours, fixed in zip(rows[0::2], rows[1::2]):
        lines.append(f"| {ours['dtype']} | {ours['start']:g} | {ours['n']} | {ours['exact_rate']:.4f} | "
                     f"{fixed['exact_grads'] / fixed['n']:.4f} | {ours['params']} | {ours['nonzero']} | {ours['build_s']:.3f} | {ours['check_s']:.3f} |")
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    groups: dict[tuple, list] = {}
    for r in res["rows"]:
        groups.setdefault((r["dtype"], r["start"], r["step_scale"]), []).append(r)
    for (dt, start, scale), rr in groups.items():
        ls = "-" if scale == "per-threshold" else ":"
        ax[0].plot([r["n"] for r in rr], [r["exact_grads"] / r["n"] for r in rr], ls, marker="o", label=f"{dt} from {start:g} ({scale})")
    ax[0].set(xscale="log", xlabel="grid size n", ylabel="bit-exact gradient fraction", title="exactness (values are exact in every row)")
    ax[0].legend(fontsize=6)
    rr = [r for r in res["rows"] if r["step_scale"] == "per-threshold" and r["dtype"] == res["rows"][0]["dtype"] and r["start"] == res["rows"][0]["start"]]
    ax[1].loglog([r["n"] for r in rr], [r["params"] for r in rr], "o-", label="dense parameters")
    ax[1].loglog([r["n"] for r in rr], [r["nonzero"] for r in rr], "s-", label="non-zero parameters")
    ax[1].set(xlabel="grid size n", title="network size")
    ax[1].legend()
    fig.suptitle("float-ad-networks (this project's construction, tanh gate)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """float-ad-networks: bit-exact value and gradient fraction and network size against grid size, this
    project's construction beside the note's fixed K = 2^24, float32 and float64 (--quick: n <= 64)."""
    res = measure_grid(opts.sizes, opts.starts, list(opts.dtypes))
    ctx.report(table(res))
    plot(res, ctx.figure("float-ad-networks.png"))
    return res
