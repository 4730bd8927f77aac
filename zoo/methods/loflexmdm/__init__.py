"""LoFlexMDM (Patel et al., ICML 2026, arXiv 2602.18695): insertion-based masked diffusion with learnable
per-position order dynamics; FlexMDM (Kim et al. 2025, arXiv 2509.01025) is the a = b = 1 special case and
shares this implementation. See docs/methods/loflexmdm.md."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
    from .model import LoFlexMDMModel, build_model
    from .sampler import TauLeaping, tau_leap

__all__ = ["LoFlexMDMModel", "TauLeaping", "build_model", "tau_leap"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "LoFlexMDMModel": ".model", "TauLeaping": ".sampler", "build_model": ".model", "tau_leap": ".sampler",
})
