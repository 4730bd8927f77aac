"""FMRG vs DPS on a *learned*, imperfect velocity and flow map (``zoo bench fmrg --learned``).

Pre-registered in ``docs/methods/fmrg.NOTES.md``: per network-training seed (0 = the shipped checkpoint, others
retrained by :func:`zoo.methods.fmrg.train.train_pair`), on fresh sampling draws (noise seed ``10000 + seed``, shared
by every arm of that seed: paired), at equal NFE 4:

* FMRG-J and FMRG-E (the spec defaults: ``flow_map1``, n_opt 1, velocity-norm gradients, Adam with the outer lr
  schedule) over a log-spaced eta grid in [0.1, 30]; their look-ahead is the learned flow map ``X_phi(x, t, 1)``;
* DPS over a log-spaced lambda grid in [0.01, 3], its look-ahead the learned Tweedie ``x + (1 - t) u_theta(x, t)``;
* best-of-4 one-jump flow-map samples ``X_phi(x_0, 0, 1)``; strength-0 rows (unguided chords; DPS's Euler on
  ``u_theta``) as each arm's own before;
* rewards: quadratic ``-|x - (0.3, 1.4)|^2 / (2 0.5^2)`` and the non-smooth ``disc`` (flat inside radius 0.5).

Summary per arm: the best mean log p (under the *true* mixture) among grid strengths with mean reward >= -2.
``g = max(FMRG-J, FMRG-E) - DPS`` per seed; the claim is **refuted** if mean g <= sd(g) (g <= 0 included),
**supported** if g > 0 on every seed and mean g > 2 sd(g), otherwise **not shown**.

Ceilings (measured first, :func:`ceilings`): (a) ``|x1_hat_theta - E[x1 | x_t]|`` (learned vs exact Tweedie) and
(b) ``|X_phi(x, t, 1) - ODE_theta(x, t -> 1)|`` and ``|X_phi(x, t, 1) - X_{t,1}(x)|`` (exact flow), by t, on
``x_t`` from the true interpolant; plus the exact look-ahead gap ``|E[x1 | x_t] - X_{t,1}(x_t)|`` and each
look-ahead's mean log p.
"""
from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import torch

from zoo.common.flows import rf_flow_map, rf_velocity
from zoo.common.out_files import pyplot, save_figure

from .sampler import BestOfNSampler, DPSSampler, FlowMapSampler, FMRGSampler

__all__ = ["REWARDS", "ARMS", "strength_grid", "ceilings", "sweep_learned", "summarise", "verdict", "compare", "table", "plot", "run_learned"]

REWARDS = {"quadratic": {"kind": "quadratic", "target": [0.3, 1.4], "tau": 0.5},
           "disc": {"kind": "disc", "target": [0.3, 1.4], "tau": 0.5, "radius": 0.5}}
ARMS = ["FMRG-J", "FMRG-E", "DPS", "best-of-N"]
NFE = 4
MIN_REWARD = -2.0
EXTRA_ETAS = [1.0, 3.0]  # the open question (eta 1 vs 3 under the outer schedule); off the grid, not in the summary
TS = [0.0, 0.25, 0.5, 0.75, 0.9]


def strength_grid(lo: float, hi: float, n: int) -> list[float]:
    """``n`` log-spaced strengths from ``lo`` to ``hi`` (both included)."""
    return [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]


def _mean_norm(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm(dim=1).mean())


@torch.no_grad()
def ceilings(model, n: int = 2048, seed: int = 20_000, ts: list[float] = TS) -> list[dict[str, float]]:
    """Ceilings (a), (b) of the module docstring by t on ``n`` fresh ``x_t = (1 - t) x0 + t x1``, ``x1 ~ p_data``."""
    gmm = model.gmm
    g = torch.Generator().manual_seed(seed)
    x1 = gmm.sample(n, generator=g)
    x0 = torch.randn(n, model.dim, dtype=torch.float64, generator=g)
    out = []
    for t in ts:
        xt = (1 - t) * x0 + t * x1
        tw_exact = xt + (1 - t) * rf_velocity(gmm, xt, t)
        tw_learned = xt + (1 - t) * model._vel(xt, t)
        end_exact = rf_flow_map(gmm, xt, t, 1.0, rtol=1e-7, atol=1e-7)
        end_ode = model.ode(xt, t, 1.0)
        end_fmap = xt + (1 - t) * model.fmap(torch.cat([xt, torch.full((n, 1), t, dtype=torch.float64), torch.ones(n, 1, dtype=torch.float64)], 1))
        lp = lambda a: float(gmm.log_prob(a).mean())  # noqa: E731
        out.append({"t": t, "a_tweedie_err": _mean_norm(tw_learned, tw_exact), "b_fmap_vs_ode": _mean_norm(end_fmap, end_ode),
                    "b_fmap_vs_exact": _mean_norm(end_fmap, end_exact), "ode_vs_exact": _mean_norm(end_ode, end_exact),
                    "gap_tweedie_vs_flow_exact": _mean_norm(tw_exact, end_exact), "log_p_tweedie_learned": lp(tw_learned),
                    "log_p_tweedie_exact": lp(tw_exact), "log_p_fmap": lp(end_fmap), "log_p_flow_exact": lp(end_exact)})
    return out


