"""PoE-Bridge (Shi et al., ICML 2026, arXiv 2606.08048): decode with a masked-diffusion LM while
targeting an autoregressive LM through a Product-of-Experts bridge. See docs/methods/poe-bridge.md."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = ["ARDecoding", "ConfidenceDecoding", "GenerationOutput", "PoEBridgeSampler"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "ARDecoding": ".baselines",
    "ConfidenceDecoding": "zoo.common.masked_dlm",
    "GenerationOutput": "zoo.common.masked_dlm",
    "PoEBridgeSampler": ".sampler",
})

if TYPE_CHECKING:
    from zoo.common.masked_dlm import ConfidenceDecoding, GenerationOutput

    from .baselines import ARDecoding
    from .sampler import PoEBridgeSampler
