"""Benchmark of ``robuq`` on the shared digits DiT: FP vs W1.58A4 vs W1.58A3 vs AMPN (2-bit average),
each with and without the Hadamard rotation, post-training quantised (PTQ) and QAT-fine-tuned (the
shipped packed checkpoints of ``zoo train robuq``): classifier accuracy of class-conditional
DDIM samples, PCA-20 Frechet distance to the test split, held-out epsilon-MSE, the activation bits,
the packed checkpoint-size ratio (measured file sizes) and the sampling wall time. Fake quantisation
runs in FP32 with extra rounding work, so it is SLOWER than FP on a CPU: no speed claim. Writes
``robuq.png`` (one row of samples per setting). Run as ``zoo bench robuq [--quick] [--out-dir D]``.

``--outlier-seeds 0 1 2`` adds the injected-outlier study (:mod:`.inject`): for each scale in ``--outlier-scales`` and
each injection channel-choice seed, the function-preserving outlier channels are injected into the FP DiT, and
W1.58A4 PTQ with vs without the Hadamard rotation is compared on the held-out epsilon-MSE and on samples (same
metrics as the table), beside the operator-level oracle; writes ``robuq-outliers.json`` and ``robuq-outliers.png``."""
from __future__ import annotations

import copy
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from registry.contract import benchmark

from .attention import attention_bits_of
from .metrics import activation_error, attention_error
from .model import layer_groups, pack_model, quant_modules
from .params import BenchOptions
from .procedures import QuantDigitsSampler, heldout_eps_mse, quantize_dit

PTQ_ROLES = ["dit", "dit-w158a4", "dit-w158a4-nohad", "dit-w158a3", "dit-w158a3-nohad", "dit-ampn2", "dit-ampn2-nohad"]


def state_file_bytes(model: Any) -> int:
    """The size of ``model``'s state dict saved as safetensors (the shipped FP checkpoint's format)."""
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fp.safetensors"
        save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, str(path))
        return path.stat().st_size


def _size_ratio(model: Any, fp_bytes: int) -> float | None:
    if not quant_modules(model):
        return 1.0
    if any(m.frozen for m in quant_modules(model).values()):
        return None  # QAT roles: the shipped file is the packed export (ratio reported from its size)
    with tempfile.TemporaryDirectory() as d:
        return fp_bytes / pack_model(model, Path(d) / "p.safetensors").stat().st_size


def evaluate(model: Any, per_class: int, steps: int, seed: int) -> dict[str, Any]:
    from zoo.common.digits import digits_classifier, frechet_distance

    proc = QuantDigitsSampler({"m": model}, QuantDigitsSampler.Params(role="m", num_inference_steps=steps, per_class=per_class))
    t0 = time.perf_counter()
    out = proc(seed=seed)
    secs = time.perf_counter() - t0
    groups = layer_groups(model) if quant_modules(model) else {}
    bits = {g: model.get_submodule(names[0]).a_bits for g, names in groups.items()} or None
    attn = set(attention_bits_of(model).values())
    return {"accuracy": digits_classifier().accuracy(out.samples, out.labels), "frechet": frechet_distance(out.samples),
            "attention_bits": None if attn in (set(), {None}) else max(b for b in attn if b is not None),
            "eps_mse": heldout_eps_mse(model), "bits": bits, "mean_bits": (sum(bits.values()) / len(bits)) if bits else None,
            "sample_seconds": secs, "samples": out.samples, "labels": out.labels}


