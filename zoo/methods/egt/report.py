"""Tables and plots of the ``egt`` recipes (shared by ``zoo run`` and the benchmark)."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from zoo.common.digits import NUM_CLASSES
from zoo.common.out_files import pyplot, save_figure

#: the shared note's table (methods/egt.md §6a) for the Gaussian toy: KL_A, KL_B, max, gap, weighted average
NOTE_ROWS: dict[str, tuple[float, float, float, float, float]] = {
    "erm": (0.182, 2.033, 2.033, 1.851, 0.367),
    "exact": (0.511, 0.494, 0.511, 0.016, 0.509),
    "minmax": (0.512, 0.492, 0.512, 0.020, 0.510),
}

LABELS = {"erm": "ERM fine-tuning (frequency-weighted)", "proportion": "proportion baseline (balanced, π uniform)",
          "minmax": "min–max fine-tuning (worst EMA group)", "group-dro": "group-DRO (exp.-gradient weights)"}


def cli_text(out: Any, fmt: Callable[[dict[str, Any]], str], plot: Callable[[dict[str, Any], str | Path], Path], inputs: Any,
             default: str) -> str:
    """``zoo run``'s text for one recipe's output: its table (``fmt``) and the figure ``plot`` wrote to ``--out``
    (``default`` when no inputs are given)."""
    res = {out["algorithm"]: out}
    path = plot(res, inputs.out if inputs is not None else default)
    return fmt(res) + f"\nwrote {path}"


def format_gaussian(results: dict[str, Any]) -> str:
    """Markdown: one row per fine-tuned model, then the ERM start and the exact min–max solution,
    with the shared note's numbers beside ours; then the δ-EGT gap under every divergence."""
    any_r = next(iter(results.values()))
    g = any_r["groups"]
    head = (f"| model | KL_{g[0]} | KL_{g[1]} | worst | δ-EGT gap | Σ p_a KL_a | joint KL | π | max\\|π−1/K\\| | note (KL_A, KL_B, gap) |"
            if len(g) == 2 else "| model | per-group KL | worst | gap | weighted | joint KL | π | max\\|π−1/K\\| | note |")
    lines = [head, "|---" * (head.replace("\\|", "").count("|") - 1) + "|"]

    def row(name: str, s: dict[str, Any], note_key: str | None) -> str:
        kl = " | ".join(f"{v:.3f}" for v in s["kl"]) if len(g) == 2 else ", ".join(f"{v:.3f}" for v in s["kl"])
        note = NOTE_ROWS.get(note_key or "")
        note_s = f"{note[0]:.3f}, {note[1]:.3f}, {note[3]:.3f}" if note else "-"
        pg = max(abs(p - 1 / len(s["props"])) for p in s["props"])
        return (f"| {name} | {kl} | {s['worst']:.3f} | {s['gap']:.3f} | {s['weighted']:.3f} | {s['joint_kl']:.3f} | "
                f"{', '.join(f'{p:.2f}' for p in s['props'])} | {pg:.2f} | {note_s} |")

    lines.append(row("θ₀ = ERM solution (closed form)", any_r["before"], "erm"))
    for alg, r in results.items():
        lines.append(row(LABELS.get(alg, alg) + f" [{r['config']['loss']} loss, {r['config']['steps']} steps]", r, alg if r["config"]["loss"] == "exact" and alg != "erm" else None))
    lines.append(row("exact min–max (duality, w* = " + ", ".join(f"{w:.3f}" for w in any_r["exact_minmax"]["w"]) + ")", any_r["exact_minmax"], "exact"))
    kinds = list(any_r["gaps"])
    lines += ["", "δ-EGT gap under each reference divergence (tv, js: Monte Carlo, ± s.e. ≤ "
              f"{max(max(r['divergence_se'][k]) for r in results.values() for k in kinds):.1e}):", "",
              "| model | " + " | ".join(kinds) + " |", "|---" * (len(kinds) + 1) + "|"]
    for alg, r in results.items():
        lines.append(f"| {alg} | " + " | ".join(f"{r['gaps'][k]:.3f}" for k in kinds) + " |")
    return "\n".join(lines)


