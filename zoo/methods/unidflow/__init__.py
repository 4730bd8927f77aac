"""UniDFlow (Susladkar et al., arXiv 2602.12221; no public code): discrete flow matching over a joint text +
image-token vocabulary on a frozen bidirectional backbone, with two LoRA adapters (understanding Δu,
generation Δg) mixed per timestep by a router, timestep-guided RMSNorm with zero-initialised modulation, and
three training stages ending in reference-based preference alignment (mRef-DPO). See docs/methods/unidflow.md."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = ["TSGRMSNorm", "UniDFlowModel", "UniDFlowOutput", "UniDFlowSampler", "build_unidflow"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "TSGRMSNorm": ".model",
    "UniDFlowModel": ".model",
    "build_unidflow": ".model",
    "UniDFlowOutput": ".procedures",
    "UniDFlowSampler": ".procedures",
})

if TYPE_CHECKING:
    from .model import TSGRMSNorm, UniDFlowModel, build_unidflow
    from .procedures import UniDFlowOutput, UniDFlowSampler