def measure(ctx: Any, per_class: int = 30, steps: int = 20, seed: int = 0) -> dict[str, Any]:
    """Every setting's row, the operator-level errors and the attention error (the table's numbers)."""
    from .train import file_name

    t0 = time.perf_counter()
    pipe = ctx.pipeline("toy")
    fp = pipe.models["dit"]
    fp_bytes = state_file_bytes(fp)
    rows: dict[str, dict[str, Any]] = {}
    roles = PTQ_ROLES + [r for r in pipe.models if r.endswith("-qat")]
    # built here, not spec roles: the uniform 2-bit baseline AMPN is compared with (same average bits); the
    # effect of the 8-bit attention products (W1.58A4 with FP attention, PTQ; and the QAT checkpoint, trained
    # with 8-bit attention, run with FP attention products); the Gaussian-clip activation quantiser
    qat_attn_fp = copy.deepcopy(pipe.models["dit-w158a4-qat"])
    for blk in qat_attn_fp.transformer_blocks:
        blk.attn1.processor.bits = None
    extra = {"dit-w158a2-uniform": quantize_dit(copy.deepcopy(fp), a_bits=2, hadamard=True, lowrank_rank=8),
             "dit-w158a4-attnfp": quantize_dit(copy.deepcopy(fp), a_bits=4, hadamard=True, lowrank_rank=8, attention_bits=None),
             "dit-w158a4-qat-attnfp": qat_attn_fp,
             "dit-w158a4-gaussclip": quantize_dit(copy.deepcopy(fp), a_bits=4, hadamard=True, lowrank_rank=8, a_clip="gaussian"),
             "dit-w158a3-gaussclip": quantize_dit(copy.deepcopy(fp), a_bits=3, hadamard=True, lowrank_rank=8, a_clip="gaussian")}
    for name in roles + list(extra):
        model = extra.get(name) or pipe.models[name]
        r = evaluate(model, per_class, steps, seed)
        r["size_ratio"] = _size_ratio(model, fp_bytes)
        rows[name] = r
    for name, r in rows.items():
        if r["size_ratio"] is None:  # a QAT role: the shipped packed file (declared, and verified, by the spec)
            setting = name.removeprefix("dit-").removesuffix("-attnfp").removesuffix("-qat")
            r["size_ratio"] = fp_bytes / ctx.spec_file(f"weights/{file_name(setting)}").stat().st_size
    act = {f"{b}b": {"plain": activation_error(fp, b, False), "hadamard": activation_error(fp, b, True)} for b in (2, 3, 4)}
    attn = {f"{b}b": attention_error(fp, b) for b in (4, 6, 8)}
    return {"rows": rows, "activation_error": act, "attention_error": attn,
            "config": {"per_class": per_class, "steps": steps, "seed": seed, "quick": ctx.quick}, "seconds": time.perf_counter() - t0}


def _mean_sd(xs: list[float]) -> dict[str, float]:
    """Mean and sample sd over seeds (:func:`zoo.common.spread.spread`; 0 for one seed, as the tables print it)."""
    from zoo.common.spread import spread

    s = spread(xs)
    return {"mean": s.mean, "sd": s.sd or 0.0, "n": s.n}


def outlier_study(fp: Any, seeds: list[int], scales: list[float], n_channels: int, sites: list[str], per_class: int, steps: int,
                  sample_seed: int, qat_steps: int = 0) -> dict[str, Any]:
    """The injected-outlier study: per scale and injection seed, the injected FP model's function deviation and
    epsilon-MSE, the operator oracle (uninjected FP as scale 1), and W1.58A4 PTQ +/- Hadamard: held-out epsilon-MSE
    (:func:`~.procedures.heldout_eps_mse`, 360 noised test digits) and sample accuracy / Frechet
    (``per_class`` DDIM-``steps`` samples per digit, noise seed ``sample_seed``); mean +/- sd over the seeds and the
    paired difference Hadamard - plain. ``qat_steps`` > 0: each PTQ arm is then fine-tuned by
    :func:`~.procedures.qat_finetune` (the shipped recipe, :class:`~.params.QATOptions`; data seed 0) and its held-out
    epsilon-MSE reported as ``qat_eps_mse`` (the PTQ value is its "before")."""
    from zoo.common.training import progress

    from .params import QATOptions
    from .procedures import qat_finetune

    from .inject import function_deviation, injected_model, operator_oracle
    from .procedures import quantize_dit

    t0 = time.perf_counter()
    keys = ("eps_mse", "accuracy", "frechet", "w158_only_eps_mse", "a4_only_eps_mse") + (("qat_eps_mse",) if qat_steps else ())
    oracle_fp = operator_oracle(fp)["total"]
    runs: list[dict[str, Any]] = []
    for scale in scales:
        for seed in progress(seeds, desc=f"outliers s={scale:g}"):
            inj, chosen = injected_model(fp, scale, seed, n_channels, sites)
            run: dict[str, Any] = {"scale": scale, "seed": seed, "channels": chosen, "fp_deviation": function_deviation(fp, inj),
                                   "fp_eps_mse": heldout_eps_mse(inj), "oracle": operator_oracle(inj)["total"]}
            for arm, had in (("hadamard", True), ("plain", False)):
                q = quantize_dit(copy.deepcopy(inj), a_bits=4, hadamard=had, lowrank_rank=8)
                r = evaluate(q, per_class, steps, sample_seed)
                run[arm] = {k: r[k] for k in ("eps_mse", "accuracy", "frechet", "sample_seconds")}
                if qat_steps:
                    rec = QATOptions()
                    qat_finetune(q, qat_steps, rec.lr, rec.batch, seed=0)
                    run[arm]["qat_eps_mse"] = heldout_eps_mse(q)
                # the two terms end to end, each alone on the targeted linears (adaLN and attention products FP)
                run[arm]["w158_only_eps_mse"] = heldout_eps_mse(quantize_dit(copy.deepcopy(inj), a_bits=None, hadamard=had, lowrank_rank=8,
                                                                             adaln=False, attention_bits=None))
                run[arm]["a4_only_eps_mse"] = heldout_eps_mse(quantize_dit(copy.deepcopy(inj), a_bits=4, hadamard=had, lowrank_rank=0,
                                                                           weight="fp", adaln=False, attention_bits=None))
            runs.append(run)
    summary: dict[str, Any] = {}
    for scale in scales:
        rs = [r for r in runs if r["scale"] == scale]
        summary[f"{scale:g}"] = {
            **{arm: {k: _mean_sd([r[arm][k] for r in rs]) for k in keys} for arm in ("hadamard", "plain")},
            "fp_eps_mse": _mean_sd([r["fp_eps_mse"] for r in rs]),
            "hadamard_minus_plain": {k: _mean_sd([r["hadamard"][k] - r["plain"][k] for r in rs]) for k in keys},
            "oracle": {h: {k: _mean_sd([r["oracle"][h][k] for r in rs]) for k in oracle_fp[h]} for h in oracle_fp}}
    return {"seeds": seeds, "scales": scales, "n_channels": n_channels, "sites": sites, "per_class": per_class, "steps": steps, "qat_steps": qat_steps,
            "sample_seed": sample_seed, "fp_eps_mse": heldout_eps_mse(fp), "oracle_uninjected": oracle_fp, "runs": runs, "summary": summary,
            "seconds": time.perf_counter() - t0}


