"""The ``train-dplm-evo`` recipe: train the del/ins heads (and the rest of the network) with the edit loss
(:func:`.training.train`). On ``full`` it warm-starts from DPLM 150M (the del/ins heads are new, hence
``needs-training``; UniRef50, the paper's presumed data [unverified], is not available offline, so pass
``sequences=``); on the toy it trains on the synthetic family by default. Each call trains a deep copy of the
pipeline's network (the cached model never changes)."""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any

import torch

from registry.contract import Procedure
from registry.limits import Bound, Rows, Steps
from registry.results import ProcedureOutput

from .alphabet import encode
from .noise import Knobs
from .params import TrainDPLMEvoParams
from .training import TrainConfig, train

__all__ = ["TrainOutput", "TrainDPLMEvo"]


@dataclass
class TrainOutput(ProcedureOutput):
    """``state`` (the trained weights; ``state_dict()`` returns them) and ``losses`` per step."""

    state: dict[str, torch.Tensor]
    losses: list[float] = field(default_factory=list)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.state


class TrainDPLMEvo(Procedure):
    """Train role ``net`` with the DPLM-Evo loss (contextual kernel after a mask-noise warm-up)."""

    Params = TrainDPLMEvoParams

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"steps": 2, "batch_size": batch_size}

    def __call__(self, *, seed: int = 0, steps: Steps | None = None, batch_size: Rows | None = None,
                 sequences: Annotated[list[str], Bound("rows"), Bound("length", "longest")] | None = None) -> TrainOutput:
        p = self.params
        if sequences is None:
            from .family import family

            data = family().train_tensor()
        else:
            data = [encode(s) for s in sequences]
        if max(len(d) for d in data) > p.n_latent:
            raise ValueError(f"a training sequence is longer than n_latent = {p.n_latent}")
        cfg = TrainConfig(Knobs(p.omega_del, p.omega_ins, p.rho_mask, p.kernel), p.gamma_sub, p.gamma_del, p.gamma_ins,
                          steps or p.steps, batch_size or p.batch_size, p.lr, p.warmup_fraction, weighting=p.weighting,
                          t_proposal=p.t_proposal)
        cfg = dataclasses.replace(cfg)
        torch.manual_seed(seed)
        net = copy.deepcopy(self.models[p.net_role])
        losses = train(net, data, cfg, p.n_latent, torch.Generator().manual_seed(seed), show_progress=False)
        return TrainOutput({k: v.detach().clone() for k, v in net.state_dict().items()}, losses)
