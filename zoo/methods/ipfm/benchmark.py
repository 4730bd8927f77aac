"""Benchmark of ``ipfm`` (and its teacher spec ``pfgmpp``): one-step IPFM generators against the exact PFGM++ teacher's
Heun sampler at several NFE, for D in {4, 16, 128, inf} on the 2-D ``gmm3`` mixture, plus SiD (alpha = 1.2, the SiD
default, and alpha = 1) at D = inf. Quality: sliced Wasserstein-2 to exact data samples and the mean exact data
log-likelihood of the samples; "steps to a quality threshold" per D (the paper's claim: finite D converges faster than
the diffusion limit) is reported as measured, not gated.

    zoo bench ipfm [--quick] [--D 4 16 128 inf] [--steps 800] [--no-sid] [--out-dir docs/methods]   # ipfm.png into --out-dir

Two multi-seed studies replace the table when their seeds are given (both in one command writes both;
:func:`bands` / :func:`plateau`; results in ``ipfm-study.json``):

    zoo bench ipfm --bands-seeds 0 1 2 3 4 5 6 7 --plateau-seeds 0 1 2 --out-dir docs/methods   # ipfm-bands.png, ipfm-plateau.png

Both use the learned network teacher (``teacher_field="learned"``: one frozen copy of the exact field per D, the
paper's setting) and fresh evaluation draws at every evaluated step (``fresh_eval``), and score a run's end by the
mean SW2 of ``final_draws`` fresh draws. Decision rules are pre-registered in ``docs/methods/ipfm.md``.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from registry.contract import benchmark
from zoo.common.pfgmpp import NFE_STEPS, AnalyticPFGMPP, data_quality, teacher_quality

from .distill import distill, learned_teacher, steps_to_threshold
from .params import BenchOptions

#: the plateau ablations: arm -> distill overrides of the default (D = 16, learned teacher, width 64, 3 layers,
#: 2 fake steps per generator step, SiD's t_max noise law); equal generator steps and batch in every arm
ARMS: dict[str, dict[str, Any]] = {
    "default": {},
    "capacity (width 256, 5 layers)": {"width": 256, "layers": 5},
    "fake fit (fake_iters 8)": {"fake_iters": 8},
    "gen sigma lognormal (= fake fit law)": {"gen_sigma_law": "lognormal"},
    "gen sigma log-uniform": {"gen_sigma_law": "loguniform"},
    "exact teacher": {"teacher_field": "exact"},
}

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


def _mean_sd(xs: list[float]) -> tuple[float, float]:
    """Mean and sample sd over seeds (:func:`zoo.common.spread.spread`; 0 for one seed, as the tables print it)."""
    from zoo.common.spread import spread

    s = spread(xs)
    return s.mean, s.sd or 0.0


def auc(history: list[dict[str, float]]) -> float:
    """Mean SW2 over the run: trapezoid area under the SW2-vs-step curve divided by the run's length."""
    st, sw = [h["step"] for h in history], [h["sw2"] for h in history]
    area = sum((st[i + 1] - st[i]) * (sw[i + 1] + sw[i]) / 2 for i in range(len(st) - 1))
    return area / (st[-1] - st[0])


def paired(a: list[float], b: list[float]) -> dict[str, float]:
    """Paired difference a - b over seeds: mean, sd, standard error, mean / s.e."""
    d = [x - y for x, y in zip(a, b)]
    m, sd = _mean_sd(d)
    se = sd / len(d) ** 0.5
    return {"mean": m, "sd": sd, "se": se, "z": m / se if se > 0 else float("nan"), "diffs": d}


def ceiling(teacher: Any, n: int, draws: int) -> dict[str, float]:
    """The learned teacher's Heun sampler at NFE 35 (18 Karras points) and exact data, scored like a study run's end:
    mean SW2 over ``draws`` fresh draws (prior, reference and data seeds 100 + k, 200 + k, 300 + k)."""
    from zoo.common.pfgmpp import heun_sample, karras_sigmas, quality

    tq, dq = [], []
    for k in range(draws):
        ref = teacher.gmm.sample(n, torch.Generator().manual_seed(200 + k))
        x, _ = heun_sample(teacher, teacher.prior(n, 80.0, torch.Generator().manual_seed(100 + k)), karras_sigmas(18))
        tq.append(quality(x, teacher, ref, seed=k)["sw2"])
        dq.append(quality(teacher.gmm.sample(n, torch.Generator().manual_seed(300 + k)), teacher, ref, seed=k)["sw2"])
    return {"teacher_heun35_sw2": _mean_sd(tq), "data_floor_sw2": _mean_sd(dq)}


