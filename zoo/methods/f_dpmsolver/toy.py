"""CPU variants of f-dpmsolver: the exact mixture lives in :mod:`zoo.common.gmm`; the tiny digits ``UNet2DModel``
trained in-repo (``zoo train digits``), a real learned epsilon-model for the samplers, lives in
:mod:`zoo.common.digits` (``build_digits_unet``; PROBE uses it too), with the digits data it was trained on."""
from __future__ import annotations

from zoo.common.digits import digits_images as digits_data  # noqa: F401  (the digits data now live in zoo.common.digits)
