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
    """An analytic reward: ``quadratic`` (target ``y``, width ``tau``), ``disc`` (flat inside the disc of radius
    ``radius`` around ``y``, quadratic outside: ``-max(0, |x - y| - radius)^2 / (2 tau^2)``, not smooth in x) or
    ``mode`` (component ``component``), plus a constant ``offset`` (which must not change any guided sample:
    invariant ``reward-shift``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["quadratic", "disc", "mode", "constant"] = "quadratic"
    target: list[Coord] = Field(default_factory=lambda: [0.3, 1.4], min_length=1, max_length=64)
    tau: float = Field(0.5, gt=0, le=1e3)
    radius: float = Field(0.5, ge=0, le=1e3, description="disc: radius of the flat region")
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


class LearnedFlowMapConfig(FactoryParams):
    """``config`` of :func:`learned_flow_map_model`."""

    mixture: Literal["gaussian", "gmm3"] = "gmm3"
    width: int = Field(64, ge=4, le=1024)


class TrainOptions(Options):
    """The learned velocity + flow-map recipe (``zoo train fmrg``; the benchmark retrains other seeds with it)."""

    mixture: Literal["gaussian", "gmm3"] = Field("gmm3", description="the toy mixture the networks learn")
    width: int = Field(64, ge=4, le=1024, description="MLP width (two hidden layers)")
    vel_steps: int = Field(3000, ge=1, le=100_000, description="flow-matching steps of the velocity net")
    fmap_steps: int = Field(3000, ge=1, le=100_000, description="distillation steps of the flow map")
    batch: int = Field(256, ge=1, le=65_536, description="minibatch rows")
    lr: float = Field(3e-3, gt=0, le=1.0, description="AdamW one-cycle peak learning rate (both nets)")
    n_traj: int = Field(4096, ge=1, le=100_000, description="learned-ODE trajectories the flow map is distilled from")
    n_grid: int = Field(32, ge=1, le=1024, description="time-grid intervals of the distillation trajectories (multiples of 4 keep the sampler's grid on it)")
    progress: bool = Field(True, description="tqdm progress bars")


class BenchOptions(Options):
    n: int = Field(256, ge=1, le=100_000, description="particles per setting")
    nfe: list[Annotated[int, Field(ge=1, le=1000)]] = Field([3, 4, 5, 6], min_length=1, max_length=16, description="NFE budgets")
    learned: bool = Field(False, description="run the learned-model comparison (FMRG-E/J vs DPS vs best-of-N on a learned velocity and flow map, "
                                              "3 training seeds; writes fmrg-learned.json/png) instead of the exact-model sweep")
    seeds: list[Annotated[int, Field(ge=0, le=10_000)]] = Field([0, 1, 2], min_length=1, max_length=16,
                                                               description="--learned: network-training seeds (0 = the shipped checkpoint, others retrained)")
    samples: int = Field(4096, ge=1, le=100_000, description="--learned: fresh sampling draws per setting")
    grid: int = Field(13, ge=2, le=64, description="--learned: points of each log-spaced strength grid (eta in [0.1, 30], lambda in [0.01, 3])")
    exact_reference: bool = Field(True, description="--learned: also run the sweeps on the exact flow map (the oracle reference)")
    quick: ClassVar[dict[str, Any]] = {"n": 64, "nfe": [3, 4], "samples": 512, "grid": 5, "exact_reference": False}


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


class LearnedGapParams(FactoryParams):
    reward: Literal["quadratic", "disc"]
    stat: Literal["g_mean", "g_sd", "arm_mean"] = "g_mean"
    arm: Literal["FMRG-J", "FMRG-E", "DPS", "best-of-N"] | None = None
    samples: int = Field(4096, ge=1, le=100_000)
    grid: int = Field(13, ge=2, le=64)
    seeds: list[Annotated[int, Field(ge=0, le=10_000)]] = Field([0, 1, 2], min_length=1, max_length=16)


class CeilingParams(FactoryParams):
    t: float = Field(ge=0.0, lt=1.0)
    stat: Literal["a_tweedie_err", "b_fmap_vs_ode", "b_fmap_vs_exact", "ode_vs_exact", "gap_tweedie_vs_flow_exact",
                  "log_p_tweedie_learned", "log_p_tweedie_exact", "log_p_fmap", "log_p_flow_exact"]
    n: int = Field(2048, ge=1, le=100_000)


_CLI = {"cli": FMRGCli}

TARGETS = {
    "FlowMapSampler": declare.procedure(FlowMapSamplerParams, **_CLI),
    "FMRGSampler": declare.procedure(FMRGSamplerParams, **_CLI),
    "DPSSampler": declare.procedure(DPSSamplerParams, **_CLI),
    "BestOfNSampler": declare.procedure(BestOfNSamplerParams, **_CLI),
    "exact_flow_map_model": declare.factory(ExactFlowMapConfig),
    "learned_flow_map_model": declare.factory(LearnedFlowMapConfig),
    "train:train_learned": declare.trainer(TrainOptions),
    "benchmark:run": declare.benchmark(BenchOptions),
    "dual_time_embedder": declare.transform(),
    "closed_form_error": declare.metric_check(ClosedFormErrorParams),
    "bench_stat": declare.metric_check(BenchStatParams),
    "pareto_logp": declare.metric_check(ParetoLogpParams),
    "learned_gap": declare.metric_check(LearnedGapParams),
    "ceiling": declare.metric_check(CeilingParams),
}
