"""IPFM (Shlenskii & Korotin, arXiv 2509.22454): distilling a PFGM++ teacher into a one-step generator by matching its
electrostatic field (fake-field fit + generator update), with SiD (Zhou et al., arXiv 2404.04057) as the D -> inf /
general-alpha form. The teacher (PFGM++) lives in :mod:`zoo.common.pfgmpp`; the ``pfgmpp`` spec samples it."""
from typing import TYPE_CHECKING

from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
    from .distill import DistillOutput, IPFMDistill, distill, steps_to_threshold
    from .losses import ipfm_loss, sid_loss

__all__ = ["DistillOutput", "IPFMDistill", "distill", "steps_to_threshold", "ipfm_loss", "sid_loss"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "DistillOutput": ".distill", "IPFMDistill": ".distill", "distill": ".distill", "steps_to_threshold": ".distill",
    "ipfm_loss": ".losses", "sid_loss": ".losses",
})

