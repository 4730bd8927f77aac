"""CPU variants of f-dpmsolver: the exact mixture lives in :mod:`zoo.common.gmm`; here is the tiny
``UNet2DModel`` trained in-repo on scikit-learn's 8x8 digits (``tools/train_f_dpmsolver_digits.py``), a real
learned epsilon-model for the samplers, and the digits data it was trained on."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from registry.contract import FactoryParams, factory
from zoo.common.digits import digits_images as digits_data  # noqa: F401  (the digits data now live in zoo.common.digits)

DIGITS_UNET: dict[str, Any] = dict(
    sample_size=8, in_channels=1, out_channels=1, layers_per_block=1, block_out_channels=[16, 32],
    down_block_types=["DownBlock2D", "AttnDownBlock2D"], up_block_types=["AttnUpBlock2D", "UpBlock2D"], norm_num_groups=8,
)


#: mean pixel value of the training data (``digits_data().mean()``; checked in tests): the ``data_mean`` that
#: ``first_eps="mean"`` uses for the digits model
DIGITS_MEAN = -0.3894794285297394

Block = Literal["DownBlock2D", "AttnDownBlock2D", "UpBlock2D", "AttnUpBlock2D"]


class DigitsUNetConfig(FactoryParams):
    """``config`` of :func:`build_digits_unet`: overrides of :data:`DIGITS_UNET`, bounded."""

    sample_size: int = Field(8, ge=4, le=256)
    in_channels: int = Field(1, ge=1, le=16)
    out_channels: int = Field(1, ge=1, le=16)
    layers_per_block: int = Field(1, ge=1, le=8)
    block_out_channels: list[int] = Field([16, 32], min_length=1, max_length=6)
    down_block_types: list[Block] = Field(["DownBlock2D", "AttnDownBlock2D"], min_length=1, max_length=6)
    up_block_types: list[Block] = Field(["AttnUpBlock2D", "UpBlock2D"], min_length=1, max_length=6)
    norm_num_groups: int = Field(8, ge=1, le=64)


@factory(params=DigitsUNetConfig)
def build_digits_unet(**overrides: Any):
    """The digits UNet architecture (random init; the spec loads the shipped weights with strict=True). The model
    carries ``data_mean`` (its training data's mean pixel value) for ``first_eps="mean"``."""
    from diffusers import UNet2DModel

    model = UNet2DModel(**{**DIGITS_UNET, **overrides}).eval()
    model.data_mean = DIGITS_MEAN
    return model
