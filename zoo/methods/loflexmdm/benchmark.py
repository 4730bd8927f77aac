"""LoFlexMDM vs FlexMDM on both toy tasks, one run, one table (and a PNG of the learned per-position schedules).

For each task (``toy`` = checksum, ``toy-brackets``), each method (the ``loflexmdm`` and ``flexmdm`` specs' own
trained weights) and each step budget (8 / 16 / 32 / 64 τ-leaping steps), ``--samples`` unconditional samples
from one generator seeded by ``--seed``; rows:

* FlexMDM, plain (no confidence, top_p = 1) — the baseline;
* LoFlexMDM, plain (the same sampler: isolates the learned order);
* LoFlexMDM, paper sampler (top_prob confidence, top_p = 0.5);
* the exact-rate oracle (``oracle.OracleLengthModel``, linear schedule): the same τ-leaping sampler driven by the
  exact conditional insertion rate of the task's length law, i.e. the length TV that the time grid alone leaves
  for a perfect generator (validity not defined: its tokens are uniform).

``--tv-steps`` (default 1024, the paper's ``max_steps``) adds plain-sampler and oracle rows at many steps for
the length-TV bar (< 0.05 on 2k samples): at 64 steps the grid alone leaves the oracle TV ≈ 0.05 (checksum) and
0.16 (brackets) with the linear schedule.

Columns: validity (± binomial SE), length TV to the exact length law, and on the checksum task the format rate
and the checksum accuracy given a well-formed sample. Then φ's learned insertion multipliers b_in by position
type (checksum vs free digits; the paper's claim: the determined token is inserted late = smaller b_in), with the
paper's star-graph numbers (FlexMDM 6.0 % vs LoFlexMDM 87.9 % exact match on star_hard) beside for context.

The ``chain`` task (``toy-chain``, the order toy; :mod:`zoo.methods.loflexmdm.evaluation`): both methods for every
training seed of ``--chain-seeds`` (0 = the shipped weights; the others trained with the same recipe on first use
and cached, 4.5-7 CPU minutes per model measured under load, idle not measured), validity with its error split (missing tokens only / conflicting
tokens), φ's b_in by distance from the end, the exact-posterior (Bayes) references (linear schedule, planted leaf-first and
root-first orders, each seed's learned φ) and the LoFlexMDM − FlexMDM gap per seed with mean ± sd over the seeds.

    zoo bench loflexmdm                           # 2000 samples per row, chain seeds 0 1 2
    zoo bench loflexmdm --quick                   # 256 samples, steps 8 and 16, chain seed 0
    zoo bench loflexmdm --out-dir docs/methods    # refresh the card's table, JSON and PNG
    zoo bench flexmdm ...                         # the same benchmark, files named flexmdm-bench.*
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark

from .params import BenchOptions, StepBudget  # noqa: F401 - moved to the params module

METHOD_SPECS = ("flexmdm", "loflexmdm")  # the two specs this benchmark compares (each names it as its bench:)
PAPER_STAR_HARD = {"FlexMDM": 6.0, "LoFlexMDM": 87.9}
VARIANTS = {"checksum": "toy", "brackets": "toy-brackets"}
ORACLE = "oracle rates (linear schedule)"


def print_table(res: dict) -> str:
    lines = [f"| {'task':<8} | {'method':<34} | {'steps':>5} | {'valid':>13} | {'len TV':>6} | {'format':>6} | {'cksum|fmt':>9} |",
             "|" + "|".join("-" * n for n in (10, 36, 7, 15, 8, 8, 11)) + "|"]
    for r in res["rows"]:
        v = f"{r['validity']:.3f}±{r['validity_se']:.3f}" if "validity" in r else "-"
        fmt = f"{r['format_rate']:.3f}" if "format_rate" in r else "-"
        ck = f"{r['checksum_given_format']:.3f}" if "checksum_given_format" in r else "-"
        lines.append(f"| {r['task']:<8} | {r['method']:<34} | {r['steps']:>5} | {v:>13} | {r['length_tv']:6.3f} | {fmt:>6} | {ck:>9} |")
    return "\n".join(lines)


def print_chain(ch: dict) -> str:
    """The chain-task tables: rows per seed, ceilings, φ by distance, gap summary."""
    lines = [f"| {'method':<34} | {'seed':>4} | {'steps':>5} | {'valid':>13} | {'missing':>7} | {'conflict':>8} | {'len TV':>6} |",
             "|" + "|".join("-" * n for n in (36, 6, 7, 15, 9, 10, 8)) + "|"]
    for r in ch["rows"] + ch["ceilings"]:
        seed = str(r.get("train_seed", "-"))
        lines.append(f"| {r['method']:<34} | {seed:>4} | {r['steps']:>5} | {r['validity']:.3f}±{r['validity_se']:.3f} | "
                     f"{r['missing_only']:7.3f} | {r['conflict']:8.3f} | {r['length_tv']:6.3f} |")
    lines.append("\nphi's b_in on the chain task by distance from the end (0 = the leaf; 2048 draws), ratio determined/leaf "
                 "(< 1 = determined tokens inserted later, the claim), Spearman(b_in, distance) (claim < 0):")
    for s, sch in ch["schedules"].items():
        by = " ".join(f"{v:.3f}" for v in sch["by_distance"])
        lines.append(f"  seed {s}: b_in {by}; mean T_in {' '.join(f'{v:.3f}' for v in sch['mean_time_by_distance'])}; "
                     f"ratio {sch['ratio']:.3f}; Spearman {sch['spearman']:.3f}; by position from the root "
                     f"{' '.join(f'{v:.3f}' for v in sch['by_position'])}")
        fd = sch.get("reward_fd")
        if fd:
            lines.append(f"    loss {fd['loss']:.3f}; b_in + {fd['delta']} at the leaf: {fd['d_leaf']:+.4f} ± {fd['se_leaf']:.4f}, at every "
                         f"determined token: {fd['d_determined']:+.4f} ± {fd['se_determined']:.4f} "
                         f"({fd['d_determined_per_token']:+.4f} ± {fd['se_determined_per_token']:.4f} per token)")
    lines.append("\nLoFlexMDM plain - FlexMDM plain validity, per training seed (± sampling SE) and over the seeds:")
    for g in ch["gaps"]:
        per = ", ".join(f"seed {p['train_seed']}: {p['gap']:+.3f}±{p['se']:.3f}" for p in g["per_seed"])
        lines.append(f"  {g['steps']:>3} steps: LoFlexMDM {g['a_mean']:.3f} ± {g['a_sd']:.3f}, FlexMDM {g['b_mean']:.3f} ± {g['b_sd']:.3f} "
                     f"(mean ± sd over seeds); difference {g['gap_mean']:+.3f} ± {g['gap_se_seeds']:.3f} (SE from the seed spread)"
                     f"{', every seed apart' if g['separated'] else ''}; per seed {per} (range [{g['gap_min']:+.3f}, {g['gap_max']:+.3f}])")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    controls = "checksum" in res["schedule"] and "brackets" in res["schedule"]
    if controls:
        fig, grid = plt.subplots(2, 3, figsize=(18, 8.4))
        axes = list(grid.flatten())
        _plot_controls(res, axes, np)
    else:  # the chain task alone (--tasks chain): its two panels
        fig, grid = plt.subplots(1, 2, figsize=(12, 4.4))
        axes = [None] * 4 + list(grid)
    _plot_chain(res.get("chain"), axes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _multiplier_axes(ax, xlabel: str, ylabel: str, title: str) -> None:
    """A φ-multiplier panel's FlexMDM reference line (b = 1), labels and legend."""
    ax.axhline(1.0, color="grey", ls=":", lw=1, label="FlexMDM (b = 1)")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)


