"""Benchmark of ``ipfm`` (and its teacher spec ``pfgmpp``): one-step IPFM generators against the exact PFGM++ teacher's
Heun sampler at several NFE, for D in {4, 16, 128, inf} on the 2-D ``gmm3`` mixture, plus SiD (alpha = 1.2, the SiD
default, and alpha = 1) at D = inf. Quality: sliced Wasserstein-2 to exact data samples and the mean exact data
log-likelihood of the samples; "steps to a quality threshold" per D (the paper's claim: finite D converges faster than
the diffusion limit) is reported as measured, not gated.

    zoo bench ipfm [--quick] [--D 4 16 128 inf] [--steps 800] [--no-sid] [--out-dir docs/methods]   # ipfm.png into --out-dir
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from registry.contract import benchmark
from zoo.common.pfgmpp import NFE_STEPS, AnalyticPFGMPP, data_quality, teacher_quality

from .distill import distill, steps_to_threshold
from .params import BenchOptions

def measure(Ds: list[str], steps: int, threshold: float, seed: int, n: int, sid: bool, progress: bool = True) -> dict[str, Any]:
    t0 = time.perf_counter()
    rows: list[dict[str, Any]] = []
    data = data_quality(AnalyticPFGMPP("gmm3", "inf"), n, seed)
    runs = [(D, "ipfm", 0.5) for D in Ds] + ([("inf", "sid", 1.2), ("inf", "sid", 1.0)] if sid else [])
    for D, loss, alpha in runs:
        teacher = {f"nfe{k}": teacher_quality(AnalyticPFGMPP("gmm3", D), k, n, seed) for k in NFE_STEPS} if loss == "ipfm" else {}
        out = distill(AnalyticPFGMPP("gmm3", D), loss=loss, alpha=alpha, steps=steps, seed=seed, eval_every=max(steps // 16, 1), eval_n=n,
                      progress=progress)
        h = out["history"]
        rows.append({"D": D, "loss": loss, "alpha": alpha, "teacher": teacher, "history": h, "sw2": h[-1]["sw2"], "loglik": h[-1]["loglik"],
                     "best_sw2": min(r["sw2"] for r in h), "steps_to_threshold": steps_to_threshold(h, threshold)})
    return {"rows": rows, "threshold": threshold, "steps": steps, "seed": seed, "n": n, "data_loglik": data["loglik"], "data_sw2": data["sw2"],
            "seconds": time.perf_counter() - t0}


def table(res: dict[str, Any]) -> str:
    lines = [f"gmm3, {res['n']} samples, seed {res['seed']}; exact data samples: mean log-lik {res['data_loglik']:.3f}, SW2 floor {res['data_sw2']:.3f}; "
             f"SW2 threshold {res['threshold']}",
             "| D | method | one-step SW2 (final / best) | one-step log-lik | steps to SW2 <= thr | teacher SW2 @ NFE 5 / 9 / 17 / 35 | teacher log-lik @ NFE 35 |",
             "|---|---|---:|---:|---:|---|---:|"]
    for r in res["rows"]:
        t = r["teacher"]
        tq = " / ".join(f"{t[f'nfe{k}']['sw2']:.3f}" for k in NFE_STEPS) if t else "-"
        tl = f"{t['nfe35']['loglik']:.3f}" if t else "-"
        name = "IPFM" if r["loss"] == "ipfm" else f"SiD a={r['alpha']}"
        st = r["steps_to_threshold"]
        lines.append(f"| {r['D']} | {name} | {r['sw2']:.3f} / {r['best_sw2']:.3f} | {r['loglik']:.3f} | {st if st is not None else 'not reached'} | {tq} | {tl} |")
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for r in res["rows"]:
        label = f"IPFM D={r['D']}" if r["loss"] == "ipfm" else f"SiD a={r['alpha']} D=inf"
        ax[0].plot([h["step"] for h in r["history"]], [h["sw2"] for h in r["history"]], "-" if r["loss"] == "ipfm" else ":", label=label)
    ax[0].axhline(res["threshold"], color="k", lw=0.6, ls="--")
    ax[0].set(xlabel="generator steps", ylabel="SW2 to data (one step)", yscale="log", title="one-step generator during distillation")
    ax[0].legend(fontsize=7)
    for r in res["rows"]:
        if r["teacher"]:
            nfes = list(NFE_STEPS)
            line = ax[1].plot(nfes, [r["teacher"][f"nfe{k}"]["sw2"] for k in nfes], "o-", label=f"teacher Heun D={r['D']}")
            ax[1].plot([1], [r["sw2"]], "*", ms=12, color=line[0].get_color())
    ax[1].set(xscale="log", yscale="log", xlabel="NFE", ylabel="SW2 to data", title="teacher at NFE 5-35 vs one-step IPFM (stars)")
    ax[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """One-step IPFM generators vs the exact PFGM++ teacher's Heun sampler for several D on gmm3, plus SiD
    (alpha = 1.2, 1) at D = inf (--quick: D in {16, inf}, 100 steps, 1000 samples, no SiD runs)."""
    torch.set_num_threads(1)
    res = measure(list(opts.D), opts.steps, opts.threshold, ctx.seed, opts.n, opts.sid)
    ctx.report(table(res))
    plot(res, ctx.figure("ipfm.png"))
    return res
