"""Benchmark of ``dsmtree``: one XGBoost teacher on the axis-aligned XOR of thresholds, four students in one run
(hard labels, plain KD, dsm-trajectory and dsm-clean [inferred]), test accuracy, gap to the teacher, agreement,
wall time. Writes ``dsmtree.png`` (training loss per student). With ``--grid-steps S1 S2 ... [--grid-widths W1 ...]``
also a training-budget table: steps × width × objective (hard, kd, dsm-trajectory), mean ± sd over the seeds of
the student's accuracy and of its gap to that seed's teacher, and ``dsmtree-grid.png`` (gap vs steps per width).
Run as ``zoo bench dsmtree [--quick] [--seeds 0 1 2] [--grid-steps 3000 12000] [--out-dir D]``."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from registry.contract import benchmark
from zoo.methods.dsmtree.params import BenchOptions
from zoo.common.out_files import pyplot, save_figure
from zoo.common.spread import spread

from .distill import fit_teacher, student_predict, teacher_prob, train_student, xor_task

MODES = ("hard", "kd", "dsm-trajectory", "dsm-clean")
#: the objectives of the budget grid (the claim's student and its two baselines)
GRID_MODES = ("hard", "kd", "dsm-trajectory")


def measure(steps: int, n_train: int, seeds: list[int]) -> dict[str, Any]:
    """One teacher per seed, the four students on its task; accuracy, agreement and wall time per student."""
    t0 = time.perf_counter()
    rows: dict[str, dict[str, list[float]]] = {m: {"acc": [], "agree": [], "s": [], "loss": []} for m in MODES}
    teacher_acc = []
    for seed in seeds:
        X, y = xor_task(n_train, seed)
        Xt, yt = xor_task(5000, seed + 10_000)
        teacher = fit_teacher(X, y, seed=seed, use_cache=False)
        tp = teacher_prob(teacher, Xt) > 0.5
        teacher_acc.append(float((tp == yt).mean()))
        for m in MODES:
            t1 = time.perf_counter()
            r = train_student(m, X, y, teacher, steps=steps, seed=seed)
            sp = student_predict(r.net, Xt)
            rows[m]["acc"].append(float((sp == yt).mean()))
            rows[m]["agree"].append(float((sp == tp).mean()))
            rows[m]["s"].append(time.perf_counter() - t1)
            rows[m]["loss"] = r.losses
            print(f"  seed {seed} {m:15s} acc {rows[m]['acc'][-1]:.4f}", file=sys.stderr, flush=True)
    return {"teacher_acc": teacher_acc, "students": rows, "settings": {"steps": steps, "n_train": n_train, "seeds": seeds},
            "seconds": time.perf_counter() - t0}


def measure_grid(steps_grid: list[int], widths: list[int], n_train: int, seeds: list[int],
                 modes: tuple[str, ...] = GRID_MODES) -> dict[str, Any]:
    """The budget grid: per seed one task and teacher (as :func:`measure`: the seed draws the training and test
    points, the teacher and the student's init and batch order), then every (steps, width, objective) student on
    it. ``cells``: one record per seed and grid point; ``rows``: their aggregate (:func:`aggregate`)."""
    t0 = time.perf_counter()
    cells: list[dict[str, Any]] = []
    for seed in seeds:
        X, y = xor_task(n_train, seed)
        Xt, yt = xor_task(5000, seed + 10_000)
        teacher = fit_teacher(X, y, seed=seed, use_cache=False)
        ta = float(((teacher_prob(teacher, Xt) > 0.5) == yt).mean())
        for steps in steps_grid:
            for width in widths:
                for m in modes:
                    t1 = time.perf_counter()
                    r = train_student(m, X, y, teacher, steps=steps, width=width, seed=seed)
                    acc = float((student_predict(r.net, Xt) == yt).mean())
                    cells.append({"seed": seed, "steps": steps, "width": width, "mode": m, "teacher_acc": ta, "acc": acc,
                                  "gap_points": 100 * (ta - acc), "s": time.perf_counter() - t1})
                    print(f"  grid seed {seed} steps {steps} width {width} {m:15s} acc {acc:.4f} gap {100 * (ta - acc):.2f} "
                          f"({cells[-1]['s']:.0f} s)", file=sys.stderr, flush=True)
    return {"rows": aggregate(cells), "cells": cells,
            "settings": {"steps": list(steps_grid), "widths": list(widths), "modes": list(modes), "n_train": n_train, "seeds": seeds},
            "seconds": time.perf_counter() - t0}


def _mean_sd(v: list[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (ddof 1; None for one value)."""
    s = spread(v)
    return s.mean, s.sd


def aggregate(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (steps, width, mode), in first-seen order: mean and sample sd over its seeds of the student's
    accuracy and of the per-seed gap to that seed's teacher (points), the teacher's mean accuracy, mean train s."""
    groups: dict[tuple[int, int, str], list[dict[str, Any]]] = {}
    for c in cells:
        groups.setdefault((c["steps"], c["width"], c["mode"]), []).append(c)
    rows = []
    for (steps, width, mode), cs in groups.items():
        acc, acc_sd = _mean_sd([c["acc"] for c in cs])
        gap, gap_sd = _mean_sd([c["gap_points"] for c in cs])
        rows.append({"steps": steps, "width": width, "mode": mode, "seeds": [c["seed"] for c in cs], "acc_mean": acc, "acc_sd": acc_sd,
                     "gap_mean": gap, "gap_sd": gap_sd, "teacher_acc_mean": _mean_sd([c["teacher_acc"] for c in cs])[0],
                     "s_mean": _mean_sd([c["s"] for c in cs])[0]})
    return rows


def grid_table(grid: dict[str, Any]) -> str:
    s = grid["settings"]

    def pm(m: float, sd: float | None, f: str) -> str:
        return f"{m:{f}} ± {sd:{f}}" if sd is not None else f"{m:{f}}"

    lines = [f"Training budget (steps × width; 2 SiLU hidden layers of the width, Adam lr 1e-3, batch 256), n_train {s['n_train']}, "
             f"5000 test points, seeds {s['seeds']}: mean ± sd (ddof 1) over seeds; gap = that seed's teacher − student, points",
             "", "| steps | width | objective | student accuracy | gap to teacher (points) | teacher accuracy | train s (mean) |",
             "|---|---|---|---|---|---|---|"]
    for r in grid["rows"]:
        lines.append(f"| {r['steps']} | {r['width']} | {r['mode']}{' [inferred]' if r['mode'].startswith('dsm') else ''} | "
                     f"{pm(r['acc_mean'], r['acc_sd'], '.4f')} | {pm(r['gap_mean'], r['gap_sd'], '.2f')} | {r['teacher_acc_mean']:.4f} | "
                     f"{r['s_mean']:.1f} |")
    return "\n".join(lines)


def grid_plot(grid: dict[str, Any], path: Path) -> Path:
    """Gap to the teacher vs steps (log x), one panel per width, one line per objective, error bars ± sd."""
    plt = pyplot()
    widths = grid["settings"]["widths"]
    fig, axes = plt.subplots(1, len(widths), figsize=(4.2 * len(widths), 3.4), sharey=True, squeeze=False)
    for ax, w in zip(axes[0], widths):
        for m in grid["settings"]["modes"]:
            rs = sorted((r for r in grid["rows"] if r["width"] == w and r["mode"] == m), key=lambda r: r["steps"])
            ax.errorbar([r["steps"] for r in rs], [r["gap_mean"] for r in rs], yerr=[r["gap_sd"] or 0.0 for r in rs],
                        marker="o", capsize=3, label=m)
        ax.axhline(2.0, color="grey", ls="--", lw=0.8, label="paper: within 2 %")
        ax.axhline(0.0, color="black", lw=0.6)
        ax.set_xscale("log")
        ax.set_xticks(grid["settings"]["steps"], [f"{k:g}" for k in grid["settings"]["steps"]])
        ax.minorticks_off()
        ax.set_xlabel("Adam steps")
        ax.set_title(f"width {w}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("teacher − student accuracy (points)")
    axes[0][-1].legend(fontsize=7)
    return save_figure(fig, path)


def table(res: dict[str, Any]) -> str:
    import numpy as np

    s = res["settings"]
    ta = float(np.mean(res["teacher_acc"]))
    lines = [f"XOR of thresholds (d 6, θ = 0.3/0.5/0.7 on axes 0-2), n_train {s['n_train']}, 5000 test points, {s['steps']} Adam steps, seeds {s['seeds']}",
             "", "| model | test accuracy (mean) | gap to teacher (points) | agreement with teacher | train s |", "|---|---|---|---|---|",
             f"| teacher: XGBoost 300 × depth 4 | {ta:.4f} | 0 | 1 | |"]
    for m in MODES:
        r = res["students"][m]
        lines.append(f"| student {m}{' [inferred]' if m.startswith('dsm') else ''} | {np.mean(r['acc']):.4f} | {100 * (ta - np.mean(r['acc'])):.2f} | "
                     f"{np.mean(r['agree']):.4f} | {np.mean(r['s']):.1f} |")
    lines.append("\npaper (abstract): students within 2 % of the teacher on many benchmarks")
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Path) -> Path:
    import numpy as np

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for m in MODES:
        loss = np.asarray(res["students"][m]["loss"])
        k = max(1, len(loss) // 100)
        ax.plot(np.convolve(loss, np.ones(k) / k, mode="valid"), label=m)
    ax.set_xlabel("step")
    ax.set_ylabel("training BCE (last seed)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """dsmtree: one XGBoost teacher on the XOR of thresholds, four students (hard labels, plain KD, dsm-trajectory,
    dsm-clean [inferred]): test accuracy, gap to the teacher, agreement, wall time (--quick: 300 steps per student);
    with --grid-steps, the steps × width × objective budget table (hard, kd, dsm-trajectory; mean ± sd over seeds)."""
    seeds = list(opts.seeds) if opts.seeds else [ctx.seed]
    res = measure(opts.steps, opts.n_train, seeds)
    ctx.report(table(res))
    plot(res, ctx.figure("dsmtree.png"))
    if opts.grid_steps:
        res["grid"] = measure_grid(list(opts.grid_steps), list(opts.grid_widths), opts.n_train, seeds)
        ctx.report("\n" + grid_table(res["grid"]))
        grid_plot(res["grid"], ctx.figure("dsmtree-grid.png"))
    return res
