"""The ``toy-stretch`` study of ``zoo bench codila``: the dynamic schedule's tokens per DLM forward
against validity, beside static and sequential decoding, over several training seeds.

CoDiLA (arXiv 2603.20216, Sec. 3 "inference"): the dynamic schedule "recovers sequential-quality accuracy at >= 2x
throughput (B = 4)". On ``toy-stretch`` (:mod:`.tasks`: word 1 determines words 2-4) one free letter is followed by a
stretch of 7 determined ones; the exact ceilings are :func:`~.tasks.dynamic_schedule_forwards` /
:func:`~.tasks.dynamic_schedule_extremes`, and the card pre-registers the rule this module applies (per training seed,
the matched dynamic row must reach >= 2 tokens per DLM forward).

Training seed 0 is the spec's shipped ``toy-stretch`` checkpoints; every other seed ``s`` is trained by the shipped
trainer's own function (:func:`~.train.train_task`, with the spec entry's options and generator seed
``task_seed("stretch", s)``) and cached by the engine (``registry.contract.cached_artifact``), never written into
the checkout. Every seed is evaluated on the same fresh unconditional draws (sampling seed ``seed``).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from zoo.common.spread import spread

VARIANT = "toy-stretch"
ENTRY = "toy-stretch"  # the spec's training entry of the variant
TASK = "stretch"


def _rows(procs: dict[str, Any], taus: list[float]) -> list[tuple[str, Any]]:
    rows = [("DLM parallel (2 tok/fwd, blocks of 2)", procs["dlm-parallel"]),
            ("DLM sequential (1 tok/fwd)", procs["dlm-sequential"]),
            ("CoDiLA static B=2 (paper)", procs["codila-static"]),
            ("CoDiLA static B=4", procs["codila-static-b4"])]
    rows += [(f"CoDiLA dynamic B=4 tau={t:g}", procs["codila-dynamic"].with_params(entropy_threshold=t)) for t in taus]
    return rows


def seed_models(ctx: Any, seed: int) -> dict[str, Any]:
    """``{"dlm", "local_ar"}`` of training seed ``seed``: the shipped checkpoints for 0, else trained with the shipped
    recipe (the spec's ``toy-stretch`` training entry) and cached."""
    if seed == 0:
        m = ctx.pipeline(VARIANT).models
        return {"dlm": m["dlm"], "local_ar": m["local_ar"]}
    import torch

    from registry.contract import cached_artifact

    from .params import ToyTrainOptions
    from .toy import build_dlm, build_local_ar
    from .train import file_names, task_seed, train_task

    opts = ToyTrainOptions.model_validate(dict(ctx.spec.training[ENTRY].params))
    files = file_names(TASK)

    def produce() -> dict[str, torch.Tensor]:
        print(f"  training {TASK} seed {seed} (generator seed {task_seed(TASK, seed)}; cached afterwards)", file=sys.stderr)
        models = train_task(TASK, task_seed(TASK, seed), opts, bar=False)
        return {f"{role}.{k}": v.detach().contiguous().clone() for role, f in (("dlm", files[0]), ("local_ar", files[1]))
                for k, v in models[f].state_dict().items()}

    state = cached_artifact(["codila-train", 1, TASK, seed, opts.model_dump(), torch.__version__], produce, "safetensors",
                            namespace="codila")
    out = {"dlm": build_dlm(task=TASK), "local_ar": build_local_ar(task=TASK)}
    for role, model in out.items():
        model.load_state_dict({k[len(role) + 1:]: v for k, v in state.items() if k.startswith(role + ".")})
        model.eval()
    return out


def _procedures(ctx: Any, models: dict[str, Any]) -> dict[str, Any]:
    """The spec's ``toy-stretch`` procedures (their params as built for the variant) on ``models``."""
    base = ctx.pipeline(VARIANT).procedures
    names = ("dlm-parallel", "dlm-sequential", "codila-static", "codila-static-b4", "codila-dynamic")
    return {n: base[n].with_models({r: m for r, m in models.items() if r in base[n].models}) for n in names}


def _mean_sd(xs: list[float]) -> dict[str, float]:
    s = spread(xs)
    return {"mean": s.mean, "sd": 0.0 if s.sd is None else s.sd, "min": min(xs), "max": max(xs)}


def study(ctx: Any, seeds: list[int], taus: list[float], samples: int, seed: int) -> dict[str, Any]:
    """Every stretch number of the benchmark: per training seed the table, the matched dynamic row and whether it
    reaches 2x; then mean / sd over the seeds per row and the verdict of the card's refutation rule."""
    from .benchmark import matched_dynamic, run_table
    from .tasks import Task, dynamic_schedule_extremes, dynamic_schedule_forwards

    task = Task(TASK)
    per_seed = []
    for s in seeds:
        rows = run_table(None, _rows(_procedures(ctx, seed_models(ctx, s)), taus), task, samples, seed)
        m = matched_dynamic(rows)
        per_seed.append({"train_seed": s, "rows": rows, "matched": m,
                         "reaches_2x": m is not None and m["tokens_per_dlm_forward"] >= 2.0})
    summary = []
    for i, r0 in enumerate(per_seed[0]["rows"]):
        vals = {k: _mean_sd([p["rows"][i][k] for p in per_seed]) for k in ("validity", "tokens_per_dlm_forward", "dlm_forwards", "ar_forwards")}
        summary.append({"method": r0["method"], **vals})
    e_f = {tau: sum(f * p for f, p in dynamic_schedule_forwards(task, 4, tau).items()) for tau in taus}
    ceilings = {"exact_uniform_ties_tokens_per_forward": {str(t): task.length / f for t, f in e_f.items()},
                "exact_fewest_most_forwards": {str(t): dynamic_schedule_extremes(task, 4, t) for t in taus}}
    verdict = "reproduced" if all(p["reaches_2x"] for p in per_seed) else "not reproduced"
    return {"seeds": seeds, "taus": taus, "samples": samples, "sampling_seed": seed, "per_seed": per_seed,
            "summary": summary, "ceilings": ceilings, "verdict": verdict}


def print_study(res: dict[str, Any]) -> str:
    lines = [f"\nstretch toy (word 1 determines words 2-4; {res['samples']} unconditional samples per row, sampling seed "
             f"{res['sampling_seed']}; training seeds {res['seeds']}, mean ± sd over them)",
             "| method | valid | tok/DLM fwd | DLM fwd | AR fwd | per seed (valid @ tok/fwd) |", "|---|---|---|---|---|---|"]
    for i, r in enumerate(res["summary"]):
        per = "; ".join(f"{p['rows'][i]['validity']:.3f} @ {p['rows'][i]['tokens_per_dlm_forward']:.2f}" for p in res["per_seed"])
        lines.append(f"| {r['method']} | {r['validity']['mean']:.3f} ± {r['validity']['sd']:.3f} | "
                     f"{r['tokens_per_dlm_forward']['mean']:.2f} ± {r['tokens_per_dlm_forward']['sd']:.2f} | "
                     f"{r['dlm_forwards']['mean']:.2f} | {r['ar_forwards']['mean']:.2f} | {per} |")
    for p in res["per_seed"]:
        m = p["matched"]
        lines.append(f"training seed {p['train_seed']}: matched dynamic row "
                     + (f"{m['method']} at {m['tokens_per_dlm_forward']:.2f} tok/DLM fwd, validity {m['validity']:.3f}"
                        if m else "none (no dynamic row within 2 SE of sequential)")
                     + f" -> {'>=' if p['reaches_2x'] else '<'} 2x")
    c = res["ceilings"]
    lines.append("exact-marginal ceilings of the dynamic rule (B = 4): tokens per forward with uniform ties "
                 + ", ".join(f"tau {t}: {v:.2f}" for t, v in c["exact_uniform_ties_tokens_per_forward"].items())
                 + "; fewest/most forwards " + ", ".join(f"tau {t}: {v[0]}/{v[1]}" for t, v in c["exact_fewest_most_forwards"].items()))
    lines.append(f"verdict (card's rule: matched dynamic row >= 2.0 tok/DLM fwd in every training seed): {res['verdict']}")
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    dyn = [i for i, r in enumerate(res["summary"]) if "dynamic" in r["method"]]
    for k, p in enumerate(res["per_seed"]):
        xs = [p["rows"][i]["tokens_per_dlm_forward"] for i in dyn]
        ys = [p["rows"][i]["validity"] for i in dyn]
        ax.plot(xs, ys, "-o", color="C0", alpha=0.35 + 0.2 * k, ms=4, label=f"dynamic, training seed {p['train_seed']}")
    markers = {"DLM parallel": ("C7", "s"), "DLM sequential": ("k", "D"), "CoDiLA static B=2": ("C2", "^"), "CoDiLA static B=4": ("C3", "v")}
    for i, r in enumerate(res["summary"]):
        for key, (col, mk) in markers.items():
            if r["method"].startswith(key):
                for p in res["per_seed"]:
                    ax.scatter(p["rows"][i]["tokens_per_dlm_forward"], p["rows"][i]["validity"], color=col, marker=mk, s=40,
                               label=r["method"] if p is res["per_seed"][0] else None)
    for i in dyn:
        r = res["summary"][i]
        ax.annotate(r["method"].split("tau=")[-1], (r["tokens_per_dlm_forward"]["mean"], r["validity"]["mean"]), fontsize=7,
                    xytext=(3, -9), textcoords="offset points")
    ax.axvline(2.0, color="grey", ls=":", lw=1)
    ax.axvline(8 / 3, color="C0", ls=":", lw=1, label="dynamic ceiling 8/3 (exact marginals)")
    ax.set_xlabel("tokens per DLM forward")
    ax.set_ylabel("sequence validity")
    ax.set_title(f"stretch toy: {res['samples']} samples per row, training seeds {res['seeds']}; verdict: {res['verdict']}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