def _plot_controls(res: dict, axes, np) -> None:
    """Panels 0-3: the checksum and brackets toys (the control tasks)."""
    sch = res["schedule"]["checksum"]
    ax = axes[0]
    for i, (L, vals) in enumerate(sorted(sch["by_length"].items())):
        ax.plot(range(1, L + 1), vals, marker="o", label=f"length {L}", color=f"C{i}")
        ax.scatter([L], [vals[-1]], s=120, facecolors="none", edgecolors="k")
    _multiplier_axes(ax, "position (last = checksum, circled; second-last = '=')", "learned b_in (phi)",
                     "checksum task: phi's insertion multipliers")
    ax = axes[1]
    t = np.linspace(0, 1, 200)
    for label, b, c in (("checksum", sch["checksum"], "C3"), ("free digits", sch["free"], "C0"), ("separator", sch["separator"], "C2")):
        ax.plot(t, 1 - (1 - t) ** b, color=c, label=f"{label}: F(t; 1, {b:.2f})")
    ax.plot(t, t, "k:", label="FlexMDM: F(t) = t")
    ax.set_xlabel("t (0 = empty, 1 = clean)")
    ax.set_ylabel("P(inserted by t)")
    ax.set_title("insertion-time CDFs (mean b_in per type)")
    ax.legend(fontsize=7)
    ax = axes[2]
    br = res["schedule"]["brackets"]["per_position"]
    ax.bar(range(1, len(br) + 1), [0 if v != v else v for v in br], color="C1")
    ax.axhline(1.0, color="grey", ls=":", lw=1)
    ax.set_xlabel("position")
    ax.set_ylabel("mean learned b_in")
    ax.set_title("brackets task: phi's insertion multipliers")
    ax = axes[3]
    styles = {"checksum": "-", "brackets": "--"}
    for j, (task, method) in enumerate((t, m) for t in VARIANTS for m in ("FlexMDM plain", "LoFlexMDM plain", ORACLE)):
        pts = sorted((r["steps"], r["length_tv"]) for r in res["rows"] if r["task"] == task and r["method"] == method)
        if pts:
            ax.plot(*zip(*pts), styles[task], marker="o", color=f"C{j % 3}", label=f"{task}: {method}")
    ax.axhline(0.05, color="grey", ls=":", lw=1, label="bar 0.05")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tau-leaping steps")
    ax.set_ylabel("length TV to the exact law")
    ax.set_title("length fidelity vs steps (oracle = exact rates)")
    ax.legend(fontsize=6)