def outlier_table(o: dict[str, Any], base: dict[str, dict[str, Any]] | None = None) -> str:
    """The study's table (mean +/- sd over the injection seeds; ``base``: the uninjected PTQ rows of the main table)."""
    def ms(d: dict[str, float], f: str = ".4f") -> str:
        return f"{d['mean']:{f}} ± {d['sd']:{f}}"

    lines = [f"## Injected outlier channels (function-preserving; sites {', '.join(o['sites'])}; {o['n_channels']} channels per site and "
             f"block; injection channel-choice seeds {o['seeds']}; W1.58A4 PTQ; eps-MSE held-out (360 noised test digits); samples "
             f"{o['per_class']} per digit, DDIM-{o['steps']}, noise seed {o['sample_seed']}; mean ± sd over the injection seeds)", "",
             "| scale s | FP eps-MSE | + H eps-MSE | no H eps-MSE | H − no H (paired) | + H accuracy | no H accuracy | + H Frechet | no H Frechet |",
             "|---|---|---|---|---|---|---|---|---|"]
    if base and "dit-w158a4" in base and "dit-w158a4-nohad" in base:
        h, p = base["dit-w158a4"], base["dit-w158a4-nohad"]
        lines.append(f"| 1 (not injected, seed-free) | {o['fp_eps_mse']:.4f} | {h['eps_mse']:.4f} | {p['eps_mse']:.4f} | {h['eps_mse'] - p['eps_mse']:+.4f} | "
                     f"{h['accuracy']:.3f} | {p['accuracy']:.3f} | {h['frechet']:.3f} | {p['frechet']:.3f} |")
    for sc, d in o["summary"].items():
        dd = d["hadamard_minus_plain"]["eps_mse"]
        lines.append(f"| {sc} | {ms(d['fp_eps_mse'])} | {ms(d['hadamard']['eps_mse'])} | {ms(d['plain']['eps_mse'])} | "
                     f"{dd['mean']:+.4f} ± {dd['sd']:.4f} | {ms(d['hadamard']['accuracy'], '.3f')} | {ms(d['plain']['accuracy'], '.3f')} | "
                     f"{ms(d['hadamard']['frechet'], '.3f')} | {ms(d['plain']['frechet'], '.3f')} |")
    lines += ["", "The two terms alone, end to end (held-out eps-MSE; only the 16 targeted linears quantised, adaLN and attention "
              "products FP): no H / + H / paired H − no H", "", "| scale s | W1.58 only (rank-8 branch, FP activations) | A4 only (FP weights) |",
              "|---|---|---|"]
    for sc, d in o["summary"].items():
        cells = [f"{d['plain'][k]['mean']:.4f} / {d['hadamard'][k]['mean']:.4f} / {d['hadamard_minus_plain'][k]['mean']:+.4f} ± "
                 f"{d['hadamard_minus_plain'][k]['sd']:.4f}" for k in ("w158_only_eps_mse", "a4_only_eps_mse")]
        lines.append(f"| {sc} | " + " | ".join(cells) + " |")
    if o.get("qat_steps"):
        lines += ["", f"After {o['qat_steps']} QAT steps (the shipped recipe, data seed 0; held-out eps-MSE; before = the PTQ columns above): "
                  "+ H / no H / paired H − no H", "", "| scale s | + H | no H | H − no H (paired) |", "|---|---|---|---|"]
        for sc, d in o["summary"].items():
            dd = d["hadamard_minus_plain"]["qat_eps_mse"]
            lines.append(f"| {sc} | {ms(d['hadamard']['qat_eps_mse'])} | {ms(d['plain']['qat_eps_mse'])} | {dd['mean']:+.4f} ± {dd['sd']:.4f} |")
    lines += ["", "Operator oracle on the (injected) FP model's own layer inputs, summed over the 16 targeted layers (relative output "
              "error; weight_rel in weight space): no H / + H", "",
              "| scale s | weight_rel | W1.58 weight_out | A4 act_out | W1.58A4 layer (rank-8 branch) |", "|---|---|---|---|---|"]
    u = o["oracle_uninjected"]
    lines.append("| 1 | " + " | ".join(f"{u['plain'][k]:.4f} / {u['hadamard'][k]:.4f}" for k in ("weight_rel", "weight_out", "act_out", "layer_out")) + " |")
    for sc, d in o["summary"].items():
        lines.append(f"| {sc} | " + " | ".join(f"{d['oracle']['plain'][k]['mean']:.4f} / {d['oracle']['hadamard'][k]['mean']:.4f}"
                                               for k in ("weight_rel", "weight_out", "act_out", "layer_out")) + " |")
    dev = max(r["fp_deviation"] for r in o["runs"])
    lines += ["", f"Injected FP vs FP: max relative output deviation {dev:.1e} over all runs (function preserved)."]
    return "\n".join(lines)


