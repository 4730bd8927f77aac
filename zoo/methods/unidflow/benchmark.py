"""UniDFlow on the shapes-and-captions toy: one table over the training stages and the ablations, the
interference test, the mRef-DPO preference/diversity trade-off, the exact 2-token DPO check, and a PNG grid
of generated and edited shapes.

Rows (all from the shipped ``toy`` variant's roles, rule-checked): after stage I; after stage II (the
mRef-DPO reference); after stage III (final, the paper's model); the final model with the router replaced by a
fixed α = 0.5 mix; the shared single-adapter ablation (the stage-I model whose one adapter is trained further on stage II's data). Columns: caption accuracy
(understanding, greedy), generation faithfulness and diversity (distinct faithful images per caption, temperature
1), editing accuracy (greedy), and the surrogate-ELBO preference margin. The paper's DPG-Bench and single-LoRA
ablation numbers are printed beside it (different benchmarks: not comparable, for orientation only).

Sampled columns are mean ± standard error over base seeds (the spec's ``seeds`` setting, :func:`.evaluate.over_seeds`):
generation over ``--seeds`` (8), caption accuracy over ``--caption-seeds`` (4), the margin over ``--margin-seeds``
(16; pair seeds 1234 + k); editing is one greedy draw at ``--seed``. Seeds run from ``--seed`` upward.

    zoo bench unidflow [--out-dir docs/methods]   # the spec's numbers (16 samples per caption, 8 / 4 / 16 seeds)
    zoo bench unidflow --quick                    # 4 samples per caption, 2 seeds each
    zoo bench unidflow --interference-seeds 0 1 2 # only the fair interference study (:mod:`.interference`)
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from registry.contract import benchmark

from .params import BenchOptions

PAPER = {"DPG-Bench (Table 2)": 91.19, "DPG-Bench (Table 4)": 91.91, "single-LoRA: understanding Eval": 79.92,
         "single-LoRA: GenEval": 0.90, "single-LoRA: Edit (1-5)": 4.08}
ROWS = [("after stage I (Δu)", "stage1", None), ("after stage II (Δu + Δg) = DPO reference", "reference", None),
        ("after stage III mRef-DPO (final)", "model", None), ("final, router replaced by α ≡ 0.5", "model", 0.5),
        ("sequential shared adapter (gen + edit only, after stage I): forgetting", "shared", None)]


def evaluate_row(model, per_caption: int, seed: int, alpha, seeds: int = 8, caption_seeds: int = 4, margin_seeds: int = 16) -> dict:
    """One table row: the sampled columns as means over consecutive seeds from ``seed`` (keys ``<name>_se`` hold
    their standard errors), editing one greedy draw at ``seed``."""
    import torch

    from . import evaluate as E

    a = None if alpha is None else torch.tensor(alpha)
    row = E.over_seeds(lambda s: E.generation(model, per_caption, seed=s, alpha=a), range(seed, seed + seeds))
    row.update(E.over_seeds(lambda s: {"caption_accuracy": E.caption_accuracy(model, seed=s, alpha=a)}, range(seed, seed + caption_seeds)))
    row.update(E.over_seeds(lambda s: {"preference_margin": E.preference_margin(model, seed=1234 + s, alpha=a)},
                            range(seed, seed + margin_seeds)))
    row["edit_accuracy"] = E.editing(model, seed=seed, alpha=a)
    return row


def table(rows: list[dict]) -> str:
    """Markdown table of the rows: mean ± SE for the seed-averaged columns (± nan for one seed)."""
    lines = [f"| {'model':<44} | {'caption acc':<13} | {'faithful':<13} | {'diversity':<11} | edit acc | {'pref. margin':<12} |",
             "|" + "|".join("-" * n for n in (46, 15, 15, 13, 10, 14)) + "|"]
    for r in rows:
        lines.append(f"| {r['label']:<44} | {r['caption_accuracy']:.3f} ± {r['caption_accuracy_se']:.3f} | "
                     f"{r['faithfulness']:.3f} ± {r['faithfulness_se']:.3f} | {r['diversity']:.2f} ± {r['diversity_se']:.2f} | "
                     f"{r['edit_accuracy']:8.3f} | {r['preference_margin']:5.2f} ± {r['preference_margin_se']:.2f} |")
    return "\n".join(lines)


def plot(res: dict, path: Path) -> Path:
    """Write :func:`figure` of ``res`` (its ``grid`` panels) to ``path``."""
    import matplotlib.pyplot as plt

    fig = figure(res)
    fig.savefig(path, dpi=fig.dpi)
    plt.close(fig)
    return path


def figure(res: dict):
    """The grid figure (120 dpi): one row per panel of ``res["grid"]``, the title wrapped to the figure's width."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from .world import COLOURS

    rgb = {"r": (0.85, 0.2, 0.2), "g": (0.2, 0.7, 0.3), "b": (0.2, 0.35, 0.85), "y": (0.95, 0.85, 0.2), "?": (0, 0, 0)}
    panels = res["grid"]
    n_rows, n_cols = len(panels), max(len(p["items"]) for p in panels)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(1.25 * n_cols, 1.45 * n_rows), dpi=120)  # text is measured at the saved dpi
    for i, panel in enumerate(panels):
        for j in range(n_cols):
            ax = axes[i, j]
            ax.set_xticks([])
            ax.set_yticks([])
            if j >= len(panel["items"]):
                ax.axis("off")
                continue
            item = panel["items"][j]
            img = np.array([[rgb[ch] for ch in row] for row in item["grid"].split("/")])
            ax.imshow(img)
            for side in ax.spines.values():
                side.set_color("green" if item["valid"] else "red")
                side.set_linewidth(2.5)
            ax.set_title(item["label"], fontsize=6)
            if j == 0:
                ax.set_ylabel(panel["name"], fontsize=6)
    title = (f"UniDFlow toy: generated / edited grids (frame: rule check passes green, fails red; "
             f"source row: the final model's caption); colours {', '.join(COLOURS)}")
    # about 2 characters per point of figure width at 7 pt: wrap so that no line is wider than the figure
    fig.suptitle(textwrap.fill(title, width=int(fig.get_figwidth() * 72 / 7 * 1.6)), fontsize=7)
    fig.tight_layout()
    return fig


