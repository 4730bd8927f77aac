"""FMRG (arXiv 2604.27147): reward guidance of flow models through the flow map (FMRG-E / FMRG-J), with DPS-style
denoiser guidance and best-of-N baselines, on an exact two-time flow-map model of a Gaussian mixture."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = ["ExactFlowMapModel", "exact_flow_map_model", "has_two_time_interface", "FMRGSampler", "FlowMapSampler", "DPSSampler",
           "BestOfNSampler", "FMRGOutput", "time_grid", "backprojection_weight"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ExactFlowMapModel": ".model", "exact_flow_map_model": ".model", "has_two_time_interface": ".model",
    "BestOfNSampler": ".sampler", "DPSSampler": ".sampler", "FlowMapSampler": ".sampler", "FMRGOutput": ".sampler",
    "FMRGSampler": ".sampler", "backprojection_weight": ".sampler", "time_grid": ".sampler",
})

if TYPE_CHECKING:
    from .model import ExactFlowMapModel, exact_flow_map_model, has_two_time_interface
    from .sampler import BestOfNSampler, DPSSampler, FlowMapSampler, FMRGOutput, FMRGSampler, backprojection_weight, time_grid