def _run(D: str, seed: int, opts: BenchOptions, **kw: Any) -> dict[str, Any]:
    base = {"teacher_field": "learned", "fresh_eval": True}
    out = distill(AnalyticPFGMPP("gmm3", D), steps=opts.study_steps, eval_every=opts.study_eval_every, eval_n=opts.n, seed=seed,
                  final_draws=opts.final_draws, **{**base, **kw})
    h = out["history"]
    return {"seed": seed, "history": [{"step": r["step"], "sw2": r["sw2"]} for r in h], "start_sw2": h[0]["sw2"], "final": out["final"],
            "auc": auc(h), "steps_to_threshold": steps_to_threshold(h, opts.threshold)}


def bands(opts: BenchOptions, progress: bool = True) -> dict[str, Any]:
    """"Finite D converges faster": D = 16 vs D = inf, the same training seeds, IPFM loss, learned teacher, fresh
    evaluation draws every ``study_eval_every`` steps. Verdict by the card's rule: supported only if the paired AUC
    difference (16 - inf) is < 0 by more than 2 s.e. over seeds."""
    from zoo.common.training import progress as bar

    runs: dict[str, list[dict[str, Any]]] = {"16": [], "inf": []}
    for seed in bar(list(opts.bands_seeds), desc="bands seeds", disable=not progress):
        for D in runs:
            runs[D].append(_run(D, seed, opts))
    d_auc = paired([r["auc"] for r in runs["16"]], [r["auc"] for r in runs["inf"]])
    d_final = paired([r["final"]["sw2"] for r in runs["16"]], [r["final"]["sw2"] for r in runs["inf"]])
    big = 10**9  # "not reached" counts as beyond the run for the paired steps difference
    st = {D: [r["steps_to_threshold"] if r["steps_to_threshold"] is not None else big for r in runs[D]] for D in runs}
    d_steps = paired([float(x) for x in st["16"]], [float(x) for x in st["inf"]]) if big not in st["16"] + st["inf"] else None
    supported = d_auc["mean"] < 0 and -d_auc["mean"] > 2 * d_auc["se"]
    ceil = {D: ceiling(learned_teacher(AnalyticPFGMPP("gmm3", D)), opts.n, opts.final_draws) for D in runs}
    return {"seeds": list(opts.bands_seeds), "steps": opts.study_steps, "eval_every": opts.study_eval_every, "n": opts.n,
            "threshold": opts.threshold, "final_draws": opts.final_draws, "runs": runs, "paired_auc": d_auc, "paired_final_sw2": d_final,
            "paired_steps_to_threshold": d_steps, "verdict": "supported" if supported else "not supported (rule: paired AUC < 0 by > 2 s.e.)",
            "ceiling": ceil}


def plateau(opts: BenchOptions, progress: bool = True) -> dict[str, Any]:
    """The plateau ablations (:data:`ARMS`) at D = 16 over the same seeds; each arm's final SW2 (mean of
    ``final_draws`` fresh draws) paired against the default's. An arm moves the plateau (card's rule) if the paired
    difference is below -max(2 s.e., 0.02)."""
    from zoo.common.training import progress as bar

    res: dict[str, list[dict[str, Any]]] = {a: [] for a in ARMS}
    for seed in bar(list(opts.plateau_seeds), desc="plateau seeds", disable=not progress):
        for arm, kw in ARMS.items():
            res[arm].append(_run("16", seed, opts, **kw))
    base = [r["final"]["sw2"] for r in res["default"]]
    summary = {}
    for arm, rs in res.items():
        f = [r["final"]["sw2"] for r in rs]
        d = paired(f, base)
        moves = arm != "default" and d["mean"] < -max(2 * d["se"], 0.02)
        worse = arm != "default" and d["mean"] > max(2 * d["se"], 0.02)
        summary[arm] = {"final_sw2": _mean_sd(f), "start_sw2": _mean_sd([r["start_sw2"] for r in rs]), "auc": _mean_sd([r["auc"] for r in rs]),
                        "paired_vs_default": d, "verdict": "-" if arm == "default" else ("moves the plateau" if moves else "worse" if worse else "no effect")}
    return {"seeds": list(opts.plateau_seeds), "steps": opts.study_steps, "n": opts.n, "final_draws": opts.final_draws, "arms": res,
            "summary": summary, "ceiling": ceiling(learned_teacher(AnalyticPFGMPP("gmm3", "16")), opts.n, opts.final_draws)}


