"""How dplm-evo's (and dplm-masked's) shipped toy networks are made (``zoo train dplm-evo [--check] [--only FAMILY]``).

Five networks per toy family (:data:`.training.CONFIGS`: the contextual, uniform and BLOSUM62 kernels, the masked
baseline with DPLM's constant weight and with DPLM-Evo's ELBO weight), each trained by :func:`.training.train_named`
from its own seed (:data:`.training.SEEDS`, replicate 0: the shipped network), one thread, ~1 CPU minute each.
One spec entry per family (:data:`.family.FAMILIES`): ``conserved-core`` writes ``dplm-evo-NAME.safetensors``,
``mutation-bias`` writes ``dplm-evo-mutation-bias-NAME.safetensors``. ``dplm-evo-masked.safetensors`` is also the
``dplm-masked`` spec's network (that spec reuses dplm-evo's declaration of it).
"""
from __future__ import annotations

import time
from typing import Any

from registry.contract import trainer

from .params import FamilyTrainOptions, Network  # noqa: F401

from .training import train_named

__all__ = ["FamilyTrainOptions", "file_name", "train_family"]

def file_name(name: str, family_name: str) -> str:
    """``dplm-evo-NAME.safetensors`` (conserved-core family) or ``dplm-evo-FAMILY-NAME.safetensors``."""
    return f"dplm-evo-{name if family_name == 'conserved-core' else f'{family_name}-{name}'}.safetensors"


@trainer(options=FamilyTrainOptions)
def train_family(ctx: Any, opts: FamilyTrainOptions) -> None:
    """Train each network of ``opts.networks`` on ``opts.family`` and write it into ``ctx.out_dir``. The seeds are the
    networks' own (:func:`.training.training_seed`, replicate 0), not ``ctx.seed``: the shipped files fix them."""
    from zoo.common.training import save_checkpoint

    for name in opts.networks:
        t0 = time.process_time()
        net, losses = train_named(name, opts.family)
        tail = losses[-100:]
        print(f"{opts.family} / {name}: final loss {sum(tail) / len(tail):.4f} ({time.process_time() - t0:.0f} CPU s)")
        save_checkpoint(net, ctx.path(file_name(name, opts.family)))
