"""How the LoFlexMDM and FlexMDM toy checkpoints are made (``zoo train loflexmdm [--check] [--only chain]``,
``zoo train flexmdm ...``): one ``training:`` entry per task in each spec, each writing
``<method>-<task>.safetensors``.

For each task of :mod:`~zoo.methods.loflexmdm.tasks` (``checksum`` = variant ``toy``, ``brackets`` =
``toy-brackets``, ``chain`` = ``toy-chain``, the order toy of issue 37) a tiny DDiT generator (2 layers, d = 64) is
trained from scratch on exact draws of the task law by :func:`~zoo.methods.loflexmdm.training.train_toy`:

* ``loflexmdm``: joint θ/φ training (arXiv 2602.18695, Alg. 1) with the paper's best setting a = 1, b_um = 1
  fixed, only b_in learned by a 1-layer aux network φ (projected rate matching + leave-one-out REINFORCE +
  the schedule regulariser);
* ``flexmdm``: the same generator and loss with a = b = 1 and no φ (arXiv 2509.01025).

Time weighting: ``time_weight: hazard`` (the default, the paper's loss). ``unit`` divides θ's per-sequence loss by
the hazard shape ``a t^(a-1)/(1 - t^a)``: every per-t minimiser of θ is unchanged and the gradients stay bounded,
but the t → 1 signal is drowned (the first toys; docs/methods/loflexmdm.NOTES.md, "Diagnosis"). φ always gets the
paper's hazard-weighted loss, and the gradient norm is clipped per parameter group. ``length_conditioning`` (the
default) adds the row-length embedding to θ's adaLN condition; ``insertion_head`` selects θ's insertion head (both
must match the spec's ``config``). The data/noise seed is ``ctx.seed + 100 · task index + 10 · method index``, the
initial weights' ``ctx.seed``, so any subset of the entries reproduces the full run. One thread; ~4 min per model
on a free core (6-9 min on a loaded machine).
"""
from __future__ import annotations

import time
from typing import Any

from registry.contract import trainer

from .params import ToyOptions

__all__ = ["ToyOptions", "file_name", "train_task"]


def file_name(method: str, task: str) -> str:
    """The produced file's base name (``weights/<method>-<task>.safetensors`` in the spec)."""
    return f"{method}-{task}.safetensors"


@trainer(options=ToyOptions)
def train_task(ctx: Any, opts: ToyOptions) -> None:
    """Train one toy checkpoint (``opts.method`` on ``opts.task``, training seed ``ctx.seed``) into ``ctx.out_dir``."""
    from zoo.common.training import save_checkpoint

    from .training import train_toy

    t0 = time.time()
    model = train_toy(opts.method, opts.task, ctx.seed, opts.steps, opts.batch_size, opts.lr, opts.aux_lr, opts.time_weight,
                      opts.insertion_head, opts.length_conditioning)
    fname = file_name(opts.method, opts.task)
    digest = save_checkpoint(model, ctx.path(fname), quiet=True)
    print(f"{opts.method:9s} {opts.task:8s} {time.time() - t0:6.1f}s  {fname}  sha256 {digest}", flush=True)
