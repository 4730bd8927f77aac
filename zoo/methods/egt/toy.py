"""The model role of the ``egt`` digits recipes: the shared class-conditional digits DiT
(:mod:`zoo.common.digits`, trained in-repo by ``tools/train_digits_dit.py``); the spec loads the shipped
``specs/weights/digits-dit.safetensors`` into it (sha256 pinned, strict)."""
from __future__ import annotations

from registry.contract import factory
from zoo.common.digits import build_digits_dit as _build


@factory
def build_digits_dit():
    """The digits DiT architecture (random init; weights come from the spec)."""
    return _build()
