"""Deep Forcing (Yi et al., arXiv 2512.05081): a training-free KV-cache policy (Deep Sink + Participative
Compression) for chunk-wise autoregressive video diffusion, on a toy causal chunk transformer with 3-D RoPE."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = ["POLICIES", "CachePolicy", "FifoReferenceCache", "FrameKVCache", "Rope3D", "policy", "rope_split", "select_top_c",
           "select_top_c_bruteforce", "ToyVideoTransformer", "build_toy_video", "make_clips", "rollout", "teacher_forced_means"]

__all__ += ["DeepForcingRollout", "RolloutOutput", "identity_drift", "motion_energy"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "POLICIES": ".policy",
    "CachePolicy": ".policy",
    "FifoReferenceCache": ".policy",
    "FrameKVCache": ".policy",
    "Rope3D": ".policy",
    "policy": ".policy",
    "rope_split": ".policy",
    "select_top_c": ".policy",
    "select_top_c_bruteforce": ".policy",
    "ToyVideoTransformer": ".toy",
    "build_toy_video": ".toy",
    "make_clips": ".toy",
    "rollout": ".toy",
    "teacher_forced_means": ".toy",
    "DeepForcingRollout": ".procedures",
    "RolloutOutput": ".procedures",
    "identity_drift": ".procedures",
    "motion_energy": ".procedures",
})

if TYPE_CHECKING:
    from .policy import POLICIES, CachePolicy, FifoReferenceCache, FrameKVCache, Rope3D, policy, rope_split, select_top_c, select_top_c_bruteforce
    from .toy import ToyVideoTransformer, build_toy_video, make_clips, rollout, teacher_forced_means
    from .procedures import DeepForcingRollout, RolloutOutput, identity_drift, motion_energy
