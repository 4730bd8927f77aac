"""Source kind ``role``: a role derived from another role's built model (of this spec, or of another catalogued
spec that declares a shared checkpoint once), deep-copied unless ``share``, through ``transform``."""
from __future__ import annotations

import copy
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from ..errors import BuildError, Location, ParamError
from ..schema import Name
from .base import BuildRequest, LintRequest, SaveRequest, SourceKind, register

@register
class RoleSource(SourceKind):
    """A role derived from another role of the same variant: a deep copy of that role's built
    model, passed through ``transform`` (e.g. a quantised copy of the full-precision model)."""

    doc_example: ClassVar[str] = """
models:
  dit: {kind: dit, variants: {toy: {source: zoo, factory: "my_plugin.toy:build_dit"}}}
  dit-int8:
    kind: dit
    variants:
      toy: {source: role, from_role: dit, transform: "my_plugin.quant:quantise", transform_config: {bits: 8}}
  unet:   # another spec's declaration of a shared checkpoint, built (and cached) once for both
    kind: unet
    variants:
      toy: {source: role, from_spec: digits, from_role: unet, share: true}
"""

    source: Literal["role"]
    from_role: str = Field(description="the role whose built model is copied")
    from_spec: Name | None = Field(
        None, description="the catalogued spec that declares `from_role` (default: this spec); its declaration (factory, "
        "weights, sha256, folder) builds the model, so a checkpoint several specs use is declared once"
    )
    from_variant: Name | None = Field(None, description="with from_spec: that spec's variant (default: this variant's name)")
    share: bool = Field(False, description="hand the transform the parent's object itself instead of a deep copy (it must not mutate it)")

    @model_validator(mode="after")
    def _foreign(self) -> "RoleSource":
        if self.from_variant is not None and self.from_spec is None:
            raise ValueError("from_variant: only with from_spec (a role of this spec has this variant)")
        return self

    def derived_from(self) -> str | None:
        return self.from_role if self.from_spec is None else None

    def foreign(self) -> tuple[str, str, str | None] | None:
        return (self.from_spec, self.from_role, self.from_variant) if self.from_spec is not None else None

    def build(self, req: BuildRequest) -> Any:
        raise BuildError(f"role derived from {self.from_role!r}: built by build_pipeline (derive_role)", req.loc)

    def derive(self, parent: Any, req: BuildRequest) -> Any:
        """A deep copy of the parent's built model (unless ``share``), transformed."""
        return req.transform(parent if self.share else copy.deepcopy(parent))

    def lint(self, req: LintRequest) -> None:
        if self.from_spec is not None:
            problem = req.foreign_problem(self, req.variant)
            if problem:
                req.problem(f"{req.field}.from_spec", problem)

    def saved(self, req: SaveRequest) -> dict[str, Any]:
        if req.replacement is not None:
            raise ParamError(f"role {req.role!r} is derived from {self.from_role!r} (source: role); replace {self.from_role!r} instead",
                             Location(field="replace"))
        return self.model_dump(mode="json", exclude_defaults=True)
