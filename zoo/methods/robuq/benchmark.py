"""Benchmark of ``robuq`` on the shared digits DiT: FP vs W1.58A4 vs W1.58A3 vs AMPN (2-bit average),
each with and without the Hadamard rotation, post-training quantised (PTQ) and QAT-fine-tuned (the
shipped packed checkpoints of ``tools/train_robuq_toy.py``): classifier accuracy of class-conditional
DDIM samples, PCA-20 Frechet distance to the test split, held-out epsilon-MSE, the activation bits,
the packed checkpoint-size ratio (measured file sizes) and the sampling wall time. Fake quantisation
runs in FP32 with extra rounding work, so it is SLOWER than FP on a CPU: no speed claim. Writes
``robuq.png`` (one row of samples per setting). Run as ``python tools/bench_robuq.py`` or
``zoo bench robuq [--quick]``."""
from __future__ import annotations

import argparse
import copy
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from registry.contract import benchmark
from zoo.common.bench_output import parse_with_quick, write_outputs

from .attention import attention_bits_of
from .metrics import activation_error, attention_error
from .model import layer_groups, pack_model, quant_modules
from .procedures import QuantDigitsSampler, heldout_eps_mse, quantize_dit

PTQ_ROLES = ["dit", "dit-w158a4", "dit-w158a4-nohad", "dit-w158a3", "dit-w158a3-nohad", "dit-ampn2", "dit-ampn2-nohad"]


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


def run(quick: bool = False, per_class: int = 30, steps: int = 20, seed: int = 0) -> dict[str, Any]:
    import zoo
    from zoo.common.digits import DIGITS_DIT_WEIGHTS

    t0 = time.perf_counter()
    pipe = zoo.load("robuq", variant="toy")
    fp_bytes = DIGITS_DIT_WEIGHTS.stat().st_size
    rows: dict[str, dict[str, Any]] = {}
    roles = PTQ_ROLES + [r for r in pipe.models if r.endswith("-qat")]
    fp = pipe.models["dit"]
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
        if r["size_ratio"] is None:
            setting = name.removeprefix("dit-").removesuffix("-attnfp").removesuffix("-qat")
            shipped = Path(__file__).resolve().parents[3] / "specs" / "weights" / f"robuq-{setting}-qat.safetensors"
            r["size_ratio"] = fp_bytes / shipped.stat().st_size if shipped.is_file() else None
    act = {f"{b}b": {"plain": activation_error(fp, b, False), "hadamard": activation_error(fp, b, True)} for b in (2, 3, 4)}
    attn = {f"{b}b": attention_error(fp, b) for b in (4, 6, 8)}
    return {"rows": rows, "activation_error": act, "attention_error": attn, "config": {"per_class": per_class, "steps": steps, "seed": seed, "quick": quick},
            "seconds": time.perf_counter() - t0}


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


@benchmark
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog="bench_robuq")
    ap.add_argument("--per-class", type=int, default=30, help="samples per digit (default 30)")
    ap.add_argument("--steps", type=int, default=20, help="DDIM steps (default 20)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", metavar="PATH", help="write every number as JSON")
    ap.add_argument("--out-dir", default=".", help="folder for robuq.png")
    a = parse_with_quick(ap, argv, {"per_class": 5, "steps": 10}, "5 samples per class, DDIM-10")
    torch.set_num_threads(1)
    res = run(a.quick, a.per_class, a.steps, a.seed)
    text = table(res)
    write_outputs(_jsonable(res), text, lambda _r, p: plot(res, p), a.out_dir, "robuq.png", a.json)
    return 0
