"""F-DPMSolver (arXiv 2512.24927): forward-value first-order diffusion sampler as a diffusers scheduler."""
from typing import TYPE_CHECKING

from zoo.common.deprecation import install_aliases
from zoo.common.lazy import lazy_exports

if TYPE_CHECKING:
    from .sampler import FDPMHalfSumSampler, FDPMSolverSampler
    from .scheduler import FDPMSolverScheduler, fdpm_sample

__all__ = ["FDPMSolverScheduler", "FDPMSolverSampler", "FDPMHalfSumSampler", "fdpm_sample"]

#: Public names that moved (deprecated aliases until zoo 0.2; a plain literal, read statically by the public-names
#: test and the static index): ``zoo.methods.f_dpmsolver.toy`` held the digits UNet, which moved to
#: :mod:`zoo.common.digits` on its second use (PROBE), and re-exported the digits data.
__deprecated_aliases__ = {
    "toy": {
        "build_digits_unet": "zoo.common.digits:build_digits_unet",
        "DigitsUNetConfig": "zoo.common.digits:DigitsUNetConfig",
        "DIGITS_UNET": "zoo.common.digits:DIGITS_UNET",
        "DIGITS_MEAN": "zoo.common.digits:DIGITS_MEAN",
        "Block": "zoo.common.digits:UNetBlock",
        "digits_data": "zoo.common.digits:digits_images",
    },
}
__getattr__, __dir__ = lazy_exports(__name__, {
    "FDPMSolverScheduler": ".scheduler", "FDPMSolverSampler": ".sampler", "FDPMHalfSumSampler": ".sampler",
    "fdpm_sample": ".scheduler",
}, fallback=install_aliases(__name__, __deprecated_aliases__))
