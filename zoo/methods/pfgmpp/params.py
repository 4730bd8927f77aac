"""The torch-free params module of PFGM++, read by ``zoo validate`` (see :mod:`registry.declare`)."""
from __future__ import annotations

from pydantic import Field, model_validator

from registry import declare
from registry.contract import FactoryParams, ProcedureParams
from zoo.common.out_files import SamplesCli

# ----------------------------------------------------------------------------- the teacher sampler (sampler)


class PFGMPPSamplerParams(ProcedureParams):
    num_steps: int = Field(18, ge=1, le=1000, description="Karras grid points; NFE = 2 num_steps - 1 (18 -> 35, the paper's CIFAR-10)")
    sigma_min: float = Field(0.002, gt=0, le=10.0)
    sigma_max: float = Field(80.0, gt=0, le=1e4)
    rho: float = Field(7.0, gt=0, le=100.0)
    prior: str = Field("pfgmpp", pattern="^(pfgmpp|gaussian)$", description="pfgmpp (the paper) or gaussian (ablation: the diffusion prior with a finite-D field)")

    @model_validator(mode="after")
    def _range(self):
        if self.sigma_min >= self.sigma_max:
            raise ValueError("sigma_min must be < sigma_max")
        return self


# ----------------------------------------------------------------------------- metric checks (metrics)


class TeacherStatParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.pfgmpp.metrics.teacher_stat`."""

    nfe: int = 35
    stat: str = "sw2"
    n: int = 2000


class DataStatParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.pfgmpp.metrics.data_stat`."""

    stat: str = "sw2"
    n: int = 2000


TARGETS = {
    "PFGMPPSampler": declare.procedure(PFGMPPSamplerParams, cli=SamplesCli),
    "metrics:teacher_stat": declare.metric_check(TeacherStatParams),
    "metrics:data_stat": declare.metric_check(DataStatParams),
}