def _plot_chain(ch: dict | None, axes) -> None:
    """Panels 4-5: the chain task (φ by distance from the end; validity of every seed vs the Bayes ceilings)."""
    if ch:
        ax = axes[4]
        for s, sc in ch["schedules"].items():
            ax.plot(range(len(sc["by_distance"])), sc["by_distance"], marker="o", label=f"seed {s} (ratio {sc['ratio']:.2f})")
        _multiplier_axes(ax, "distance from the end (0 = leaf, the free token)", "mean learned b_in (phi)",
                         "chain task: phi's insertion multipliers (claim: leaf highest)")
        ax = axes[5]
        for j, method in enumerate(("FlexMDM plain", "LoFlexMDM plain")):
            for s in ch["seeds"]:
                pts = sorted((r["steps"], r["validity"]) for r in ch["rows"] if r["method"] == method and r["train_seed"] == s)
                ax.plot(*zip(*pts), marker="o", color=f"C{j}", alpha=0.7, label=method if s == ch["seeds"][0] else None)
        for j, label in enumerate(sorted({r["method"] for r in ch["ceilings"] if "learned" not in r["method"]})):
            pts = sorted((r["steps"], r["validity"]) for r in ch["ceilings"] if r["method"] == label)
            ax.plot(*zip(*pts), ls="--", marker="x", color=f"C{j + 2}", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tau-leaping steps")
        ax.set_ylabel("validity")
        ax.set_title("chain task: trained (every seed) vs the Bayes generator")
        ax.legend(fontsize=6)
    else:
        axes[4].axis("off")
        axes[5].axis("off")


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """LoFlexMDM vs FlexMDM on the checksum, brackets and chain toys: one table, the learned per-position schedules (PNG)."""
    import torch

    import zoo

    from .metrics import evaluate, learned_schedule, oracle_length_tv
    from .sampler import SamplerConfig

    def shipped(spec: str, variant: str) -> Any:
        """A spec's built model: this run's own spec through ``ctx``, the other one of the pair by name."""
        if spec == ctx.name:
            return ctx.models(variant)["model"]
        return zoo.load(spec, variant=variant, device="cpu").models["model"]

    tasks = opts.tasks
    torch.set_num_threads(1)
    t0 = time.time()
    steps, tv_steps = list(opts.steps), list(opts.tv_steps)
    res: dict = {"samples": opts.samples, "seed": ctx.seed, "rows": [], "schedule": {}}
    for task, variant in VARIANTS.items():
        if task not in tasks:
            continue
        models = {spec: shipped(spec, variant) for spec in METHOD_SPECS}
        res["schedule"][task] = learned_schedule(models["loflexmdm"], 2048, ctx.seed)
        for label, model, kw in (("FlexMDM plain", models["flexmdm"], dict(confidence=None, top_p=1.0)),
                                 ("LoFlexMDM plain", models["loflexmdm"], dict(confidence=None, top_p=1.0)),
                                 ("LoFlexMDM paper (top_prob, p=0.5)", models["loflexmdm"], dict(confidence="top_prob", top_p=0.5))):
            for n_steps in steps + (tv_steps if "plain" in label else []):
                r = evaluate(model, opts.samples, SamplerConfig(max_steps=n_steps, **kw), ctx.seed)
                r.update(task=task, method=label)
                res["rows"].append(r)
                print(f"  {task} {label} {n_steps}: validity {r['validity']:.3f} TV {r['length_tv']:.3f}", file=sys.stderr)
        for n_steps in steps + tv_steps:
            res["rows"].append({"task": task, "method": ORACLE, "steps": n_steps, "length_tv": oracle_length_tv(task, n_steps, opts.samples, ctx.seed)})
    if "chain" in tasks:
        from .evaluation import chain_comparison

        res["chain"] = chain_comparison(list(opts.chain_seeds), opts.samples, steps, opts.bayes_samples, shipped, ctx.seed,
                                        fd_samples=opts.fd_samples)
    res["seconds"] = time.time() - t0
    text = [f"\nLoFlexMDM vs FlexMDM, {opts.samples} unconditional samples per row (seed {ctx.seed}; one CPU thread, torch {torch.__version__})"]
    if res["rows"]:
        text.append(print_table(res))
    if "checksum" in res["schedule"]:
        sch = res["schedule"]["checksum"]
        text += [f"\nphi's learned insertion multiplier b_in on the checksum task (2048 exact draws): checksum {sch['checksum']:.3f}, "
                 f"free digits {sch['free']:.3f}, separator {sch['separator']:.3f}; ratio checksum/free {sch['ratio']:.3f}; "
                 f"Spearman(b_in, is-checksum) {sch['spearman']:.3f} (paper claim: < 0, the checksum is inserted last; FlexMDM: all 1)",
                 f"paper, star_hard exact match (the order-learning claim these toys mirror): FlexMDM {PAPER_STAR_HARD['FlexMDM']} % vs "
                 f"LoFlexMDM {PAPER_STAR_HARD['LoFlexMDM']} %"]
    if "chain" in res:
        text += [f"\nchain task (toy-chain: the leaf determines every token, left-to-right is a guess), {opts.samples} draws per row, "
                 f"ceilings {opts.bayes_samples}; training seeds {res['chain']['seeds']}", print_chain(res["chain"])]
    ctx.report("\n".join(text))
    # both control toys: the card's figure (with the chain panels when run); else the tasks run name it
    # (--tasks chain: <spec>-chain-bench.png, the card's second figure)
    png = f"{ctx.name}-bench.png" if all(t in tasks for t in VARIANTS) else f"{ctx.name}-{'-'.join(tasks)}-bench.png"
    plot(res, ctx.figure(png))
    return res
