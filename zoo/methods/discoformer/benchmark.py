"""Benchmark of ``discoformer``: relative score MSE and log-density MSE of the trained DiScoFormer toys against
Scott-rule KDE, score-debiased KDE (own score, DiScoFormer plug-in score, exact-score oracle) by dimension
(d = 1, 2) and sample-set size on held-out random mixtures of Algorithm 1 with exact ground truth, plus the
trained model's learned rotation equivariance, consistency, Gaussian limit and normalisation; the paper's
numbers (d = 2 and 10, n = 2^14) beside ours. Run as ``zoo bench discoformer [--quick] [--out-dir docs/methods]``."""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark
from zoo.common.training import progress

from .evaluation import ESTIMATORS, EVAL_SEED, _model_fn, compare, gaussian_fit_score, gaussian_limit, normalisation, ood_compare, ou_particle_flow, symmetry_errors
from .kde import kde_log_density_score
from .params import BenchOptions

#: paper numbers (relative score MSE, GMM, n = 2^14; method note section 5 [paper-note])
PAPER = {(2, 16384): {"discoformer": 0.068, "kde": 0.172}, (10, 16384): {"discoformer": 0.0283, "kde": 0.529}}
VARIANT = {1: "toy-d1", 2: "toy"}


def measure(ctx: Any, dims: list[int], ns: list[int], tasks: int, n_query: int = 256) -> dict[str, Any]:
    """Every number of the benchmark for the trained toys of ``dims`` (``ctx.models``). The held-out draws come from
    :data:`.evaluation.EVAL_SEED` (+ k per measurement), shifted by ``10**6 * ctx.seed`` (``--seed``; 0: the card's)."""
    t0 = time.perf_counter()
    s0 = EVAL_SEED + 1_000_000 * ctx.seed
    res: dict[str, Any] = {"dims": dims, "ns": ns, "tasks": tasks, "n_query": n_query, "rows": [], "model": {}, "ood": []}
    for d in dims:
        model = ctx.models(VARIANT[d])["estimator"]
        for n in ns:
            r = compare(model, d, n, tasks, n_query, seed=s0, progress=progress)
            res["rows"].append({"d": d, "n": n, **{e: r[e] for e in ESTIMATORS}})
        res["model"][str(d)] = {
            **symmetry_errors(model, d, tasks=max(4, tasks // 4), seed=s0 + 1),
            **gaussian_limit(model, d, tasks=max(4, tasks // 8), seed=s0 + 2),
            "normalisation": normalisation(model, d, tasks=max(4, tasks // 8), seed=s0 + 3),
        }
        res["model"][str(d)]["ou_flow"] = {name: ou_particle_flow(fn, d, seed=s0 + 5) for name, fn in
                                           (("discoformer", _model_fn(model)), ("kde", kde_log_density_score), ("gaussian-fit", gaussian_fit_score))}
        for law in ("laplace", "student-t"):
            r = ood_compare(model, d, law, n=256, tasks=max(4, tasks // 4), seed=s0 + 4)
            res["ood"].append({"d": d, "law": law, "n": 256, **r})
    res["seconds"] = time.perf_counter() - t0
    return res


def table(res: dict[str, Any]) -> str:
    """Markdown: one row per (d, n) with every estimator's relative score MSE and log-density MSE."""
    short = {"discoformer": "DiScoFormer", "kde": "KDE (Scott)", "sd-kde": "SD-KDE (own)", "sd-kde+discoformer": "SD-KDE (+DSF)", "sd-kde+oracle": "SD-KDE (oracle)"}
    head = "| d | n | " + " | ".join(short[e] for e in ESTIMATORS) + " |"
    lines = [f"relative score MSE, E|S_hat - S|^2 / E|S|^2 ({res['tasks']} held-out mixtures x {res['n_query']} queries; lower is better)",
             head, "|---:|---:|" + "---:|" * len(ESTIMATORS)]
    for r in res["rows"]:
        lines.append(f"| {r['d']} | {r['n']} | " + " | ".join(f"{r[e]['rel_score_mse']:.4f}" for e in ESTIMATORS) + " |")
    for (d, n), p in PAPER.items():
        lines.append(f"| {d} (paper) | {n} | {p['discoformer']:.4f} | {p['kde']:.4f} | | | |")
    lines += ["", "log-density MSE, E (T_hat - log f)^2", head, "|---:|---:|" + "---:|" * len(ESTIMATORS)]
    for r in res["rows"]:
        lines.append(f"| {r['d']} | {r['n']} | " + " | ".join(f"{r[e]['log_density_mse']:.4f}" for e in ESTIMATORS) + " |")
    lines += ["", "| d | rotation: rel. score MSE | rotation: log-density MSE | consistency |S - grad T|^2/|S|^2 | vs plug-in Gaussian (score) | int exp(T) (median, min-max) |",
              "|---:|---:|---:|---:|---:|---|"]
    for d, m in res["model"].items():
        z = m["normalisation"]
        lines.append(f"| {d} | {m['rotation_rel_score_mse']:.2e} | {m['rotation_log_density_mse']:.2e} | {m['consistency_rel_mse']:.4f} | "
                     f"{m['rel_score_mse_vs_plugin_gaussian']:.4f} | {statistics.median(z):.3f} ({min(z):.3f}-{max(z):.3f}) |")
    lines += ["", "Fokker-Planck particle flow (Ornstein-Uhlenbeck, 256 particles, dx/dt = -x - score, 50 Euler steps to t = 1): "
              "relative error of the particle covariance vs the exact S_1 (at t = 0: sampling noise)",
              "| d | DiScoFormer score | KDE score | Gaussian-fit score | t = 0 |", "|---:|---:|---:|---:|---:|"]
    for d, m in res["model"].items():
        if "ou_flow" in m:
            f = m["ou_flow"]
            lines.append(f"| {d} | {f['discoformer']['cov_err']:.4f} | {f['kde']['cov_err']:.4f} | {f['gaussian-fit']['cov_err']:.4f} | {f['kde']['cov_err_t0']:.4f} |")
    if res.get("ood"):
        lines += ["", "laws outside the training family (n = 256; rotated product laws, unit variance; TTT: 4 GD steps, lr 1e-4)",
                  "| d | law | DiScoFormer | DiScoFormer + TTT | KDE (Scott) | log-density MSE: DSF / +TTT / KDE |", "|---:|---|---:|---:|---:|---|"]
        for r in res["ood"]:
            lines.append(f"| {r['d']} | {r['law']} | {r['discoformer']['rel_score_mse']:.4f} | {r['discoformer+ttt']['rel_score_mse']:.4f} | "
                         f"{r['kde']['rel_score_mse']:.4f} | {r['discoformer']['log_density_mse']:.4f} / {r['discoformer+ttt']['log_density_mse']:.4f} / "
                         f"{r['kde']['log_density_mse']:.4f} |")
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2 * len(res["dims"]), figsize=(5 * len(res["dims"]) * 2, 3.8))
    style = {"discoformer": "o-", "kde": "s--", "sd-kde": "^--", "sd-kde+discoformer": "v-", "sd-kde+oracle": "x:"}
    for i, d in enumerate(res["dims"]):
        rows = [r for r in res["rows"] if r["d"] == d]
        ns = [r["n"] for r in rows]
        for j, key in enumerate(("rel_score_mse", "log_density_mse")):
            a = ax[2 * i + j]
            for e in ESTIMATORS:
                a.loglog(ns, [r[e][key] for r in rows], style[e], label=e)
            a.set(xlabel="sample-set size n", ylabel=key.replace("_", " "), title=f"d = {d}: {key.replace('_', ' ')}")
            a.grid(alpha=0.3, which="both")
    ax[0].legend(fontsize=7)
    fig.suptitle(f"DiScoFormer toy vs KDE baselines on held-out random mixtures ({res['tasks']} per point)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """discoformer: relative score MSE and log-density MSE of the trained toys vs KDE and score-debiased KDE on
    held-out random mixtures, plus learned symmetry, Gaussian limit, normalisation, OU flow and out-of-family laws
    (--quick: 12 mixtures per point, n in {64, 256}, about a minute)."""
    res = measure(ctx, list(opts.dims), list(opts.ns), opts.tasks)
    ctx.report(table(res))
    plot(res, ctx.figure("discoformer-bench.png"))
    return res
