"""The torch-free params module of float-AD networks: the models its specs fill, read by ``zoo validate`` (see registry.declare)."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import CliInputs, FactoryParams, Options, ProcedureParams
from zoo.common.out_files import OutPath

# ----------------------------------------------------------------------------- procedure (analysis)

class ExactnessReportParams(ProcedureParams):
    dtype: Literal["float32", "float64"] = Field("float32", description="the network's own dtype (not the pipeline's)")
    starts: tuple[float, ...] = Field((1.0, 1.5, 0.75, -3.0, 1e-6, 1e6), min_length=1, max_length=32,
                                      description="grid starts (1.0 is the binade edge case of the note)")
    sizes: tuple[Annotated[int, Field(ge=1, le=4096)], ...] = Field((256,), min_length=1, max_length=16)
    gates: tuple[Literal["tanh", "gelu", "gelu-tanh", "silu", "elu", "softsign", "hardtanh"], ...] = Field(("tanh",), min_length=1, max_length=16)
    step_scale: Literal["per-threshold", "fixed"] = Field("per-threshold", description="fixed = the note's K = 2^24 (negative control)")
    lo: float = Field(1e-20, gt=0, le=1e30, description="smallest target magnitude")
    hi: float = Field(1e20, gt=0, le=1e30, description="largest target magnitude (beyond what B absorbs: ConstructionError rows)")


class ExactnessReportCli(CliInputs):
    out: OutPath = "float-ad-networks.png"


# ----------------------------------------------------------------------------- metric checks (metrics)

class ExactRateParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.float_ad_networks.metrics.exact_rate`."""

    start: float
    n: int
    dtype: str = "float32"
    gate: str = "tanh"
    step_scale: str = "per-threshold"
    what: str = "both"


class NNonzeroParams(FactoryParams):
    """``check_params`` of :func:`~zoo.methods.float_ad_networks.metrics.n_nonzero`."""

    n: int
    dtype: str = "float32"


# ----------------------------------------------------------------------------- benchmark (benchmark)

class BenchOptions(Options):
    sizes: list[Annotated[int, Field(ge=1, le=4096)]] = Field([4, 16, 64, 256, 1024], min_length=1, max_length=16, description="grid sizes n")
    starts: list[float] = Field([1.0, 1.5, 0.75], min_length=1, max_length=16, description="first grid point of each grid")
    dtypes: list[Literal["float32", "float64"]] = Field(["float32", "float64"], min_length=1, max_length=2)
    quick: ClassVar[dict[str, Any]] = {"sizes": [4, 16, 64]}


# ----------------------------------------------------------------------------- what float_ad_networks registers

TARGETS = {
    "ExactnessReport": declare.procedure(ExactnessReportParams, cli=ExactnessReportCli),
    "exact_rate": declare.metric_check(ExactRateParams),
    "n_nonzero": declare.metric_check(NNonzeroParams),
    "benchmark:run": declare.benchmark(BenchOptions),
}
