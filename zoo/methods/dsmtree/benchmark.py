"""Benchmark of ``dsmtree``: one XGBoost teacher on the axis-aligned XOR of thresholds, four students in one run
(hard labels, plain KD, dsm-trajectory and dsm-clean [inferred]), test accuracy, gap to the teacher, agreement,
wall time. Writes ``dsmtree.png`` (training loss per student). Run as ``python tools/bench_dsmtree.py`` or
``zoo bench dsmtree [--quick]``."""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark
from zoo.common.bench_output import parse_with_quick, write_outputs

from .distill import fit_teacher, student_predict, teacher_prob, train_student, xor_task

MODES = ("hard", "kd", "dsm-trajectory", "dsm-clean")


def run(steps: int, n_train: int, seeds: list[int]) -> dict[str, Any]:
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
            print(f"  seed {seed} {m:15s} acc {rows[m]['acc'][-1]:.4f}", flush=True)
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for m in MODES:
        loss = np.asarray(res["students"][m]["loss"])
        k = max(1, len(loss) // 100)
        ax.plot(np.convolve(loss, np.ones(k) / k, mode="valid"), label=m)
    ax.set_xlabel("step")
    ax.set_ylabel("training BCE (last seed)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


@benchmark
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="bench_dsmtree")
    ap.add_argument("--steps", type=int, default=3000, help="Adam steps per student (default 3000)")
    ap.add_argument("--n-train", type=int, default=2000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--json", metavar="PATH", help="write every number as JSON")
    ap.add_argument("--out-dir", default=".", help="folder for dsmtree.png")
    a = parse_with_quick(ap, argv, {"steps": 300}, "300 steps per student")
    res = run(a.steps, a.n_train, a.seeds)
    write_outputs(res, table(res), plot, a.out_dir, "dsmtree.png", a.json)
    return 0
