"""The CPU variant's models: the packaged all-MiniLM-L6-v2 encoder and a TopK SAE (F = 256, k = 8)
trained on its sentence embeddings of lee_background.cor passages by
``zoo train sae-tm`` (:mod:`.train`; weights ``weights/sae-tm-minilm-topk256.safetensors`` beside the spec)."""
from __future__ import annotations

from registry.contract import factory
from zoo.common.activations import MiniLMEncoder, build_minilm_encoder
from zoo.common.sae import SAEConfig, SparseAutoencoder


@factory
def build_minilm() -> MiniLMEncoder:
    """Factory for role ``encoder`` (toy variant)."""
    return build_minilm_encoder()


@factory(params=SAEConfig)
def build_sae(d_in: int = 384, n_features: int = 256, arch: str = "topk", k: int = 8) -> SparseAutoencoder:
    """Factory for role ``sae``: the engine loads the shipped safetensors into it (strict)."""
    return SparseAutoencoder(d_in=d_in, n_features=n_features, arch=arch, k=k)  # type: ignore[arg-type]
