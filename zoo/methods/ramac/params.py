"""The torch-free params module of RAMAC: the models its specs fill, read by ``zoo validate`` (see registry.declare)."""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from registry.limits import Rows
from zoo.common.out_files import OutPath

# ----------------------------------------------------------------------------- training (risk, train)

RiskMeasure = Literal["cvar", "neutral", "wang", "cpw", "power"]
Pairing = Literal["standard", "radac_released"]


class TrainConfig(ProcedureParams):
    """Hyper-parameters of :func:`train_ramac` (the toy's values; the paper's per-task values are the
    spec's ``params_by_variant``)."""

    steps: int = Field(3500, ge=0, le=2_000_000)
    batch_size: int = Field(128, ge=1, le=65_536)
    risk_batch: int = Field(64, ge=0, le=65_536, description="states (chains with gradient) in the risk term; 0: the whole batch")
    lr_actor: float = Field(5e-3, gt=0, le=1.0)
    lr_critic: float = Field(3e-3, gt=0, le=1.0)
    lambda_bc: float = Field(1.0, ge=0, le=1e4, description="weight of the behaviour-cloning loss")
    eta: float = Field(0.1, ge=0, le=1e4, description="weight of the risk term (0: behaviour cloning only)")
    eta_warmup: int = Field(2000, ge=0, le=2_000_000, description="steps with eta_t = 0 (the critic learns first)")
    eta_ramp: int = Field(500, ge=0, le=2_000_000, description="steps of the linear ramp 0 -> eta after the warm-up")
    risk: RiskMeasure = "cvar"
    alpha: float = Field(0.1, gt=0, le=1.0, description="CVaR level")
    risk_eta: float = Field(0.0, ge=-10, le=10, description="distortion parameter of wang / cpw / power")
    q_norm: bool = Field(False, description="divide the risk term by mean |Z| (detached; RAFMAC / Diffusion-QL option)")
    n_quantiles: int = Field(8, ge=1, le=1024, description="critic quantile samples N (and M for the targets)")
    n_actor_quantiles: int = Field(8, ge=1, le=1024, description="tau samples of the actor's risk estimate")
    kappa: float = Field(1.0, ge=0, le=100, description="Huber threshold (0: pure pinball loss)")
    pairing: Pairing = "standard"
    grad_norm: float = Field(5.0, gt=0, le=1e6)
    discount: float = Field(0.99, ge=0, le=1.0)
    tau_soft: float = Field(0.005, ge=0, le=1.0)
    q_clip: float = Field(300.0, gt=0, le=1e9)
    ema_decay: float = Field(0.995, ge=0, le=1.0)
    ema_start: int = Field(1000, ge=0, le=2_000_000)
    ema_every: int = Field(5, ge=1, le=10_000)
    lr_decay: bool = Field(True, description="cosine decay of both learning rates to 0 over `steps` (Diffusion-QL's lr_decay)")
    log_every: int = Field(100, ge=1, le=1_000_000)


# ----------------------------------------------------------------------------- procedures (procedures)

RoleName = Literal["actor", "actor-bc-only", "actor-risk-neutral", "actor-cvar-no-bc", "actor-rafmac"]
ActorType = Literal["diffusion", "flow"]


class ActParams(ProcedureParams):
    role: RoleName = Field("actor", description="which shipped actor: RAMAC or one of the baselines")
    actor: ActorType = Field("diffusion", description="actor type: diffusion (RADAC) or flow (RAFMAC; role actor -> actor-rafmac)")


class ActCli(CliInputs):
    n: Rows = Field(8, description="number of actions (bandit state 0)")


class EvaluateParams(ProcedureParams):
    role: RoleName = "actor"
    n: int = Field(1000, ge=10, le=1_000_000, description="sampled actions")
    alpha: float = Field(0.1, gt=0, le=1.0)


class EvaluateCli(CliInputs):
    out: OutPath | None = None


class TrainParams(TrainConfig):
    init: Literal["scratch", "finetune"] = "scratch"
    actor: ActorType = Field("diffusion", description="actor type: diffusion (RADAC, role actor) or flow (RAFMAC, role actor-rafmac)")
    data_size: int = Field(10_000, ge=16, le=10_000_000, description="behaviour transitions of the bandit dataset")
    eval_n: int = Field(1000, ge=10, le=1_000_000, description="actions sampled for the evaluation of the result")


