"""IPFM (Shlenskii & Korotin, arXiv 2509.22454): distilling a PFGM++ teacher into a one-step generator by matching its
electrostatic field (fake-field fit + generator update), with SiD (Zhou et al., arXiv 2404.04057) as the D -> inf /
general-alpha form. The teacher (PFGM++) lives in :mod:`zoo.common.pfgmpp`; the ``pfgmpp`` spec samples it."""
import sys
import types
from typing import TYPE_CHECKING, Any

from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
    from .distill import DistillOutput, IPFMDistill, distill, steps_to_threshold
    from .losses import ipfm_loss, sid_loss

__all__ = ["DistillOutput", "IPFMDistill", "distill", "steps_to_threshold", "ipfm_loss", "sid_loss"]
__getattr__, __dir__ = lazy_exports(__name__, {
    "DistillOutput": ".distill", "IPFMDistill": ".distill", "distill": ".distill", "steps_to_threshold": ".distill",
    "ipfm_loss": ".losses", "sid_loss": ".losses",
})


class _Package(types.ModuleType):
    """The package's ``distill`` is the function, as when ``__init__`` imported it eagerly: the import system binds the
    submodule of the same name on the package when it loads it, which would hide the lazy export; that binding is
    skipped (the module stays ``sys.modules["zoo.methods.ipfm.distill"]``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "distill" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