def _stats(model, out) -> dict[str, Any]:
    x = out.samples
    lp = model.log_prob(x)
    ok = bool(torch.isfinite(x).all())
    return {"reward": float(out.rewards.mean()), "log_p": float(lp.mean()) if ok else float("nan"), "nfe": int(out.nfe), "finite": ok}


def sweep_learned(model, reward: dict, samples: int, noise_seed: int, etas: list[float], lambdas: list[float]) -> list[dict[str, Any]]:
    """Every arm at NFE 4 on ``samples`` shared noise draws; rows ``{method, strength, grid, reward, log_p, nfe}``."""
    fm = {"flow_map": model}
    x0 = torch.randn(samples, model.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(noise_seed))
    rows: list[dict[str, Any]] = []
    s = FlowMapSampler(fm, FlowMapSampler.Params(num_steps=NFE, reward=reward))
    rows.append({"method": "unguided", "strength": 0.0, "grid": False, **_stats(model, s(noise=x0))})
    for name, gm in (("FMRG-J", "jac"), ("FMRG-E", "euc")):
        for eta, on_grid in [(0.0, False)] + [(e, True) for e in etas] + ([(e, False) for e in EXTRA_ETAS] if gm == "jac" else []):
            s = FMRGSampler(fm, FMRGSampler.Params(num_steps=NFE, grad_mode=gm, step_size=eta, num_optim_iters=1, reward=reward))
            rows.append({"method": name, "strength": eta, "grid": on_grid, **_stats(model, s(noise=x0))})
    for lam, on_grid in [(0.0, False)] + [(v, True) for v in lambdas]:
        s = DPSSampler(fm, DPSSampler.Params(num_steps=NFE, guidance_scale=lam, reward=reward))
        rows.append({"method": "DPS", "strength": lam, "grid": on_grid, **_stats(model, s(noise=x0))})
    s = BestOfNSampler(fm, BestOfNSampler.Params(num_steps=1, n_candidates=NFE, reward=reward))
    rows.append({"method": "best-of-N", "strength": float(NFE), "grid": True, **_stats(model, s(seed=noise_seed + 1, noise=x0))})
    return rows


def summarise(rows: list[dict[str, Any]], method: str, min_reward: float = MIN_REWARD) -> float | None:
    """Best mean log p among the grid strengths of ``method`` reaching mean reward ``min_reward`` (None: none does)."""
    ok = [r["log_p"] for r in rows if r["method"] == method and r["grid"] and r["finite"] and r["reward"] >= min_reward]
    return max(ok) if ok else None


def verdict(gs: list[float]) -> str:
    """The pre-registered rule on the paired gaps ``g`` (one per training seed)."""
    m = statistics.fmean(gs)
    sd = statistics.stdev(gs) if len(gs) > 1 else float("inf")
    if m <= sd:
        return "refuted"
    if all(g > 0 for g in gs) and m > 2 * sd:
        return "supported"
    return "not shown"


