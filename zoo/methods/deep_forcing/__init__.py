"""Deep Forcing (Yi et al., arXiv 2512.05081): a training-free KV-cache policy (Deep Sink + Participative
Compression) for chunk-wise autoregressive video diffusion, on a toy causal chunk transformer with 3-D RoPE."""
from .policy import POLICIES, CachePolicy, FifoReferenceCache, FrameKVCache, Rope3D, policy, rope_split, select_top_c, select_top_c_bruteforce
from .toy import ToyVideoTransformer, build_toy_video, make_clips, rollout, teacher_forced_means

__all__ = ["POLICIES", "CachePolicy", "FifoReferenceCache", "FrameKVCache", "Rope3D", "policy", "rope_split", "select_top_c",
           "select_top_c_bruteforce", "ToyVideoTransformer", "build_toy_video", "make_clips", "rollout", "teacher_forced_means"]
from .procedures import DeepForcingRollout, RolloutOutput, identity_drift, motion_energy  # noqa: E402

__all__ += ["DeepForcingRollout", "RolloutOutput", "identity_drift", "motion_energy"]
