"""The ``train-local-ar`` recipe: train CoDiLA's local AR with the DLM frozen (paper Sec. 3, "training
objective"; the loss is :func:`zoo.methods.codila.training.train_local_ar`).

Each call trains a fresh deep copy of the pipeline's AR (the cached DLM and AR are never changed, and two calls
with the same seed give the same weights). Training data: the toy task's exact law when the DLM's tokenizer names one
(``zoo_task``), else the ``sequences`` given to the call (token ids after BOS); the paper's Ling-Coder-SFT is
not available offline, so the ``full`` variant is ``needs-training`` with this recipe named.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Annotated, Any

import torch
from pydantic import Field

from registry.contract import Procedure
from registry.limits import Bound, Rows, Steps
from registry.results import ProcedureOutput
from zoo.common.masked_dlm import MaskedDenoiser, find_tokenizer

from .params import TrainLocalARParams
from .sampler import boundary_ids, excluded_ids
from .tasks import Task
from .training import sample_batch, train_local_ar

__all__ = ["LocalAROutput", "TrainLocalAR"]


@dataclass
class LocalAROutput(ProcedureOutput):
    """What ``train-local-ar`` returns: ``state``, the trained local AR's weights (``state_dict()`` returns them,
    so the conformance harness reloads them into the ``local_ar`` factory), and ``losses``, the block
    cross-entropy per step (nats per block)."""

    state: dict[str, torch.Tensor]
    losses: list[float] = field(default_factory=list)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.state


class TrainLocalAR(Procedure):
    """Train the local AR (role ``local_ar``) on block-masked marginals of the frozen DLM (role ``dlm``)."""


    Params = TrainLocalARParams

    def __init__(self, models, params, device="cpu", dtype=None):
        super().__init__(models, params, device, dtype)
        self.dlm = self.models[params.dlm_role]
        self.ar = self.models[params.local_ar_role]

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"steps": 2, "batch_size": batch_size}

    def __call__(self, *, seed: int = 0, steps: Steps | None = None, batch_size: Rows | None = None,
                 sequences: Annotated[list[list[Annotated[int, Field(ge=0, le=2**31 - 1)]]], Bound("rows"),
                                      Bound("length", "longest")] | None = None) -> LocalAROutput:
        p = self.params
        tok = find_tokenizer(self.dlm, self.ar)
        den = MaskedDenoiser.wrap(self.dlm, p.mask_token_id)
        boundary = boundary_ids(getattr(self.ar, "zoo_tokenizer", None) or tok, p.boundary_tokens)
        ex = excluded_ids(tok, den.mask_token_id, boundary, p.marginals_allow_eos)
        task_name = getattr(tok, "zoo_task", None)
        if sequences is not None:
            data = torch.tensor([[tok.bos_token_id, *s] for s in sequences], dtype=torch.long)
            sample = lambda n, g: data[torch.randint(0, len(data), (n,), generator=g)]  # noqa: E731
        elif task_name is not None:
            task = Task(task_name)
            sample = lambda n, g: sample_batch(task, tok, n, g)  # noqa: E731
        else:
            raise ValueError("train-local-ar: no training data; pass sequences= (token ids after BOS). The paper's "
                             "Ling-Coder-SFT is not available offline")
        g = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        ar = copy.deepcopy(self.ar)
        losses = train_local_ar(ar, den.model, sample, steps or p.steps, batch_size or p.batch_size, p.lr,
                                p.max_block_size, g, den.mask_token_id, ex, boundary, p.conditioning, p.topk, bar=False,
                                grid=p.block_grid)
        return LocalAROutput({k: v.detach().clone() for k, v in ar.state_dict().items()}, losses)
