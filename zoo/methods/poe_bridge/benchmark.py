"""PoE-Bridge on the toy variants against its baselines, one run, one table (and a PNG).

Rows: AR decoding of the target (greedy), standard DLM decoding (Dream entropy rule, 2 tokens per
forward), direct DLM->AR importance sampling without the bridge (K = 4 drafted windows resampled with
p_A/q, no rejection), speculative rejection straight onto the AR (w = 0, K = 4; the paper's ablation),
PoE-Bridge K = 1, PoE-Bridge K = 4 with the paper's exact lane resampling and with the repository's
argmax lane choice. Columns: exact-match accuracy on held-out additions, DLM and AR forwards per
problem, new tokens per second, wall time. The paper's claims: >= 95% of the AR target's accuracy,
>= 5x the speed of standard DLM decoding, faster than AR decoding.

Model pairs (``--variants``): ``toy`` (the shipped pair: a bare torch encoder DLM, several times
cheaper per forward than the K-lane Qwen2 verify forward), ``toy-equal`` (a bidirectional Qwen2 DLM of
exactly the AR target's width and depth, both through transformers, so one DLM forward costs what one
AR forward costs, as Dream-7B and Qwen2.5-7B do in the paper) and ``toy-long`` (63-token answers, an
equal-size pair trained for them). Each pair also gets DLM decoding at 1 token per step (the DLM's best
accuracy, for a comparison at matched accuracy) and a per-forward cost line (median ms of one DLM
forward on prompt + answer-region masks and of one verify forward of V drafts).

    zoo bench poe-bridge --problems 64 --repeats 5 --sweep-w   # the spec's numbers (also dlm-confidence-decoding, ar-decoding)
    zoo bench poe-bridge --quick                               # 8 problems, 1 round, the toy pair only
    zoo bench poe-bridge --variants toy toy-equal --problems 64 --repeats 5 --sweep-w --out-dir docs/methods   # the card's PNG
"""
from __future__ import annotations

import sys
from typing import Any

from registry.contract import benchmark

from .params import BenchOptions, Variant  # noqa: F401

TITLES = {
    "toy": "3-digit addition (33-token answers), shipped pair: torch-encoder DLM + Qwen2 AR",
    "toy-equal": "3-digit addition (33-token answers), equal pair: bidirectional Qwen2 DLM + the toy's Qwen2 AR",
    "toy-long": "31-digit column addition (63-token answers), equal pair trained for it: bidirectional Qwen2 DLM + Qwen2 AR",
}


def build(ctx: Any, variant: str = "toy", device: str = "cpu"):
    """The pipeline of a toy variant, built by the engine from the spec (sha256-checked shipped weights); on a
    device other than the CPU its models are moved there (in place: the benchmark's own process)."""
    pipe = ctx.pipeline(variant)
    if device != "cpu":
        for m in pipe.models.values():
            m.to(device)
    return pipe


def _accepted_per_window(proc, n_problems: int) -> float:
    """Mean accepted draft tokens per verify window (re-runs the same seeds; counters are deterministic)."""
    acc = win = 0
    for i, ex in enumerate(proc.tokenizer().eval_problems(n_problems)):
        st = proc(ex.prompt, seed=i).stats[0]
        acc += st["accepted_tokens"]
        win += st["windows"]
    return acc / max(win, 1)


