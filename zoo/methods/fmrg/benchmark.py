"""Benchmark of ``fmrg``: reward vs on-manifold log-likelihood across guidance strengths at 3-6 NFE for FMRG-E,
FMRG-J (the authors' normalisation: velocity-norm gradients, Adam with lr decaying over the outer steps as in the
authors' reward sampler; ``flow_map1`` chord steps, and ``flow_map2`` exact jumps at the same NFE, "fm2"), the
earlier reading ("inner lr": lr decayed over the inner iteration, i.e. constant at n_opt = 1; FMRG-E with the
inverse-problem sampler's extra x Delta), FMRG-J without the normalisation (plain gradient), DPS-style denoiser
guidance and best-of-N, on exact two-time flow maps of (a) the 3-component toy
mixture ``gmm3`` and (b) the single Gaussian ``gaussian`` of :mod:`zoo.common.gmm`, with the quadratic reward
``r = -||x - y||^2 / (2 tau^2)``, ``y = (0.3, 1.4)`` off the data manifold, ``tau = 0.5`` (method note section 6).
On (b) the closed-form LQR optimum of the strength-lambda problem is the reference curve (rewards module).
Writes ``fmrg.png``; run as ``zoo bench fmrg [--quick] [--nfe 3 4 5 6] [--n 256] [--out-dir D]``."""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import torch

from registry.contract import benchmark
from zoo.common.out_files import pyplot, save_figure

from .model import exact_flow_map_model
from .params import BenchOptions
from .rewards import gramian, lqr_endpoint
from .sampler import BestOfNSampler, DPSSampler, FMRGSampler

REWARD = {"kind": "quadratic", "target": [0.3, 1.4], "tau": 0.5}
ETAS = [0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0]
PLAIN_ETAS = [0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8]
LAMBDAS = [0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0]
METHODS = ["FMRG-J", "FMRG-E", "FMRG-J fm2", "FMRG-E fm2", "FMRG-J (inner lr)", "FMRG-E (inner lr, ×Δ)", "FMRG-J (plain)", "DPS", "best-of-N"]


def _row(model, out, x1_ref=None) -> dict[str, Any]:
    x = out.samples
    lp = model.log_prob(x)
    row = {"reward": float(out.rewards.mean()), "log_p": float(lp.mean()), "log_p_median": float(lp.median()), "nfe": int(out.nfe),
           "finite": bool(torch.isfinite(x).all())}
    if x1_ref is not None:
        row["dist_lqr"] = float((x - x1_ref).norm(dim=1).mean())
    return row