def outlier_plot(o: dict[str, Any], path: Path, base: dict[str, dict[str, Any]] | None = None) -> Path:
    """W1.58A4 eps-MSE per scale, + H vs no H (bars: mean +/- sd over the injection seeds, dots: seeds; FP dashed):
    PTQ (``base``: the uninjected PTQ rows as s = 1), after QAT when it ran; last panel: the operator oracle."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = ["eps_mse"] + (["qat_eps_mse"] if o.get("qat_steps") else [])
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(4.5 * (len(panels) + 1), 3.4))
    scales = list(o["summary"])
    for a, key in zip(axes, panels):
        first = 1 if key == "eps_mse" and base and "dit-w158a4" in base else 0
        for j, (arm, col, role) in enumerate((("plain", "tab:blue", "dit-w158a4-nohad"), ("hadamard", "tab:red", "dit-w158a4"))):
            xs = [i + first + (j - 0.5) * 0.35 for i in range(len(scales))]
            a.bar(xs, [o["summary"][s][arm][key]["mean"] for s in scales], 0.33, color=col, alpha=0.5,
                  yerr=[o["summary"][s][arm][key]["sd"] for s in scales], label="no H" if arm == "plain" else "+ H")
            for x, s in zip(xs, scales):
                a.plot([x] * len(o["seeds"]), [r[arm][key] for r in o["runs"] if f"{r['scale']:g}" == s], "k.", ms=4)
            if first:
                a.bar([(j - 0.5) * 0.35], [base[role]["eps_mse"]], 0.33, color=col, alpha=0.5)
        a.axhline(o["fp_eps_mse"], ls="--", c="gray", label="FP (= injected FP)")
        a.set_xticks(range(len(scales) + first), (["s = 1\n(not injected)"] if first else []) + [f"s = {s}" for s in scales])
        a.set_ylabel("held-out eps-MSE")
        a.set_title(f"W1.58A4 {'PTQ' if key == 'eps_mse' else 'after %d QAT steps' % o['qat_steps']} (injection seeds {o['seeds']})", fontsize=8)
        a.legend(fontsize=7)
    b = axes[-1]
    labels = ["1"] + scales
    for k, mk, col in (("weight_out", "o", "tab:green"), ("act_out", "s", "tab:purple"), ("layer_out", "^", "k")):
        for h, ls in (("plain", "-"), ("hadamard", "--")):
            ys = [o["oracle_uninjected"][h][k]] + [o["summary"][s]["oracle"][h][k]["mean"] for s in scales]
            b.plot(range(len(labels)), ys, ls, marker=mk, color=col, label=f"{k} {'+ H' if h == 'hadamard' else 'no H'}")
    b.set_yscale("log")
    b.set_xticks(range(len(labels)), [f"s = {s}" for s in labels])
    b.set_ylabel("relative output error (16 layers)")
    b.set_title("operator oracle (FP inputs of the injected model)", fontsize=8)
    b.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def table(res: dict[str, Any]) -> str:
    c = res["config"]
    lines = [f"## RobuQ on the digits DiT (DDIM-{c['steps']}, {c['per_class']} samples per class, seed {c['seed']}; accuracy = logistic-regression "
             "classifier agrees with the conditioning label; Frechet in PCA-20 vs the test split; eps-MSE held-out)", "",
             "| setting | accuracy | Frechet | eps-MSE | mean act. bits | attention bits | packed size ratio | sampling s (CPU) |", "|---|---|---|---|---|---|---|---|"]
    for name, r in res["rows"].items():
        mb = "FP" if r["mean_bits"] is None else f"{r['mean_bits']:.2f}"
        sr = "-" if r["size_ratio"] is None else f"{r['size_ratio']:.2f}x"
        ab = "FP" if r["attention_bits"] is None else str(r["attention_bits"])
        lines.append(f"| {name} | {r['accuracy']:.3f} | {r['frechet']:.3f} | {r['eps_mse']:.4f} | {mb} | {ab} | {sr} | {r['sample_seconds']:.2f} |")
    lines += ["", "Operator level on the FP DiT's own layer inputs (relative output error of the activation quantiser alone):", "",
              "| bits | no rotation | Hadamard |", "|---|---|---|"]
    for b, v in res["activation_error"].items():
        lines.append(f"| {b} | {v['plain']:.4f} | {v['hadamard']:.4f} |")
    lines += ["", "Attention products alone on the FP DiT's own attention inputs (relative self-attention output error, operands of "
              "QK^T and softmax V quantised per token): " + ", ".join(f"{b}: {v:.3g}" for b, v in res["attention_error"].items())]
    lines += ["", "Fake quantisation computes in FP32 plus rounding work: it is slower than FP on a CPU (see the last column); the "
              "paper's speed-ups need low-bit kernels. AMPN bits per group: " +
              "; ".join(f"{n}: {r['bits']}" for n, r in res["rows"].items() if n.startswith("dit-ampn"))]
    return "\n".join(lines)


def plot(res: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    fig, axes = plt.subplots(len(rows), 10, figsize=(7, 0.75 * len(rows) + 0.5))
    for i, (name, r) in enumerate(rows.items()):
        for d in range(10):
            ax = axes[i, d]
            ax.set_xticks([])
            ax.set_yticks([])
            idx = (r["labels"] == d).nonzero().reshape(-1)
            if len(idx):
                ax.imshow(r["samples"][idx[0]].reshape(8, 8).clamp(-1, 1).numpy(), cmap="gray_r", vmin=-1, vmax=1)
            if d == 0:
                ax.set_ylabel(f"{name.removeprefix('dit-') or 'fp'}\n{r['accuracy']:.2f}", rotation=0, ha="right", va="center", fontsize=6)
    fig.suptitle("RobuQ on the digits DiT: one sample per class (row label: setting, classifier accuracy)", fontsize=7)
    path = Path(path)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _jsonable(res: dict[str, Any]) -> dict[str, Any]:
    out = dict(res)
    out["rows"] = {n: {k: v for k, v in r.items() if not isinstance(v, torch.Tensor)} for n, r in res["rows"].items()}
    return out


@benchmark(options=BenchOptions)
def run(ctx: Any, opts: BenchOptions) -> dict[str, Any]:
    """RobuQ on the digits DiT: FP vs W1.58A4 / W1.58A3 / AMPN-2, with and without Hadamard, PTQ and QAT; with
    ``--outlier-seeds``, also W1.58A4 +/- Hadamard on the DiT with injected outlier channels (:func:`outlier_study`)."""
    torch.set_num_threads(1)
    res = measure(ctx, opts.per_class, opts.steps, ctx.seed)
    ctx.report(table(res))
    plot(res, ctx.figure("robuq.png"))
    out = _jsonable(res)
    if opts.outlier_seeds:
        o = outlier_study(ctx.pipeline("toy").models["dit"], list(opts.outlier_seeds), list(opts.outlier_scales), opts.outlier_channels,
                          list(opts.outlier_sites), opts.per_class, opts.steps, ctx.seed, opts.outlier_qat_steps)
        ctx.report(outlier_table(o, res["rows"]))
        ctx.write_json("robuq-outliers.json", o)
        outlier_plot(o, ctx.figure("robuq-outliers.png"), res["rows"])
        out["outliers"] = {k: v for k, v in o.items() if k != "runs"}
    return out
