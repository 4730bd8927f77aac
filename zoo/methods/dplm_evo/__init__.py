"""DPLM-Evo (Wang, Hong, Ye, Zheng, Li, Huang, Gu, arXiv 2605.00182): edit-based discrete diffusion for proteins
(substitution, deletion, right-insertion heads on an ESM/DPLM network; a 2L latent alignment space with gaps; the
contextual evolutionary noising kernel), and its masked-diffusion degenerate case (spec ``dplm-masked``).
See docs/methods/dplm-evo.md."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

__all__ = ["EditConfig", "EditOutput", "EditSampler", "EditStep", "TrainDPLMEvo", "TrainOutput", "edit_row", "replay"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "EditConfig": ".editing", "EditStep": ".editing", "edit_row": ".editing", "replay": ".editing",
    "TrainDPLMEvo": ".recipe", "TrainOutput": ".recipe",
    "EditOutput": ".sampler", "EditSampler": ".sampler",
})

if TYPE_CHECKING:
    from .editing import EditConfig, EditStep, edit_row, replay
    from .recipe import TrainDPLMEvo, TrainOutput
    from .sampler import EditOutput, EditSampler
