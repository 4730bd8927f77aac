"""CoDiLA (Hersche, Menet, Tanios, Rahimi, ICML 2026, arXiv 2603.20216): coherent parallel decoding of a
frozen masked-diffusion LM by a small local autoregressive model soft-conditioned on the DLM's marginals.
See docs/methods/codila.md."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = ["CoDiLASampler", "ConfidenceDecoding", "GenerationOutput", "LocalAROutput", "TrainLocalAR", "codila_decode"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "CoDiLASampler": ".sampler",
    "ConfidenceDecoding": "zoo.common.masked_dlm",
    "GenerationOutput": "zoo.common.masked_dlm",
    "LocalAROutput": ".recipe",
    "TrainLocalAR": ".recipe",
    "codila_decode": ".sampler",
})

if TYPE_CHECKING:
    from zoo.common.masked_dlm import ConfidenceDecoding, GenerationOutput

    from .recipe import LocalAROutput, TrainLocalAR
    from .sampler import CoDiLASampler, codila_decode
