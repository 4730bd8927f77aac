"""The torch-free params module of F-DPMSolver, read by ``zoo validate`` (see :mod:`registry.declare`)."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, model_validator

from registry import declare
from registry.contract import FactoryParams, Options, ProcedureParams
from zoo.common.params import TARGETS as COMMON
from zoo.common.params import SamplerCli

# ----------------------------------------------------------------------------- the sampler procedures (sampler)

BoundedFloat = Annotated[float, Field(ge=-1e6, le=1e6, allow_inf_nan=False)]


class FDPMSolverSamplerParams(ProcedureParams):
    num_inference_steps: int = Field(10, ge=1, le=1000, description="N steps (= N model calls unless first_eps=evaluate)")
    solver_order: int = Field(1, ge=1, le=3, description="look-ahead predictor order p (1 = F-DDIM)")
    first_eps: Literal["approx", "mean", "evaluate"] = Field("approx", description="first history entry: x_T (paper), data-mean prior, or one extra model call")
    data_mean: BoundedFloat | Annotated[list[BoundedFloat], Field(min_length=1, max_length=64)] | None = Field(None, description="mu of first_eps=mean (scalar or per channel); None: the model's data mean (analytic toy)")
    timestep_spacing: Literal["linspace", "leading", "trailing"] = "linspace"
    use_karras_sigmas: bool = False
    sigma_min: float | None = Field(None, ge=1e-6, le=1e4, description="floor 1e-6: log(sigma) must stay finite")
    sigma_max: float | None = Field(None, ge=1e-6, le=1e4)
    rho: float = Field(7.0, gt=0, le=100)

    @model_validator(mode="after")
    def _range(self):
        if self.sigma_min is not None and self.sigma_max is not None and self.sigma_min >= self.sigma_max:
            raise ValueError("sigma_min must be < sigma_max")
        return self


# ----------------------------------------------------------------------------- the benchmark (benchmark)

Mixture = Literal["gaussian", "gaussian-centred", "gmm3"]
Grid = Literal["vp", "edm"]


class BenchOptions(Options):
    """The benchmark's options (``zoo bench f-dpmsolver --help``)."""

    rows: int = Field(1000, ge=1, le=100_000, description="number of x_T rows (same for every sampler)")
    nfe: list[Annotated[int, Field(ge=1, le=1000)]] = Field([4, 5, 6, 8, 10, 15, 20, 50], min_length=1, max_length=16,
                                                            description="model calls per sample")
    mixtures: list[Mixture] = Field(["gaussian", "gaussian-centred", "gmm3"], min_length=1, max_length=3, description="toy data laws")
    grids: list[Grid] = Field(["vp", "edm"], min_length=1, max_length=2, description="noise grids")
    overhead: bool = Field(True, description="time the schedulers against a tiny UNet call")
    digits: bool = Field(True, description="the learned digits-UNet comparison (~1 min; needs the spec's digits variant)")
    digits_rows: int = Field(64, ge=1, le=10_000, description="x_T rows for the digits UNet")
    quick: ClassVar[dict[str, Any]] = {"rows": 200, "nfe": [5, 10], "digits": False, "overhead": False}


# ----------------------------------------------------------------------------- metric checks (metrics)


class BenchRatioParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.f_dpmsolver.metrics.bench_ratio`."""

    grid: str
    mixture: str
    nfe: int
    sampler: str = "F-DDIM"


class DigitsRatioParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.f_dpmsolver.metrics.digits_ratio`."""

    nfe: int
    sampler: str = "F-DDIM"


TARGETS = {
    "FDPMSolverSampler": declare.procedure(FDPMSolverSamplerParams, cli=SamplerCli),
    "FDPMHalfSumSampler": declare.procedure(FDPMSolverSamplerParams, cli=SamplerCli),
    "benchmark:run": declare.benchmark(BenchOptions),
    "metrics:bench_ratio": declare.metric_check(BenchRatioParams),
    "metrics:digits_ratio": declare.metric_check(DigitsRatioParams),
    "metrics:ddim_over_fddim": declare.metric_check(None),
    # zoo.common's, re-exported (bench.py, metrics.py, sampler.py)
    "toy_nfe": COMMON["toy_nfe"],
    "toy_path_error": COMMON["toy_path_error"],
    "SchedulerSampler": COMMON["SchedulerSampler"],
    "DDIMSampler": COMMON["DDIMSampler"],
    "DPMSolverPPSampler": COMMON["DPMSolverPPSampler"],
    "UniPCSampler": COMMON["UniPCSampler"],
    "analytic_model": COMMON["analytic_model"],
}