def sweep(mixture: str, nfes: list[int], n: int, seed: int) -> dict[str, Any]:
    """Every method at every NFE and strength on ``n`` shared x_0 (seed); rows ``(method, nfe, strength) -> stats``."""
    model = exact_flow_map_model(mixture, rtol=1e-7, atol=1e-7)
    x0 = torch.randn(n, model.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    fm = {"flow_map": model}
    gauss = model.gmm.is_single_gaussian
    rows: list[dict[str, Any]] = []
    ref = None
    if gauss:
        v, y, tau = model.gmm.evals[0], torch.tensor(REWARD["target"], dtype=torch.float64), REWARD["tau"]
        x1 = model.flow_map(x0, 0.0, 1.0)
        ref = lqr_endpoint(x1, v, y, tau)  # the unit-strength optimum
        for lam in [0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 20.0]:
            xs = lqr_endpoint(x1, v, y, tau / math.sqrt(lam)) if lam > 0 else x1
            r = -((xs - y) ** 2).sum(1) / (2 * tau**2)
            lp = model.log_prob(xs)
            rows.append({"method": "LQR optimum", "nfe": 0, "strength": lam, "reward": float(r.mean()), "log_p": float(lp.mean()),
                         "log_p_median": float(lp.median()), "dist_lqr": float((xs - ref).norm(dim=1).mean()), "finite": True})
    for N in nfes:
        for eta in ETAS:
            for name, gm in (("FMRG-J", "jac"), ("FMRG-E", "euc")):
                s = FMRGSampler(fm, FMRGSampler.Params(num_steps=N, grad_mode=gm, step_size=eta, num_optim_iters=1, reward=REWARD))
                rows.append({"method": name, "strength": eta, **_row(model, s(noise=x0), ref)})
                # flow_map2 (exact jumps, 2 NFE per guided step) at the same NFE: NFE // 2 guided steps, plus one
                # unguided exact jump (1 NFE) to t = 1 when NFE is odd
                k = N // 2
                grid = dict(num_steps=k + (N % 2), early_stop=k) if N % 2 else dict(num_steps=k)
                s = FMRGSampler(fm, FMRGSampler.Params(**grid, sample_mode="flow_map2", grad_mode=gm, step_size=eta, num_optim_iters=1, reward=REWARD))
                rows.append({"method": name + " fm2", "strength": eta, **_row(model, s(noise=x0), ref)})
                # this module's earlier reading (before issue 38): Adam lr decayed over the inner iteration (constant at
                # n_opt = 1) and, for FMRG-E, the inverse-problem sampler's extra x Delta
                s = FMRGSampler(fm, FMRGSampler.Params(num_steps=N, grad_mode=gm, step_size=eta, num_optim_iters=1, lr_schedule="inner",
                                                       euc_times_dt=gm == "euc", reward=REWARD))
                rows.append({"method": name + " (inner lr" + (", ×Δ)" if gm == "euc" else ")"), "strength": eta, **_row(model, s(noise=x0), ref)})
        for eta in PLAIN_ETAS:
            s = FMRGSampler(fm, FMRGSampler.Params(num_steps=N, grad_mode="jac", step_size=eta, num_optim_iters=1, use_adam=False,
                                                   normalize_grad=False, reward=REWARD))
            rows.append({"method": "FMRG-J (plain)", "strength": eta, **_row(model, s(noise=x0), ref)})
        for lam in LAMBDAS:
            s = DPSSampler(fm, DPSSampler.Params(num_steps=N, guidance_scale=lam, reward=REWARD))
            rows.append({"method": "DPS", "strength": lam, **_row(model, s(noise=x0), ref)})
        s = BestOfNSampler(fm, BestOfNSampler.Params(num_steps=1, n_candidates=N, reward=REWARD))
        rows.append({"method": "best-of-N", "strength": N, **_row(model, s(seed=seed, batch_size=n), ref)})
    return {"mixture": mixture, "n": n, "seed": seed, "rows": rows, "gramian": [float(g) for g in gramian(model.gmm.evals[0])] if gauss else None}


def best_logp_at(rows: list[dict[str, Any]], method: str, nfe: int, min_reward: float) -> float | None:
    """Highest mean log p over the strengths of ``method`` at ``nfe`` whose mean reward reaches ``min_reward``."""
    ok = [r["log_p"] for r in rows if r["method"] == method and r["nfe"] == nfe and r["finite"] and r["reward"] >= min_reward]
    return max(ok) if ok else None


def measure(n: int = 256, nfes: tuple[int, ...] = (3, 4, 5, 6), seed: int = 0) -> dict[str, Any]:
    """:func:`sweep` on both mixtures and the Pareto summary (best log p reaching mean reward -2) per method and NFE."""
    t0 = time.perf_counter()
    out = {"gmm3": sweep("gmm3", list(nfes), n, seed), "gaussian": sweep("gaussian", list(nfes), n, seed)}
    out["pareto"] = {mix: {m: {N: best_logp_at(out[mix]["rows"], m, N, -2.0) for N in nfes} for m in METHODS} for mix in ("gmm3", "gaussian")}
    out["seconds"] = time.perf_counter() - t0
    return out


def _fmt(v: Any) -> str:
    return "—" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))


def table(res: dict[str, Any]) -> str:
    parts = []
    for mix in ("gmm3", "gaussian"):
        r = res[mix]
        parts += [f"## {mix}: quadratic reward y = {REWARD['target']}, tau = {REWARD['tau']}; {r['n']} particles, seed {r['seed']}", "",
                  "| method | NFE | strength | mean reward | mean log p | median log p |" + (" mean ‖x − x*_LQR‖ |" if mix == "gaussian" else ""),
                  "|---|---|---|---|---|---|" + ("---|" if mix == "gaussian" else "")]
        for row in r["rows"]:
            line = f"| {row['method']} | {row['nfe']} | {row['strength']:g} | {row['reward']:.3f} | {row['log_p']:.3f} | {row['log_p_median']:.3f} |"
            if mix == "gaussian":
                line += f" {row['dist_lqr']:.3f} |"
            parts.append(line if row["finite"] else line + " (non-finite)")
        parts.append("")
    nf = sorted({k for m in res["pareto"]["gmm3"].values() for k in m})
    parts += ["## Pareto summary: best mean log p among strengths reaching mean reward ≥ −2 (— = none reaches it)", "",
              "| data | method | " + " | ".join(f"NFE {k}" for k in nf) + " |", "|---|---|" + "---|" * len(nf)]
    for mix, per in res["pareto"].items():
        for m, vals in per.items():
            parts.append(f"| {mix} | {m} | " + " | ".join(_fmt(vals[k]) for k in nf) + " |")
    return "\n".join(parts)


