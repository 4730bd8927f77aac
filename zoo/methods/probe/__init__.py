"""PROBE (Cao et al., "Where Detectors Fail: Probing Generative Space for Generalizable AI-Generated Image
Detection", ICML 2026; evaluation-only code: https://github.com/Amamiya-C/PROBE-AIGI-Detection): a frozen
detector as critic steers a LoRA on the generator's denoiser into hard fakes near its decision boundary; the
samples along the LoRA trajectory form a boundary buffer on which the detector is fine-tuned. Toy: digits real
vs fakes of the shared digits DiT, a timm ``test_resnet`` detector, unseen = differently sampled / trained generators."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
    from .core import (
        FAKE, GENERATORS, LORA_TARGETS, REAL, SEEN, UNSEEN, Stage1Run, balanced_accuracy, detector_bacc, finetune_detector, generate, predict,
        probe_losses, probe_stage1, seen_train_fakes, train_detector,
    )
    from .procedures import DetectorEval, DetectorEvalOutput, ProbeOutput, ProbeRecipe

__all__ = [
    "FAKE", "GENERATORS", "LORA_TARGETS", "REAL", "SEEN", "UNSEEN", "DetectorEval", "DetectorEvalOutput", "ProbeOutput", "ProbeRecipe",
    "Stage1Run", "balanced_accuracy", "detector_bacc", "finetune_detector", "generate", "predict", "probe_losses", "probe_stage1",
    "seen_train_fakes", "train_detector",
]
__getattr__, __dir__ = lazy_exports(__name__, {
    "FAKE": ".core", "GENERATORS": ".core", "LORA_TARGETS": ".core", "REAL": ".core", "SEEN": ".core", "UNSEEN": ".core",
    "Stage1Run": ".core", "balanced_accuracy": ".core", "detector_bacc": ".core", "finetune_detector": ".core", "generate": ".core", "predict": ".core",
    "probe_losses": ".core", "probe_stage1": ".core", "seen_train_fakes": ".core", "train_detector": ".core",
    "DetectorEval": ".procedures", "DetectorEvalOutput": ".procedures", "ProbeOutput": ".procedures", "ProbeRecipe": ".procedures",
})