def plot_history(results: dict[str, Any], path: str | Path) -> Path:
    """PNG: per-group KL(P_a‖Q_a) vs fine-tuning step, one panel per algorithm, with the exact min–max level."""
    plt = pyplot()

    n = len(results)
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.8 * cols, 3.2 * rows), squeeze=False, sharey=True)
    for ax in axes.reshape(-1)[n:]:
        ax.axis("off")
    for ax, (alg, r) in zip(axes.reshape(-1), results.items()):
        for a, name in enumerate(r["groups"]):
            ax.plot(r["steps"], [k[a] for k in r["kl_history"]], lw=0.9, label=f"group {name} (p={r['config']['p_b'] if a else 1 - r['config']['p_b']:.1f})")
        ax.axhline(r["exact_minmax"]["worst"], color="grey", ls="--", lw=0.8, label="exact min–max")
        ax.set(title=f"{alg}, {r['config']['loss']} loss: gap {r['gap']:.3f}", xlabel="step", yscale="log")
        ax.title.set_fontsize(9)
    for row in axes:
        row[0].set_ylabel("KL(P_a ‖ Q_a)")
    axes[0][0].legend(fontsize=7)
    return save_figure(fig, path, dpi=100)


def _ms(d: dict[str, float], f: str = "+.4f") -> str:
    """``mean ± sd``, the sd with as many decimals as the mean (the mean alone for one seed)."""
    return f"{d['mean']:{f}}" if d["sd"] is None else f"{d['mean']:{f}} ± {d['sd']:{f.lstrip('+')}}"


def format_digits(results: dict[str, Any], paired: dict[str, Any] | None = None) -> str:
    """Markdown. ``results``: ``{arm: output}`` (one run each, ``zoo run``) or ``{arm: [output per seed]}`` (the
    benchmark, with its paired summary ``paired``): per arm and seed the held-out loss (mean, worst digit, gap) and
    recall before → after; then per arm its own after − before and the paired arm − erm differences, mean ± sd over
    seeds; then the per-digit losses and recalls of the first seed."""
    runs = {a: (r if isinstance(r, list) else [r]) for a, r in results.items()}
    lines = ["| fine-tuning | seed | rows back-propagated / step | mean loss | worst-digit loss | loss gap (max − min) | worst-digit recall | recall gap |",
             "|---|---|---|---|---|---|---|---|"]
    for alg, rs in runs.items():
        for r in rs:
            c = r["config"]
            lines.append(f"| {alg} ({c['batch_per_group']} rows/digit, {c['steps']} steps, lr {c['lr']:g} {c['schedule']}) | {r['seed']} | "
                         f"{r['rows_backprop']:.1f} | {r['mean_loss']['before']:.5f} → {r['mean_loss']['after']:.5f} | "
                         f"{r['worst_loss']['before']:.5f} → {r['worst_loss']['after']:.5f} | {r['loss_gap']['before']:.5f} → {r['loss_gap']['after']:.5f} | "
                         f"{r['worst_recall']['before']:.3f} → {r['worst_recall']['after']:.3f} | {r['recall_gap']['before']:.3f} → {r['recall_gap']['after']:.3f} |")
    if paired:
        lines += ["", "Mean ± sd over seeds: each arm's own after − before (its health), and arm − erm after (paired by seed):", "",
                  "| arm | own: mean loss | own: worst-digit loss | own: loss gap | digits worse (per seed) | "
                  "− erm: worst-digit loss | − erm: loss gap | − erm: mean loss | − erm: worst-digit recall | worst digit better (mean + sd < 0) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for arm, p in paired.items():
            o, v = p["own"], p.get("vs_erm")
            vs = (f"{_ms(v['worst_loss'], '+.5f')} | {_ms(v['loss_gap'], '+.5f')} | {_ms(v['mean_loss'], '+.5f')} | {_ms(v['worst_recall'], '+.3f')} | "
                  f"{'yes' if p['worst_digit_better_than_erm'] else 'no'}" if v else "- | - | - | - | -")
            lines.append(f"| {arm} | {_ms(o['mean_loss'], '+.5f')} | {_ms(o['worst_loss'], '+.5f')} | {_ms(o['loss_gap'], '+.5f')} | "
                         f"{', '.join(map(str, o['digits_worse']))} | {vs} |")
    first = {a: rs[0] for a, rs in runs.items()}
    f0 = next(iter(first.values()))
    lines += ["", f"Per digit, seed {f0['seed']}:", "", "| digit | loss before | " + " | ".join(f"loss {a}" for a in first) + " | recall before | "
              + " | ".join(f"recall {a}" for a in first) + " |", "|---" * (3 + 2 * len(first)) + "|"]
    for c in range(NUM_CLASSES):
        lines.append(f"| {c} | {f0['before']['loss'][c]:.4f} | " + " | ".join(f"{r['after']['loss'][c]:.4f}" for r in first.values())
                     + f" | {f0['before']['recall'][c]:.2f} | " + " | ".join(f"{r['after']['recall'][c]:.2f}" for r in first.values()) + " |")
    return "\n".join(lines)


def _curves(results: dict[str, Any], path: str | Path, series: Any, title: Any, ylabel: str, log: bool = False, **legend: Any) -> Path:
    """One panel per run: ``series(r)`` -> [(label, steps, values)], titled ``title(name, r)``; shared y axis."""
    plt = pyplot()

    n = len(results)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.2), squeeze=False, sharey=True)
    for ax, (name, r) in zip(axes[0], results.items()):
        for lab, xs, ys in series(r):
            ax.plot(xs, ys, lw=0.8, label=lab)
        ax.set(title=title(name, r), xlabel="fine-tuning step", yscale="log" if log else "linear")
        ax.title.set_fontsize(9)
    axes[0][0].set_ylabel(ylabel)
    axes[0][0].legend(**legend)
    return save_figure(fig, path, dpi=100)


