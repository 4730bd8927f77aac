"""dsmtree (Ramachandran & Sra, ICML 2026, arXiv 2605.00414; no public code): distil a tree ensemble into an
MLP along noising trajectories [inferred], against hard-label and plain-KD baselines. Spec: ``dsmtree``."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
    from .distill import batch_targets, fit_teacher, student, student_predict, teacher_prob, train_student, xor_task
    from .procedures import DistillOutput, TreeDistillation

__all__ = ["DistillOutput", "TreeDistillation", "batch_targets", "fit_teacher", "student", "student_predict", "teacher_prob",
           "train_student", "xor_task"]
__getattr__, __dir__ = lazy_exports(__name__, {
    **dict.fromkeys(["batch_targets", "fit_teacher", "student", "student_predict", "teacher_prob", "train_student",
                     "xor_task"], ".distill"),
    "DistillOutput": ".procedures", "TreeDistillation": ".procedures",
})
