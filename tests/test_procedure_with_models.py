"""Procedure.with_models: the same procedure (params, device, dtype, context, constructor extras) on other models."""
from __future__ import annotations

import pytest

from registry.contract import Procedure, ProcedureParams, Roles


class _Scale(Procedure):
    class Params(ProcedureParams):
        factor: float = 2.0

    def __init__(self, models, params, device="cpu", dtype=None, tag: str = "none"):
        super().__init__(models, params, device, dtype)
        self.tag = tag

    def clone_kwargs(self):
        return {"tag": self.tag}

    def __call__(self, *, seed: int = 0, x: float = 1.0):
        return self.models["a"] * self.models["b"] * self.params.factor * x


def _proc() -> _Scale:
    p = _Scale(Roles({"a": 3.0, "b": 5.0}, variant="toy", procedure="scale"), _Scale.Params(factor=0.5), device="cpu", tag="t")
    p.ctx = object()
    return p


def test_other_models_replace_only_the_roles_given_and_keep_everything_else() -> None:
    p = _proc()
    q = p.with_models({"a": 7.0})
    assert q() == 7.0 * 5.0 * 0.5 and p() == 3.0 * 5.0 * 0.5  # the original is untouched
    assert (q.params, q.device, q.dtype, q.ctx, q.tag) == (p.params, p.device, p.dtype, p.ctx, "t")
    assert isinstance(q.models, Roles) and q.models.variant == "toy" and q.models.procedure == "scale"
    assert q.with_models({"a": 7.0}) is not q  # nothing is remembered


def test_an_unknown_role_is_one_line_naming_it() -> None:
    with pytest.raises(ValueError, match=r"_Scale.with_models: role 'c' is not one of this procedure's roles \(a, b\)") as exc:
        _proc().with_models({"c": 1.0})
    assert "\n" not in str(exc.value)