# ----------------------------------------------------------------------------- factories (nets)

Dim = Annotated[int, Field(ge=1, le=1024)]
Width = Annotated[int, Field(ge=1, le=4096)]


class BuildActorConfig(FactoryParams):
    """``config`` of :func:`~zoo.methods.ramac.nets.build_actor`."""

    state_dim: Dim = 1
    action_dim: Dim = 2
    T: Annotated[int, Field(ge=1, le=1000)] = 20
    schedule: str = "vp"
    width: Width = 128
    layers: Annotated[int, Field(ge=1, le=16)] = 3
    time_dim: Annotated[int, Field(ge=2, le=512)] = 16
    max_action: Annotated[float, Field(gt=0, le=1e6)] = 1.0


class BuildFlowActorConfig(FactoryParams):
    """``config`` of :func:`~zoo.methods.ramac.nets.build_flow_actor`."""

    state_dim: Dim = 1
    action_dim: Dim = 2
    steps: Annotated[int, Field(ge=1, le=1000)] = 10
    width: Width = 128
    layers: Annotated[int, Field(ge=1, le=16)] = 3
    time_dim: Annotated[int, Field(ge=2, le=512)] = 16
    max_action: Annotated[float, Field(gt=0, le=1e6)] = 1.0


class BuildCriticConfig(FactoryParams):
    """``config`` of :func:`~zoo.methods.ramac.nets.build_critic`."""

    state_dim: Dim = 1
    action_dim: Dim = 2
    width: Width = 64
    emb_dim: Width = 64
    n_cos: Annotated[int, Field(ge=1, le=1024)] = 16


# ----------------------------------------------------------------------------- metric checks (metrics)


class ActorRiskParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.ramac.metrics.actor_risk`."""

    role: str = "actor"
    quantity: str = "exact_cvar"
    n: int = 1000
    seed: int = 0


class CvarGainParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.ramac.metrics.cvar_gain`."""

    role: str = "actor"
    baseline: str = "actor-risk-neutral"
    quantity: str = "exact_cvar"
    n: int = 1000
    seed: int = 0


class QuantileFitParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.ramac.metrics.quantile_fit`."""

    level: float = 0.1
    kappa: float = 1.0
    pairing: str = "standard"


# ----------------------------------------------------------------------------- trainer (toy), benchmark (benchmark)


class ToyTrainOptions(Options):
    """Which shipped actors one ``training:`` entry of ``specs/ramac.yaml`` trains (the TrainConfig defaults otherwise)."""

    presets: list[Literal["ramac", "bc-only", "risk-neutral", "cvar-no-bc", "rafmac"]] = Field(
        ["ramac", "bc-only", "risk-neutral", "cvar-no-bc", "rafmac"], min_length=1, max_length=5,
        description="presets to train (the four diffusion actors share one warm-up; rafmac is a separate run)")
    progress: bool = Field(True, description="tqdm progress bars")


class BenchOptions(Options):
    retrain: bool = Field(False, description="train the five actors from the seed (~5-12 min on one thread) instead of loading the shipped ones")
    released_pairing: bool = Field(False, description="also train RAMAC with the released RADAC critic pairing (~2-5 min) and score it beside the others")
    n: int = Field(1000, ge=10, le=1_000_000, description="actions per actor")


# ----------------------------------------------------------------------------- what ramac registers

TARGETS = {
    "Act": declare.procedure(ActParams, cli=ActCli),
    "Evaluate": declare.procedure(EvaluateParams, cli=EvaluateCli),
    "Train": declare.procedure(TrainParams),
    "build_actor": declare.factory(BuildActorConfig),
    "build_flow_actor": declare.factory(BuildFlowActorConfig),
    "build_critic": declare.factory(BuildCriticConfig),
    "actor_risk": declare.metric_check(ActorRiskParams),
    "cvar_gain": declare.metric_check(CvarGainParams),
    "quantile_fit": declare.metric_check(QuantileFitParams),
    "train_toy_actors": declare.trainer(ToyTrainOptions),
    "benchmark:run": declare.benchmark(BenchOptions),
}
