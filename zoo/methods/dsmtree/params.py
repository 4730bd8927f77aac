"""The torch-free params module of dsmtree: the models its spec fills, read by ``zoo validate`` without importing
torch (see :mod:`registry.declare`); the implementation imports these very classes."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from registry import declare
from registry.contract import FactoryParams, Options, ProcedureParams


class TreeDistillationParams(ProcedureParams):
    mode: Literal["hard", "kd", "dsm-trajectory", "dsm-clean"] = "dsm-trajectory"
    n_train: int = Field(2000, ge=10, le=1_000_000)
    n_test: int = Field(5000, ge=10, le=1_000_000)
    d: int = Field(6, ge=3, le=1000, description="input dimension (the first 3 axes carry the XOR)")
    steps: int = Field(3000, ge=1, le=1_000_000)
    batch: int = Field(256, ge=1, le=100_000)
    lr: float = Field(1e-3, gt=0, le=1.0)
    width: int = Field(64, ge=1, le=4096)
    sigmas: list[Annotated[float, Field(ge=0, le=100.0)]] = Field([0.0, 0.02, 0.05, 0.1, 0.2], min_length=1, max_length=1000,
                                                                 description="noise grid (dsm modes)")
    teacher_trees: int = Field(300, ge=1, le=10_000)
    teacher_depth: int = Field(4, ge=1, le=16)
    use_cache: bool = True


class BenchOptions(Options):
    steps: int = Field(3000, ge=1, le=1_000_000, description="Adam steps per student")
    n_train: int = Field(2000, ge=10, le=1_000_000, description="training points of the XOR task")
    seeds: list[Annotated[int, Field(ge=0, le=2**31 - 1)]] | None = Field(
        None, min_length=1, max_length=32, description="task/teacher/student seeds, averaged (none: [--seed])")
    grid_steps: list[Annotated[int, Field(ge=1, le=1_000_000)]] | None = Field(
        None, min_length=1, max_length=8, description="budget grid: Adam steps per student (none: no grid)")
    grid_widths: list[Annotated[int, Field(ge=1, le=4096)]] = Field(
        [64, 256], min_length=1, max_length=8, description="budget grid: hidden width of the student (with --grid-steps)")
    quick: ClassVar[dict[str, Any]] = {"steps": 300}


class StudentAccuracyParams(FactoryParams):
    """``check_params`` of :func:`zoo.methods.dsmtree.metrics.student_accuracy`."""

    mode: str
    steps: int = 3000
    n_train: int = 2000
    width: int = 64


TARGETS = {
    "TreeDistillation": declare.procedure(TreeDistillationParams),
    "benchmark:run": declare.benchmark(BenchOptions),
    "student_accuracy": declare.metric_check(StudentAccuracyParams),
}