def compare(per_seed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Per reward: the summary of every arm per seed, the paired ``g`` per seed, mean, sd and the verdict."""
    out: dict[str, Any] = {}
    for rname in REWARDS:
        summ = {seed: {a: summarise(res["sweeps"][rname], a) for a in ARMS} for seed, res in per_seed.items()}
        gs = []
        for s in summ.values():
            fm = [v for v in (s["FMRG-J"], s["FMRG-E"]) if v is not None]
            gs.append((max(fm) if fm else -math.inf) - (s["DPS"] if s["DPS"] is not None else -math.inf))
        finite = all(math.isfinite(g) for g in gs)
        mean = statistics.fmean(gs) if finite else None
        sd = statistics.stdev(gs) if finite and len(gs) > 1 else None
        gj = [s["FMRG-J"] - s["DPS"] for s in summ.values() if s["FMRG-J"] is not None and s["DPS"] is not None]
        out[rname] = {"summary": summ, "g": gs, "g_mean": mean, "g_sd": sd, "verdict": verdict(gs) if finite else "refuted (an arm reaches no reward >= -2)",
                      "g_fmrg_j": gj, "g_fmrg_j_mean": statistics.fmean(gj) if gj else None}
    return out


def _f(v: Any, nd: int = 3) -> str:
    return "—" if v is None else f"{v:.{nd}f}"


def table(res: dict[str, Any]) -> str:
    seeds = list(res["per_seed"])
    parts = ["## Ceilings by t (mean over training seeds " + ", ".join(map(str, seeds)) + "; 2048 fresh x_t per seed)", "",
             "| t | (a) learned vs exact Tweedie | (b) X_phi vs ODE_theta | (b) X_phi vs exact flow | ODE_theta vs exact | exact Tweedie vs exact flow |"
             " log p: Tweedie (learned) | log p: X_phi endpoint |",
             "|---|---|---|---|---|---|---|---|"]
    keys = ["a_tweedie_err", "b_fmap_vs_ode", "b_fmap_vs_exact", "ode_vs_exact", "gap_tweedie_vs_flow_exact", "log_p_tweedie_learned", "log_p_fmap"]
    for i, t in enumerate(TS):
        vals = [statistics.fmean(res["per_seed"][s]["ceilings"][i][k] for s in seeds) for k in keys]
        parts.append(f"| {t:g} | " + " | ".join(f"{v:.3f}" for v in vals) + " |")
    parts.append("")
    for rname in REWARDS:
        c = res["compare"][rname]
        parts += [f"## {rname} reward: best mean log p at mean reward ≥ {MIN_REWARD:g}, NFE {NFE}, {res['samples']} fresh draws per seed", "",
                  "| seed | " + " | ".join(ARMS) + " | g = FMRG best − DPS |", "|---|" + "---|" * (len(ARMS) + 1)]
        for (seed, s), g in zip(c["summary"].items(), c["g"]):
            parts.append(f"| {seed} | " + " | ".join(_f(s[a]) for a in ARMS) + f" | {_f(g)} |")
        parts += ["", f"g mean {_f(c['g_mean'])} ± sd {_f(c['g_sd'])} over {len(c['g'])} training seeds: **{c['verdict']}**"
                  f" (FMRG-J alone: mean {_f(c['g_fmrg_j_mean'])})", ""]
    if "exact" in res:
        parts += ["## Oracle reference: the same sweeps on the exact flow map and exact Tweedie (seed 0's draws)", "",
                  "| reward | " + " | ".join(ARMS) + " | FMRG best − DPS |", "|---|" + "---|" * (len(ARMS) + 1)]
        for rname in REWARDS:
            s = res["exact"]["summary"][rname]
            fm = [v for v in (s["FMRG-J"], s["FMRG-E"]) if v is not None]
            g = max(fm) - s["DPS"] if fm and s["DPS"] is not None else None
            parts.append(f"| {rname} | " + " | ".join(_f(s[a]) for a in ARMS) + f" | {_f(g)} |")
        parts.append("")
    parts += ["## Every row (seed 0)", "", "| reward | method | strength | on grid | mean reward | mean log p | NFE |", "|---|---|---|---|---|---|---|"]
    s0 = seeds[0]
    for rname in REWARDS:
        for r in res["per_seed"][s0]["sweeps"][rname]:
            parts.append(f"| {rname} | {r['method']} | {r['strength']:.3g} | {'yes' if r['grid'] else 'no'} | {r['reward']:.3f} | {r['log_p']:.3f} | {r['nfe']} |")
    return "\n".join(parts)


def plot(res: dict[str, Any], path: Path) -> Path:
    """Pareto fronts (mean reward vs mean log p) per reward: the seed mean per strength with ±1 sd of log p over
    training seeds (error bars) and each seed's own front (thin lines)."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(REWARDS), figsize=(6.5 * len(REWARDS), 5), squeeze=False)
    style = {"FMRG-J": ("C0", "o"), "FMRG-E": ("C1", "s"), "DPS": ("C3", "^"), "best-of-N": ("C2", "*"), "unguided": ("k", "x")}
    seeds = list(res["per_seed"])
    for ax, rname in zip(axes[0], REWARDS):
        for m, (c, mk) in style.items():
            rows = [[r for r in res["per_seed"][s]["sweeps"][rname] if r["method"] == m and (r["grid"] or m == "unguided" or (m == "DPS" and r["strength"] == 0))]
                    for s in seeds]
            k = len(rows[0])
            R = [[rows[j][i]["reward"] for j in range(len(seeds))] for i in range(k)]
            L = [[rows[j][i]["log_p"] for j in range(len(seeds))] for i in range(k)]
            keep = [i for i in range(k) if all(math.isfinite(v) for v in L[i]) and statistics.fmean(R[i]) > -30 and statistics.fmean(L[i]) > -12]
            if not keep:
                continue
            xr = [statistics.fmean(R[i]) for i in keep]
            ym = [statistics.fmean(L[i]) for i in keep]
            sd = [statistics.stdev(L[i]) if len(seeds) > 1 else 0.0 for i in keep]
            ax.errorbar(xr, ym, yerr=sd, marker=mk, color=c, label=m, ms=9 if mk == "*" else 5, ls="-" if k > 1 else "none", capsize=2, lw=1.2)
            for j in range(len(seeds)):  # each training seed's own front, thin
                if k > 1:
                    ax.plot([R[i][j] for i in keep], [L[i][j] for i in keep], color=c, lw=0.5, alpha=0.4)
        if "exact" in res:  # the oracle reference (exact flow map and Tweedie), dashed
            for m in ("FMRG-J", "FMRG-E", "DPS"):
                pts = [r for r in res["exact"]["sweeps"][rname] if r["method"] == m and r["grid"] and math.isfinite(r["log_p"])
                       and r["reward"] > -30 and r["log_p"] > -12]
                ax.plot([r["reward"] for r in pts], [r["log_p"] for r in pts], color=style[m][0], ls="--", lw=1, alpha=0.7, label=m + " (exact model)")
        ax.axvline(MIN_REWARD, color="grey", ls=":", lw=1)
        cm = res["compare"][rname]
        ax.set_title(f"{rname} reward, NFE {NFE}: g = {_f(cm['g_mean'], 2)} ± {_f(cm['g_sd'], 2)} ({cm['verdict']})", fontsize=10)
        ax.set_xlabel("mean reward")
        ax.set_ylabel("mean log p_data (true mixture)")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"FMRG vs DPS on a learned velocity + flow map (gmm3), training seeds {seeds}; error bars ±1 sd over seeds, thin lines per seed, dashed the exact model", fontsize=10)
    return save_figure(fig, path)


