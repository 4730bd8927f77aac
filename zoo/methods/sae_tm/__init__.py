"""SAE-TM: sparse autoencoders as topic models (Girrbach & Akata, ICML 2026, arXiv 2511.16309)."""
from .pipeline import SAETopicModel, TopicModelOutput, cached_embeddings, default_corpus
from .topics import (
    MERGE_FLAVOURS,
    Interpretation,
    TopicSet,
    fit_interpretation,
    merge_atoms,
    mixture_word_probs,
    normalise_theta,
    npmi_coherence,
    sparsify_top_mass,
    topic_diversity,
    windowed_c_npmi,
)

__all__ = [
    "Interpretation",
    "MERGE_FLAVOURS",
    "SAETopicModel",
    "TopicModelOutput",
    "TopicSet",
    "cached_embeddings",
    "default_corpus",
    "fit_interpretation",
    "merge_atoms",
    "mixture_word_probs",
    "normalise_theta",
    "npmi_coherence",
    "sparsify_top_mass",
    "topic_diversity",
    "windowed_c_npmi",
]
