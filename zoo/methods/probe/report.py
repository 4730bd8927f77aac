"""Tables and figures of the ``probe`` recipes and benchmark: text tables of bAcc per generator and a PNG of
the boundary buffer (one row per snapshot along the LoRA trajectory, with the frozen detector's P(fake))."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from zoo.common.spread import spread

from .core import GENERATORS, SEEN, UNSEEN


def format_run(out: Mapping[str, Any]) -> str:
    """One recipe run: bAcc per generator before (shipped detector) and after stage 2."""
    lines = ["| generator | role | bAcc before | bAcc after |", "|---|---|---|---|"]
    for k in (SEEN, *UNSEEN):
        lines.append(f"| {k} | {'seen' if k == SEEN else 'held out'} | {out['before'][k]:.3f} | {out['after'][k]:.3f} |")
    um = out["unseen_mean"]
    lines.append(f"| held-out mean | | {um['before']:.3f} | {um['after']:.3f} |")
    if out["buffer_fake_prob"]:
        traj = ", ".join(f"{p:.2f}" for p in out["buffer_fake_prob"])
        lines.append(f"\nbuffer: {out['buffer'].shape[0]} fakes; frozen detector's mean P(fake) per snapshot: {traj}")
    return "\n".join(lines)


def mean_sd(xs: Sequence[float]) -> str:
    return spread(xs).text(3)


ARM_LABELS = {"probe": "PROBE (buffer, λ = 10)", "probe-no-buffer": "no buffer (same stage 2 on original fakes)",
              "probe-lambda0": "λ = 0 (buffer)", "probe-no-critic": "no critic (random-direction LoRA, buffer)",
              "probe-band": "band buffer (P(fake) in [0.3, 0.7], λ = 10)",
              "probe-band-unsteered": "band buffer, unsteered (LoRA lr 1e-9: the base generator's hard fakes)"}


def format_bench(res: Mapping[str, Any]) -> str:
    """The benchmark table: per arm, mean ± s.d. over seeds of bAcc on each generator and the held-out mean."""
    arms = res["arms"]
    names = (SEEN, *UNSEEN)
    head = "| arm | " + " | ".join(names) + " | held-out mean | gain vs shipped |"
    lines = [head, "|" + "---|" * (len(names) + 3)]
    base = res["shipped"]
    lines.append("| shipped detector | " + " | ".join(f"{base[k]:.3f}" for k in names) + f" | {res['shipped_unseen_mean']:.3f} | — |")
    for arm, runs in arms.items():
        cells = [mean_sd([r["after"][k] for r in runs]) for k in names]
        um = [r["unseen_mean"]["after"] for r in runs]
        gain = [r["gain"] for r in runs]
        lines.append(f"| {ARM_LABELS.get(arm, arm)} | " + " | ".join(cells) + f" | {mean_sd(um)} | {mean_sd(gain)} |")
    seeds = res["seeds"]
    lr = f"; stage-2 lr {res['stage2_lr']:g}" if res.get("stage2_lr") is not None else ""
    lines.append(f"\nmean ± s.d. over seeds {seeds} (stage-1 noise/labels, LoRA init, stage-2 batches){lr}; "
                 f"{res['n_eval']} real test digits vs {res['n_eval']} held-out fakes per generator.")
    sizes = [f"{ARM_LABELS.get(a, a)}: {mean_sd([float(r['buffer_size']) for r in runs])} samples, mean P(fake) "
             f"{mean_sd([r['buffer_mean_fake_prob'] for r in runs])}" for a, runs in arms.items() if runs and "buffer_size" in runs[0]
             and runs[0]["buffer_size"] and runs[0].get("buffer_kept") is not None]
    if sizes:
        lines.append("buffer per arm (size; the frozen detector's mean P(fake) on its samples; the no-buffer arm's is unused): " + "; ".join(sizes))
    if "paired" in res:
        lines.append("paired differences of the held-out mean (same seed): " +
                     "; ".join(f"{k}: {mean_sd(v)} (per seed {', '.join(f'{x:+.3f}' for x in v)})" for k, v in res["paired"].items()))
    lines.append("\ngenerators: " + "; ".join(f"{k} = {GENERATORS[k].note}" for k in names))
    return "\n".join(lines)


def plot_buffer(out: Mapping[str, Any], path: str | Path, per_row: int = 12) -> Path:
    """A PNG grid: one row per buffer snapshot (stage-1 step and the frozen detector's mean P(fake)),
    ``per_row`` samples each; the last row is the unadapted generator for the same digits when given."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buf, steps, probs = out["buffer"], out["buffer_steps"], out["buffer_fake_prob"]
    kept = out.get("buffer_kept")
    if kept is not None and len(set(kept)) > 1:  # a band buffer: uneven snapshots; rows of per_row samples in trajectory order
        return _plot_uneven(out, path, per_row)
    rows = max(1, len(steps))
    n = buf.shape[0] // rows if len(steps) else 0
    fig, axes = plt.subplots(rows, per_row, figsize=(per_row * 0.55, rows * 0.6 + 0.5), squeeze=False)
    for r in range(rows):
        for j in range(per_row):
            ax = axes[r, j]
            ax.set_xticks([])
            ax.set_yticks([])
            if n and j < n:
                ax.imshow(buf[r * n + j].reshape(8, 8).clamp(-1, 1).cpu().numpy(), cmap="gray_r", vmin=-1, vmax=1)
            if j == 0 and len(steps):
                ax.set_ylabel(f"step {steps[r]}\nP(fake) {probs[r]:.2f}", fontsize=6, rotation=0, ha="right", va="center")
    cfg = out.get("config", {})
    fig.suptitle(f"PROBE boundary buffer (λ = {cfg.get('lambda_prec', '?')}, critic = {cfg.get('critic', '?')}): "
                 "samples along the LoRA trajectory", fontsize=8)
    return _save(fig, path)


def _plot_uneven(out: Mapping[str, Any], path: str | Path, per_row: int, max_rows: int = 10) -> Path:
    """A band buffer's PNG: up to ``max_rows`` rows of ``per_row`` buffer samples spread evenly over the buffer (trajectory
    order), each row labelled with its samples' stage-1 steps and the frozen detector's mean P(fake) on them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    buf, pf = out["buffer"], out["buffer_sample_fake_prob"]
    step_of = torch.tensor([s for s, k in zip(out["buffer_steps"], out["buffer_kept"]) for _ in range(k)])
    n = buf.shape[0]
    rows = max(1, min(max_rows, n // per_row))
    idx = torch.linspace(0, n - 1, rows * per_row).round().long() if n else torch.empty(0, dtype=torch.long)
    fig, axes = plt.subplots(rows, per_row, figsize=(per_row * 0.55, rows * 0.6 + 0.5), squeeze=False)
    for r in range(rows):
        sel = idx[r * per_row:(r + 1) * per_row]
        for j in range(per_row):
            ax = axes[r, j]
            ax.set_xticks([])
            ax.set_yticks([])
            if j < sel.numel():
                ax.imshow(buf[sel[j]].reshape(8, 8).clamp(-1, 1).cpu().numpy(), cmap="gray_r", vmin=-1, vmax=1)
        if sel.numel():
            axes[r, 0].set_ylabel(f"steps {int(step_of[sel[0]])}-{int(step_of[sel[-1]])}\nP(fake) {float(pf[sel].mean()):.2f}", fontsize=6,
                                  rotation=0, ha="right", va="center")
    cfg = out.get("config", {})
    fig.suptitle(f"PROBE band buffer (P(fake) in {list(cfg.get('buffer_band') or [])}, {n} samples): along the LoRA trajectory", fontsize=8)
    return _save(fig, path)


def _save(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` (its folder created) and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