def _fmt(ms: tuple[float, float]) -> str:
    return f"{ms[0]:.3f} ± {ms[1]:.3f}"


def bands_table(b: dict[str, Any]) -> str:
    c, lines = b["ceiling"], []
    lines.append(f"D = 16 vs D = inf, IPFM, learned teacher, {b['steps']} generator steps, seeds {b['seeds']}, fresh draws of {b['n']} "
                 f"every {b['eval_every']} steps; final = mean of {b['final_draws']} draws; mean ± sd over seeds")
    lines += ["| D | start SW2 | mean SW2 over run (AUC) | final SW2 | steps to SW2 <= thr | learned teacher Heun NFE 35 | exact data floor |",
              "|---|---:|---:|---:|---|---:|---:|"]
    for D, rs in b["runs"].items():
        st = [r["steps_to_threshold"] for r in rs]
        lines.append(f"| {D} | {_fmt(_mean_sd([r['start_sw2'] for r in rs]))} | {_fmt(_mean_sd([r['auc'] for r in rs]))} | "
                     f"{_fmt(_mean_sd([r['final']['sw2'] for r in rs]))} | {'/'.join(str(x) for x in st)} | "
                     f"{_fmt(c[D]['teacher_heun35_sw2'])} | {_fmt(c[D]['data_floor_sw2'])} |")
    a, f, s = b["paired_auc"], b["paired_final_sw2"], b["paired_steps_to_threshold"]
    lines.append(f"paired 16 - inf: AUC {a['mean']:+.4f} ± {a['sd']:.4f} sd (s.e. {a['se']:.4f}, {a['z']:+.2f} s.e.); final SW2 "
                 f"{f['mean']:+.4f} ± {f['sd']:.4f} (s.e. {f['se']:.4f}); steps to thr "
                 + (f"{s['mean']:+.1f} ± {s['sd']:.1f} (s.e. {s['se']:.1f})" if s else "n/a (a run never reached it)")
                 + f". Verdict (finite D converges faster): {b['verdict']}")
    return "\n".join(lines)


def plateau_table(p: dict[str, Any]) -> str:
    c = p["ceiling"]
    lines = [f"plateau ablations, D = 16, IPFM, {p['steps']} generator steps, seeds {p['seeds']}; final SW2 = mean of {p['final_draws']} fresh "
             f"draws of {p['n']}; learned teacher Heun NFE 35 {_fmt(c['teacher_heun35_sw2'])}, exact data floor {_fmt(c['data_floor_sw2'])}",
             "| arm | start SW2 | final SW2 (mean ± sd) | paired vs default (mean ± sd, s.e.) | verdict |", "|---|---:|---:|---:|---|"]
    for arm, s in p["summary"].items():
        d = s["paired_vs_default"]
        pv = "-" if arm == "default" else f"{d['mean']:+.4f} ± {d['sd']:.4f} ({d['se']:.4f})"
        lines.append(f"| {arm} | {_fmt(s['start_sw2'])} | {_fmt(s['final_sw2'])} | {pv} | {s['verdict']} |")
    return "\n".join(lines)


