"""Per-call parameter overrides, ``pipe(..., num_inference_steps=20)`` and
``pipe.procedures[name](..., **params)``, validated by the procedure's ``Params`` model, without
rebuilding the pipeline or reloading any model. Model calls are counted on the analytic toy."""
from __future__ import annotations

from typing import Any

import pytest
import torch

import zoo
from registry import build
from registry.errors import ParamError


@pytest.fixture(scope="module")
def pipe() -> Any:
    return zoo.load("f-dpmsolver", variant="toy")


def _calls(pipe: Any, fn: Any) -> int:
    log = pipe.models["denoiser"].call_log
    before = len(log)
    fn()
    return len(log) - before


def test_override_changes_the_step_count_without_rebuilding(pipe: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default runs the spec's 10 model calls; ``num_inference_steps=20`` runs 20, and 7 on a
    named sampler; nothing is built or loaded for either (build_model/make_procedure untouched)."""
    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("rebuilt")

    monkeypatch.setattr(build, "build_model", refuse)
    monkeypatch.setattr(build, "make_procedure", refuse)
    model = pipe.models["denoiser"]
    assert _calls(pipe, lambda: pipe(seed=0, batch_size=2)) == 10
    assert _calls(pipe, lambda: pipe(seed=0, batch_size=2, num_inference_steps=20)) == 20
    assert _calls(pipe, lambda: pipe.procedures["f-ddim-edm"](seed=0, batch_size=2, num_inference_steps=7)) == 7
    assert pipe.models["denoiser"] is model and pipe.procedure.params.num_inference_steps == 10  # the pipeline is unchanged
    assert _calls(pipe, lambda: pipe(seed=0, batch_size=2)) == 10


def test_override_result_equals_a_pipeline_loaded_with_that_param(pipe: Any) -> None:
    """Same seed, same params: the per-call override and ``zoo.load(..., num_inference_steps=20)`` agree bit for bit."""
    loaded = zoo.load("f-dpmsolver", variant="toy", num_inference_steps=20)
    assert torch.equal(pipe(seed=3, batch_size=4, num_inference_steps=20).samples, loaded(seed=3, batch_size=4).samples)


@pytest.mark.parametrize("kwargs, name, expected", [
    ({"num_inference_steps": 0}, "num_inference_steps", "greater than or equal to 1"),
    ({"num_inference_steps": "many"}, "num_inference_steps", "expected an integer, got a string"),
    ({"num_inference_steps": True}, "num_inference_steps", "expected an integer, got a boolean"),
    ({"num_inference_steps": "20"}, "num_inference_steps", "expected an integer, got a string"),
    ({"solver_order": 7}, "solver_order", "got 7"),
    ({"num_inference_step": 20}, "num_inference_step", "unknown parameter or input of FDPMSolverSampler"),
])
def test_bad_override_is_a_param_error_naming_the_parameter(pipe: Any, kwargs: dict[str, Any], name: str, expected: str) -> None:
    with pytest.raises(ParamError) as exc:
        pipe(seed=0, batch_size=2, **kwargs)
    msg = str(exc.value)
    assert msg.startswith(f"parameter {name}: ") and expected in msg and "\n" not in msg
    with pytest.raises(ParamError, match=f"^parameter {name}: "):
        pipe.procedures["f-ddim"](seed=0, batch_size=2, **kwargs)
