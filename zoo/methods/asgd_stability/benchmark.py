"""Benchmark of ``asgd-stability``: on-average model stability ε and the generalisation gap of
simulated ASGD against N = mn, m (at fixed N and at fixed n), the delay distribution and the
worker participation, with synchronous SGD (m = 1, no delay) beside ASGD in the N sweep and the
∝ 1/√(mn) reference line. No paper numbers exist (abstract only). Run as
``zoo bench asgd-stability [--quick] [--overparam] [--out-dir D]``."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark

from .analysis import StabilityReport, format_report, slope_with_se
from .params import BenchOptions
from .simulator import Problem, run_coupled


def _report(sweep: str, seeds: int, quick: bool, device: str, **kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = dict(sweep=sweep, seeds=seeds)
    if quick:
        base.update(Ns=(64, 128, 256), ms=(1, 2, 4), N=256, n=32)
    base.update(kw)
    return StabilityReport({}, StabilityReport.Params(**base), device=device)(seed=0, progress=True)


def measure(quick: bool = False, overparam: bool = False, device: str = "cpu", seeds: int | None = None) -> dict[str, Any]:
    """Every sweep of the spec's recipes (20 seeds x 4 replaced indices; 5 seeds and N <= 256 with ``quick``)."""
    seeds = seeds if seeds is not None else (5 if quick else 20)
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    for sweep in ("N", "m", "m-fixed-n", "delay", "participation"):
        out[sweep] = _report(sweep, seeds, quick, device)
    # the synchronous-SGD baseline on the same N grid (m = 1, no delay)
    Ns = [r["N"] for r in out["N"]["rows"]]
    sgd = [run_coupled(Problem(), N=N, m=1, delay="none", seeds=range(seeds), k=4, n_test=1024, device=device) for N in Ns]
    s, se = slope_with_se([float(n) for n in Ns], sgd)
    out["sgd"] = {"rows": [{"N": N, "stability": r.stability, "gap": r.gap} for N, r in zip(Ns, sgd)], "slope": s, "slope_se": se}
    if overparam:
        out["N-overparam"] = _report("N", seeds, quick, device, problem="lsq-overparam", d=1200)
        out["N-strongly-convex"] = _report("N", seeds, quick, device, problem="lsq-strongly-convex", d=10)
    out["seconds"] = time.perf_counter() - t0
    return out


def table(res: dict[str, Any]) -> str:
    """Markdown: the N sweep with SGD beside ASGD, then each sweep's own table and gates."""
    lines = ["| N = mn | ε ASGD (m=4, τ~U{0..4}) | ε SGD (m=1, τ=0) | gap ASGD | ∝ 1/√(mn) from N=64 |", "|---:|---:|---:|---:|---:|"]
    rows, sgd = res["N"]["rows"], res["sgd"]["rows"]
    for r, b in zip(rows, sgd):
        ref = rows[0]["stability"] * (rows[0]["N"] / r["N"]) ** 0.5
        lines.append(f"| {r['N']} | {r['stability']:.4g} | {b['stability']:.4g} | {r['gap']:+.4f} ± {r['gap_se']:.4f} | {ref:.4g} |")
    lines.append(f"| slope | {res['N']['slope']:+.3f} ± {res['N']['slope_se']:.3f} | {res['sgd']['slope']:+.3f} ± {res['sgd']['slope_se']:.3f} | | −0.5 |")
    out = ["\n".join(lines)]
    for key in ("m", "m-fixed-n", "delay", "participation", "N-overparam", "N-strongly-convex"):
        if key in res:
            out.append(f"[{key}: {res[key]['config']['problem']}]\n" + format_report(res[key]))
    return "\n\n".join(out)


def plot(res: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(2, 3, figsize=(13, 7))
    rows = res["N"]["rows"]
    Ns = [r["N"] for r in rows]
    ax[0, 0].loglog(Ns, [r["stability"] for r in rows], "o-", label=f"ASGD m=4 (slope {res['N']['slope']:+.2f})")
    ax[0, 0].loglog(Ns, [r["stability"] for r in res["sgd"]["rows"]], "s-", label=f"SGD (slope {res['sgd']['slope']:+.2f})")
    for key, mk in (("N-overparam", "^-"), ("N-strongly-convex", "v-")):
        if key in res:
            rr = res[key]["rows"]
            ax[0, 0].loglog([r["N"] for r in rr], [r["stability"] for r in rr], mk, label=f"{res[key]['config']['problem']} ({res[key]['slope']:+.2f})")
    ax[0, 0].loglog(Ns, [rows[0]["stability"] * (Ns[0] / n) ** 0.5 for n in Ns], "--", color="grey", label="∝ 1/√(mn)")
    ax[0, 0].set(xlabel="N = mn", ylabel="ε (on-average model stability)", title="ε vs N")
    ax[0, 0].legend(fontsize=7)
    ax[0, 1].errorbar(Ns, [r["gap"] for r in rows], yerr=[r["gap_se"] for r in rows], marker="o")
    ax[0, 1].set(xscale="log", xlabel="N = mn", ylabel="F − F_S", title="generalisation gap vs N")
    for key, lab in (("m", "fixed N"), ("m-fixed-n", "fixed n (N = n m)")):
        rr = res[key]["rows"]
        ax[0, 2].loglog([r["m"] for r in rr], [r["stability"] for r in rr], "o-", label=f"{lab}: slope {res[key]['slope']:+.2f}")
    ax[0, 2].set(xlabel="workers m", ylabel="ε", title="ε vs m")
    ax[0, 2].legend(fontsize=7)
    for a, key in ((ax[1, 0], "delay"), (ax[1, 1], "participation")):
        rr = res[key]["rows"]
        a.bar(range(len(rr)), [r["stability"] for r in rr], yerr=[2 * r["stability"] * r["stability_se"] for r in rr])
        a.set_xticks(range(len(rr)), [str(r["x"]) for r in rr], rotation=20)
        a.set(ylabel="ε", title=f"ε vs {key} (N={rr[0]['N']}, m={rr[0]['m']})")
    rr = res["delay"]["rows"]
    ax[1, 2].bar(range(len(rr)), [r["gap"] for r in rr], yerr=[r["gap_se"] for r in rr])
    ax[1, 2].set_xticks(range(len(rr)), [str(r["x"]) for r in rr], rotation=20)
    ax[1, 2].set(ylabel="F − F_S", title="gap vs delay")
    fig.suptitle("asgd-stability: separable logistic regression, d = 20, T = N, η = 0.5/√T")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """asgd-stability: on-average model stability and generalisation gap of simulated ASGD against N = mn, m, the
    delay and the participation, with synchronous SGD beside it (--quick: 5 seeds, N <= 256; the table still prints)."""
    res = measure(ctx.quick, opts.overparam, opts.device, opts.seeds)
    ctx.report(table(res))
    plot(res, ctx.figure("asgd-stability.png"))
    return res