def run_learned(models: dict[int, Any], samples: int, grid: int, exact: Any = None, progress: bool = True) -> dict[str, Any]:
    """Ceilings + sweeps for each ``{seed: model}`` and the paired comparison; with ``exact`` (the exact flow-map
    model) the same sweeps on it, on seed 0's draws, as the oracle reference (the testbed that hands DPS the
    exact Tweedie answer)."""
    from zoo.common.training import progress as bar

    etas, lambdas = strength_grid(0.1, 30.0, grid), strength_grid(0.01, 3.0, grid)
    per_seed = {}
    items = list(models.items())
    for seed, model in (bar(items, "fmrg --learned: seeds") if progress else items):
        per_seed[seed] = {"ceilings": ceilings(model),
                          "sweeps": {rn: sweep_learned(model, rw, samples, 10_000 + seed, etas, lambdas) for rn, rw in REWARDS.items()}}
    out = {"samples": samples, "nfe": NFE, "etas": etas, "lambdas": lambdas, "per_seed": per_seed, "compare": compare(per_seed)}
    if exact is not None:
        sw = {rn: sweep_learned(exact, rw, samples, 10_000, etas, lambdas) for rn, rw in REWARDS.items()}
        summ = {rn: {a: summarise(sw[rn], a) for a in ARMS} for rn in REWARDS}
        out["exact"] = {"sweeps": sw, "summary": summ}
    return out
