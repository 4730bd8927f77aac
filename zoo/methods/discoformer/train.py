"""How discoformer's shipped checkpoints are made (``zoo train discoformer [--check] [--only d1|d2]``).

Algorithm 1 of arXiv 2511.05924 at CPU scale (method note section 6; :func:`.training.train_discoformer`):
2 layers x d_model 64 x 4 heads, batches of 8 fresh random mixtures (1-10 components), 256 context and 128 query
points each, loss 0.5 MSE(log-density) + 0.5 MSE(score), AdamW one-cycle, EMA weights (what is shipped), seed
``ctx.seed``. One spec entry per data dimension (``params: {dim: 1}`` / ``{dim: 2}``), each writing
``discoformer-d{dim}.safetensors``; byte-for-byte deterministic on one thread (~4-5 CPU minutes each).
"""
from __future__ import annotations

import time
from typing import Any

from registry.contract import trainer

from .params import ToyTrainOptions
from .training import TrainConfig, train_discoformer

__all__ = ["ToyTrainOptions", "train_toy"]


@trainer(options=ToyTrainOptions)
def train_toy(ctx: Any, opts: ToyTrainOptions) -> None:
    """Train the toy for ``opts.dim`` from scratch and write its EMA weights as ``discoformer-d{dim}.safetensors``."""
    from zoo.common.training import save_checkpoint

    t0, c0 = time.perf_counter(), time.process_time()
    state, losses = train_discoformer(TrainConfig(dim=opts.dim, steps=opts.steps, seed=ctx.seed))
    save_checkpoint(state, ctx.path(f"discoformer-d{opts.dim}.safetensors"))
    tail = losses[-100:]
    print(f"d={opts.dim}: {len(losses)} steps, final loss (mean of last 100) {sum(tail) / len(tail):.4f}, "
          f"{time.process_time() - c0:.0f} CPU s, {time.perf_counter() - t0:.0f} wall s")
