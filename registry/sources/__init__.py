"""Model source kinds, one module each (:mod:`.hub`: ``transformers``/``diffusers``, :mod:`.timm`, :mod:`.zoo`,
:mod:`.role`), registered in :mod:`.base`. ``registry.spec.ModelSource`` is the union of the registered kinds; the
builder, weights, conformance, lint and save code call a kind's methods instead of branching on it. A new kind is a
:class:`SourceKind` subclass with a ``source: Literal[...]`` tag passed to :func:`register`.
"""
from __future__ import annotations

from .base import (BuildRequest, LintRequest, LoadingPathRequest, SaveRequest, SourceKind, ensure_tags, kinds, on_change,
                   register, unregister)
from .hub import HubSource, tiny_tokenizer  # registration order = the union's order (schema, error messages)
from .timm import TIMM_KWARGS, TimmSource  # isort: skip
from .zoo import ZooSource, ZooTiny  # isort: skip
from .role import RoleSource  # isort: skip

__all__ = ["BuildRequest", "HubSource", "LintRequest", "LoadingPathRequest", "RoleSource", "SaveRequest", "SourceKind",
           "TIMM_KWARGS", "TimmSource", "ZooSource", "ZooTiny", "ensure_tags", "kinds", "on_change", "register", "tiny_tokenizer", "unregister"]