def plot_digits(results: dict[str, Any], path: str | Path) -> Path:
    """PNG: per-group training-loss EMA vs step for each algorithm (a proxy, not a divergence)."""
    return _curves(results, path, lambda r: [(str(c), r["steps"], [float("nan") if v[c] is None else v[c] for v in r["train_loss"]])
                                             for c in range(NUM_CLASSES)],
                   lambda name, r: f"digits {name}", "per-digit training loss EMA (proxy)", fontsize=6, ncol=2)


def format_ddpm(results: dict[str, Any]) -> str:
    """Markdown: per fine-tuning, the per-group excess before → after, gap, worst and Σ p_a (global quality)."""
    lines = ["| fine-tuning | excess A (3 modes, 90 %) | excess B (9-ring, 10 %) | gap | worst | Σ p_a excess |", "|---|---|---|---|---|---|"]
    first = next(iter(results.values()))
    b = first["before"]
    lines.append(f"| θ₀ (ERM pretraining, {first['config']['pretrain_steps']} steps) | {b[0]:.4f} | {b[1]:.4f} | {first['gap']['before']:.4f} | "
                 f"{first['worst']['before']:.4f} | {first['weighted']['before']:.4f} |")
    for name, r in results.items():
        a = r["after"]
        extra = f", q = {r['weights'][0]:.3f}, {r['weights'][1]:.3f}" if r["algorithm"] == "group-dro" else ""
        lines.append(f"| {name} ({r['config']['steps']} steps{extra}) | {a[0]:.4f} | {a[1]:.4f} | {r['gap']['after']:.4f} | {r['worst']['after']:.4f} | "
                     f"{r['weighted']['after']:.4f} |")
    return "\n".join(lines)


def plot_ddpm(results: dict[str, Any], path: str | Path) -> Path:
    """PNG: per-group EMA of the training excess loss vs fine-tuning step, one panel per fine-tuning."""
    return _curves(results, path, lambda r: [(lab, r["steps"], [v[a] for v in r["excess_ema"]])
                                             for a, lab in enumerate(("A: 3 modes (90 %)", "B: 9-ring (10 %)"))],
                   lambda name, r: f"DDPM {name}: gap {r['gap']['after']:.3f}", "excess ε-loss (EMA)", log=True, fontsize=7)
