"""The torch-free params module of the ``fmrg`` method: the models its specs fill, read by ``zoo validate`` without
importing torch (see :mod:`registry.declare`); the implementation modules import these very classes."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from registry.limits import Rows


Coord = Annotated[float, Field(ge=-1e3, le=1e3, allow_inf_nan=False)]


class RewardSpec(BaseModel):
    """An analytic reward: ``quadratic`` (target ``y``, width ``tau``) or ``mode`` (component ``component``),
    plus a constant ``offset`` (which must not change any guided sample: invariant ``reward-shift``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["quadratic", "mode", "constant"] = "quadratic"
    target: list[Coord] = Field(default_factory=lambda: [0.3, 1.4], min_length=1, max_length=64)
    tau: float = Field(0.5, gt=0, le=1e3)
    component: int = Field(2, ge=0, le=63)
    scale: float = Field(1.0, ge=-1e3, le=1e3, allow_inf_nan=False)
    offset: float = Field(0.0, ge=-1e6, le=1e6, allow_inf_nan=False)


class FMRGCli(CliInputs):
    n: Rows = Field(512, description="number of samples")


class _FlowParams(ProcedureParams):
    num_steps: int = Field(4, ge=1, le=1000, description="grid steps N (paper grid: FLUX's shifted schedule, see shift)")
    shift: float = Field(1.0, gt=0, le=100, description="FLUX time shift exp(mu) of the grid (1 = uniform)")
    sample_mode: Literal["flow_map1", "flow_map2"] = Field("flow_map1", description="flow_map1: chord toward X_{t,1} (1 NFE/step); flow_map2: exact jump X_{t,t'} (2 NFE/guided step)")
    reward: RewardSpec = Field(default_factory=RewardSpec)


class FlowMapSamplerParams(_FlowParams):
    pass


class FMRGSamplerParams(_FlowParams):
    grad_mode: Literal["jac", "euc"] = Field("jac", description="jac: FMRG-J (gradient through the flow map); euc: FMRG-E (endpoint space)")
    step_size: float = Field(1.0, ge=0, le=1e4, description="eta: inner ascent step (Adam: initial learning rate); 0 = unguided")
    num_optim_iters: int = Field(1, ge=0, le=100, description="n_opt inner ascent steps per guided step")
    early_stop: int | None = Field(None, ge=0, le=1000, description="guide only the first early_stop steps (None: all)")
    unguided_steps: int | None = Field(None, ge=1, le=1000, description="finish after early_stop with this many uncontrolled jumps (None: the rest of the grid)")
    normalize_grad: bool = Field(True, description="rescale each gradient to the norm of u(x, t, 1) (authors)")
    use_adam: bool = Field(True, description="Adam with a decaying lr (lr_schedule; authors' default in reward mode) instead of plain gradient ascent")
    lr_schedule: Literal["outer", "inner"] = Field(
        "outer", description="Adam lr decay: outer = eta (1 - k / K) over the K guided steps (authors' reward sampler); inner = eta (1 - i / n_opt) over the inner iterations")
    euc_times_dt: bool = Field(False, description="FMRG-E: multiply the back-projected correction by Delta (the authors' inverse-problem sampler with normalisation; their reward sampler has no such factor)")

    @model_validator(mode="after")
    def _stops(self):
        if self.early_stop is not None and self.early_stop > self.num_steps:
            raise ValueError(f"early_stop ({self.early_stop}) must be <= num_steps ({self.num_steps})")
        return self


class DPSSamplerParams(ProcedureParams):
    num_steps: int = Field(4, ge=1, le=1000)
    shift: float = Field(1.0, gt=0, le=100)
    guidance_scale: float = Field(1.0, ge=0, le=1e4, description="lambda")
    grad_mode: Literal["jac", "euc"] = "jac"
    reward: RewardSpec = Field(default_factory=RewardSpec)


class BestOfNSamplerParams(_FlowParams):
    n_candidates: int = Field(4, ge=1, le=4096)


class ExactFlowMapConfig(FactoryParams):
    """``config`` of :func:`exact_flow_map_model` (bounded sizes and tolerances)."""

    mixture: Literal["gaussian", "gmm3"] = "gmm3"
    weights: list[float] | None = Field(None, min_length=1, max_length=64)
    means: list[list[float]] | None = Field(None, min_length=1, max_length=64)
    variances: list[float] | None = Field(None, min_length=1, max_length=64)
    rtol: float = Field(1e-8, ge=1e-13, le=1e-2)
    atol: float = Field(1e-8, ge=1e-13, le=1e-2)


class BenchOptions(Options):
    n: int = Field(256, ge=1, le=100_000, description="particles per setting")
    nfe: list[Annotated[int, Field(ge=1, le=1000)]] = Field([3, 4, 5, 6], min_length=1, max_length=16, description="NFE budgets")
    quick: ClassVar[dict[str, Any]] = {"n": 64, "nfe": [3, 4]}


# ----------------------------------------------------------------------------- metric checks (metrics)


class ClosedFormErrorParams(FactoryParams):
    num_steps: int = 400


class BenchStatParams(FactoryParams):
    mixture: str
    nfe: int
    method: str
    strength: float
    stat: str


class ParetoLogpParams(FactoryParams):
    mixture: str
    nfe: int
    method: str
    min_reward: float = -2.0


_CLI = {"cli": FMRGCli}

TARGETS = {
    "FlowMapSampler": declare.procedure(FlowMapSamplerParams, **_CLI),
    "FMRGSampler": declare.procedure(FMRGSamplerParams, **_CLI),
    "DPSSampler": declare.procedure(DPSSamplerParams, **_CLI),
    "BestOfNSampler": declare.procedure(BestOfNSamplerParams, **_CLI),
    "exact_flow_map_model": declare.factory(ExactFlowMapConfig),
    "benchmark:run": declare.benchmark(BenchOptions),
    "dual_time_embedder": declare.transform(),
    "closed_form_error": declare.metric_check(ClosedFormErrorParams),
    "bench_stat": declare.metric_check(BenchStatParams),
    "pareto_logp": declare.metric_check(ParetoLogpParams),
}
