"""The ``dsmtree`` recipe: teacher (XGBoost) on the XOR-of-thresholds task, one student objective, accuracies."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from registry.contract import Procedure, ProcedureParams
from registry.results import ProcedureOutput
from zoo.methods.dsmtree.params import TreeDistillationParams

from .distill import fit_teacher, student_predict, teacher_prob, train_student, xor_task


@dataclass
class DistillOutput(ProcedureOutput):
    """What :class:`TreeDistillation` returns (attribute, key and index access, ``to_tuple()``).

    * ``mode`` -- the student objective; ``teacher_acc`` / ``student_acc`` -- test accuracy (``n_test`` fresh points);
    * ``gap`` -- teacher_acc − student_acc; ``agreement`` -- fraction of test points where student and teacher agree;
    * ``final_loss`` -- mean BCE over the last 100 steps; ``config`` -- the parameters."""

    mode: str
    teacher_acc: float
    student_acc: float
    gap: float
    agreement: float
    final_loss: float
    config: dict[str, Any]


class TreeDistillation(Procedure):
    """Distil an XGBoost teacher into an MLP with ``mode`` (hard / kd baselines; dsm-trajectory / dsm-clean
    [inferred], see :mod:`.distill`). Returns :class:`DistillOutput`."""

    kind = "analysis"

    Params = TreeDistillationParams

    def __call__(self, *, seed: int = 0, progress: bool = False) -> DistillOutput:
        p = self.params
        X, y = xor_task(p.n_train, seed, p.d)
        Xt, yt = xor_task(p.n_test, seed + 10_000, p.d)
        teacher = fit_teacher(X, y, p.teacher_trees, p.teacher_depth, seed=seed, use_cache=p.use_cache)
        run = train_student(p.mode, X, y, teacher, p.steps, p.batch, p.lr, p.sigmas, p.width, seed, progress)
        t_pred = (teacher_prob(teacher, Xt) > 0.5).astype(np.float32)
        s_pred = student_predict(run.net, Xt)
        ta, sa = float((t_pred == yt).mean()), float((s_pred == yt).mean())
        return DistillOutput(mode=p.mode, teacher_acc=ta, student_acc=sa, gap=ta - sa, agreement=float((t_pred == s_pred).mean()),
                             final_loss=float(np.mean(run.losses[-100:])), config=p.model_dump())

    def example_inputs(self, batch_size: int = 2) -> dict[str, Any]:
        return {"n_train": 200, "n_test": 200, "steps": 5, "batch": 16, "teacher_trees": 5, "use_cache": False}

    def run_cli(self, inputs: Any, seed: int) -> str:
        out = self(seed=seed, progress=True)
        return "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in out.items() if k != "config")
