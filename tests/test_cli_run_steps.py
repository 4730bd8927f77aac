"""A `zoo run` option overrides a spec parameter only when it is given.

The diffusion samplers' ``--nfe`` used to default to 10 and always won over the spec's (or
``--param``'s) ``num_inference_steps``. Model calls are counted on the analytic toy model.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import zoo
from zoo.cli import main

TOY_SPEC = """
name: my-f-ddim
title: F-DDIM with a chosen step count on the exact mixture
task: unconditional-sampling
implementation: zoo.methods.f_dpmsolver
models:
  denoiser:
    kind: vp-diffusion-model
    variants:
      toy: {{source: zoo, factory: "zoo.common.gmm:analytic_model", config: {{mixture: gmm3}}}}
samplers: {{f-ddim: {{target: "zoo.methods.f_dpmsolver:FDPMSolverSampler", params: {{num_inference_steps: {steps}}}}}}}
default: f-ddim
variants: [toy]
hardware: {{toy: {{accelerator: cpu, dtypes: [float64]}}}}
"""


@pytest.fixture
def captured_pipes(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every pipeline `zoo run` builds, so the test can count the model calls it made."""
    pipes: list[Any] = []
    real = zoo.load

    def load(*args: Any, **kwargs: Any) -> Any:
        pipe = real(*args, **kwargs)
        pipe.calls_before_run = len(pipe.procedure.model.call_log)  # built models may be cached and shared
        pipes.append(pipe)
        return pipe

    monkeypatch.setattr(zoo, "load", load)
    return pipes


def _calls(pipe: Any) -> int:
    """Model calls made since `zoo run` built the pipeline."""
    return len(pipe.procedure.model.call_log) - pipe.calls_before_run


@pytest.mark.parametrize("steps", [7, 20])
def test_zoo_run_uses_the_spec_step_count_when_nfe_is_not_given(tmp_path: Path, captured_pipes: list[Any], capsys: pytest.CaptureFixture[str], steps: int) -> None:
    """A spec asking for `steps` steps runs `steps` model calls per sample batch (not the CLI's old default 10)."""
    spec = tmp_path / "my-f-ddim.yaml"
    spec.write_text(TOY_SPEC.format(steps=steps))
    assert main(["run", str(spec), "--variant", "toy", "--n", "8"]) == 0
    assert f"NFE={steps}, steps={steps}" in capsys.readouterr().out
    # one run of the sampler (the report draws its samples once) = `steps` model calls
    assert _calls(captured_pipes[-1]) == steps


def test_zoo_run_param_overrides_the_spec_and_nfe_overrides_both(captured_pipes: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    """--param num_inference_steps=N runs N steps; an explicit --nfe M wins over it."""
    assert main(["run", "f-dpmsolver", "--variant", "toy", "--n", "8", "--param", "num_inference_steps=7"]) == 0
    assert "NFE=7, steps=7" in capsys.readouterr().out
    assert _calls(captured_pipes[-1]) == 7
    assert main(["run", "ddim", "--n", "8", "--param", "num_inference_steps=7", "--nfe", "5"]) == 0
    assert "NFE=5, steps=5" in capsys.readouterr().out
    assert _calls(captured_pipes[-1]) == 5


@pytest.mark.parametrize("given,expected", [({}, (17, 6)), ({"topics": "4"}, (4, 6)), ({"top_words": "3"}, (17, 3))])
def test_sae_tm_cli_options_default_to_the_spec_params(given: dict[str, str], expected: tuple[int, int]) -> None:
    """`zoo run sae-tm` without --topics/--top-words uses the spec's n_topics/top_words (it used 10/10)."""
    from zoo.methods.sae_tm.pipeline import SAETopicModel

    proc = SAETopicModel.__new__(SAETopicModel)  # no models needed: the call itself is recorded
    proc.params = SAETopicModel.Params(n_topics=17, top_words=6)
    seen: dict[str, Any] = {}

    def fake_call(**kwargs: Any) -> dict[str, Any]:
        seen.update(kwargs)
        return {"n_docs": 1, "vocab_size": 1, "n_valid_atoms": 1, "cluster_mass": np.zeros(0), "topics": []}

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(SAETopicModel, "__call__", lambda self, **kw: fake_call(**kw))
        proc.run_cli(proc.CliInputs(**given), seed=0)
    assert (seen["n_topics"], seen["top_words"]) == expected
