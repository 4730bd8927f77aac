"""CoDiLA (Hersche, Menet, Tanios, Rahimi, ICML 2026, arXiv 2603.20216): coherent parallel decoding of a
frozen masked-diffusion LM by a small local autoregressive model soft-conditioned on the DLM's marginals.
See docs/methods/codila.md."""
from zoo.common.masked_dlm import ConfidenceDecoding, GenerationOutput

from .recipe import LocalAROutput, TrainLocalAR
from .sampler import CoDiLASampler, codila_decode

__all__ = ["CoDiLASampler", "ConfidenceDecoding", "GenerationOutput", "LocalAROutput", "TrainLocalAR", "codila_decode"]