def plot(res: dict[str, Any], path: Path) -> Path:
    plt = pyplot()

    nfes = sorted({r["nfe"] for r in res["gmm3"]["rows"]})
    fig, axes = plt.subplots(2, len(nfes), figsize=(4 * len(nfes), 7.5), squeeze=False)
    style = {"FMRG-J": ("C0", "o"), "FMRG-E": ("C1", "s"), "FMRG-J fm2": ("C5", "o"), "FMRG-E fm2": ("C6", "s"), "FMRG-J (plain)": ("C4", "x"), "DPS": ("C3", "^"), "best-of-N": ("C2", "*"),
             "FMRG-J (inner lr)": ("C7", "."), "FMRG-E (inner lr, ×Δ)": ("C8", "."),
             "LQR optimum": ("k", "")}
    for i, mix in enumerate(("gmm3", "gaussian")):
        rows = res[mix]["rows"]
        for j, N in enumerate(nfes):
            ax = axes[i, j]
            for m, (c, mk) in style.items():
                pts = [r for r in rows if r["method"] == m and (r["nfe"] == N or m == "LQR optimum") and r["finite"]]
                pts = [r for r in pts if r["reward"] > -25 and r["log_p"] > -8]  # unstable strengths leave the frame (table)
                if pts:
                    ax.plot([r["reward"] for r in pts], [r["log_p"] for r in pts], marker=mk or None, color=c, ls="--" if m == "LQR optimum" else "-",
                            label=m, ms=8 if mk == "*" else 5)
            ax.set_title(f"{mix}, NFE {N}")
            ax.set_xlabel("mean reward")
            ax.set_ylabel("mean log p_data")
            ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle("FMRG toy: reward vs on-manifold log-likelihood across guidance strengths (exact flow maps)")
    return save_figure(fig, path)


def learned_models(ctx: Any, seeds: list[int]) -> dict[int, Any]:
    """The learned velocity + flow map per network-training seed: seed 0 is the shipped checkpoint (spec variant
    ``learned``), any other seed is retrained in memory by the spec's own recipe (``training.learned``, the same
    :func:`~zoo.methods.fmrg.train.train_pair` that ``zoo train fmrg`` runs)."""
    from .params import TrainOptions
    from .train import train_pair

    params = dict(ctx.spec.training["learned"].params)
    out = {}
    for seed in seeds:
        if seed == 0:
            out[seed] = ctx.models("learned", roles=["flow_map"])["flow_map"]
        else:
            out[seed] = train_pair(seed, TrainOptions(**{**params, "progress": False}))[0]
    return out


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """fmrg: reward vs on-manifold log-likelihood across guidance strengths for FMRG-J/-E (chord and exact jumps), plain
    FMRG-J, DPS and best-of-N on exact flow maps of gmm3 and a Gaussian, beside the closed-form LQR optimum (--quick:
    64 particles, NFE 3 and 4). With --learned: FMRG-J/-E vs DPS vs best-of-N at NFE 4 on a learned velocity and flow
    map, per network-training seed (the shipped seed 0, the others retrained), with the ceilings by t; writes
    fmrg-learned.json and fmrg-learned.png (--quick: 512 draws, 5-point grids)."""
    if opts.learned:
        from .learned_bench import plot as plot_learned
        from .learned_bench import run_learned
        from .learned_bench import table as table_learned

        t0 = time.process_time()
        exact = exact_flow_map_model("gmm3", rtol=1e-7, atol=1e-7) if opts.exact_reference else None
        res = run_learned(learned_models(ctx, list(opts.seeds)), opts.samples, opts.grid, exact)
        res["seeds"] = list(opts.seeds)
        res["cpu_seconds"] = time.process_time() - t0
        ctx.report(table_learned(res))
        plot_learned(res, ctx.figure("fmrg-learned.png"))
        ctx.write_json("fmrg-learned.json", res)
        return res
    res = measure(opts.n, tuple(opts.nfe), ctx.seed)
    ctx.report(table(res))
    plot(res, ctx.figure("fmrg.png"))
    return res