def grid_panels(pipe, seed: int) -> list[dict]:
    from .world import COLOURS

    caps = ["red s1 tl", "green s2 br", "blue s3 tl", "yellow s1 tr", "red s2 bl", "blue s1 br"]
    out = []
    for name, role in (("final (stage III)", "model"), ("stage II (reference)", "reference"), ("shared adapter", "shared")):
        gen = pipe.procedures["generate"].with_params(model_role=role)(seed=seed, captions=caps)
        out.append({"name": f"generate: {name}", "items": [{"grid": g, "valid": v, "label": c} for g, v, c in zip(gen.grids, gen.valid, caps)]})
    ed = pipe.procedures["edit"]
    scenes = [3, 40, 100, 170, 250, 330]
    src = pipe.procedures["understand"](seed=seed, scenes=scenes)
    out.append({"name": "edit: source (understood)", "items": [{"grid": g, "valid": v, "label": c} for g, v, c in zip(src.grids, src.valid, src.captions)]})
    colours = []
    from .world import all_scenes

    for k in scenes:
        s = all_scenes()[k]
        colours.append(COLOURS[next(c for c in range(4) if c not in (s.bg, s.fg))])
    for name, role in (("final", "model"), ("shared adapter", "shared")):
        e = ed.with_params(model_role=role)(seed=seed, scenes=scenes, colours=colours)
        out.append({"name": f"edit: {name}", "items": [{"grid": g, "valid": v, "label": f"-> {c}"} for g, v, c in zip(e.grids, e.valid, colours)]})
    return out


