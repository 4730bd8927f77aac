"""SAE-TM: sparse autoencoders as topic models (Girrbach & Akata, ICML 2026, arXiv 2511.16309)."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
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
__getattr__, __dir__ = lazy_exports(__name__, {
    "SAETopicModel": ".pipeline", "TopicModelOutput": ".pipeline", "cached_embeddings": ".pipeline", "default_corpus": ".pipeline",
    "MERGE_FLAVOURS": ".topics", "Interpretation": ".topics", "TopicSet": ".topics", "fit_interpretation": ".topics", "merge_atoms": ".topics", "mixture_word_probs": ".topics",
    "normalise_theta": ".topics", "npmi_coherence": ".topics", "sparsify_top_mass": ".topics", "topic_diversity": ".topics", "windowed_c_npmi": ".topics",
})
