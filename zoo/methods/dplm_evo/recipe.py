"""The ``train-dplm-evo`` recipe: train the del/ins heads (and the rest of the network) with the edit loss
(:func:`.training.train`). On ``full`` it warm-starts from DPLM 150M (the del/ins heads are new, hence
``needs-training``; UniRef50, the paper's presumed data [unverified], is not available offline, so pass
``sequences=``); on the toy it trains on the synthetic family by default. Each call trains a deep copy of the
pipeline's network (the cached model never changes)."""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import torch
from pydantic import Field

from registry.contract import Procedure, ProcedureParams
from registry.limits import Bound, Rows, Steps
from registry.results import ProcedureOutput

from .alphabet import encode
from .noise import Knobs
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

    class Params(ProcedureParams):
        steps: int = Field(2500, ge=1, le=10_000_000)
        batch_size: int = Field(64, ge=1, le=65536)
        lr: float = Field(3e-3, gt=0, le=1.0)
        omega_del: float = Field(0.1, ge=0, le=1)
        omega_ins: float = Field(0.02, ge=0, le=1)
        rho_mask: float = Field(0.5, ge=0, le=1)
        kernel: Literal["contextual", "uniform", "blosum62"] = "contextual"
        gamma_sub: float = Field(1.0, ge=0, le=100)
        gamma_del: float = Field(1.0, ge=0, le=100)
        gamma_ins: float = Field(1.0, ge=0, le=100)
        warmup_fraction: float = Field(0.3, ge=0, le=1)
        weighting: Literal["elbo", "none"] = Field("elbo", description="loss weight λ_t: elbo = 1/t (the note's diffusion ELBO weight), none = 1")
        t_proposal: Literal["uniform", "square"] = Field(
            "uniform", description="how t is drawn: uniform, or square (t = t_min + (1 - t_min) u^2 with importance weight 2u: the same objective, more rows at small t)")
        n_latent: int = Field(28, ge=2, le=4096, description="the 2L latent size (2 x the longest sequence)")
        net_role: str = Field("net", min_length=1)

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
