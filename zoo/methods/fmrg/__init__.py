"""FMRG (arXiv 2604.27147): reward guidance of flow models through the flow map (FMRG-E / FMRG-J), with DPS-style
denoiser guidance and best-of-N baselines, on an exact two-time flow-map model of a Gaussian mixture."""
from .model import ExactFlowMapModel, exact_flow_map_model, has_two_time_interface
from .sampler import BestOfNSampler, DPSSampler, FlowMapSampler, FMRGOutput, FMRGSampler, backprojection_weight, time_grid

__all__ = ["ExactFlowMapModel", "exact_flow_map_model", "has_two_time_interface", "FMRGSampler", "FlowMapSampler", "DPSSampler",
           "BestOfNSampler", "FMRGOutput", "time_grid", "backprojection_weight"]