def parse_recipe(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` overrides of the toy-long recipe (``--train-recipe``), values read as JSON (numbers, true/false)
    where they parse, else as text; the trainer's options validate them."""
    import json

    from registry.errors import Location, ParamError

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ParamError(f"--train-recipe takes KEY=VALUE items, got {item!r}", Location(None, None, None, "--train-recipe"))
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value.strip()
    return out


def seed_models(ctx: Any, seed: int, device: str = "cpu", recipe: dict[str, Any] | None = None) -> tuple[Any, dict]:
    """The ``toy-long`` roles of training seed ``seed``: fresh copies built by the engine from the spec
    (``ctx.models``), their weights replaced (strictly) by the pair :func:`~.train.train_long_seed` trains with the
    spec's recipe (updated by ``recipe``) into the run's output folder; seed 0 without ``recipe``: the shipped pair
    itself (``zoo train poe-bridge --only toy-long --check`` compares it with that recipe's bytes). Returns the
    roles and the pair's record (sha256)."""
    from safetensors.torch import load_file

    from .train import train_long_seed

    roles = ctx.models("toy-long", roles=["proposal", "target"])
    if seed == 0 and not recipe:
        record = {"seed": 0, "trained": False, "sha256": {r: ctx.spec.models[r].variants["toy-long"].sha256
                                                          for r in ("proposal", "target")}}
    else:
        record = train_long_seed(ctx, seed, recipe)
        for role, path in record["paths"].items():
            roles[role].load_state_dict(load_file(str(path)), strict=True)
    if device != "cpu":
        for m in roles.values():
            m.to(device)
    return roles, record


def run_pair(ctx: Any, variant: str, args: BenchOptions, models: Any = None) -> tuple[list[dict], dict, dict]:
    """The benchmark rows of one model pair; returns (rows, spec sampler params, forward costs). Each row
    keeps its fastest wall round and, separately, its lowest thread-CPU round; ``model_s`` is the cost model
    (:func:`~zoo.methods.poe_bridge.speed.cost_model_s`) with the pair's :func:`forward_costs`. ``models``:
    these roles instead of the variant's pipeline's (another training seed's pair, :func:`seed_models`)."""
    from zoo.common.masked_dlm import ConfidenceDecoding
    from zoo.methods.poe_bridge.baselines import ARDecoding
    from zoo.methods.poe_bridge.metrics import evaluate
    from zoo.methods.poe_bridge.sampler import PoEBridgeSampler
    from zoo.methods.poe_bridge.speed import cost_model_s, forward_costs, verify_key

    device = args.device
    if models is None:
        models = build(ctx, variant, device).models
    spec_params = {n: dict(ctx.spec.samplers[n].params) for n in ctx.spec.samplers}
    if args.verify_window:
        for v in spec_params.values():
            v["verify_window"] = args.verify_window

    def poe(label: str, sampler: str):
        prm = spec_params[sampler]
        return (label, PoEBridgeSampler, models, prm, verify_key(prm.get("n_lanes", 4)))

    rows = [
        ("AR decoding (target)", ARDecoding, {"target": models["target"]}, {}, "ar_step_ms"),
        ("DLM decoding (entropy, 2 tok/step)", ConfidenceDecoding, {"proposal": models["proposal"]},
         {"tokens_per_step": 2, "alg": "entropy"}, None),
        ("DLM decoding (entropy, 1 tok/step)", ConfidenceDecoding, {"proposal": models["proposal"]},
         {"tokens_per_step": 1, "alg": "entropy"}, None),
    ]
    if variant == "toy":
        rows += [poe("direct D->A IS, no bridge (K=4)", "direct-is"), poe("speculative D->A, w=0 (K=4)", "speculative-w0")]
    rows += [poe("PoE-Bridge K=1 (no IS)", "poe-bridge-k1"), poe("PoE-Bridge K=4 multinomial_exact (paper)", "poe-bridge"),
             poe("PoE-Bridge K=4 argmax_logit_diff (repo)", "poe-bridge-repo")]
    procs = [(label, cls(models=mdl, params=cls.Params(**params), device=device, dtype=None), key)
             for label, cls, mdl, params, key in rows]
    best: dict[str, dict] = {}
    # round-robin repeats (every method once per round) so that load from other processes hits all rows
    # alike; each row keeps its fastest wall round and its lowest CPU round (counters and accuracy are
    # identical across rounds)
    for rep in range(args.repeats):
        for label, proc, key in procs:
            r = evaluate(proc, args.problems, progress=True)
            if label not in best:
                best[label] = dict(r, method=label, variant=variant, ar_cost_key=key)
            b = best[label]
            if r["wall_s"] < b["wall_s"]:
                b.update(wall_s=r["wall_s"], tokens_per_s=r["tokens_per_s"])
            if r["cpu_s"] < b["cpu_s"]:
                b.update(cpu_s=r["cpu_s"], tokens_per_cpu_s=r["tokens_per_cpu_s"])
        print(f"  {variant}: round {rep + 1}/{args.repeats} done", file=sys.stderr)
    lanes = tuple(sorted({spec_params[n].get("n_lanes", 4) for n in ("poe-bridge", "poe-bridge-k1")}))
    costs = forward_costs(models, lanes, spec_params["poe-bridge"]["verify_window"], reps=5 if ctx.quick else 30,
                          device=device)
    results = [best[label] for label, _, _ in procs]
    for r in results:
        r["model_s"] = cost_model_s(r, costs, r["ar_cost_key"], args.problems)
        r["tokens_per_model_s"] = r["tokens"] * args.problems / r["model_s"]
    return results, spec_params, costs


def speed_summary(results: list[dict], costs: dict, window: int) -> list[dict]:
    """PoE-Bridge K = 1 (the CPU row) and K = 4 (the paper's row) against DLM decoding at 2 tokens/step, in
    tok/s ratios by each clock: wall, thread CPU, cost model, and forward counts (every forward at the same
    cost, the paper's GPU regime), next to the forward-count bound of the task."""
    from zoo.methods.poe_bridge.speed import forward_count_bound

    dlm = next(r for r in results if r["method"].startswith("DLM decoding (entropy, 2"))
    out = []
    for label, start in (("K=1, the CPU row", "PoE-Bridge K=1"), ("K=4, the paper's row", "PoE-Bridge K=4 multinomial")):
        r = next(x for x in results if x["method"].startswith(start))
        fwd = (dlm["dlm_forwards"] / dlm["tokens"]) / ((r["dlm_forwards"] + r["ar_forwards"]) / r["tokens"])
        out.append({"row": label, "method": r["method"], "wall": r["tokens_per_s"] / dlm["tokens_per_s"],
                    "cpu": r["tokens_per_cpu_s"] / dlm["tokens_per_cpu_s"],
                    "model": r["tokens_per_model_s"] / dlm["tokens_per_model_s"], "fwd": fwd,
                    "bound": forward_count_bound(dlm["dlm_forwards"], round(r["tokens"]), window),
                    "cpu_over_model": r["cpu_s"] / r["model_s"]})
    return out


def print_table(variant: str, results: list[dict], costs: dict, problems: int, window: int = 32,
                out: list[str] | None = None) -> list[dict]:
    """One pair's table, its cost line and speed summary as lines appended to ``out`` (printed when ``out`` is
    None); returns the summary rows."""
    import torch

    lines: list[str] = [] if out is None else out

    ar, dlm = results[0], results[1]
    clock = "thread-CPU" if costs["clock"] == "thread-cpu" else "CUDA wall"
    lines.append(f"\n[{variant}] Toy {TITLES.get(variant.split('/')[0], variant)}; {problems} held-out problems; one thread, torch {torch.__version__}")
    lanes = sorted(int(k[len("verify_k"):-3]) for k in costs if k.startswith("verify_k"))
    lines.append(f"cost per forward ({clock} ms, median): DLM {costs['dlm_forward_ms']:.3f} over prompt + {costs['answer_region']} "
          f"masks; AR step {costs['ar_step_ms']:.3f}; " + ", ".join(
              f"K={k} verify {costs[f'verify_k{k}_ms']:.3f} ({costs[f'verify_k{k}_ms'] / costs['dlm_forward_ms']:.2f} x DLM)"
              for k in lanes))
    hdr = (f"| {'method':<42} | {'acc':>5} | {'acc/AR':>6} | {'DLM fwd':>7} | {'AR fwd':>6} | {'wall s':>6} | {'CPU s':>6} | "
           f"{'model s':>7} | {'x DLM wall':>10} | {'x DLM CPU':>9} | {'x DLM model':>11} | {'x AR CPU':>8} |")
    lines.append(hdr)
    lines.append("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
    for r in results:
        r["acc_vs_ar"] = r["accuracy"] / ar["accuracy"] if ar["accuracy"] else float("nan")
        r["speed_vs_dlm"] = r["tokens_per_s"] / dlm["tokens_per_s"]
        r["speed_vs_ar"] = r["tokens_per_s"] / ar["tokens_per_s"]
        r["cpu_speed_vs_dlm"] = r["tokens_per_cpu_s"] / dlm["tokens_per_cpu_s"]
        r["cpu_speed_vs_ar"] = r["tokens_per_cpu_s"] / ar["tokens_per_cpu_s"]
        r["model_speed_vs_dlm"] = r["tokens_per_model_s"] / dlm["tokens_per_model_s"]
        lines.append(f"| {r['method']:<42} | {r['accuracy']:5.3f} | {r['acc_vs_ar']:6.3f} | {r['dlm_forwards']:7.2f} | "
              f"{r['ar_forwards']:6.2f} | {r['wall_s']:6.2f} | {r['cpu_s']:6.2f} | {r['model_s']:7.2f} | "
              f"{r['speed_vs_dlm']:10.2f} | {r['cpu_speed_vs_dlm']:9.2f} | {r['model_speed_vs_dlm']:11.2f} | "
              f"{r['cpu_speed_vs_ar']:8.2f} |")
    summary = speed_summary(results, costs, window)
    lines.append(f"PoE-Bridge over DLM decoding (2 tok/step), tok/s ratios (paper, GSM8K: 3.84 K=4, 3.98 K=1; abstract ~5x); "
          f"forward-count bound {summary[0]['bound']:.2f}:")
    for s in summary:
        lines.append(f"  {s['row']:<21} wall x{s['wall']:.2f}  thread CPU x{s['cpu']:.2f}  cost model x{s['model']:.2f}  "
              f"forward count x{s['fwd']:.2f}  (CPU / model {s['cpu_over_model']:.2f})")
    dlm1 = next(r for r in results if r["method"].startswith("DLM decoding (entropy, 1"))
    paper = next(r for r in results if r["method"].startswith("PoE-Bridge K=4 multinomial"))
    lines.append(f"PoE-Bridge (paper) vs DLM decoding at 1 tok/step: accuracy {paper['accuracy']:.3f} vs {dlm1['accuracy']:.3f}, "
          f"thread-CPU tok/s x{paper['tokens_per_cpu_s'] / dlm1['tokens_per_cpu_s']:.2f}")
    if out is None:
        print("\n".join(lines))
    return summary


def plot(results: list[dict], summaries: dict[str, list[dict]], path: Any) -> None:
    """The PNG: accuracy against thread-CPU throughput on the toy pair; PoE-Bridge's speedup over DLM
    decoding per pair by clock (K = 1 and K = 4) with the forward-count bound; the PoE-weight ablation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    short = ["AR", "DLM 2 tok/step", "DLM 1 tok/step", "direct IS", "spec. w=0", "PoE K=1", "PoE K=4 exact", "PoE K=4 argmax"]
    main_rows = [r for r in results if not r["method"].startswith("sweep")]
    sweep = [r for r in results if r["method"].startswith("sweep")]
    fig, axes = plt.subplots(1, 3 if sweep else 2, figsize=(16 if sweep else 11, 4.2), squeeze=False)
    ax = axes[0][0]
    for r, lab in zip(main_rows, short):
        ax.scatter(r["tokens_per_cpu_s"], r["accuracy"], s=45)
        ax.annotate(lab, (r["tokens_per_cpu_s"], r["accuracy"]), fontsize=8, xytext=(4, -10 if "argmax" in lab else 4),
                    textcoords="offset points")
    ax.set_xlabel("new tokens / thread-CPU second (one thread)")
    ax.set_ylabel("exact-match accuracy (held-out problems)")
    ax.set_title("toy pair: accuracy vs throughput")
    ax.grid(alpha=0.3)
    ax = axes[0][1]
    clocks = [("wall", "wall"), ("cpu", "thread CPU"), ("model", "cost model"), ("fwd", "forward count")]
    groups = [(v, s) for v, ss in summaries.items() for s in ss]
    width = 0.8 / len(clocks)
    for c, (key, lab) in enumerate(clocks):
        ax.bar([g + c * width for g in range(len(groups))], [s[key] for _, s in groups], width, label=lab)
    for g, (_, s) in enumerate(groups):
        ax.hlines(s["bound"], g - width / 2, g + 0.8 - width / 2, colors="k", linestyles=":")
    ax.axhline(3.84, color="C3", lw=1, ls="--", label="paper K=4 (GSM8K)")
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{v}\n{s['row'].split(',')[0]}" for v, s in groups], fontsize=8)
    ax.set_ylabel("PoE-Bridge tok/s / DLM decoding tok/s")
    ax.set_title("speedup over DLM decoding (dotted: forward-count bound)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    if sweep:
        ax2 = axes[0][2]
        ws = [float(r["method"].split("=")[1]) for r in sweep]
        ax2.plot(ws, [r["accuracy"] for r in sweep], "o-", label="accuracy")
        ax2.set_xlabel("PoE weight w")
        ax2.set_ylabel("accuracy")
        ax3 = ax2.twinx()
        ax3.plot(ws, [r["accepted_per_window"] for r in sweep], "s--", color="C1", label="accepted / window")
        ax3.set_ylabel("accepted draft tokens per window", color="C1")
        ax2.set_title("PoE-weight ablation (K=4, exact)")
        ax2.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """PoE-Bridge against AR decoding, DLM decoding and its ablations on the toy model pairs: accuracy, forwards,
    wall / thread-CPU / cost-model speed; the PNG poe-bridge-bench.png when the toy pair runs (--quick: 8 problems,
    1 timing round, the toy pair only, 5 cost repetitions; the table still prints)."""
    import torch

    torch.set_num_threads(1)
    from registry.errors import Location, ParamError
    from zoo.methods.poe_bridge.metrics import evaluate
    from zoo.methods.poe_bridge.sampler import PoEBridgeSampler

    if opts.sweep_w and "toy" not in opts.variants:
        raise ParamError("the PoE-weight ablation runs on the toy pair: add toy to --variants",
                         Location(None, None, None, "--sweep-w"))
    all_results: list[dict] = []
    results: list[dict] = []
    summaries: dict[str, list[dict]] = {}
    spec_params: dict = {}
    models = None
    if opts.train_seeds and "toy-long" not in opts.variants:
        raise ParamError("--train-seeds benchmarks toy-long once per training seed: add toy-long to --variants",
                         Location(None, None, None, "--train-seeds"))
    runs = [(v, None) for v in opts.variants if not (v == "toy-long" and opts.train_seeds)]
    runs += [("toy-long", s) for s in opts.train_seeds] if "toy-long" in opts.variants else []
    records: dict[int, dict] = {}
    for variant, seed in runs:
        pair = None
        label = variant
        if seed is not None:
            pair, records[seed] = seed_models(ctx, seed, opts.device, parse_recipe(opts.train_recipe))
            label = f"toy-long/seed{seed}"
        rows, params_v, costs = run_pair(ctx, variant, opts, pair)
        lines: list[str] = []
        summaries[label] = print_table(label, rows, costs, opts.problems, params_v["poe-bridge"]["verify_window"], out=lines)
        if seed is not None:
            sha = records[seed]["sha256"]
            how = "the shipped pair" if not records[seed]["trained"] and "recipe" not in records[seed] else (
                "trained by the spec recipe" + (f" with {' '.join(opts.train_recipe)}" if opts.train_recipe else ""))
            lines.insert(1, f"training seed {seed} ({how}): "
                         f"AR {sha['target'][:12]}..., DLM {sha['proposal'][:12]}...")
        ctx.report("\n".join(lines))
        for r in rows:
            r.update(costs, training_seed=seed)
        all_results += rows
        all_results += [dict(s, method=f"speedup {s['row']}", variant=variant, training_seed=seed) for s in summaries[label]]
        if variant == "toy":
            results, spec_params = rows, params_v
            models = build(ctx, "toy", opts.device).models
    if opts.sweep_w:
        lines = [f"\nPoE weight ablation (K=4, multinomial_exact, V={spec_params['poe-bridge']['verify_window']}; paper: "
                 "HumanEval K=1, accepted tokens/step 4.91 at w=0 -> 15.61 at w=0.9, accuracy 81.3 -> 30.5)",
                 "|   w  |   acc | accepted/window | DLM fwd | AR fwd | CPU tok/s |",
                 "|------|-------|-----------------|---------|--------|-----------|"]
        for w in (0.0, 0.3, 0.5, 0.7, 0.9, 1.0):
            prm = dict(spec_params["poe-bridge"], mixture_weight=w)
            proc = PoEBridgeSampler(models=models, params=PoEBridgeSampler.Params(**prm), device=opts.device, dtype=None)
            r = evaluate(proc, opts.problems, progress=True)
            acc_w = _accepted_per_window(proc, opts.problems)
            lines.append(f"| {w:4.1f} | {r['accuracy']:5.3f} | {acc_w:15.2f} | {r['dlm_forwards']:7.2f} | {r['ar_forwards']:6.2f} | "
                         f"{r['tokens_per_cpu_s']:9.0f} |")
            sweep_row = dict(r, method=f"sweep w={w}", accepted_per_window=acc_w, variant="toy")
            results.append(sweep_row)
            all_results.append(sweep_row)
        ctx.report("\n".join(lines))
    if len(opts.train_seeds) > 1:
        spread_lines, spread = seed_spread(all_results, opts.train_seeds)
        ctx.report("\n".join(spread_lines))
        all_results += spread
    if results:
        plot(results, {k: v for k, v in summaries.items() if "/" not in k}, ctx.figure("poe-bridge-bench.png"))
    return {"rows": all_results, "training_pairs": {str(k): {"seed": k, "sha256": v["sha256"], "recipe": v.get("recipe")}
                                                    for k, v in records.items()}}


SPREAD = [("AR acc", "AR decoding", "accuracy"), ("DLM acc", "DLM decoding (entropy, 2", "accuracy"),
          ("K=1 acc", "PoE-Bridge K=1", "accuracy"), ("K=4 acc", "PoE-Bridge K=4 multinomial", "accuracy"),
          ("K=1 fwd", "speedup K=1", "fwd"), ("K=1 model", "speedup K=1", "model"), ("K=1 CPU", "speedup K=1", "cpu"),
          ("K=1 wall", "speedup K=1", "wall"), ("K=4 fwd", "speedup K=4", "fwd"), ("K=4 model", "speedup K=4", "model"),
          ("K=4 CPU", "speedup K=4", "cpu"), ("K=4 wall", "speedup K=4", "wall")]


def seed_spread(rows: list[dict], seeds: list[int]) -> tuple[list[str], list[dict]]:
    """The training-seed spread on ``toy-long``: per seed, the accuracies (AR target, DLM decoding at 2 tokens/step,
    PoE-Bridge K = 1 and K = 4) and PoE-Bridge's speedups over DLM decoding (forward count, cost model, thread CPU,
    wall); then mean +- sample standard deviation over the seeds. Returns the table lines and one row per
    quantity (``method: seed spread <name>``, per-seed ``values``, ``mean``, ``sd``)."""
    from zoo.common.spread import spread

    def value(seed: int, start: str, key: str) -> float:
        return next(r[key] for r in rows if r.get("training_seed") == seed and r["method"].startswith(start))

    table = {name: [value(s, start, key) for s in seeds] for name, start, key in SPREAD}
    names = [n for n, _, _ in SPREAD]
    summary = {n: spread(table[n]) for n in names}
    lines = [f"\n[toy-long] training-seed spread over seeds {', '.join(map(str, seeds))} (speedups: PoE-Bridge tok/s over "
             "DLM decoding at 2 tok/step)", "| seed | " + " | ".join(f"{n:>9}" for n in names) + " |",
             "|------|" + "|".join("-" * 11 for _ in names) + "|"]
    for i, s in enumerate(seeds):
        lines.append(f"| {s:4d} | " + " | ".join(f"{table[n][i]:9.3f}" for n in names) + " |")
    lines.append("| mean | " + " | ".join(f"{summary[n].mean:9.3f}" for n in names) + " |")
    lines.append("|   sd | " + " | ".join("        -" if summary[n].sd is None else f"{summary[n].sd:9.3f}" for n in names) + " |")
    out = [{"method": f"seed spread {n}", "variant": "toy-long", "seeds": list(seeds), "values": table[n],
            "mean": summary[n].mean, "sd": summary[n].sd} for n in names]
    return lines, out
