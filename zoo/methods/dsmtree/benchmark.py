"""Benchmark of ``dsmtree``: one XGBoost teacher on the axis-aligned XOR of thresholds, four students in one run
(hard labels, plain KD, dsm-trajectory and dsm-clean [inferred]), test accuracy, gap to the teacher, agreement,
wall time. Writes ``dsmtree.png`` (training loss per student). Run as
``zoo bench dsmtree [--quick] [--seeds 0 1 2] [--out-dir D]``."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any, ClassVar

from pydantic import Field

from registry.contract import Options, benchmark
from zoo.common.out_files import pyplot, save_figure

from .distill import fit_teacher, student_predict, teacher_prob, train_student, xor_task

MODES = ("hard", "kd", "dsm-trajectory", "dsm-clean")


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


class BenchOptions(Options):
    steps: int = Field(3000, ge=1, le=1_000_000, description="Adam steps per student")
    n_train: int = Field(2000, ge=10, le=1_000_000, description="training points of the XOR task")
    seeds: list[Annotated[int, Field(ge=0, le=2**31 - 1)]] | None = Field(
        None, min_length=1, max_length=32, description="task/teacher/student seeds, averaged (none: [--seed])")
    quick: ClassVar[dict[str, Any]] = {"steps": 300}


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """dsmtree: one XGBoost teacher on the XOR of thresholds, four students (hard labels, plain KD, dsm-trajectory,
    dsm-clean [inferred]): test accuracy, gap to the teacher, agreement, wall time (--quick: 300 steps per student)."""
    res = measure(opts.steps, opts.n_train, list(opts.seeds) if opts.seeds else [ctx.seed])
    ctx.report(table(res))
    plot(res, ctx.figure("dsmtree.png"))
    return res