def interference_run(ctx: Any, pipe: Any, opts: BenchOptions, seed: int) -> dict:
    """``--interference-seeds``: only the fair interference study (:mod:`.interference`), its table and JSON."""
    from .interference import ARMS, study
    from .params import ToyOptions

    t0 = time.time()
    toy = ToyOptions()
    res = study(pipe.models["stage1"], list(opts.interference_seeds), opts.interference_steps, opts.interference_router_steps,
                toy.batch_size, toy.lr, toy.router_lr, opts.per_caption, opts.interference_eval_seeds, seed)
    res["seconds"] = time.time() - t0
    keys = ("caption_accuracy", "faithfulness", "edit_accuracy")
    b = res["stage1"]
    lines = [f"\nUniDFlow toy, interference study: stage II from the shipped stage-I state, {res['steps']} adapter steps per arm "
             f"(+{res['router_steps']} router-only steps for decoupled), batch {res['batch']}, lr {res['lr']}; training seeds "
             f"{res['seeds']}; draws: captions/generation mean over seeds {seed}..{seed + res['eval_seeds'] - 1} "
             f"({res['per_caption']} samples per caption), editing greedy at seed {seed}; mean ± sd over training seeds",
             "| arm | caption acc | faithful | edit acc |", "|---|---|---|---|",
             f"| stage I (before) | {b['caption_accuracy']:.3f} | {b['faithfulness']:.3f} | {b['edit_accuracy']:.3f} |"]
    for arm in ARMS:
        r = res["summary"][arm]
        lines.append(f"| {arm} | " + " | ".join(f"{r[k]['mean']:.3f} ± {r[k]['sd']:.3f}" for k in keys) + " |")
    d = res["decoupled_minus_joint_shared"]
    lines.append("| decoupled − joint shared (paired) | " + " | ".join(f"{d[k]['mean']:+.3f} ± {d[k]['sd']:.3f}" for k in keys) + " |")
    ctx.report("\n".join(lines))
    ctx.write_json("unidflow-interference.json", res)
    return res


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """UniDFlow's shapes-and-captions toy: the stages-and-ablations table, the interference test, the mRef-DPO
    trade-off, the exact 2-token DPO check and unidflow-bench.png (--quick: 4 samples per caption, 2 seeds per
    average; the table still prints). --seed is the first base seed (editing and the PNG use it)."""
    import torch

    from .exact_dpo import surrogate_gap

    torch.set_num_threads(1)
    t0 = time.time()
    seed = ctx.seed
    pipe = ctx.pipeline("toy")
    if opts.interference_seeds:
        return interference_run(ctx, pipe, opts, seed)
    rows = []
    for label, role, alpha in ROWS:
        r = evaluate_row(pipe.models[role], opts.per_caption, seed, alpha, opts.seeds, opts.caption_seeds, opts.margin_seeds)
        r.update(label=label, role=role, alpha=alpha)
        rows.append(r)
        print(f"  {label}: caption {r['caption_accuracy']:.3f} faithful {r['faithfulness']:.3f}", file=sys.stderr)
    by = {(r["role"], r["alpha"]): r for r in rows}
    res: dict = {"per_caption": opts.per_caption, "seed": seed, "seeds": opts.seeds, "caption_seeds": opts.caption_seeds,
                 "margin_seeds": opts.margin_seeds, "rows": rows}
    res["interference"] = {"decoupled_drop_points": 100 * (by[("stage1", None)]["caption_accuracy"] - by[("model", None)]["caption_accuracy"]),
                           "shared_drop_points": 100 * (by[("stage1", None)]["caption_accuracy"] - by[("shared", None)]["caption_accuracy"])}
    ref, fin = by[("reference", None)], by[("model", None)]
    res["dpo"] = {"faithfulness_gain": fin["faithfulness"] - ref["faithfulness"], "margin_gain": fin["preference_margin"] - ref["preference_margin"],
                  "diversity_cost": ref["diversity"] - fin["diversity"]}
    res["exact_2token"] = surrogate_gap(4, 0.5, seed)
    res["grid"] = grid_panels(pipe, seed)
    res["seconds"] = time.time() - t0
    it, d, x = res["interference"], res["dpo"], res["exact_2token"]
    seeds = (f"mean ± SE over base seeds {seed}.. (generation {opts.seeds}, captions {opts.caption_seeds}, margin {opts.margin_seeds}: "
             f"pair seeds 1234 + k); editing one greedy draw at seed {seed}")
    text = [f"\nUniDFlow toy (shapes-and-captions; {opts.per_caption} samples per caption; {seeds}; one CPU thread, torch {torch.__version__})",
            table(rows),
            f"\ninterference (caption accuracy, points, learned routers): decoupled Δu/Δg stage I -> final {it['decoupled_drop_points']:+.1f} drop; "
            f"sequential shared adapter (forgetting, not interference) stage I -> stage II {it['shared_drop_points']:+.1f} drop",
            f"mRef-DPO (stage II -> III): faithfulness {d['faithfulness_gain']:+.3f}, preference margin {d['margin_gain']:+.2f} nats, "
            f"diversity cost {d['diversity_cost']:+.2f} distinct faithful images per caption",
            f"exact 2-token DPO (V = 4, β = 0.5): TV(optimum, p_ref·exp(r/β)) = {x['tv_exact']:.1e} with exact log-likelihoods, "
            f"{x['tv_surrogate']:.3f} with the masked-CE (ELBO) surrogate; reference {x['tv_reference']:.3f}",
            "\npaper (declared only; no backbone or weights released): " + "; ".join(f"{k} {v}" for k, v in PAPER.items())]
    ctx.report("\n".join(text))
    plot(res, ctx.figure("unidflow-bench.png"))
    return res
