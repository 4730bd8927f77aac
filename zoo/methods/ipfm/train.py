"""How ipfm's shipped toy generator is made (``zoo train ipfm [--check]``).

IPFM distillation (plain loss, = 2 x SiD at alpha = 1/2) of the exact PFGM++ teacher of gmm3 at D = 16 (the spec's
``teacher`` role, variant ``toy``) into a one-step EDM-preconditioned MLP (width 64, 3 layers): 600 teacher-copy
steps + 400 generator steps (2 fake-field steps each), batch 256, lr 3e-4, EMA 0.99, seed ``ctx.seed``, one CPU
thread (:func:`~.distill.distill`). Writes ``ipfm-gmm3-d16-generator.safetensors`` (the EMA generator).
"""
from __future__ import annotations

from typing import Any

from registry.contract import trainer

from .params import GeneratorOptions

__all__ = ["GeneratorOptions", "train_generator"]


@trainer(options=GeneratorOptions)
def train_generator(ctx: Any, opts: GeneratorOptions) -> None:
    """Distil the toy teacher into the one-step generator and write it into ``ctx.out_dir``."""
    from zoo.common.training import save_checkpoint, setup_deterministic

    from .distill import distill

    setup_deterministic(ctx.seed)
    teacher = ctx.models("toy", roles=["teacher"])["teacher"]  # the exact D = 16 field of gmm3 (a fresh copy)
    out = distill(teacher, loss=opts.loss, steps=opts.steps, init_steps=opts.init_steps, seed=ctx.seed, progress=opts.progress)
    h = out["history"][-1]
    print(f"final EMA generator: SW2 {h['sw2']:.4f}, log-lik {h['loglik']:.4f} (2000 samples)")
    save_checkpoint(out["generator"], ctx.path("ipfm-gmm3-d16-generator.safetensors"))
