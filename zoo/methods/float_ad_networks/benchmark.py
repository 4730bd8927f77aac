"""Benchmark of ``float-ad-networks``: the fraction of grid points whose value and torch.autograd
gradient match random targets (1e-20..1e20) bit for bit, and the network size, against grid size,
for this project's construction (per-threshold step scale) beside the shared note's fixed
K = 2^24 (the baseline), in float32 and float64. The paper states no numbers (existence
theorems). Run as ``python tools/bench_float_ad_networks.py`` or ``zoo bench float-ad-networks``."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark
from zoo.common.bench_output import write_outputs

from .analysis import DTYPES, measure


def run(sizes: list[int], starts: list[float], dtypes: list[str]) -> dict[str, Any]:
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


@benchmark
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="bench_float_ad_networks")
    ap.add_argument("--quick", action="store_true", help="grid sizes 4, 16, 64 only")
    ap.add_argument("--sizes", default="4,16,64,256,1024")
    ap.add_argument("--starts", default="1.0,1.5,0.75")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--device", default="cpu", help="accepted for tools/device_check.sh; the construction runs on CPU")
    ap.add_argument("--json", metavar="PATH", help="write every number as JSON")
    ap.add_argument("--out-dir", default=".", help="folder for float-ad-networks.png")
    a = ap.parse_args(argv)
    sizes = [4, 16, 64] if a.quick else [int(v) for v in a.sizes.split(",")]
    res = run(sizes, [float(v) for v in a.starts.split(",")], a.dtypes.split(","))
    write_outputs(res, table(res), plot, a.out_dir, "float-ad-networks.png", a.json)
    return 0