def plot_bands(b: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for D, rs in b["runs"].items():
        steps = np.array([h["step"] for h in rs[0]["history"]])
        y = np.array([[h["sw2"] for h in r["history"]] for r in rs])
        m, sd = y.mean(0), y.std(0, ddof=1) if len(rs) > 1 else np.zeros(y.shape[1])
        ax[0].plot(steps, m, label=f"IPFM D={D} (mean of {len(rs)} seeds)")
        ax[0].fill_between(steps, m - sd, m + sd, alpha=0.25)
    fl = b["ceiling"]["16"]["data_floor_sw2"][0]
    ax[0].axhline(b["threshold"], color="k", lw=0.6, ls="--", label=f"threshold {b['threshold']}")
    ax[0].axhline(fl, color="gray", lw=0.8, ls=":", label=f"exact data floor {fl:.3f}")
    ax[0].set(xlabel="generator steps", ylabel="one-step SW2 to data (fresh draws)", yscale="log", title="convergence, mean ± sd over seeds")
    ax[0].legend(fontsize=7)
    a = b["paired_auc"]
    ax[1].bar(range(len(a["diffs"])), a["diffs"], color="tab:purple")
    ax[1].axhline(a["mean"], color="k", lw=1, label=f"mean {a['mean']:+.4f} (s.e. {a['se']:.4f})")
    ax[1].axhline(0, color="gray", lw=0.5)
    ax[1].set(xticks=range(len(a["diffs"])), xticklabels=[str(s) for s in b["seeds"]], xlabel="training seed",
              ylabel="AUC(D=16) - AUC(D=inf)", title="paired difference of mean SW2 over the run")
    ax[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_plateau(p: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(1, 2, figsize=(12, 4.2))
    arms = list(p["summary"])
    for i, arm in enumerate(arms):
        f = [r["final"]["sw2"] for r in p["arms"][arm]]
        ax[0].plot([i] * len(f), f, "o", alpha=0.5, color="tab:blue")
        ax[0].errorbar([i], [p["summary"][arm]["final_sw2"][0]], yerr=[p["summary"][arm]["final_sw2"][1]], fmt="s", color="k", capsize=4)
    c = p["ceiling"]
    ax[0].axhline(c["teacher_heun35_sw2"][0], color="tab:green", ls="--", lw=0.8, label="learned teacher, Heun NFE 35")
    ax[0].axhline(c["data_floor_sw2"][0], color="gray", ls=":", lw=0.8, label="exact data floor")
    ax[0].set(xticks=range(len(arms)), ylabel="final one-step SW2", title="plateau ablations (D = 16; points = seeds)")
    ax[0].set_xticklabels([a.replace(" (", "\n(") for a in arms], fontsize=6.5, rotation=25, ha="right")
    ax[0].legend(fontsize=7)
    for arm in arms:
        rs = p["arms"][arm]
        steps = np.array([h["step"] for h in rs[0]["history"]])
        ax[1].plot(steps, np.mean([[h["sw2"] for h in r["history"]] for r in rs], 0), label=arm)
    ax[1].set(xlabel="generator steps", ylabel="SW2 (mean over seeds)", yscale="log", title="curves per arm")
    ax[1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """One-step IPFM generators vs the exact PFGM++ teacher's Heun sampler for several D on gmm3, plus SiD
    (alpha = 1.2, 1) at D = inf (--quick: D in {16, inf}, 100 steps, 1000 samples, no SiD runs); with --bands-seeds /
    --plateau-seeds the multi-seed studies instead (:func:`bands`, :func:`plateau`)."""
    torch.set_num_threads(1)
    if opts.bands_seeds or opts.plateau_seeds:
        study: dict[str, Any] = {}
        if opts.bands_seeds:
            study["bands"] = bands(opts)
            ctx.report(bands_table(study["bands"]))
            plot_bands(study["bands"], ctx.figure("ipfm-bands.png"))
        if opts.plateau_seeds:
            study["plateau"] = plateau(opts)
            ctx.report(plateau_table(study["plateau"]))
            plot_plateau(study["plateau"], ctx.figure("ipfm-plateau.png"))
        ctx.write_json("ipfm-study.json", study)
        return study
    res = measure(list(opts.D), opts.steps, opts.threshold, ctx.seed, opts.n, opts.sid)
    ctx.report(table(res))
    plot(res, ctx.figure("ipfm.png"))
    return res
