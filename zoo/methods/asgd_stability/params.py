"""The torch-free params module of the ``asgd_stability`` method: the models its specs fill, read by
``zoo validate`` without importing torch (see :mod:`registry.declare`); the implementation modules import these
very classes."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs as BaseCliInputs, FactoryParams, Options, ProcedureParams
from zoo.common.out_files import OutPath


Sweep = Literal["N", "m", "m-fixed-n", "delay", "participation"]


class StabilityReportParams(ProcedureParams):
    sweep: Sweep = Field("N", description="what varies: N = mn (m fixed), m at fixed N, m at fixed n, delay, participation")
    problem: Literal["logistic-separable", "lsq-overparam", "lsq-strongly-convex"] = "logistic-separable"
    d: int = Field(20, ge=1, le=100_000, description="feature dimension (lsq-overparam needs d > N)")
    noise: float = Field(0.5, ge=0, le=100, description="label noise of the least-squares problems")
    Ns: tuple[Annotated[int, Field(ge=2, le=1_000_000)], ...] = Field((64, 128, 256, 512, 1024), min_length=1, max_length=16)
    N: int = Field(512, ge=2, le=1_000_000, description="sample size for the m / delay / participation sweeps")
    n: int = Field(64, ge=1, le=100_000, description="shard size for the m-fixed-n sweep")
    m: int = Field(4, ge=1, le=1024, description="workers for the N / delay / participation sweeps")
    ms: tuple[Annotated[int, Field(ge=1, le=1024)], ...] = Field((1, 2, 4, 8, 16), min_length=1, max_length=16)
    delay: str = Field("uniform:4", max_length=200, description="delay pmf (simulator.delay_pmf) when delay is not swept")
    delays: tuple[str, ...] = Field(("none", "uniform:2", "uniform:4", "uniform:8", "uniform:16"), max_length=16)
    participation: str = Field("balanced", max_length=200)
    participations: tuple[str, ...] = Field(("balanced", "one-slow:4", "one-slow:10", "one-slow:100"), max_length=16)
    seeds: int = Field(20, ge=2, le=10_000, description="independent seeds (>= 20 for the rate gate)")
    k: int = Field(4, ge=1, le=1000, description="replaced indices i per seed")
    eta0: float = Field(0.5, gt=0, le=100, description="η = η0 / sqrt(T), T = N")
    n_test: int = Field(1024, ge=1, le=1_000_000)


class StabilityReportCli(BaseCliInputs):
    out: OutPath = "asgd-stability.png"


class BenchOptions(Options):
    seeds: int = Field(20, ge=1, le=200, description="coupled-run seeds per point (x 4 replaced indices)")
    overparam: bool = Field(False, description="also the d > N least-squares and strongly convex N sweeps (~25 s more)")
    device: str = Field("cpu", pattern=r"^(cpu|cuda(:[0-9]+)?|mps)$", description="where the simulator runs")
    quick: ClassVar[dict[str, Any]] = {"seeds": 5}


# ----------------------------------------------------------------------------- metric checks (metrics)


class SlopeParams(FactoryParams):
    recipe: str


class RateConsistentParams(FactoryParams):
    recipe: str


class MIndependentParams(FactoryParams):
    recipe: str


class StabilityRatioParams(FactoryParams):
    recipe: str
    num: int
    den: int


TARGETS = {
    "StabilityReport": declare.procedure(StabilityReportParams, cli=StabilityReportCli),
    "benchmark:run": declare.benchmark(BenchOptions),
    "slope": declare.metric_check(SlopeParams),
    "rate_consistent": declare.metric_check(RateConsistentParams),
    "m_independent": declare.metric_check(MIndependentParams),
    "stability_ratio": declare.metric_check(StabilityRatioParams),
}
