"""PoE-Bridge (Shi et al., ICML 2026, arXiv 2606.08048): decode with a masked-diffusion LM while
targeting an autoregressive LM through a Product-of-Experts bridge. See docs/methods/poe-bridge.md."""
from zoo.common.masked_dlm import ConfidenceDecoding, GenerationOutput

from .baselines import ARDecoding
from .sampler import PoEBridgeSampler

__all__ = ["ARDecoding", "ConfidenceDecoding", "GenerationOutput", "PoEBridgeSampler"]
