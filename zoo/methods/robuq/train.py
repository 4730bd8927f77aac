"""How robuq's shipped QAT checkpoints are made (``zoo train robuq [--check]``).

For each setting (W1.58A4, W1.58A3, AMPN 2-bit average; each with and without the Hadamard rotation) the shared
FP digits DiT is quantised by :func:`~.procedures.quantize_dit` (ternary weights, rank-8 FP low-rank branch from
the SVD of the ternarisation error, per-token min-max activations, adaLN W4A4, 8-bit attention products QK^T and
softmax V -- the paper's layout) and fine-tuned by :func:`~.procedures.qat_finetune` (AdamW 2e-4, batch 64, DDPM
epsilon loss, straight-through gradients, seed ``ctx.seed``). AMPN follows the paper's protocol: QAT warm-up at
uniform 2-bit activations (``ampn_warmup`` steps), then per-group sensitivities measured on that QAT model, the exact
DP allocation under the 2.0-bit average, and QAT for the remaining steps (same total step count as the other
settings; fresh AdamW state, seed ``ctx.seed + 1``). Each result is written with :func:`~.model.pack_model` (ternary
weights as 2-bit codes + fp32 row scales) as ``robuq-<setting>-qat.safetensors``. Byte-for-byte deterministic on
one thread (~2-3 min).
"""
from __future__ import annotations

import copy
import time
from typing import Any

from registry.contract import trainer

from .model import pack_model
from .params import QATOptions
from .procedures import ampn_allocate, heldout_eps_mse, qat_finetune, quantize_dit

#: setting -> quantize_dit arguments (lowrank_rank 8 for all); AMPN settings start from uniform int(avg) bits
SETTINGS: dict[str, dict[str, Any]] = {
    "w158a4": {"a_bits": 4, "hadamard": True},
    "w158a4-nohad": {"a_bits": 4, "hadamard": False},
    "w158a3": {"a_bits": 3, "hadamard": True},
    "w158a3-nohad": {"a_bits": 3, "hadamard": False},
    "ampn2": {"ampn_avg_bits": 2.0, "hadamard": True},
    "ampn2-nohad": {"ampn_avg_bits": 2.0, "hadamard": False},
}


def file_name(setting: str) -> str:
    return f"robuq-{setting}-qat.safetensors"


@trainer(options=QATOptions)
def train_qat(ctx: Any, opts: QATOptions) -> None:
    """QAT-fine-tune every setting from the shared FP DiT and write its packed export into ``ctx.out_dir``."""
    from zoo.common.training import setup_deterministic, sha256_file

    setup_deterministic(ctx.seed)
    fp = ctx.models("toy", roles=["dit"])["dit"]  # a fresh copy of the shared DiT (specs/digits.yaml)
    for setting, cfg in SETTINGS.items():
        t0 = time.time()
        cfg = dict(cfg)
        avg = cfg.pop("ampn_avg_bits", None)
        q = quantize_dit(copy.deepcopy(fp), lowrank_rank=8, **({"a_bits": int(avg)} if avg else {}), **cfg)
        before = heldout_eps_mse(q)
        if avg:  # AMPN: sensitivities after a QAT warm-up at uniform bits, then QAT with the allocation
            warm = min(opts.ampn_warmup, opts.steps)
            losses = qat_finetune(q, warm, opts.lr, opts.batch, ctx.seed, progress=True)
            print(f"{setting}: AMPN bits after {warm} QAT steps: {ampn_allocate(q, avg)}")
            losses += qat_finetune(q, opts.steps - warm, opts.lr, opts.batch, ctx.seed + 1, progress=True)
        else:
            losses = qat_finetune(q, opts.steps, opts.lr, opts.batch, ctx.seed, progress=True)
        after = heldout_eps_mse(q)
        path = pack_model(q, ctx.path(file_name(setting)))
        tail = losses[-50:] or [float("nan")]
        print(f"{setting}: held-out eps-MSE {before:.4f} -> {after:.4f} (last-50 train loss {sum(tail) / len(tail):.4f}); "
              f"wrote {path.name} ({path.stat().st_size / 1e3:.0f} kB) sha256 {sha256_file(path)}  [{time.time() - t0:.0f}s]")
